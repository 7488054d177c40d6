// The instruction-set reference in Markdown, one section per group, one row
// per opcode, straight from isa.def.
#include "isa_doc.hpp"

#include "isa.hpp"

namespace pipevm {

namespace {
constexpr OpcodeGroup kGroups[] = {OpcodeGroup::data, OpcodeGroup::compute, OpcodeGroup::p2p,
                                   OpcodeGroup::collective, OpcodeGroup::optimizer};

std::string syntax_of(const OpcodeInfo& op) {
  std::string out(op.name);
  switch (op.shape) {
    case OperandShape::None:
      break;
    case OperandShape::MicroBatch:
      out += " mb [chunk C]";
      break;
    case OperandShape::Message:
      out += op.name.find("Send") != std::string_view::npos ? " act|grad mb [chunk C] [to S]"
                                                            : " act|grad mb [chunk C] [from S]";
      break;
    case OperandShape::Wait:
      out += " send|recv act|grad mb [chunk C]";
      break;
  }
  return out;
}
}  // namespace

std::string isa_markdown() {
  std::string out =
      "# The pipevm instruction set\n\n"
      "Generated from `core/isa.def` by `pipevm_isa_doc`; do not edit by hand\n"
      "(regenerate with `build/release/core/pipevm_isa_doc > docs/isa.md`).\n\n"
      "Every instruction is written as `Opcode operands` in a schedule (see\n"
      "[language.md](language.md)). Operands are expressions; `mb` is a micro-batch\n"
      "in `0 .. micro_batches - 1`, `C` a chunk in `0 .. chunks - 1`, `S` a stage.\n"
      "Without `to S` / `from S` the peer is the neighbouring stage along the\n"
      "chunk's lane: activations flow forward, gradients backward.\n";
  for (const OpcodeGroup group : kGroups) {
    out += "\n## ";
    out += name(group);
    out += "\n\n| instruction | what it does |\n|---|---|\n";
    for (const OpcodeInfo& op : kOpcodeInfo) {
      if (op.group != group) continue;
      out += "| `";
      out += syntax_of(op);
      out += "` | ";
      out += op.doc;
      out += " |\n";
    }
  }
  return out;
}

}  // namespace pipevm
