// A test helper: a Program from per-rank lists of instructions written in the
// language's syntax ("Send act 3", "Wait recv grad 1 chunk 1",
// "Recv act 0 from 2"), without the front end. It writes a flat schedule text
// (one line per instruction) so that diagnostics have real positions:
// instruction j of rank r is on line line_of(r, j). Peers not given are the
// default neighbour. It understands only what these tests write.
#pragma once

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa.hpp"
#include "program.hpp"

namespace pipevm::testing {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(Config config, Placement placement = Placement::looped)
      : config_(config), placement_(placement) {}

  // Streams in rank order (dp_rank * stages + stage).
  Program build(const std::vector<std::vector<std::string>>& ranks) {
    std::string text;
    struct Pending {
      Instruction in;
      std::uint32_t begin, end;
    };
    std::vector<std::vector<Pending>> parsed(ranks.size());
    line_starts_.clear();
    std::uint32_t line = 1;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const int stage = stage_of(config_, static_cast<int>(r));
      text += "stage " + std::to_string(stage) + " {\n";
      ++line;
      line_starts_.push_back(line);
      for (const std::string& statement : ranks[r]) {
        const auto begin = static_cast<std::uint32_t>(text.size() + 4);
        text += "    " + statement + "\n";
        ++line;
        parsed[r].push_back(
            {parse(statement, stage), begin, static_cast<std::uint32_t>(begin + statement.size())});
      }
      text += "}\n";
      ++line;
    }
    Program program;
    program.file = std::make_shared<SourceFile>("test.pipe", text);
    program.name = "test";
    program.placement = placement_;
    program.config = config_;
    program.rank_begin.push_back(0);
    for (const auto& stream : parsed) {
      for (const Pending& p : stream) {
        Instruction in = p.in;
        in.set_source(static_cast<std::uint32_t>(program.sources.size()), in.explicit_peer());
        program.sources.push_back({p.begin, p.end});
        program.code.push_back(in);
      }
      program.rank_begin.push_back(program.code.size());
    }
    return program;
  }

  // The 1-based line of instruction j (0-based) of rank r in the last build.
  std::uint32_t line_of(std::size_t rank, std::size_t j) const {
    return line_starts_.at(rank) + static_cast<std::uint32_t>(j);
  }

 private:
  Instruction parse(const std::string& statement, int stage) const {
    std::istringstream words(statement);
    std::string word;
    words >> word;
    const auto op = opcode_from_name(word);
    if (!op) throw std::invalid_argument("unknown opcode in test: " + statement);
    Instruction in;
    in.op = *op;
    const OperandParts takes = operand_parts(*op);
    if (takes.direction) {
      words >> word;
      in.direction = word == "send" ? WaitDirection::send : WaitDirection::recv;
    }
    if (takes.kind) {
      words >> word;
      in.kind = word == "act" ? MessageKind::act : MessageKind::grad;
    }
    if (takes.micro_batch) words >> in.micro_batch;
    bool explicit_peer = false;
    int peer = 0;
    while (words >> word) {
      if (word == "chunk") {
        words >> in.chunk;
      } else if (word == "to" || word == "from") {
        explicit_peer = true;
        words >> peer;
      }
    }
    if (takes.peer) {
      in.set_source(0, explicit_peer);
      in.peer = static_cast<std::int16_t>(
          explicit_peer ? peer
                        : default_peer(placement_, config_, stage, in.kind, in.chunk, is_send(in.op)));
    }
    return in;
  }

  Config config_;
  Placement placement_;
  std::vector<std::uint32_t> line_starts_;
};

}  // namespace pipevm::testing
