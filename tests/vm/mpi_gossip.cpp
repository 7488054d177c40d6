// Run under mpiexec (4 ranks): gossip.pipe through the VM over MpiComm
// trains, on every replica, the weights of the gossip recurrence
//   x_i(k+1) = mean over i's group in round k of x_j(k) - step(g_i(x_i(k)))
// computed here by a plain reference: the dp replicas in one process, each
// a whole-model Piece with its own optimizer, no communication layer. For
// ring, one-peer-exp and complete at dp = 4, relative 1e-5, replica by
// replica; the reference must have moved the weights, and under ring and
// one-peer-exp the replicas must differ (else mixing was not tested).
// Plain main (no gtest): every rank must run the same collectives.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "check.hpp"
#include "mpi_comm.hpp"
#include "topology.hpp"
#include "vm_test_support.hpp"

namespace {

using namespace pipevm;

constexpr int kMicroBatches = 2;
constexpr int kSteps = 5;
constexpr double kTolerance = 1e-5;

Program compile_gossip(const Config& config, const std::string& topology) {
  Diagnostics diagnostics;
  const auto file = read_source(vm_test::schedule_path("gossip"), diagnostics);
  ExpandOptions options;
  options.topology_name = topology;
  std::optional<Program> program;
  if (file) program = compile(file, config, diagnostics, options);
  if (!program || diagnostics.has_errors()) throw std::runtime_error("cannot compile gossip.pipe");
  return std::move(*program);
}

// The recurrence for `dp` replicas; replica after replica, flat.
std::vector<float> reference(const TrainingOptions& options, const Topology& topology, int dp) {
  const runtime::ModelConfig& model = options.machine.model;
  const runtime::LayerRange all{0, runtime::layer_count(model.sizes)};
  runtime::Batcher batcher(vm_test::small_data().train, options.shuffle_seed,
                           options.machine.global_batch, dp, kMicroBatches);
  batcher.start_epoch(0);
  const int rows = batcher.micro_batch_rows();
  std::vector<runtime::Piece> replicas;
  std::vector<runtime::Optimizer> optimizers;
  for (int i = 0; i < dp; ++i) {
    replicas.emplace_back(model, all);
    replicas.back().reserve(kMicroBatches, rows);
    optimizers.emplace_back(options.machine.optimizer, replicas.back().parameters().size());
  }
  // Each replica's gradient: the mean over its share of the batch.
  const float scale = static_cast<float>(dp) / static_cast<float>(options.machine.global_batch);
  std::vector<float> input(static_cast<std::size_t>(rows * replicas[0].input_width()));
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(rows));
  for (int k = 0; k < kSteps; ++k) {
    for (int i = 0; i < dp; ++i) {
      runtime::Piece& piece = replicas[static_cast<std::size_t>(i)];
      piece.zero_grad();
      for (int mb = 0; mb < kMicroBatches; ++mb) {
        batcher.input(k, i, mb, input);
        piece.forward(mb, input, rows);
      }
      for (int mb = kMicroBatches - 1; mb >= 0; --mb) {
        batcher.labels(k, i, mb, labels);
        piece.loss(mb, labels, scale);
        piece.backward_input(mb, {});
        piece.backward_weight(mb);
      }
    }
    // Mix x(k) within round k's groups, then each replica's own step.
    const auto& groups = topology.rounds[static_cast<std::size_t>(round_of_step(topology, k))];
    std::vector<std::vector<float>> mixed(static_cast<std::size_t>(dp));
    for (const std::vector<int>& group : groups) {
      std::vector<float> mean(replicas[0].parameters().size(), 0.0F);
      for (const int j : group) {
        const auto p = replicas[static_cast<std::size_t>(j)].parameters();
        for (std::size_t x = 0; x < mean.size(); ++x) mean[x] += p[x];
      }
      for (float& v : mean) v /= static_cast<float>(group.size());
      for (const int j : group) mixed[static_cast<std::size_t>(j)] = mean;
    }
    for (int i = 0; i < dp; ++i) {
      runtime::Piece& piece = replicas[static_cast<std::size_t>(i)];
      std::copy(mixed[static_cast<std::size_t>(i)].begin(),
                mixed[static_cast<std::size_t>(i)].end(), piece.parameters().begin());
      optimizers[static_cast<std::size_t>(i)].step(piece.parameters(), piece.gradients());
    }
  }
  std::vector<float> out;
  for (const runtime::Piece& piece : replicas) {
    out.insert(out.end(), piece.parameters().begin(), piece.parameters().end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::MpiSession session(&argc, &argv);
  const bool root = session.world_rank() == 0;
  const int dp = session.world_size();
  bool all_passed = dp == 4;
  for (const char* name : {"ring", "one-peer-exp", "complete"}) {
    const Config config{1, kMicroBatches, 1, dp};
    bool passed = false;
    std::string detail;
    try {
      const Program program = compile_gossip(config, name);
      if (!check(program).ok()) throw std::runtime_error("the checker rejects it");
      TrainingOptions options = vm_test::training_options(dp * kMicroBatches * 4, kSteps);
      runtime::MpiComm comm(session, 1, MessageTags(program.placement, config).max_tag());
      Trainer trainer(program, comm, options, &vm_test::small_data());
      trainer.train_epoch(0);
      // Each replica's weights, before the global average.
      std::vector<std::size_t> counts;
      const std::vector<float> replicas =
          gather_floats_to_root(comm, trainer.machine().piece(0).parameters(), counts);
      passed = true;
      if (root) {
        const std::vector<float> expected = reference(options, *program.topology, dp);
        TrainingOptions untrained = options;
        untrained.max_steps_per_epoch = 0;
        const std::vector<float> initial = vm_test::sequential_reference(untrained);
        const std::size_t size = initial.size();
        const std::vector<float> first(expected.begin(),
                                       expected.begin() + static_cast<long>(size));
        const std::vector<float> last(expected.end() - static_cast<long>(size), expected.end());
        const double difference = vm_test::relative_difference(replicas, expected);
        const double moved = vm_test::relative_difference(initial, first);
        const double spread = vm_test::relative_difference(first, last);
        const bool mixed_only_partly = std::string(name) != "complete";
        passed = difference <= kTolerance && moved > 100 * kTolerance &&
                 (!mixed_only_partly || spread > 100 * kTolerance);
        char text[200];
        std::snprintf(
            text, sizeof text,
            "relative difference %.3g, weights moved %.3g, replicas 0 and %d differ by %.3g",
            difference, moved, dp - 1, spread);
        detail = text;
      }
      trainer.finish_gossip();
      passed = passed && trainer.replicas_agree();
    } catch (const std::exception& error) {
      detail = error.what();
    }
    passed = session.all_ok(passed);
    if (root)
      std::printf("%s gossip %s at dp %d: %s\n", passed ? "ok  " : "FAIL", name, dp,
                  detail.c_str());
    all_passed = all_passed && passed;
  }
  return all_passed ? 0 : 1;
}
