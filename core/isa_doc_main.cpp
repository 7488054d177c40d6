// pipevm_isa_doc: prints docs/isa.md (see isa_doc.hpp).
#include <iostream>

#include "isa_doc.hpp"

int main() {
  std::cout << pipevm::isa_markdown();
  return 0;
}
