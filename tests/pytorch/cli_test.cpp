// The command line on PyTorch tables: check, expand and simulate take a
// .csv with no configuration flags; expand writes tables back.
#include <gtest/gtest.h>

#include "../cli/run_pipevm.hpp"

namespace pipevm::testing {
namespace {

const std::string kData = "tests/pytorch/data/";

TEST(cli, check_expand_simulate_take_a_csv) {
  EXPECT_EQ(run_pipevm("check " + kData + "dualpipev_4rank_10mb.csv").status, 0);
  const auto expanded = run_pipevm("expand " + kData + "zb1p_2rank_2stagep_comms.csv");
  EXPECT_EQ(expanded.status, 0);
  EXPECT_NE(expanded.out.find("# rank 1: row 2 of " + kData + "zb1p_2rank_2stagep_comms.csv"),
            std::string::npos);
  EXPECT_NE(expanded.out.find("Wait recv act 0 chunk 1"), std::string::npos);
  const auto simulated = run_pipevm("simulate " + kData + "zb1p_2rank_2stagep_compute.csv");
  EXPECT_EQ(simulated.status, 0);
  EXPECT_NE(simulated.out.find("makespan"), std::string::npos);
}

TEST(cli, the_expanded_table_is_a_pipevm_program_that_checks) {
  const std::string pipe = std::string(PIPEVM_BINARY_DIR) + "/pytorch-imported-zb1p.pipe";
  const auto expanded =
      run_pipevm("expand " + kData + "zb1p_2rank_2stagep_compute.csv > '" + pipe + "'");
  ASSERT_EQ(expanded.status, 0);
  const auto checked = run_pipevm("check '" + pipe + "' --stages 2 --micro-batches 8 --chunks 2");
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
}

TEST(cli, p2p_order_posted_finds_the_deferred_receive_deadlock) {
  const std::string file = kData + "deferred_recv_172668.csv";
  EXPECT_EQ(run_pipevm("check " + file).status, 0);
  const auto posted = run_pipevm("check --format gcc --p2p-order posted " + file);
  EXPECT_EQ(posted.status, 1);
  EXPECT_NE(posted.out.find("[PV2001]"), std::string::npos) << posted.out;
}

TEST(cli, configuration_flags_with_a_csv_are_a_usage_error) {
  const auto run = run_pipevm("check " + kData + "dualpipev_4rank_10mb.csv --stages 4");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("gives its own stages"), std::string::npos);
  EXPECT_EQ(run_pipevm("expand schedules/1f1b.pipe").status, 2);
}

TEST(cli, a_bad_cell_is_reported_at_file_line_column) {
  const auto run = run_pipevm("check --format gcc " + kData + "bad_cell.csv");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find(kData + "bad_cell.csv:2:6: error:"), std::string::npos) << run.out;
}

TEST(cli, expand_writes_a_table_that_checks) {
  const auto table = run_pipevm(
      "expand schedules/zb-h1.pipe --stages 4 --micro-batches 8 --format torch-csv --with-comms");
  ASSERT_EQ(table.status, 0);
  EXPECT_NE(table.out.find("0F0,0SEND_F0,"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("1RECV_F0,1F0,1SEND_F0"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace pipevm::testing
