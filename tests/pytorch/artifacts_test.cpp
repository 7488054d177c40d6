// PyTorch's own test artifacts (data/README.md): each passes the checker
// with no flags, PyTorch's lowering done by pipevm reproduces PyTorch's
// comms table, the DualPipeV table runs the compute order of
// schedules/dualpipev.pipe, and each mutation is rejected with its class.
#include <gtest/gtest.h>

#include "compile.hpp"
#include "lower.hpp"
#include "support.hpp"

namespace pipevm::pytorch {
namespace {

using testing::data_text;
using testing::error_classes;
using testing::load;

// The text with the first `from` replaced by `to` (which must exist).
std::string mutate(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string all_messages(const Program& program) {
  std::string text;
  for (const Diagnostic& d : check(program).diagnostics) text += d.message + "\n";
  return text;
}

TEST(artifacts, each_passes_check) {
  for (const char* name : {"zb1p_2rank_2stagep_compute.csv", "zb1p_2rank_2stagep_comms.csv",
                           "dualpipev_4rank_10mb.csv"}) {
    const auto loaded = load(data_text(name), name);
    ASSERT_TRUE(loaded.program) << name;
    EXPECT_TRUE(error_classes(*loaded.program).empty()) << name << "\n"
                                                        << all_messages(*loaded.program);
  }
}

TEST(artifacts, lowering_the_compute_table_gives_pytorchs_comms_table) {
  const auto file = testing::csv_file(data_text("zb1p_2rank_2stagep_compute.csv"));
  Diagnostics diagnostics;
  const auto table = read_table(file, diagnostics);
  ASSERT_TRUE(table);
  const auto layout = infer_layout(*table, file, diagnostics);
  ASSERT_TRUE(layout);
  const auto lowered = add_send_recv(merge_backwards(*table), *layout, file, diagnostics);
  ASSERT_TRUE(lowered);
  EXPECT_EQ(write_table(*lowered), data_text("zb1p_2rank_2stagep_comms.csv"));
}

TEST(artifacts, the_compute_and_comms_tables_run_the_same_program) {
  const auto compute = load(data_text("zb1p_2rank_2stagep_compute.csv"));
  const auto comms = load(data_text("zb1p_2rank_2stagep_comms.csv"));
  ASSERT_TRUE(compute.program && comms.program);
  EXPECT_EQ(testing::compute_order(*compute.program), testing::compute_order(*comms.program));
}

TEST(artifacts, dualpipev_table_is_schedules_dualpipev_at_p4_m10_v2) {
  const auto table = load(data_text("dualpipev_4rank_10mb.csv"));
  ASSERT_TRUE(table.program);
  Diagnostics diagnostics;
  const auto file =
      read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/dualpipev.pipe", diagnostics);
  ASSERT_TRUE(file);
  const auto ours =
      compile(file, Config{.stages = 4, .micro_batches = 10, .chunks = 2}, diagnostics);
  ASSERT_TRUE(ours);
  // The table is compute only: PyTorch merges each I directly followed by its W.
  EXPECT_EQ(testing::compute_order(*table.program), testing::compute_order(*ours, true));
}

// Mutations of the comms table, each a mistake users make by hand.
class mutation : public ::testing::Test {
 protected:
  std::string comms_ = data_text("zb1p_2rank_2stagep_comms.csv");
  std::set<std::string> classes_of(const std::string& text) {
    const auto loaded = load(text);
    EXPECT_TRUE(loaded.program);
    return loaded.program ? error_classes(*loaded.program) : std::set<std::string>{};
  }
};

TEST_F(mutation, a_receive_dropped_is_unmatched) {
  const auto classes = classes_of(mutate(comms_, "1RECV_F2,", ""));
  EXPECT_TRUE(classes.contains("unmatched"));
  EXPECT_TRUE(classes.contains("dataflow"));
}

TEST_F(mutation, a_send_of_the_wrong_micro_batch_is_unmatched) {
  const auto classes = classes_of(mutate(comms_, "0SEND_F2,", "0SEND_F3,"));
  EXPECT_TRUE(classes.contains("unmatched"));
}

TEST_F(mutation, a_receive_moved_after_its_compute_is_a_dataflow_error) {
  const auto text = mutate(mutate(comms_, "1RECV_F2,", ""), "1F2,", "1F2,1RECV_F2,");
  EXPECT_EQ(classes_of(text), std::set<std::string>{"dataflow"});
}

TEST_F(mutation, a_forward_repeated_is_a_dataflow_error) {
  const auto classes = classes_of(mutate(comms_, "0F3,", "0F3,0F3,"));
  EXPECT_TRUE(classes.contains("dataflow"));
}

TEST_F(mutation, a_compute_table_in_a_cycle_cannot_be_lowered) {
  // Rank 0 wants its backward before its forward: no rank can go on.
  const auto loaded = load("0B0,0F0\n1F0,1B0\n");
  EXPECT_FALSE(loaded.program);
  ASSERT_EQ(loaded.diagnostics.size(), 1u);
  const Diagnostic& d = loaded.diagnostics.all()[0];
  EXPECT_EQ(d.kind, DiagnosticKind::LoweringStuck);
  EXPECT_EQ(name(class_of(d.kind)), "deadlock");
  EXPECT_EQ(d.location.rank, 0);
  EXPECT_EQ(d.location.range.begin, 0u);
}

}  // namespace
}  // namespace pipevm::pytorch
