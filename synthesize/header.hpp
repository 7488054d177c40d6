// The comment header a synthesized program is written with: the inputs,
// the command or call that asked, the search, and the predicted figures,
// so the file says how it was made. Shared by `pipevm synthesize` and the
// Python module's pipevm.synthesize. Not here: the `check` line and the
// stage blocks, which Result::text holds.
#pragma once

#include <cstdint>
#include <string>

#include "costs.hpp"
#include "synthesize.hpp"

namespace pipevm::synthesis {

// How the result was asked for, as the header records it.
struct HeaderInputs {
  std::string command;  // the command line, or the Python call, that asked
  Costs costs;
  double memory_limit = 0;          // M_B per stage as asked; 0: none
  std::uint64_t memory_bytes = 0;   // bytes per stage as asked; 0: none
  std::string memory_model;         // what the bytes were counted for
  double weight_memory = 1;
  std::string p2p_order = "any";    // the progress model recorded
  MemoryPolicy memory_policy = MemoryPolicy::any;  // recorded when the result searched it
  std::string cut;                  // with per-layer costs: describe_cut (cut_search.hpp)
  std::string bytes_counted = "as `pipevm check` counts peak_bytes";  // how peak_bytes were counted
};

// The header's lines, each starting "# ", then the line `schedule synthesized`.
std::string header(const HeaderInputs& inputs, const Result& result);

// One line for the terminal after the program is written to `path`: the
// shape, the predicted makespan and bubble, the peak memory.
std::string summary(const std::string& path, const Result& result);

}  // namespace pipevm::synthesis
