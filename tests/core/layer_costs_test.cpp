// Cuts as text, even cuts and a piece's summed costs (core/layer_costs.hpp).
#include "layer_costs.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace pipevm {
namespace {

TEST(layer_costs, a_cut_reads_and_writes_as_the_same_text) {
  std::string error;
  const auto cut = parse_cut("0-2,3-4,5,6-7", 8, error);
  ASSERT_TRUE(cut) << error;
  EXPECT_EQ(*cut, (std::vector<LayerRange>{{0, 3}, {3, 5}, {5, 6}, {6, 8}}));
  EXPECT_EQ(cut_text(*cut), "0-2,3-4,5,6-7");
}

TEST(layer_costs, a_bad_cut_says_which_piece_and_why) {
  std::string error;
  EXPECT_FALSE(parse_cut("0-2,4-7", 8, error));
  EXPECT_EQ(error, "piece 1 (`4-7`) starts at layer 4, not at 3: the pieces must cover the layers in order, each once");
  EXPECT_FALSE(parse_cut("0-2,3-1", 8, error));
  EXPECT_EQ(error, "piece 1 (`3-1`) is empty: its last layer comes before its first");
  EXPECT_FALSE(parse_cut("0-2,3-9", 8, error));
  EXPECT_EQ(error, "piece 1 (`3-9`) reaches layer 9 but the model has 8 layers (0-7)");
  EXPECT_FALSE(parse_cut("0-2,,3-7", 8, error));
  EXPECT_EQ(error, "piece 1 (``) is not a layer `L` or a range `A-B` of layer numbers");
  EXPECT_FALSE(parse_cut("0-5", 8, error));
  EXPECT_EQ(error, "the cut ends at layer 5 but the model has 8 layers: the last piece must end at layer 7");
}

TEST(layer_costs, an_even_cut_gives_the_longer_pieces_first) {
  EXPECT_EQ(even_cut(7, 3), (std::vector<LayerRange>{{0, 3}, {3, 5}, {5, 7}}));
  EXPECT_EQ(even_cut(4, 4), (std::vector<LayerRange>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_THROW(even_cut(3, 4), std::invalid_argument);
  EXPECT_THROW(even_cut(3, 0), std::invalid_argument);
}

TEST(layer_costs, a_piece_sums_its_layers_and_sends_its_last_output) {
  const std::vector<LayerCost> layers{{1, 2, 3, 10, 5, 100, 7}, {1, 1, 1, 20, 6, 200, 8}, {2, 2, 2, 30, 7, 300, 9}};
  const PieceCost first = piece_cost(layers, {0, 2});
  EXPECT_DOUBLE_EQ(first.fwd, 2);
  EXPECT_DOUBLE_EQ(first.bwd_input, 3);
  EXPECT_DOUBLE_EQ(first.bwd_weight, 4);
  EXPECT_DOUBLE_EQ(first.activation_bytes, 30);
  EXPECT_DOUBLE_EQ(first.weight_activation_bytes, 11);
  EXPECT_DOUBLE_EQ(first.parameter_bytes, 300);
  EXPECT_DOUBLE_EQ(first.output_bytes, 8);
  EXPECT_DOUBLE_EQ(piece_cost(layers, {2, 3}).output_bytes, 0);
}

}  // namespace
}  // namespace pipevm
