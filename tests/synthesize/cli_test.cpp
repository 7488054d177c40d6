// `pipevm synthesize` as a user runs it: the whole output of a small case
// against a golden file (header figures, the check line, the placed
// program), the written program passing `pipevm check` in posted order
// with no flags, a budget of moves giving one program wherever it runs,
// bad requests refused with one line and exit 2, and per-layer costs
// choosing the cut (or --cut fixing it).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "../cli/run_pipevm.hpp"

namespace {

using pipevm::testing::lines;
using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;

const char* const kGoldenArguments =
    "synthesize -p 3 -m 6 --cost fwd=1,bwd-input=1,bwd-weight=0.5,send=0.1 --weight-memory 0.5 "
    "--memory-limit 3 --memory-policy keep --time-limit 0";
const char* const kGoldenFile = "tests/synthesize/data/p3-m6-limit3.pipe";

std::string read_text(const std::string& path) {
  std::ifstream file(std::string(PIPEVM_SOURCE_DIR) + "/" + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Regenerate after a deliberate change with
//   pipevm <kGoldenArguments> > tests/synthesize/data/p3-m6-limit3.pipe
TEST(cli, small_case_matches_its_golden_file) {
  const PipevmRun run = run_pipevm(kGoldenArguments);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, read_text(kGoldenFile));
}

// With a limit and --memory-policy (any, the default), the header reports
// the choices and the device and host peaks. Regenerate with
//   pipevm <kPolicyArguments> > tests/synthesize/data/p3-m6-limit1.5-any.pipe
const char* const kPolicyArguments =
    "synthesize -p 3 -m 6 --cost fwd=1,bwd=2,recompute=1,host-latency=0.5,send=0.1 "
    "--memory-limit 1.5 --time-limit 0";
const char* const kPolicyFile = "tests/synthesize/data/p3-m6-limit1.5-any.pipe";

TEST(cli, memory_policy_case_matches_its_golden_file) {
  const PipevmRun run = run_pipevm(kPolicyArguments);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, read_text(kPolicyFile));
  EXPECT_EQ(run_pipevm(std::string("check ") + kPolicyFile + " --p2p-order posted").status, 0);
  EXPECT_EQ(run_pipevm("synthesize -p 2 -m 4 --memory-limit 1 --time-limit 0 --format torch-csv").status, 0);
  const PipevmRun table = run_pipevm(
      "synthesize -p 2 -m 4 --memory-limit 1 --time-limit 0 --format torch-csv --memory-policy offload");
  EXPECT_EQ(table.status, 2);
  EXPECT_NE(table.err.find("PyTorch's table cannot say"), std::string::npos) << table.err;
  const PipevmRun bad = run_pipevm("synthesize -p 2 -m 4 --memory-limit 1 --memory-policy checkpoint");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--memory-policy"), std::string::npos) << bad.err;
}

TEST(cli, written_program_passes_posted_order_with_no_flags) {
  const PipevmRun run = run_pipevm(std::string("check ") + kGoldenFile + " --p2p-order posted");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
}

// A budget of moves instead of seconds gives one program wherever it runs:
// twice the same output. The seeds count the shipped V files (zb-v,
// dualpipev, v-half, v-min) among them.
TEST(cli, max_moves_gives_the_same_program_every_time) {
  const std::string arguments =
      "synthesize -p 3 -m 9 --chunks 2 --placement v --cost fwd=1,bwd-input=1,bwd-weight=0.5 "
      "--memory-limit 3.5 --memory-policy keep --time-limit 60 --max-moves ";
  const PipevmRun first = run_pipevm(arguments + "400");
  const PipevmRun again = run_pipevm(arguments + "400");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out, again.out);
  EXPECT_NE(first.out.find("# search: from V-ZB; 35 of 35 seeds within the memory limit, the best "
                           "spanning 47; 435 simulations"),
            std::string::npos)
      << first.out;
  EXPECT_EQ(run_pipevm(arguments + "-1").status, 2);
}

TEST(cli, bad_requests_get_one_line_and_exit_2) {
  const std::pair<const char*, const char*> cases[] = {
      {"-p 3 -m 6 --memory-limit 0.5", "the least that works is 1"},
      {"-p 3 -m 6 --memory-limit 2XB", "expected a number of micro-batch activations"},
      {"-p 3 -m 6 --memory-limit 1B", "the least that works is"},
      {"-p 3 -m 6 --placement v", "use --chunks 2"},
      {"-m 6", "--stages and --micro-batches are required"},
      {"--lower /nonexistent.pipe", "cannot read"},
      {"--lower schedules/dualpipe.pipe -p 4 -m 8 --chunks 2", "placement mirror"},
  };
  for (const auto& [arguments, reason] : cases) {
    const PipevmRun run = run_pipevm(std::string("synthesize ") + arguments);
    EXPECT_EQ(run.status, 2) << arguments << "\n" << run.err;
    EXPECT_EQ(run.out, "") << arguments;
    EXPECT_EQ(lines(run.err), 1u) << arguments << "\n" << run.err;
    EXPECT_NE(run.err.find(reason), std::string::npos) << arguments << "\n" << run.err;
  }
}

}  // namespace

// Per-layer costs: the cut chosen with the order, in the header; a byte
// limit met by a cut the even one is not; --cut fixing it; --cut refused
// without layers or when it does not cover them.
const char* const kLayerCosts = "--costs tests/synthesize/data/ten-layers.yaml -p 4 -m 8 --time-limit 0";

TEST(cli, per_layer_costs_choose_the_cut) {
  const PipevmRun run = run_pipevm(std::string("synthesize ") + kLayerCosts + " --memory-limit 150000");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("# cut: 0-1,2-4,5-7,8-9, searched over"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("memory limit 150000 bytes per stage for the model of the cost file's layers"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# peak bytes per stage (parameter-bytes plus held activation-bytes of the cut's "
                         "layers):"),
            std::string::npos)
      << run.out;
}

TEST(cli, cut_fixed_or_refused) {
  const PipevmRun even = run_pipevm(std::string("synthesize ") + kLayerCosts + " --cut even");
  ASSERT_EQ(even.status, 0) << even.err;
  EXPECT_NE(even.out.find("# cut: 0-2,3-5,6-7,8-9, the even cut (--cut even)"), std::string::npos) << even.out;
  const PipevmRun short_cut = run_pipevm(std::string("synthesize ") + kLayerCosts + " --cut 0-2,3-4,5-6,7");
  EXPECT_EQ(short_cut.status, 2);
  EXPECT_NE(short_cut.err.find("the last piece must end at layer 9"), std::string::npos) << short_cut.err;
  const PipevmRun no_layers = run_pipevm("synthesize -p 2 -m 4 --cut even");
  EXPECT_EQ(no_layers.status, 2);
  EXPECT_NE(no_layers.err.find("--cut needs per-layer costs"), std::string::npos) << no_layers.err;
}
