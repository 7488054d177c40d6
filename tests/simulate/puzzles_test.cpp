// The LLM Training Puzzles (examples/puzzles/) as a user runs them: each
// program passes `pipevm check` with its configuration, and `pipevm
// simulate NAME.pipe --config NAME.yaml --format json` gives
//  - pipevm's peak memory (the largest per_rank[].peak_bytes), which is the
//    puzzles' reference figure less exactly the values the reference
//    solution keeps and pipevm frees (README.md says which, per puzzle);
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

// One activation of the puzzles: a batch of 256 rows of 512 one-byte numbers.
constexpr std::uint64_t kActivation = 512 * 256;

struct Puzzle {
  const char* name;
  std::uint64_t reference_peak;  // bytes, the reference solution's
  double reference_time;         // the puzzles' clock
  // What the reference holds at its peak beyond pipevm's, in activations
  // (eighths: a layer's gradient shard over 16 ranks is 1/8 of one).
  int extra_eighths;
};

constexpr Puzzle kPuzzles[] = {
    {"standard", 2'621'440, 16.5, 0},
    {"grad-accumulation", 1'966'080, 16.5, 0},
    {"ddp", 1'835'008, 5.1, 2 * 8},    // its output and its input's gradient, never freed
    {"wsdp", 2'752'512, 19.9, 1 * 8},  // its output, never freed
    {"fsdp", 2'359'296, 19.9, 2 * 8},  // a layer's input and gradient, kept through its scatter
    {"pipeline", 3'145'728, 66.9, 0},
    {"gpipe", 4'194'304, 33.3, 8 * 8},        // each micro-batch's weight gradients apart
    {"pipeline-fsdp", 966'656, 15.5, 1 * 8},  // its input's gradient, never freed
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
  EXPECT_EQ(peak + static_cast<std::uint64_t>(p.extra_eighths) * kActivation / 8, p.reference_peak)
      << p.name << ": pipevm's peak " << peak;
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
