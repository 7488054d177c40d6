// Memory policies of a model piece (docs/memory.md): the copy thread moves
// what it is given, in order, and a wait returns once its copy is done;
// host buffers count in the ledger's host category, outside the device's
// total; a checkpointed forward keeps only the slot's input, and the
// recomputation then gives the backward the very bits a forward would
// (MLP and ViT); an offloaded and reloaded stash does the same; a backward
// on a stash that is not on the device throws std::logic_error.
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "gradient_check.hpp"
#include "host_copies.hpp"
#include "model.hpp"

namespace pipevm::runtime {
namespace {

constexpr std::size_t kFloat = sizeof(float);

TEST(host_copies, copies_arrive_in_order_and_a_wait_covers_the_ones_before) {
  MemoryLedger ledger;
  HostCopies copies(ledger);
  std::vector<std::vector<float>> from(8), to(8);
  std::vector<HostCopies::Part> parts(8);
  HostCopies::Ticket last = 0;
  for (std::size_t i = 0; i < from.size(); ++i) {
    from[i].resize(1000 + i);
    std::iota(from[i].begin(), from[i].end(), static_cast<float>(i));
    to[i].assign(from[i].size(), -1.0F);
    parts[i] = {from[i].data(), to[i].data(), from[i].size()};
    last = copies.start(std::span(&parts[i], 1));
  }
  copies.wait(last);
  for (std::size_t i = 0; i < from.size(); ++i) EXPECT_EQ(to[i], from[i]) << "copy " << i;
  const std::span<float> host = copies.pool().take(MemoryCategory::host, 10);
  EXPECT_EQ(ledger.current()[MemoryCategory::host], 10 * kFloat);
  EXPECT_EQ(ledger.current().total(), 0U) << "host memory is not the device's";
  ledger.sample();
  copies.pool().give_back(MemoryCategory::host, host);
  ledger.sample();
  EXPECT_EQ(ledger.host_peak(), 10 * kFloat);
}

using gradient_check::random_values;

ModelConfig mlp() {
  ModelConfig config;
  config.sizes = {6, 5, 4, 3};
  config.seed = 3;
  return config;
}

ModelConfig vit() {
  VitShape shape;
  shape.image_side = 4;
  shape.patch = 2;
  shape.width = 8;
  shape.blocks = 3;
  shape.heads = 2;
  shape.hidden = 16;
  shape.classes = 3;
  ModelConfig config;
  use_vit(config, shape);
  config.seed = 3;
  return config;
}

constexpr int kRows = 4;

// A middle piece (not the model's last) of layers [0, 2): the backward's
// input gradient and the weight gradients after one micro-batch, run with
// `before_backward` between the forward and the backward.
struct Result {
  std::vector<float> input_gradient;
  std::vector<float> gradients;
};
template <class Forward, class BeforeBackward>
Result run(const ModelConfig& config, Forward forward, BeforeBackward before_backward) {
  Piece piece(config, {0, 2});
  piece.reserve(1, kRows);
  const std::vector<float> input =
      random_values(static_cast<std::size_t>(kRows * piece.input_width()), 1);
  const std::span<float> in = piece.take_input(0, kRows);
  std::copy(input.begin(), input.end(), in.begin());
  forward(piece);
  before_backward(piece);
  const std::vector<float> top =
      random_values(static_cast<std::size_t>(kRows * piece.output_width()), 2);
  const std::span<const float> below = piece.backward_input(0, top);
  Result result{{below.begin(), below.end()}, {}};
  piece.backward_weight(0);
  result.gradients = piece.gradients();
  return result;
}

TEST(offload, recomputation_gives_the_backward_the_bits_of_a_forward) {
  for (const ModelConfig& config : {mlp(), vit()}) {
    const Result plain = run(
        config, [](Piece& p) { p.forward_all(0); }, [](Piece&) {});
    std::uint64_t kept = 0;
    const Result recomputed = run(
        config, [](Piece& p) { p.forward_checkpoint(0); },
        [&](Piece& p) {
          kept = p.ledger().current()[MemoryCategory::activations];
          EXPECT_EQ(p.stash_state(0), StashState::input_only);
          EXPECT_THROW(p.backward_input_layer(0, 1), std::logic_error);
          p.recompute(0);
        });
    // The input (rows x width 0) and the output, whose send is still to come.
    const auto widths = config.sizes;
    EXPECT_EQ(kept, static_cast<std::uint64_t>(kRows * (widths[0] + widths[2])) * kFloat);
    EXPECT_EQ(recomputed.input_gradient, plain.input_gradient);
    EXPECT_EQ(recomputed.gradients, plain.gradients);
  }
}

TEST(offload, an_offloaded_and_reloaded_stash_gives_the_same_backward) {
  for (const ModelConfig& config : {mlp(), vit()}) {
    const Result plain = run(
        config, [](Piece& p) { p.forward_all(0); }, [](Piece&) {});
    MemoryLedger host_ledger;
    HostCopies copies(host_ledger);
    const Result reloaded = run(
        config, [](Piece& p) { p.forward_all(0); },
        [&](Piece& p) {
          const std::uint64_t stash = p.ledger().current()[MemoryCategory::activations];
          p.start_offload(0, copies);
          EXPECT_EQ(host_ledger.current()[MemoryCategory::host], stash);
          p.finish_offload(0);
          EXPECT_EQ(p.ledger().current()[MemoryCategory::activations], 0U);
          EXPECT_THROW(p.backward_input_layer(0, 1), std::logic_error);
          p.start_reload(0);
          EXPECT_EQ(p.ledger().current()[MemoryCategory::activations], stash);
          p.finish_reload(0);
          EXPECT_EQ(host_ledger.current()[MemoryCategory::host], 0U);
        });
    EXPECT_EQ(reloaded.input_gradient, plain.input_gradient);
    EXPECT_EQ(reloaded.gradients, plain.gradients);
  }
}

TEST(offload, misplaced_policies_throw) {
  Piece piece(mlp(), {0, 2});
  piece.reserve(1, kRows);
  MemoryLedger ledger;
  HostCopies copies(ledger);
  EXPECT_THROW(piece.recompute(0), std::logic_error) << "no checkpoint";
  EXPECT_THROW(piece.start_offload(0, copies), std::logic_error) << "nothing forwarded";
  EXPECT_THROW(piece.start_reload(0), std::logic_error) << "nothing offloaded";
  piece.take_input(0, kRows);
  piece.forward_all(0);
  EXPECT_THROW(piece.recompute(0), std::logic_error) << "a forward keeps everything";
  piece.start_offload(0, copies);
  EXPECT_THROW(piece.start_offload(0, copies), std::logic_error) << "twice";
  EXPECT_THROW(piece.finish_reload(0), std::logic_error) << "no reload under way";
  piece.release(0);  // waits for the copy and gives the host buffer back
  EXPECT_EQ(ledger.current()[MemoryCategory::host], 0U);
  EXPECT_EQ(piece.stash_state(0), StashState::on_device);
}

}  // namespace
}  // namespace pipevm::runtime
