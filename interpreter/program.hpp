// A Program: the result of expanding a schedule for one configuration. One
// flat instruction stream per rank, all in one array; every instruction
// points at the source range of the statement that produced it. The checker,
// the simulator and the VM all walk this and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "isa.hpp"
#include "source.hpp"

namespace pipevm {

// How a rank's model chunks are placed along the pipeline (DESIGN.md).
enum class Placement : std::uint8_t { looped, v, mirror };
std::string_view name(Placement placement);

// The parameters a schedule is expanded for.
struct Config {
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;
  int dp = 1;
  int ranks() const { return stages * dp; }
};

// World rank numbering: the ranks of one pipeline are consecutive.
constexpr int rank_of(const Config& c, int dp_rank, int stage) { return dp_rank * c.stages + stage; }
constexpr int stage_of(const Config& c, int rank) { return rank % c.stages; }
constexpr int dp_rank_of(const Config& c, int rank) { return rank / c.stages; }

struct Program {
  std::shared_ptr<const SourceFile> file;  // the schedule's text
  std::string name;                        // from `schedule NAME`, else the file stem
  Placement placement = Placement::looped;
  Config config;
  std::vector<SourceRange> sources;       // Instruction::source indexes this
  std::vector<Instruction> code;          // every rank's stream, rank after rank
  std::vector<std::size_t> rank_begin;    // rank r's stream is code[rank_begin[r], rank_begin[r+1])

  int ranks() const { return static_cast<int>(rank_begin.empty() ? 0 : rank_begin.size() - 1); }
  std::span<const Instruction> rank(int r) const {
    const auto b = rank_begin[static_cast<std::size_t>(r)];
    const auto e = rank_begin[static_cast<std::size_t>(r) + 1];
    return {code.data() + b, e - b};
  }
  const SourceRange& source_of(const Instruction& i) const { return sources[i.source]; }
};

// One instruction in the language's own syntax, e.g. "Recv act 3 chunk 1 from 2".
std::string disassemble(const Instruction& instruction);
// A rank's stream as a flat program: "stage S {\n  ...\n}\n".
std::string disassemble_rank(const Program& program, int rank);

}  // namespace pipevm
