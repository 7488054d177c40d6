// docs/isa.md must be what isa.def generates.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "isa.hpp"
#include "isa_doc.hpp"

namespace pipevm {
namespace {

TEST(isa_doc, is_up_to_date) {
  std::ifstream in(PIPEVM_SOURCE_DIR "/docs/isa.md");
  ASSERT_TRUE(in) << "docs/isa.md is missing";
  std::ostringstream committed;
  committed << in.rdbuf();
  EXPECT_TRUE(committed.str() == isa_markdown())
      << "docs/isa.md differs from core/isa.def; regenerate it with\n"
         "  <build>/core/pipevm_isa_doc > docs/isa.md";
}

TEST(isa_doc, lists_every_opcode) {
  const std::string doc = isa_markdown();
  for (const OpcodeInfo& op : kOpcodeInfo) {
    EXPECT_NE(doc.find("| `" + std::string(op.name)), std::string::npos) << op.name;
  }
}

}  // namespace
}  // namespace pipevm
