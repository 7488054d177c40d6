// pipevm schedules written as PyTorch tables and read back: the table is
// accepted by the checker and gives back each rank's compute order, both
// compute only (lowered by PyTorch's rule) and with communication.
#include <gtest/gtest.h>

#include "compile.hpp"
#include "support.hpp"

namespace pipevm::pytorch {
namespace {

struct Case {
  const char* schedule;
  Config config;
};

Program compiled(const Case& c) {
  Diagnostics diagnostics;
  const auto file =
      read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + c.schedule, diagnostics);
  EXPECT_TRUE(file);
  auto program = compile(file, c.config, diagnostics);
  EXPECT_TRUE(program) << c.schedule;
  return program ? std::move(*program) : Program{};
}

void expect_round_trip(const Case& c, bool with_comms) {
  SCOPED_TRACE(std::string(c.schedule) + (with_comms ? " with comms" : " compute only"));
  const Program program = compiled(c);
  std::string error;
  const auto table = to_table(program, with_comms, error);
  ASSERT_TRUE(table) << error;
  const std::string text = write_table(*table);
  const auto back = testing::load(text, "exported.csv");
  ASSERT_TRUE(back.program) << text;
  EXPECT_EQ(back.program->config.stages, c.config.stages);
  EXPECT_EQ(back.program->config.chunks, c.config.chunks);
  EXPECT_EQ(back.program->config.micro_batches, c.config.micro_batches);
  EXPECT_EQ(back.program->placement, program.placement);
  EXPECT_TRUE(testing::error_classes(*back.program).empty()) << text;
  // A compute-only table is lowered by PyTorch's rule, which merges an I
  // directly followed by its W into one B; a table with comms is run as written.
  const bool merged = !with_comms;
  EXPECT_EQ(testing::compute_order(*back.program), testing::compute_order(program, merged));
}

const Case kCases[] = {
    {"1f1b.pipe", {.stages = 4, .micro_batches = 8}},
    {"interleaved-1f1b.pipe", {.stages = 4, .micro_batches = 8, .chunks = 2}},
    {"zb-h1.pipe", {.stages = 4, .micro_batches = 8}},
    {"gpipe.pipe", {.stages = 3, .micro_batches = 5}},
    {"dualpipev.pipe", {.stages = 4, .micro_batches = 10, .chunks = 2}},
};

TEST(round_trip, compute_only) {
  for (const Case& c : kCases) expect_round_trip(c, false);
}

TEST(round_trip, with_comms) {
  for (const Case& c : kCases) expect_round_trip(c, true);
}

// Under NCCL's posted order, PyTorch's lowering of a compute-only table is
// safe for every schedule here; the sends and receives in pipevm's own order
// are not for 1F1B: a rank's stream holds a send whose receiver's stream is
// stuck on its own send (a buffering hazard: it needs NCCL to buffer).
TEST(round_trip, posted_order_safe_when_pytorch_lowers_not_in_pipevm_order) {
  CheckOptions posted;
  posted.p2p_posted_order = true;
  for (const Case& c : kCases) {
    std::string error;
    const auto table = to_table(compiled(c), false, error);
    ASSERT_TRUE(table) << error;
    const auto back = testing::load(write_table(*table));
    ASSERT_TRUE(back.program);
    EXPECT_TRUE(check(*back.program, posted).diagnostics.empty()) << c.schedule;
  }
  std::string error;
  const auto comms = to_table(compiled(kCases[0]), true, error);
  ASSERT_TRUE(comms) << error;
  const auto back = testing::load(write_table(*comms));
  ASSERT_TRUE(back.program);
  const CheckResult result = check(*back.program, posted);
  ASSERT_FALSE(result.diagnostics.empty());
  EXPECT_EQ(result.diagnostics[0].kind, DiagnosticKind::BufferingHazard);
}

// A checkpointed forward is PyTorch's F, and the policies' other
// instructions have no action: 1f1b-recompute and 1f1b-offload export
// 1F1B's table.
TEST(round_trip, memory_policies_export_the_table_of_their_order) {
  const Config config{.stages = 4, .micro_batches = 8};
  std::string error;
  const auto plain = to_table(compiled({"1f1b.pipe", config}), true, error);
  ASSERT_TRUE(plain) << error;
  for (const char* schedule : {"1f1b-recompute.pipe", "1f1b-offload.pipe"}) {
    const auto table = to_table(compiled({schedule, config}), true, error);
    ASSERT_TRUE(table) << error;
    EXPECT_EQ(write_table(*table), write_table(*plain)) << schedule;
  }
}

TEST(round_trip, mirror_placement_has_no_table) {
  const Program program =
      compiled({"dualpipe.pipe", {.stages = 4, .micro_batches = 8, .chunks = 2}});
  std::string error;
  EXPECT_FALSE(to_table(program, false, error));
  EXPECT_NE(error.find("mirror"), std::string::npos);
}

}  // namespace
}  // namespace pipevm::pytorch
