// The bytes a rank holds, moment by moment (core/memory_bytes.hpp), on small
// programs whose every figure is worked out by hand: a model of widths
// 4, 3, 2 (layer 0: 3 x 4 + 3 = 15 parameters, layer 1: 2 x 3 + 2 = 8), one
// byte per number, one row per micro-batch. The rules are docs/memory.md's;
// the runtime follows the same (vm.report.*).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "compile.hpp"
#include "memory_bytes.hpp"

namespace pipevm {
namespace {

const std::vector<int> kWidths = {4, 3, 2};

Program program_of(const std::string& text, Config config) {
  Diagnostics diagnostics;
  ExpandOptions options;
  options.layer_widths = kWidths;
  auto program =
      compile(std::make_shared<SourceFile>("memory.pipe", text), config, diagnostics, options);
  EXPECT_TRUE(program.has_value())
      << (diagnostics.all().empty() ? "" : diagnostics.all()[0].message);
  CheckOptions check_options;
  check_options.layer_widths = kWidths;
  const CheckResult checked = check(*program, check_options);
  EXPECT_TRUE(checked.ok()) << (checked.diagnostics.empty() ? "" : checked.diagnostics[0].message);
  return std::move(*program);
}

MemoryShape shape(int optimizer_states) {
  MemoryShape s;
  s.layer_widths = kWidths;
  s.element_bytes = 1;
  s.rows = 1;
  s.optimizer_states = optimizer_states;
  return s;
}

// weights, gradients, optimizer, activations, activation gradients, messages.
struct Bytes {
  std::uint64_t w, g, o, a, ag, m;
};

void expect_moments(const std::vector<RankBytes>& after, const std::vector<Bytes>& expected) {
  ASSERT_EQ(after.size(), expected.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    const RankBytes& r = after[i];
    const Bytes& e = expected[i];
    EXPECT_EQ((std::vector<std::uint64_t>{r.weights, r.gradients, r.optimizer, r.activations,
                                          r.activation_gradients, r.messages}),
              (std::vector<std::uint64_t>{e.w, e.g, e.o, e.a, e.ag, e.m}))
        << "after instruction " << i;
  }
}

TEST(memory, layer_by_layer_values_live_from_their_making_to_their_last_use) {
  const Program p = program_of(
      "ZeroGrad\nLoadInput 0\nFwd 0 layer 0\nFwd 0 layer 1\nLoadTarget 0\n"
      "Bwd 0 layer 1\nBwd 0 layer 0\nOptimizerStep\n",
      Config{1, 1});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{23, 0, 0, 0, 0, 0},    // ZeroGrad: no gradient before the first backward
                  {23, 0, 0, 4, 0, 0},    // the input
                  {23, 0, 0, 7, 0, 0},    // layer 0's output
                  {23, 0, 0, 9, 0, 0},    // the model's output
                  {23, 0, 0, 9, 0, 0},    // LoadTarget: labels are not counted
                  {23, 8, 0, 4, 3, 0},    // layer 1: its gradient; the gradient below it
                  {23, 23, 0, 0, 0, 0},   // layer 0: no gradient of the model's input
                  {23, 0, 0, 0, 0, 0}});  // the step frees the gradients
}

TEST(memory, a_sharded_layer_is_its_shard_and_a_copy_while_gathered) {
  // Over 2 replicas: shards of ceil(15 / 2) = 8 and ceil(8 / 2) = 4; one
  // optimizer state per parameter (momentum).
  const Program p = program_of(
      "ZeroGrad\nLoadInput 0\n"
      "AllGather layer 0\nFwd 0 layer 0\nRelease layer 0\n"
      "AllGather layer 1\nFwd 0 layer 1\nRelease layer 1\nLoadTarget 0\n"
      "AllGather layer 1\nBwd 0 layer 1\nRelease layer 1\nReduceScatter layer 1\n"
      "AllGather layer 0\nBwd 0 layer 0\nRelease layer 0\nReduceScatter layer 0\nShardStep\n",
      Config{1, 1, 1, 2});
  const auto after = bytes_after_each(p, shape(1));
  ASSERT_EQ(after.size(), 2u);
  expect_moments(after[1], {{12, 0, 12, 0, 0, 0},
                            {12, 0, 12, 4, 0, 0},
                            {27, 0, 12, 4, 0, 0},  // layer 0 whole besides its shard
                            {27, 0, 12, 7, 0, 0},
                            {12, 0, 12, 7, 0, 0},
                            {20, 0, 12, 7, 0, 0},
                            {20, 0, 12, 9, 0, 0},
                            {12, 0, 12, 9, 0, 0},
                            {12, 0, 12, 9, 0, 0},
                            {20, 0, 12, 9, 0, 0},
                            {20, 8, 12, 4, 3, 0},
                            {12, 8, 12, 4, 3, 0},
                            {12, 4, 12, 4, 3, 0},  // the own shard of the sum
                            {27, 4, 12, 4, 3, 0},
                            {27, 19, 12, 0, 0, 0},
                            {12, 19, 12, 0, 0, 0},
                            {12, 12, 12, 0, 0, 0},
                            {12, 0, 12, 0, 0, 0}});
  EXPECT_EQ(peak_bytes(p, shape(1))[0].total(), 27u + 19 + 12);
}

TEST(memory, a_send_in_flight_keeps_what_it_reads) {
  // Two stages: layer 0, then layer 1. Stage 0's output outlives its last
  // use (the backward) while its ISend is in flight; stage 1's input
  // gradient, once sent, is only the message's.
  const Program p = program_of(
      "stage 0 {\n  ZeroGrad\n  LoadInput 0\n  Fwd 0\n  ISend act 0\n  Recv grad 0\n  Bwd 0\n"
      "  WaitAll\n  OptimizerStep\n}\n"
      "stage 1 {\n  ZeroGrad\n  Recv act 0\n  Fwd 0\n  LoadTarget 0\n  Bwd 0\n  ISend grad 0\n"
      "  WaitAll\n  OptimizerStep\n}\n",
      Config{2, 1});
  const auto after = bytes_after_each(p, shape(0));
  expect_moments(after[0], {{15, 0, 0, 0, 0, 0},
                            {15, 0, 0, 4, 0, 0},
                            {15, 0, 0, 7, 0, 0},
                            {15, 0, 0, 7, 0, 0},
                            {15, 0, 0, 7, 3, 0},
                            {15, 15, 0, 0, 0, 3},  // the output, for the send only
                            {15, 15, 0, 0, 0, 0},
                            {15, 0, 0, 0, 0, 0}});
  expect_moments(after[1], {{8, 0, 0, 0, 0, 0},
                            {8, 0, 0, 3, 0, 0},
                            {8, 0, 0, 5, 0, 0},
                            {8, 0, 0, 5, 0, 0},
                            {8, 8, 0, 0, 3, 0},  // the input gradient, until sent
                            {8, 8, 0, 0, 0, 3},
                            {8, 8, 0, 0, 0, 0},
                            {8, 0, 0, 0, 0, 0}});
}

TEST(memory, the_turn_of_a_v_hands_its_values_over_with_no_message) {
  // One stage, placement v: chunk 0 holds layer 0, chunk 1 layer 1. Chunk
  // 1's input is taken at its forward from chunk 0's output (which stays
  // chunk 0's until its backward); chunk 1's input gradient is chunk 0's
  // output gradient, gone once chunk 0's backward took it.
  const Program p = program_of(
      "placement v\nZeroGrad\nLoadInput 0\nFwd 0\nFwd 0 chunk 1\nLoadTarget 0 chunk 1\n"
      "Bwd 0 chunk 1\nBwd 0\nOptimizerStep\n",
      Config{1, 1, 2});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 4, 0, 0},
                  {23, 0, 0, 7, 0, 0},    // chunk 0's output
                  {23, 0, 0, 12, 0, 0},   // chunk 1's input, taken, and its output
                  {23, 0, 0, 12, 0, 0},
                  {23, 8, 0, 7, 3, 0},    // chunk 1's input gradient, no message
                  {23, 23, 0, 0, 0, 0},   // taken by chunk 0's backward
                  {23, 0, 0, 0, 0, 0}});
}

TEST(memory, a_held_value_outlives_its_last_use_until_its_drop) {
  // The output held until after the backward, the model's input gradient
  // (made only because it is held) to the step's end, and layer 1's weight
  // gradient apart from the sum until its Drop adds it in.
  const Program p = program_of(
      "ZeroGrad\nHold act 0\nHold grad 0\nHold wgrad 0 layer 1\nLoadInput 0\nFwd 0 layer 0\n"
      "Fwd 0 layer 1\nLoadTarget 0\nBwd 0 layer 1\nBwd 0 layer 0\nDrop act 0\n"
      "Drop wgrad 0 layer 1\nOptimizerStep\n",
      Config{1, 1});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 0, 0, 0},  // Hold: nothing yet
                  {23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 4, 0, 0},
                  {23, 0, 0, 7, 0, 0},
                  {23, 0, 0, 9, 0, 0},
                  {23, 0, 0, 9, 0, 0},
                  {23, 8, 0, 6, 3, 0},    // the output stays; layer 1's gradient apart
                  {23, 23, 0, 2, 4, 0},   // the model's input gradient, held
                  {23, 23, 0, 0, 4, 0},   // Drop act 0: past its last use, freed
                  {23, 23, 0, 0, 4, 0},   // Drop wgrad: in the sum, the same bytes
                  {23, 0, 0, 0, 4, 0}});  // held to the end of the step
}

TEST(memory, a_dropped_value_a_send_still_reads_is_a_message) {
  const Program p = program_of(
      "stage 0 {\n  ZeroGrad\n  Hold act 0\n  LoadInput 0\n  Fwd 0\n  ISend act 0\n"
      "  Recv grad 0\n  Bwd 0\n  Drop act 0\n  WaitAll\n  OptimizerStep\n}\n"
      "stage 1 {\n  ZeroGrad\n  Recv act 0\n  Fwd 0\n  LoadTarget 0\n  Bwd 0\n  ISend grad 0\n"
      "  WaitAll\n  OptimizerStep\n}\n",
      Config{2, 1});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{15, 0, 0, 0, 0, 0},
                  {15, 0, 0, 0, 0, 0},
                  {15, 0, 0, 4, 0, 0},
                  {15, 0, 0, 7, 0, 0},
                  {15, 0, 0, 7, 0, 0},
                  {15, 0, 0, 7, 3, 0},
                  {15, 15, 0, 3, 0, 0},  // held: still an activation, not a message
                  {15, 15, 0, 0, 0, 3},  // dropped while the send reads it
                  {15, 15, 0, 0, 0, 0},
                  {15, 0, 0, 0, 0, 0}});
}

// Layers with stashes (the ViT's blocks; here forward -> input half,
// forward -> weight half, input half -> weight half per row, and the weight
// gradients the input half reduces, per micro-batch: layer 0 {5, 6, 7, 2},
// layer 1 {1, 2, 3, 4}): a layer's input is gone after its forward, its
// stashes live from pass to pass, the reduced gradients count as gradients.
TEST(memory, a_layer_with_stashes_frees_its_input_at_its_forward) {
  const Program p = program_of(
      "ZeroGrad\nLoadInput 0\nFwd 0 layer 0\nFwd 0 layer 1\nLoadTarget 0\n"
      "BwdInput 0 layer 1\nBwdInput 0 layer 0\nBwdWeight 0 layer 1\nBwdWeight 0 layer 0\n"
      "OptimizerStep\n",
      Config{1, 1});
  MemoryShape s = shape(0);
  s.layer_stashes = {{5, 6, 7, 2}, {1, 2, 3, 4}};
  expect_moments(bytes_after_each(p, s)[0],
                 {{23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 4, 0, 0},    // the input
                  {23, 0, 0, 14, 0, 0},   // layer 0's output and stashes, not its input
                  {23, 0, 0, 16, 0, 0},   // the same for layer 1
                  {23, 0, 0, 16, 0, 0},   // LoadTarget
                  {23, 4, 0, 13, 8, 0},   // the top gradient, the one below, the stash
                  {23, 6, 0, 8, 15, 0},   // layer 0's input half: no gradient below it
                  {23, 10, 0, 6, 10, 0},  // layer 1's weight gradient, its stashes gone
                  {23, 23, 0, 0, 0, 0},   // layer 0's
                  {23, 0, 0, 0, 0, 0}});  // the step
}

// Host memory after each instruction, apart from the device's figures.
void expect_host(const std::vector<RankBytes>& after, const std::vector<std::uint64_t>& expected) {
  std::vector<std::uint64_t> host;
  for (const RankBytes& r : after) host.push_back(r.host);
  EXPECT_EQ(host, expected);
}

// Memory policies (docs/memory.md): a checkpointed forward keeps the input
// only; the recomputation makes what a forward leaves.
TEST(memory, a_checkpointed_forward_keeps_its_input_until_the_recomputation) {
  const Program p = program_of(
      "ZeroGrad\nLoadInput 0\nFwdCheckpoint 0\nLoadTarget 0\nRecompute 0\nBwd 0\n"
      "OptimizerStep\n",
      Config{1, 1});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{23, 0, 0, 0, 0, 0},
                  {23, 0, 0, 4, 0, 0},
                  {23, 0, 0, 4, 0, 0},  // the input only: the last piece sends no output
                  {23, 0, 0, 4, 0, 0},
                  {23, 0, 0, 9, 0, 0},  // as after a Fwd
                  {23, 23, 0, 0, 0, 0},
                  {23, 0, 0, 0, 0, 0}});
}

TEST(memory, a_checkpointed_output_lives_until_its_send) {
  const Program p = program_of(
      "stage 0 {\n  ZeroGrad\n  LoadInput 0\n  FwdCheckpoint 0\n  ISend act 0\n  Recv grad 0\n"
      "  Wait send act 0\n  Recompute 0\n  Bwd 0\n  WaitAll\n  OptimizerStep\n}\n"
      "stage 1 {\n  ZeroGrad\n  Recv act 0\n  Fwd 0\n  LoadTarget 0\n  Bwd 0\n  ISend grad 0\n"
      "  WaitAll\n  OptimizerStep\n}\n",
      Config{2, 1});
  expect_moments(bytes_after_each(p, shape(0))[0],
                 {{15, 0, 0, 0, 0, 0},
                  {15, 0, 0, 4, 0, 0},
                  {15, 0, 0, 7, 0, 0},  // the input and the output
                  {15, 0, 0, 4, 0, 3},  // sent: its last use, a message while in flight
                  {15, 0, 0, 4, 3, 3},
                  {15, 0, 0, 4, 3, 0},
                  {15, 0, 0, 7, 3, 0},  // the output again
                  {15, 15, 0, 0, 0, 0},
                  {15, 15, 0, 0, 0, 0},
                  {15, 0, 0, 0, 0, 0}});
}

TEST(memory, an_offload_moves_the_stash_to_host_memory_and_a_reload_back) {
  const Program p = program_of(
      "ZeroGrad\nLoadInput 0\nFwd 0\nOffload 0\nWaitOffload 0\nReload 0\nWaitReload 0\n"
      "LoadTarget 0\nBwd 0\nOptimizerStep\n",
      Config{1, 1});
  const std::vector<RankBytes> after = bytes_after_each(p, shape(0))[0];
  expect_moments(after, {{23, 0, 0, 0, 0, 0},
                         {23, 0, 0, 4, 0, 0},
                         {23, 0, 0, 9, 0, 0},
                         {23, 0, 0, 9, 0, 0},  // on the device until the copy is complete
                         {23, 0, 0, 0, 0, 0},
                         {23, 0, 0, 9, 0, 0},  // taken on the device from the reload's start
                         {23, 0, 0, 9, 0, 0},
                         {23, 0, 0, 9, 0, 0},
                         {23, 23, 0, 0, 0, 0},
                         {23, 0, 0, 0, 0, 0}});
  expect_host(after, {0, 0, 0, 9, 9, 9, 0, 0, 0, 0});
  EXPECT_EQ(after.back().host_peak, 9u);
  const RankBytes peak = peak_bytes(p, shape(0))[0];
  EXPECT_EQ(peak.total(), 23u + 23) << "host bytes are not the device's";
  EXPECT_EQ(peak.host_peak, 9u);
  const std::vector<std::uint64_t> copied = host_copy_bytes(p, shape(0));
  EXPECT_EQ(copied[3], 9u);
  EXPECT_EQ(copied[5], 9u);
  EXPECT_EQ(copied[4], 0u);
}

TEST(memory, an_offloaded_output_a_send_still_reads_is_a_message_until_sent) {
  const Program p = program_of(
      "stage 0 {\n  ZeroGrad\n  LoadInput 0\n  Fwd 0\n  ISend act 0\n  Offload 0\n"
      "  WaitOffload 0\n  Wait send act 0\n  Reload 0\n  Recv grad 0\n  WaitReload 0\n  Bwd 0\n"
      "  WaitAll\n  OptimizerStep\n}\n"
      "stage 1 {\n  ZeroGrad\n  Recv act 0\n  Fwd 0\n  LoadTarget 0\n  Bwd 0\n  ISend grad 0\n"
      "  WaitAll\n  OptimizerStep\n}\n",
      Config{2, 1});
  const std::vector<RankBytes> after = bytes_after_each(p, shape(0))[0];
  expect_moments(after, {{15, 0, 0, 0, 0, 0},
                         {15, 0, 0, 4, 0, 0},
                         {15, 0, 0, 7, 0, 0},
                         {15, 0, 0, 7, 0, 0},
                         {15, 0, 0, 7, 0, 0},
                         {15, 0, 0, 0, 0, 3},  // off the device but for the send
                         {15, 0, 0, 0, 0, 0},
                         {15, 0, 0, 7, 0, 0},
                         {15, 0, 0, 7, 3, 0},
                         {15, 0, 0, 7, 3, 0},
                         {15, 15, 0, 0, 0, 0},
                         {15, 15, 0, 0, 0, 0},
                         {15, 0, 0, 0, 0, 0}});
  expect_host(after, {0, 0, 0, 0, 7, 7, 7, 7, 7, 0, 0, 0, 0});
}

TEST(memory, without_biases_a_layer_is_its_weights) {
  MemoryShape s = shape(2);
  s.bias = false;
  EXPECT_EQ(layer_parameters(s, 0), 12u);
  EXPECT_EQ(layer_parameters(s, 1), 6u);
  s.bias = true;
  EXPECT_EQ(layer_parameters(s, 1), 8u);
  EXPECT_EQ(shard_of(15, 2), 8u);
  EXPECT_EQ(shard_of(8, 16), 1u);
}

}  // namespace
}  // namespace pipevm
