// docs/isa.md, generated from isa.def so that the reference cannot drift
// from the instruction set. `pipevm_isa_doc > docs/isa.md` regenerates it;
// a test fails when the committed file differs.
#pragma once

#include <string>

namespace pipevm {

std::string isa_markdown();

}  // namespace pipevm
