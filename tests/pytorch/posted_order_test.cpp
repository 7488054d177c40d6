// The deadlock of pytorch/pytorch#172668 (deferring receives hung two
// nodes): each rank posts a receive before the send its peer is waiting
// for. With MPI's semantics every operation progresses on its own and the
// table is clean; NCCL runs a rank's sends and receives one at a time in
// the order they were posted, and then each rank's receive waits for a send
// queued behind the other's receive.
#include <gtest/gtest.h>

#include "support.hpp"

namespace pipevm::pytorch {
namespace {

TEST(posted_order, deferred_receives_deadlock_only_in_posted_order) {
  const auto loaded = testing::load(testing::data_text("deferred_recv_172668.csv"));
  ASSERT_TRUE(loaded.program);
  EXPECT_TRUE(check(*loaded.program).diagnostics.empty());
  CheckOptions posted;
  posted.p2p_posted_order = true;
  const CheckResult result = check(*loaded.program, posted);
  ASSERT_EQ(result.diagnostics.size(), 1u);
  const Diagnostic& d = result.diagnostics[0];
  EXPECT_EQ(d.kind, DiagnosticKind::Deadlock);
  EXPECT_NE(d.message.find("in the order they were posted"), std::string::npos) << d.message;
}

TEST(posted_order, pytorchs_own_tables_are_clean_in_posted_order) {
  CheckOptions posted;
  posted.p2p_posted_order = true;
  for (const char* name : {"zb1p_2rank_2stagep_compute.csv", "zb1p_2rank_2stagep_comms.csv",
                           "dualpipev_4rank_10mb.csv"}) {
    const auto loaded = testing::load(testing::data_text(name));
    ASSERT_TRUE(loaded.program);
    EXPECT_TRUE(check(*loaded.program, posted).diagnostics.empty()) << name;
  }
}

}  // namespace
}  // namespace pipevm::pytorch
