// The instruction-set reference in Markdown, straight from isa.def and
// groups.def: one section per class, one row per opcode with what it does
// (its columns), then the groups.
#include "isa_doc.hpp"

#include "isa.hpp"

namespace pipevm {

namespace {

constexpr OpClass kClasses[] = {OpClass::data,       OpClass::compute,  OpClass::p2p,
                                OpClass::wait,       OpClass::collective, OpClass::optimizer};

// Markdown table cells: a `|` inside a cell must be escaped, code or not.
std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string values(ValueSet set) {
  std::string out;
  for (std::size_t v = 0; v < kValueCount; ++v) {
    if (!set.contains(static_cast<Value>(v))) continue;
    if (!out.empty()) out += ", ";
    out += name(static_cast<Value>(v));
  }
  return out;
}

std::string_view completion(Completion c) {
  switch (c) {
    case Completion::local: return "on its own";
    case Completion::blocking: return "when its partners are there";
    case Completion::request: return "posts a request";
  }
  return "?";
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
      "chunk's lane: activations flow forward, gradients backward.\n\n"
      "Each row says what the instruction does, as the interpreters read it:\n"
      "who it talks to (its group; see the last section), when it is done, the\n"
      "values it needs first and those it makes (per micro-batch and chunk, or\n"
      "per rank: the accumulated and the reduced gradients), and the cost the\n"
      "simulator gives it (`pipevm simulate --cost`; see\n"
      "[simulator.md](simulator.md)). An instruction talks to no rank outside\n"
      "its group.\n";
  for (const OpClass cls : kClasses) {
    out += "\n## ";
    out += name(cls);
    out += "\n\n| instruction | what it does | talks to | done | needs | makes | cost |\n"
           "|---|---|---|---|---|---|---|\n";
    for (std::size_t i = 0; i < kOpcodeCount; ++i) {
      const auto op = static_cast<Opcode>(i);
      const OpcodeInfo& row = info(op);
      if (row.cls != cls) continue;
      std::string syntax(row.name);
      if (const std::string operands = operand_syntax(op); !operands.empty()) {
        syntax += " " + operands;
      }
      out += "| `" + cell(syntax) + "` | " + cell(row.doc) + " | " + std::string(name(row.group)) +
             " | " + std::string(completion(row.completion)) + " | " + values(row.consumes) +
             " | " + values(row.produces) + " | " + cell(name(row.cost)) + " |\n";
    }
  }
  out += "\n## Groups\n\n| group | members |\n|---|---|\n";
  for (std::size_t g = 0; g < kGroupCount; ++g) {
    const auto group = static_cast<Group>(g);
    out += "| `" + std::string(name(group)) + "` | " + cell(describe(group)) + " |\n";
  }
  return out;
}

}  // namespace pipevm
