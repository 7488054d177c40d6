// A cost file's `layers:`: per-layer costs read from the form
// `pipevm.profile_torch(...).write()` writes, written back by
// write_costs_yaml, and refused at line:col when a key, a value or the
// list is wrong.
#include <gtest/gtest.h>

#include <sstream>

#include "cost_files.hpp"
#include "costs.hpp"

namespace pipevm {
namespace {

using config::parse_costs_yaml;
using config::write_costs_yaml;

// What profile_torch writes for two pieces (python/pipevm/_torch_profile.py).
constexpr const char* kTorchProfile = R"yaml(# pipevm cost model (pipevm simulate --costs FILE); time unit: microseconds
# measured by pipevm.profile_torch on cpu: medians of 3 runs per pass
layers:  # per layer, first layer first
  - name: "Linear(in_features=32, out_features=48, bias=True)"
    fwd: 12.5
    bwd-input: 8.25
    bwd-weight: 9.0
    activation-bytes: 1024
    weight-activation-bytes: 1024
    parameter-bytes: 6336
    output-bytes: 1536
  - name: "ReLU()"
    fwd: 1.5
    bwd-input: 2.0
    bwd-weight: 0.0
    activation-bytes: 1536
    weight-activation-bytes: 0
    parameter-bytes: 0
    output-bytes: 1536
)yaml";

TEST(costs, layers_read_what_profile_torch_writes) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(parse_costs_yaml(kTorchProfile, costs, error)) << error;
  ASSERT_EQ(costs.layers.size(), 2U);
  const LayerCost linear{12.5, 8.25, 9.0, 1024, 1024, 6336, 1536};
  EXPECT_EQ(costs.layers[0], linear);
  EXPECT_EQ(costs.layers[1].fwd, 1.5);
  EXPECT_EQ(costs.layers[1].bwd_weight, 0);
  EXPECT_EQ(costs.layers[1].activation_bytes, 1536);
  EXPECT_TRUE(costs.stages.empty());
  EXPECT_EQ(costs.fwd, 0);
  EXPECT_NE(describe(costs).find("per layer for 2 layers"), std::string::npos) << describe(costs);
}

TEST(costs, layers_round_trip_beside_stages_and_keys) {
  Costs costs;
  costs.send = 0.5;
  costs.stages.resize(2);
  costs.stages[1].fwd = 3;
  costs.layers = {{1.0 / 3.0, 2, 1, 4096, 2048, 100, 512}, {5, 0, 0, 0, 0, 0, 0}};
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  std::string error;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error << '\n' << out.str();
  EXPECT_EQ(read.layers, costs.layers) << out.str();
  EXPECT_EQ(read.send, 0.5);
  ASSERT_EQ(read.stages.size(), 2U);
  EXPECT_EQ(read.stages[1].fwd, 3);
  EXPECT_TRUE(read.stages[1].layers.empty());
  EXPECT_NE(out.str().find("layers:  # per layer"), std::string::npos) << out.str();
}

TEST(costs, a_layer_key_not_given_is_zero) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(parse_costs_yaml("layers:\n  - fwd: 2\n  - {}\n", costs, error)) << error;
  ASSERT_EQ(costs.layers.size(), 2U);
  EXPECT_EQ(costs.layers[0], (LayerCost{2, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(costs.layers[1], LayerCost{});
}

TEST(costs, bad_layers_are_refused_at_line_and_column) {
  Costs costs;
  std::string error;
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - fwd: 1\n  - fwdd: 2\n", costs, error));
  EXPECT_EQ(error.rfind("3:5: layer 1: 'fwdd' is not a per-layer cost (those are: fwd bwd-input", 0), 0U)
      << error;
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - fwd: 1\n    bwd-input: -2\n", costs, error));
  EXPECT_EQ(error, "3:16: layer 0: 'bwd-input' must be a finite number >= 0");
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - activation-bytes: many\n", costs, error));
  EXPECT_EQ(error, "2:23: layer 0: 'activation-bytes' is not a number");
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - fwd: [1, 2]\n", costs, error));
  EXPECT_EQ(error, "2:10: layer 0: 'fwd' is not a number");
  EXPECT_FALSE(parse_costs_yaml("fwd: 1\nlayers: []\n", costs, error));
  EXPECT_EQ(error, "2:9: 'layers' is empty: give one mapping per model layer");
  EXPECT_FALSE(parse_costs_yaml("layers: 3\n", costs, error));
  EXPECT_EQ(error, "1:9: 'layers' is a list with one mapping per model layer (- fwd: 1)");
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - 3\n", costs, error));
  EXPECT_EQ(error, "2:5: layer 0 of 'layers' is not a mapping of keys to numbers (fwd: 1)");
  EXPECT_FALSE(parse_costs_yaml("layers:\n  - fwd: inf\n", costs, error));
  EXPECT_EQ(error, "2:10: layer 0: 'fwd' must be a finite number >= 0");
}

}  // namespace
}  // namespace pipevm
