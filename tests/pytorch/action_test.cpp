// Single actions and whole tables: PyTorch's spellings read and written
// back, bad cells reported at their line and column, layouts inferred.
#include <gtest/gtest.h>

#include "support.hpp"

namespace pipevm::pytorch {
namespace {

std::string round_trip(const std::string& cell) {
  std::optional<ActionError> error;
  const auto action = parse_action(cell, 0, error);
  if (error) return "error: " + error->message;
  return action ? to_string(*action) : "(idle)";
}

TEST(action, spellings_round_trip) {
  for (const std::string cell : {"0F3", "2I1", "3W0", "1B2", "2SEND_F0", "0RECV_B5", "1UNSHARD",
                                 "1RESHARD", "1REDUCE_GRAD", "(0F7;7B3)OVERLAP_F_B", "12F345"}) {
    EXPECT_EQ(round_trip(cell), cell);
  }
  EXPECT_EQ(round_trip("  0F3 "), "0F3");
  EXPECT_EQ(round_trip(""), "(idle)");
  EXPECT_EQ(round_trip("   "), "(idle)");
}

TEST(action, bad_cells_are_errors_at_their_offset) {
  std::optional<ActionError> error;
  EXPECT_FALSE(parse_action("0X3", 10, error));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 1u);
  error.reset();
  // PyTorch's regex would read "0F3x" as 0F3; a typo must not pass.
  EXPECT_FALSE(parse_action("0F3x", 0, error));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 3u);
  error.reset();
  EXPECT_FALSE(parse_action("0F", 0, error));
  ASSERT_TRUE(error);
  EXPECT_NE(error->message.find("needs a micro-batch"), std::string::npos);
  error.reset();
  EXPECT_FALSE(parse_action("(0F1;1B0)F", 0, error));
  EXPECT_TRUE(error);
}

TEST(table, bad_cell_is_reported_at_line_and_column) {
  const auto loaded = testing::load("0F0,1F0\n1F0,0B0x\n", "bad.csv");
  EXPECT_FALSE(loaded.program);
  ASSERT_EQ(loaded.diagnostics.size(), 1u);
  const Diagnostic& d = loaded.diagnostics.all()[0];
  EXPECT_EQ(d.kind, DiagnosticKind::SyntaxError);
  const LineColumn at = d.location.file->position(d.location.range.begin);
  EXPECT_EQ(at.line, 2u);
  EXPECT_EQ(at.column, 8u);
  EXPECT_EQ(d.location.rank, 1);
}

TEST(table, quoted_cells_crlf_and_trailing_blank_lines) {
  const auto loaded = testing::load("\"0F0\",0B0\r\n1F0,1B0\r\n\n\n");
  ASSERT_TRUE(loaded.program) << loaded.diagnostics.size();
  EXPECT_EQ(loaded.program->ranks(), 2);
  EXPECT_TRUE(testing::error_classes(*loaded.program).empty());
}

// The layout of a data file's table; nullopt with a test failure when none.
std::optional<Layout> layout_of_data(const std::string& name) {
  const auto file = testing::csv_file(testing::data_text(name));
  Diagnostics diagnostics;
  const auto table = read_table(file, diagnostics);
  auto layout = table ? infer_layout(*table, file, diagnostics) : std::nullopt;
  EXPECT_TRUE(diagnostics.empty()) << name;
  return layout;
}

TEST(table, layouts_are_inferred) {
  const auto v = layout_of_data("dualpipev_4rank_10mb.csv");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->placement, Placement::v);
  EXPECT_EQ(v->ranks, 4);
  EXPECT_EQ(v->chunks, 2);
  EXPECT_EQ(v->micro_batches, 10);
  const auto looped = layout_of_data("zb1p_2rank_2stagep_compute.csv");
  ASSERT_TRUE(looped);
  EXPECT_EQ(looped->placement, Placement::looped);
  EXPECT_EQ(looped->ranks, 2);
  EXPECT_EQ(looped->chunks, 2);
  EXPECT_EQ(looped->micro_batches, 8);
}

TEST(table, a_micro_batch_past_the_cells_is_refused) {
  const auto loaded = testing::load("0F0,0F2147483647\n1F0\n");
  EXPECT_FALSE(loaded.program);
  ASSERT_FALSE(loaded.diagnostics.empty());
  EXPECT_NE(loaded.diagnostics.all()[0].message.find("micro-batch 2147483647"), std::string::npos);
}

TEST(table, a_stage_on_two_ranks_is_refused) {
  const auto loaded = testing::load("0F0,1F0\n1F0,1B0\n");
  EXPECT_FALSE(loaded.program);
  ASSERT_FALSE(loaded.diagnostics.empty());
  EXPECT_NE(loaded.diagnostics.all()[0].message.find("stage 1 is on rank 0 and on rank 1"),
            std::string::npos);
}

TEST(table, a_placement_that_is_neither_looped_nor_v_is_refused) {
  // Rank 0 holds stages 0 and 1, rank 1 stages 2 and 3: neither s mod 2 nor a V.
  const auto loaded = testing::load("0F0,1F0\n2F0,3F0\n");
  EXPECT_FALSE(loaded.program);
  ASSERT_FALSE(loaded.diagnostics.empty());
  EXPECT_NE(loaded.diagnostics.all()[0].message.find("fits neither"), std::string::npos);
}

}  // namespace
}  // namespace pipevm::pytorch
