// Helpers for the PyTorch table tests: tables from text or from the test
// data, checking a Program, and the classes of what the checker found.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"
#include "torch_csv.hpp"

namespace pipevm::testing {

inline std::string data_text(const std::string& name) {
  std::ifstream in(std::string(PIPEVM_SOURCE_DIR) + "/tests/pytorch/data/" + name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::shared_ptr<const SourceFile> csv_file(const std::string& text,
                                                  const std::string& name = "table.csv") {
  return std::make_shared<const SourceFile>(name, text);
}

struct Loaded {
  std::optional<Program> program;
  Diagnostics diagnostics;
};

inline Loaded load(const std::string& text, const std::string& name = "table.csv") {
  Loaded loaded;
  loaded.program = pytorch::load_csv(csv_file(text, name), loaded.diagnostics);
  return loaded;
}

// The classes of the errors the checker finds in `program`.
inline std::set<std::string> error_classes(const Program& program) {
  std::set<std::string> classes;
  for (const Diagnostic& d : check(program).diagnostics) {
    if (d.severity == Severity::error) classes.insert(std::string(name(class_of(d.kind))));
  }
  return classes;
}

// Every rank's compute instructions as "Fwd 3 chunk 1" words, in order
// (BwdAllReduce counted as Bwd: the table has no reduction). With
// `merge_backwards`, a BwdInput directly followed by the BwdWeight of the
// same cell counts as one Bwd, as PyTorch's `_merge_bw` lowers it.
inline std::vector<std::vector<std::string>> compute_order(const Program& program,
                                                           bool merge_backwards = false) {
  std::vector<std::vector<std::string>> order(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) {
    for (const Instruction& whole : program.rank(r)) {
      for (int which = 0; which < half_count(whole); ++which) {
        const Instruction in = half(whole, which);  // a FwdBwd counts as its Fwd and its Bwd
        if (in.op != Opcode::Fwd && in.op != Opcode::Bwd && in.op != Opcode::BwdInput &&
            in.op != Opcode::BwdWeight && in.op != Opcode::BwdAllReduce) {
          continue;
        }
        const std::string op = in.op == Opcode::BwdAllReduce ? "Bwd" : std::string(name(in.op));
        const std::string cell =
            " " + std::to_string(in.micro_batch) + " chunk " + std::to_string(in.chunk);
        auto& row = order[static_cast<std::size_t>(r)];
        if (merge_backwards && in.op == Opcode::BwdWeight && !row.empty() &&
            row.back() == "BwdInput" + cell) {
          row.back() = "Bwd" + cell;
          continue;
        }
        row.push_back(op + cell);
      }
    }
  }
  return order;
}

}  // namespace pipevm::testing
