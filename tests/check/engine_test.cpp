// The checker on hand-built Programs: one test per behaviour of the engine
// (pairing, rendezvous progress, buffering hazards, deadlock cycles,
// collectives, requests, dataflow, memory), independent of the front end.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "check.hpp"
#include "program_builder.hpp"

namespace pipevm {
namespace {

using testing::ProgramBuilder;
using Streams = std::vector<std::vector<std::string>>;

std::vector<std::string> codes(const CheckResult& result) {
  std::vector<std::string> out;
  for (const Diagnostic& d : result.diagnostics) out.push_back(code(d.kind));
  return out;
}

std::uint32_t line_of(const Location& location) {
  return location.file ? location.file->position(location.range.begin).line : 0;
}

// 1F1B for two stages and two micro-batches, sends as given.
Streams one_f_one_b(const std::string& send) {
  return {{"ZeroGrad", "LoadInput 0", "Fwd 0", send + " act 0", "LoadInput 1", "Fwd 1",
           send + " act 1", "Recv grad 0", "Bwd 0", "Recv grad 1", "Bwd 1", "WaitAll",
           "OptimizerStep"},
          {"ZeroGrad", "Recv act 0", "Fwd 0", "LoadTarget 0", "Bwd 0", send + " grad 0",
           "Recv act 1", "Fwd 1", "LoadTarget 1", "Bwd 1", send + " grad 1", "WaitAll",
           "OptimizerStep"}};
}

TEST(progress, one_f_one_b_with_isend_passes) {
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(one_f_one_b("ISend")));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
  ASSERT_EQ(result.memory.size(), 2u);
  EXPECT_EQ(result.memory[0].peak_activations, 2);
  EXPECT_EQ(result.memory[1].peak_activations, 1);
  EXPECT_EQ(result.instructions, 26u);
}

TEST(buffering, blocking_one_f_one_b_names_both_sends) {
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(one_f_one_b("Send")));
  ASSERT_EQ(codes(result), std::vector<std::string>{"PV2002"});
  const Diagnostic& d = result.diagnostics[0];
  EXPECT_NE(d.message.find("`Send act 1`"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("`Send grad 0`"), std::string::npos) << d.message;
  EXPECT_EQ(d.location.rank, 0);
  EXPECT_EQ(line_of(d.location), b.line_of(0, 6));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].location.rank, 1);
  EXPECT_EQ(line_of(d.notes[0].location), b.line_of(1, 5));
}

TEST(deadlock, receives_first_on_both_sides_prints_the_cycle) {
  ProgramBuilder b(Config{2, 1});
  const CheckResult result =
      check(b.build({{"Recv grad 0 from 1", "Send act 0"}, {"Recv act 0", "Send grad 0 to 0"}}));
  const auto c = codes(result);
  ASSERT_NE(std::find(c.begin(), c.end(), "PV2001"), c.end());
  const auto& d = *std::find_if(result.diagnostics.begin(), result.diagnostics.end(),
                                [](const Diagnostic& x) { return x.kind == DiagnosticKind::Deadlock; });
  EXPECT_EQ(d.location.rank, 0);
  EXPECT_NE(d.message.find("rank 0 (stage 0) test.pipe:2:5 `Recv grad 0 from 1` waits for "
                           "rank 1 (stage 1) test.pipe:6:5 `Recv act 0`"),
            std::string::npos)
      << d.message;
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].location.rank, 1);
}

TEST(deadlock, shortest_cycle_and_the_other_stuck_ranks) {
  // Ranks 1 and 2 wait for each other; rank 0 waits for rank 1 (not in the cycle).
  ProgramBuilder b(Config{3, 1});
  const CheckResult result = check(b.build({{"Recv grad 0", "Send act 0"},
                                            {"Recv grad 0", "Send grad 0", "Recv act 0", "Send act 0"},
                                            {"Recv act 0", "Send grad 0"}}));
  const auto it = std::find_if(result.diagnostics.begin(), result.diagnostics.end(),
                               [](const Diagnostic& x) { return x.kind == DiagnosticKind::Deadlock; });
  ASSERT_NE(it, result.diagnostics.end());
  EXPECT_EQ(it->location.rank, 1);
  ASSERT_EQ(it->notes.size(), 2u);
  EXPECT_EQ(it->notes[0].location.rank, 2);
  EXPECT_NE(it->notes[1].message.find("stuck too"), std::string::npos);
  EXPECT_EQ(it->notes[1].location.rank, 0);
}

TEST(progress, parity_ordered_blocking_exchange_passes) {
  // Even stages send first, odd stages receive first: no buffer needed.
  ProgramBuilder b(Config{2, 1});
  const CheckResult result = check(b.build(
      {{"ZeroGrad", "LoadInput 0", "Fwd 0", "Send act 0", "Recv grad 0", "Bwd 0", "OptimizerStep"},
       {"ZeroGrad", "Recv act 0", "Fwd 0", "LoadTarget 0", "Bwd 0", "Send grad 0",
        "OptimizerStep"}}));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
}

TEST(unmatched, counted_per_channel) {
  ProgramBuilder b(Config{2, 3});
  const CheckResult result =
      check(b.build({{"LoadInput 0", "Fwd 0", "ISend act 0", "LoadInput 1", "Fwd 1", "ISend act 1",
                      "LoadInput 2", "Fwd 2", "ISend act 2", "WaitAll"},
                     {"Recv act 0", "Fwd 0"}}));
  const auto c = codes(result);
  ASSERT_NE(std::find(c.begin(), c.end(), "PV2003"), c.end());
  const auto& d = *std::find_if(result.diagnostics.begin(), result.diagnostics.end(),
                                [](const Diagnostic& x) { return x.kind == DiagnosticKind::UnmatchedSend; });
  EXPECT_NE(d.message.find("2 activations"), std::string::npos) << d.message;
  EXPECT_EQ(line_of(d.location), b.line_of(0, 5));
}

TEST(pairing, on_the_full_key_not_on_arrival_order) {
  // Stage 1 receives micro-batch 1 before 0: with ISends that is fine.
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(
      {{"LoadInput 0", "Fwd 0", "ISend act 0", "LoadInput 1", "Fwd 1", "ISend act 1", "WaitAll"},
       {"Recv act 1", "Fwd 1", "Recv act 0", "Fwd 0"}}));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
}

TEST(peers, wrong_peers) {
  ProgramBuilder b(Config{3, 1});
  const CheckResult result = check(b.build({{"LoadInput 0", "Fwd 0", "Send act 0 to 2"},
                                            {"Recv act 0 from 1"},
                                            {"Recv act 0 from 5", "Fwd 0", "Send act 0"}}));
  const auto c = codes(result);
  EXPECT_EQ(std::count(c.begin(), c.end(), "PV2005"), 4) << ::testing::PrintToString(c);
}

TEST(sizes, explicit_peers_pair_different_positions) {
  // Stage 0 sends the output of piece 0 to stage 2, which takes it as its
  // input: 128 values against 127 (the default MLP split in three).
  ProgramBuilder b(Config{3, 1});
  const CheckResult result =
      check(b.build({{"LoadInput 0", "Fwd 0", "ISend act 0 to 2", "WaitAll"},
                     {},
                     {"IRecv act 0 from 0", "WaitAll", "Fwd 0"}}));
  const auto c = codes(result);
  ASSERT_NE(std::find(c.begin(), c.end(), "PV2006"), c.end()) << ::testing::PrintToString(c);
  EXPECT_EQ(std::count(c.begin(), c.end(), "PV2003"), 0);
}

TEST(sizes, come_from_the_model_in_the_options) {
  ProgramBuilder b(Config{3, 1});
  const auto streams = std::vector<std::vector<std::string>>{
      {"LoadInput 0", "Fwd 0", "ISend act 0 to 2", "WaitAll"}, {}, {"IRecv act 0 from 0", "WaitAll", "Fwd 0"}};
  // The default MLP's pieces differ in width there; with equal widths
  // everywhere the two sides agree on the size, and only their peers are
  // wrong.
  EXPECT_EQ(codes(check(b.build(streams))),
            (std::vector<std::string>{"PV2005", "PV2005", "PV2006", "PV2024"}));
  CheckOptions flat;
  flat.layer_widths = {8, 8, 8, 8};
  EXPECT_EQ(codes(check(b.build(streams), flat)),
            (std::vector<std::string>{"PV2005", "PV2005", "PV2024"}));
}

TEST(requests, never_waited_and_waits_without_requests) {
  ProgramBuilder b(Config{2, 1});
  const CheckResult result = check(b.build({{"LoadInput 0", "Fwd 0", "ISend act 0", "Wait send act 0",
                                             "Wait send act 0"},
                                            {"IRecv act 0"}}));
  const auto c = codes(result);
  EXPECT_NE(std::find(c.begin(), c.end(), "PV2010"), c.end()) << ::testing::PrintToString(c);
  EXPECT_NE(std::find(c.begin(), c.end(), "PV2009"), c.end()) << ::testing::PrintToString(c);
}

TEST(requests, left_pending_on_one_rank_is_not_waited_on_the_next) {
  ProgramBuilder b(Config{2, 1});
  const CheckResult result = check(b.build(
      {{"LoadInput 0", "Fwd 0", "ISend act 0"}, {"Recv act 0", "Fwd 0", "Wait send act 0"}}));
  const auto c = codes(result);
  EXPECT_EQ(c, (std::vector<std::string>{"PV2009", "PV2010"}));
}

TEST(requests, reading_a_pending_receive_is_misuse) {
  ProgramBuilder b(Config{2, 1});
  const CheckResult result =
      check(b.build({{"LoadInput 0", "Fwd 0", "ISend act 0", "WaitAll"},
                     {"IRecv act 0", "Fwd 0", "Wait recv act 0"}}));
  EXPECT_EQ(codes(result), std::vector<std::string>{"PV2011"});
}

TEST(dataflow, rules) {
  ProgramBuilder b(Config{1, 3});
  const CheckResult result = check(b.build(
      {{"Fwd 0", "Bwd 1", "LoadInput 2", "Fwd 2", "LoadTarget 2", "BwdWeight 2", "OptimizerStep",
        "LoadTarget 0", "Bwd 0"}}));
  const auto c = codes(result);
  for (const char* expected : {"PV2020", "PV2021", "PV2023", "PV2026", "PV2027"}) {
    EXPECT_NE(std::find(c.begin(), c.end(), expected), c.end())
        << expected << " in " << ::testing::PrintToString(c);
  }
}

TEST(dataflow, forward_only_programs_need_no_backward) {
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(
      {{"LoadInput 0", "Fwd 0", "Send act 0", "LoadInput 1", "Fwd 1", "Send act 1"},
       {"Recv act 0", "Fwd 0", "Recv act 1", "Fwd 1"}}));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
  EXPECT_EQ(result.memory[0].peak_activations, 2);
}

TEST(dataflow, micro_batch_never_forwarded) {
  ProgramBuilder b(Config{1, 3});
  const CheckResult result = check(b.build({{"LoadInput 0", "Fwd 0"}}));
  ASSERT_EQ(codes(result), std::vector<std::string>{"PV2024"});
  EXPECT_NE(result.diagnostics[0].message.find("micro-batches 1, 2"), std::string::npos)
      << result.diagnostics[0].message;
}

std::vector<std::string> replica(const std::string& collective) {
  return {"ZeroGrad", "LoadInput 0", "Fwd 0", "LoadTarget 0", "Bwd 0", collective, "OptimizerStep"};
}

TEST(collectives, replicas_with_allreduce_pass) {
  ProgramBuilder b(Config{.stages = 1, .micro_batches = 1, .dp = 2});
  const auto r = replica("AllReduce");
  const CheckResult result = check(b.build({r, r}));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
}

TEST(collectives, missing_and_step_without_reduction) {
  ProgramBuilder b(Config{.stages = 1, .micro_batches = 1, .dp = 2});
  const CheckResult result = check(b.build({replica("AllReduce"), replica("ZeroGrad")}));
  const auto c = codes(result);
  EXPECT_NE(std::find(c.begin(), c.end(), "PV2008"), c.end()) << ::testing::PrintToString(c);
}

TEST(collectives, order_differs_between_replicas) {
  ProgramBuilder b(Config{.stages = 1, .micro_batches = 2, .dp = 2});
  const Streams s = {{"ZeroGrad", "LoadInput 0", "Fwd 0", "LoadTarget 0", "LoadInput 1", "Fwd 1",
                      "LoadTarget 1", "BwdAllReduce 0", "BwdAllReduce 1", "OptimizerStep"},
                     {"ZeroGrad", "LoadInput 0", "Fwd 0", "LoadTarget 0", "LoadInput 1", "Fwd 1",
                      "LoadTarget 1", "BwdAllReduce 1", "BwdAllReduce 0", "OptimizerStep"}};
  const CheckResult result = check(b.build(s));
  const auto c = codes(result);
  EXPECT_NE(std::find(c.begin(), c.end(), "PV2007"), c.end()) << ::testing::PrintToString(c);
}

TEST(collectives, and_point_to_point_in_a_cycle) {
  // dp = 2, two stages. Rank 0 all-reduces with rank 2, which first waits
  // for a gradient from rank 3, which all-reduces with rank 1, which waits
  // for an activation from rank 0: a cycle through two collectives.
  ProgramBuilder b(Config{.stages = 2, .micro_batches = 1, .dp = 2});
  const Streams s = {{"AllReduce", "Send act 0"},
                     {"Recv act 0", "AllReduce", "Send grad 0"},
                     {"Recv grad 0", "AllReduce", "Send act 0"},
                     {"AllReduce", "Recv act 0", "Send grad 0"}};
  const CheckResult result = check(b.build(s));
  const auto it = std::find_if(result.diagnostics.begin(), result.diagnostics.end(),
                               [](const Diagnostic& x) {
                                 return x.kind == DiagnosticKind::CollectiveOrder;
                               });
  ASSERT_NE(it, result.diagnostics.end()) << ::testing::PrintToString(codes(result));
  EXPECT_EQ(it->location.rank, 0);
  EXPECT_EQ(it->notes.size(), 3u);
}

TEST(memory, counts_messages_in_flight) {
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(
      {{"LoadInput 0", "Fwd 0", "ISend act 0", "LoadInput 1", "Fwd 1", "ISend act 1", "WaitAll"},
       {"IRecv act 0", "IRecv act 1", "Wait recv act 0", "Fwd 0", "Wait recv act 1", "Fwd 1"}}));
  EXPECT_TRUE(result.ok()) << (result.diagnostics.empty() ? "" : result.diagnostics[0].message);
  EXPECT_EQ(result.memory[0].peak_in_flight, 2);
  EXPECT_EQ(result.memory[1].peak_in_flight, 2);
  const nlohmann::json j = memory_to_json(result.memory);
  EXPECT_EQ(j[0]["peak_activations"], 2);
  EXPECT_EQ(j[1]["stage"], 1);
}

TEST(buffering, self_send_through_a_v_turn_needs_nonblocking) {
  // v placement, one stage: chunk 0 (position 0) hands its activation to
  // chunk 1 (position 1) on the same rank.
  ProgramBuilder b(Config{.stages = 1, .micro_batches = 1, .chunks = 2, .dp = 1}, Placement::v);
  const CheckResult blocking = check(b.build(
      {{"LoadInput 0", "Fwd 0", "Send act 0", "Recv act 0 chunk 1", "Fwd 0 chunk 1"}}));
  EXPECT_EQ(codes(blocking), std::vector<std::string>{"PV2002"});
  const CheckResult nonblocking = check(b.build(
      {{"LoadInput 0", "Fwd 0", "ISend act 0", "Recv act 0 chunk 1", "Fwd 0 chunk 1", "WaitAll"}}));
  EXPECT_TRUE(nonblocking.ok()) << (nonblocking.diagnostics.empty()
                                        ? ""
                                        : nonblocking.diagnostics[0].message);
}

TEST(sarif, has_rules_and_results) {
  ProgramBuilder b(Config{2, 2});
  const CheckResult result = check(b.build(one_f_one_b("Send")));
  const nlohmann::json s = to_sarif(result.diagnostics, "0.1.0");
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["runs"][0]["tool"]["driver"]["rules"][0]["id"], "PV2002");
  EXPECT_EQ(s["runs"][0]["results"][0]["ruleId"], "PV2002");
  EXPECT_EQ(s["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"],
            b.line_of(0, 6));
}

}  // namespace
}  // namespace pipevm
