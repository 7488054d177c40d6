// The LLM Training Puzzles (examples/puzzles/) as a user runs them: each
// program passes `pipevm check` with its configuration, and `pipevm
// simulate NAME.pipe --config NAME.yaml --format json` gives
//  - the reference's peak memory exactly (the largest per_rank[].peak_bytes;
//    the programs hold what the reference solutions keep: Hold, Drop);
//  - a makespan within 25% of the reference's time.
// The puzzles' figures are those of Rush's reference solutions (issue 12).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_pipevm.hpp"

namespace pipevm {
namespace {

using testing::run_pipevm;

struct Puzzle {
  const char* name;
  std::uint64_t reference_peak;  // bytes, the reference solution's
  double reference_time;         // the puzzles' clock
};

constexpr Puzzle kPuzzles[] = {
    {"standard", 2'621'440, 16.5},
    {"grad-accumulation", 1'966'080, 16.5},
    {"ddp", 1'835'008, 5.1},
    {"wsdp", 2'752'512, 19.9},
    {"fsdp", 2'359'296, 19.9},
    {"pipeline", 3'145'728, 66.9},
    {"gpipe", 4'194'304, 33.3},
    {"pipeline-fsdp", 966'656, 15.5},
};

void check_and_simulate_give_the_figures(const Puzzle& p) {
  const std::string files = std::string("examples/puzzles/") + p.name;
  const auto checked = run_pipevm("check " + files + ".pipe --config " + files + ".yaml");
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;

  const auto simulated =
      run_pipevm("simulate " + files + ".pipe --config " + files + ".yaml --format json");
  ASSERT_EQ(simulated.status, 0) << simulated.err;
  const nlohmann::json j = nlohmann::json::parse(simulated.out);
  std::uint64_t peak = 0;
  for (const nlohmann::json& rank : j["per_rank"]) {
    peak = std::max(peak, rank["peak_bytes"].get<std::uint64_t>());
  }
  EXPECT_EQ(peak, p.reference_peak) << p.name;
  const double makespan = j["makespan"].get<double>();
  EXPECT_LE(std::abs(makespan - p.reference_time), 0.25 * p.reference_time)
      << p.name << ": makespan " << makespan << " against " << p.reference_time;
}

TEST(puzzles, standard) {
  check_and_simulate_give_the_figures(kPuzzles[0]);
}
TEST(puzzles, grad_accumulation) {
  check_and_simulate_give_the_figures(kPuzzles[1]);
}
TEST(puzzles, ddp) {
  check_and_simulate_give_the_figures(kPuzzles[2]);
}
TEST(puzzles, wsdp) {
  check_and_simulate_give_the_figures(kPuzzles[3]);
}
TEST(puzzles, fsdp) {
  check_and_simulate_give_the_figures(kPuzzles[4]);
}
TEST(puzzles, pipeline) {
  check_and_simulate_give_the_figures(kPuzzles[5]);
}
TEST(puzzles, gpipe) {
  check_and_simulate_give_the_figures(kPuzzles[6]);
}
TEST(puzzles, pipeline_fsdp) {
  check_and_simulate_give_the_figures(kPuzzles[7]);
}

}  // namespace
}  // namespace pipevm
