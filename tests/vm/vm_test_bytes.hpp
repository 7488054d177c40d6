// The VM tests' comparison of measured bytes with counted ones: the
// Machine's ledger (runtime/memory_ledger.hpp) against the byte walk
// (core/memory_bytes.hpp) for the same program and options. A GoogleTest
// helper (vm_test_support.hpp serves the mpiexec drivers too).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "memory_bytes.hpp"
#include "vm_test_support.hpp"

namespace pipevm::vm_test {

// The simulator's count for the same program and options (docs/memory.md):
// equal to the measured peaks, rank by rank and category by category, the
// host's too.
inline void expect_measured_equals_counted(const Program& program, const TrainingOptions& options,
                                           const runtime::DataSplit& data = small_data()) {
  MemoryShape shape;
  shape.layer_widths = options.machine.model.sizes;
  shape.rows = options.machine.global_batch / (program.config.dp * program.config.micro_batches);
  shape.optimizer_states = options.machine.optimizer.kind == "adam"    ? 2
                           : options.machine.optimizer.momentum > 0.0F ? 1
                                                                       : 0;
  const runtime::ModelConfig& model = options.machine.model;
  if (model.kind == runtime::ModelKind::vit) {
    for (int unit = 0; unit < model.vit.blocks; ++unit) {
      shape.layer_parameter_counts.push_back(runtime::vit_unit_parameter_count(model.vit, unit));
      const runtime::VitStashSizes stash = runtime::vit_stash_sizes(model.vit, unit);
      shape.layer_stashes.push_back({stash.forward_for_input, stash.forward_for_weight,
                                     stash.gradients_for_weight, stash.layernorm_gradients});
    }
  }
  const std::vector<RankBytes> counted = peak_bytes(program, shape);
  const std::vector<MeasuredPeak> measured = measured_peaks(program, options, data);
  ASSERT_EQ(counted.size(), measured.size());
  using runtime::MemoryCategory;
  for (std::size_t r = 0; r < counted.size(); ++r) {
    const RankBytes& c = counted[r];
    const runtime::MemoryBytes& m = measured[r].device;
    EXPECT_EQ(
        (std::vector<std::uint64_t>{c.weights, c.gradients, c.optimizer, c.activations,
                                    c.activation_gradients, c.messages, c.host, c.host_peak}),
        (std::vector<std::uint64_t>{
            m[MemoryCategory::weights], m[MemoryCategory::gradients], m[MemoryCategory::optimizer],
            m[MemoryCategory::activations], m[MemoryCategory::activation_gradients],
            m[MemoryCategory::messages], m[MemoryCategory::host], measured[r].host}))
        << "rank " << r;
  }
}

}  // namespace pipevm::vm_test
