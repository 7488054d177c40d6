// Figures of simulated runs as a user reads them side by side: several
// schedules in one table (`pipevm simulate A.pipe B.pipe ...`), and the
// peak bytes of each rank under one run's grid. Not here: the simulation
// (simulate_run.hpp) and the grid itself (interpreter/simulate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory_bytes.hpp"
#include "simulate_run.hpp"

namespace pipevm::api {

struct ComparedRun {
  std::string file;
  SimulateRun run;
};

// "12.5 KiB", "3 MiB", "512 B": bytes for people, three significant digits.
std::string bytes_text(std::uint64_t bytes);

// "peak bytes per rank (as `pipevm check` counts them): 0: 1.2 MiB, ...";
// empty when there are none (the model cannot be cut into the pieces).
std::string peak_bytes_line(const std::vector<RankBytes>& bytes);

// One row per run: the file, its configuration, makespan, bubble and the
// largest and each rank's peak bytes.
std::string comparison_text(const std::vector<ComparedRun>& runs);
// [{"file", "stages", "micro_batches", "chunks", "dp", "makespan",
//   "bubble_fraction", "peak_bytes": [per rank]}]
nlohmann::json comparison_json(const std::vector<ComparedRun>& runs);

}  // namespace pipevm::api
