// `pipevm simulate --costs` with per-layer costs: each piece timed by the
// sums over its layers of the program's cut (or the even cut), messages by
// the output-bytes at their boundary, activation bytes by the layers'; the
// whole text a user sees is pinned by golden files in data/.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_pipevm.hpp"

namespace {

using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;

const std::string kCosts = " --costs tests/simulate/data/six-layers.yaml --width 40";

std::string read_text(const std::string& path) {
  std::ifstream file(std::string(PIPEVM_SOURCE_DIR) + "/" + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Regenerate after a deliberate change with
//   pipevm simulate tests/simulate/data/naive-cut.pipe --costs
//   tests/simulate/data/six-layers.yaml --width 40 > tests/simulate/data/naive-cut.txt
// (and 1f1b-even-cut.txt: schedules/1f1b.pipe -p 2 -m 3). naive-cut.pipe
// says by hand why its makespan is 32.
TEST(layer_cut, the_programs_cut_times_each_piece_by_its_layers) {
  const PipevmRun run = run_pipevm("simulate tests/simulate/data/naive-cut.pipe" + kCosts);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, read_text("tests/simulate/data/naive-cut.txt"));
  EXPECT_NE(run.out.find("makespan 32 "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("the program's cut 0,1-3,4-5\n"), std::string::npos) << run.out;
}

TEST(layer_cut, without_a_cut_line_the_even_cut_is_timed_and_said) {
  const PipevmRun run = run_pipevm("simulate schedules/1f1b.pipe -p 2 -m 3" + kCosts);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, read_text("tests/simulate/data/1f1b-even-cut.txt"));
  EXPECT_NE(run.out.find("the even cut 0-2,3-5 (the program declares no cut)"), std::string::npos);
}

TEST(layer_cut, json_names_the_cut_and_each_ranks_activation_peak) {
  const PipevmRun run =
      run_pipevm("simulate schedules/1f1b.pipe -p 4 -m 4 --format json" + kCosts);
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["layer_cut"]["cut"], "0-1,2-3,4,5");
  EXPECT_EQ(j["layer_cut"]["declared"], false);
  // 1F1B: stage s holds 4 - s forwards; stage 0's pieces keep 2 + 3 bytes.
  EXPECT_EQ(j["layer_cut"]["peak_activation_bytes"], nlohmann::json::parse("[20, 15, 4, 1]"));
}

TEST(layer_cut, a_cut_of_other_layers_is_refused_with_both_counts) {
  const PipevmRun run = run_pipevm("simulate tests/simulate/data/naive-cut.pipe --costs "
                                   "tests/simulate/data/three-layers.yaml");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("the program's cut 0,1-3,4-5 covers 6 layers, but the per-layer costs give 3"),
            std::string::npos)
      << run.err;
  const PipevmRun few = run_pipevm("simulate schedules/1f1b.pipe -p 8 -m 8" + kCosts);
  EXPECT_EQ(few.status, 2);
  EXPECT_NE(few.err.find("the per-layer costs give 6 layers, fewer than the program's 8 model pieces"),
            std::string::npos)
      << few.err;
}

}  // namespace
