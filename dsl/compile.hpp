// The front end's interface: schedule text in, per-rank Program out.
//
//   parse   text -> Schedule (the syntax tree), once per file
//   expand  Schedule x Config -> Program, once per configuration
//   compile both at once
//
// Nothing here knows about MPI, the checker or the VM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics.hpp"
#include "program.hpp"
#include "topology.hpp"

namespace pipevm {

class Schedule;  // a parsed program; defined in ast.hpp

// An inclusive range of one configuration value.
struct ValueRange {
  int first = 1;
  int last = 1;
  friend bool operator==(const ValueRange&, const ValueRange&) = default;
};

// One `check ...` header line: the configurations the schedule is checked
// for by default (every combination of the four ranges). A dimension the line
// does not name is absent (first = last = 0) for stages and micro_batches
// (the command line or the program must supply it) and 1 for dp and chunks.
struct DeclaredSweep {
  ValueRange stages{0, 0};
  ValueRange micro_batches{0, 0};
  ValueRange dp;
  ValueRange chunks;
  SourceRange range;  // the header line
};

struct ExpandOptions {
  // A runaway program is stopped with PV1010 past this many instructions (all ranks).
  std::uint64_t max_instructions = 100'000'000;
  // Expand a single world rank only (the others get empty streams); -1: all.
  int only_rank = -1;
  // Gossip: the topology given on the command line, overriding the
  // schedule's `topology NAME`: rounds read from a file, else a built-in
  // name (topology.hpp) built for the configuration's dp.
  std::shared_ptr<const Topology> topology;
  std::string topology_name;
  // The model: its layer widths (empty: the default MLP of model_shape.hpp)
  // and the layers of each piece (empty: split_layers). They give the
  // built-in names layers, layer_begin and layer_end, and the range of
  // `layer L` operands; the Program keeps them.
  std::vector<int> layer_widths;
  std::vector<LayerRange> split;
};

// Reads a schedule file (read_file.hpp: a regular file of at most
// kMaxScheduleBytes); on failure reports PV1015 (no position) and returns null.
std::shared_ptr<const SourceFile> read_source(const std::string& path, Diagnostics& diagnostics);

// Syntax errors reported per file before parse() gives up: after each, the
// statement's line is skipped and parsing goes on.
inline constexpr std::size_t kMaxSyntaxErrors = 20;

// Null when the text has syntax errors (reported to `diagnostics`, up to
// kMaxSyntaxErrors of them).
std::shared_ptr<const Schedule> parse(std::shared_ptr<const SourceFile> file,
                                      Diagnostics& diagnostics);

// The program's placement header (`placement looped|v|mirror`); looped if absent.
Placement placement_of(const Schedule& schedule);
// The `schedule NAME` header, else the file's stem.
std::string name_of(const Schedule& schedule);

// The schedule's `check` header lines, in order (none: empty).
const std::vector<DeclaredSweep>& declared_sweeps(const Schedule& schedule);
// The configuration of a schedule whose `check` headers declare exactly one
// (a single header line whose every range is one value); else empty.
std::optional<Config> declared_configuration(const Schedule& schedule);
// A flat program (only `stage N { ... }` blocks at the top level, as `pipevm
// expand` writes) fixes its stage count: the highest N + 1. Else 0.
int implied_stages(const Schedule& schedule);

// Empty when expansion fails (a false `require` included).
std::optional<Program> expand(const Schedule& schedule, const Config& config,
                              Diagnostics& diagnostics, const ExpandOptions& options = {});

std::optional<Program> compile(std::shared_ptr<const SourceFile> file, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options = {});

}  // namespace pipevm
