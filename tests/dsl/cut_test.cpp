// The `cut` declaration: read with its position, checked against the
// program's model pieces when it is expanded, and the split of the model
// it covers unless an explicit split overrides it.
#include <gtest/gtest.h>

#include "layer_costs.hpp"
#include "support.hpp"

namespace pipevm {
namespace {

using test::config;

// The default model (default_layer_widths) has 7 layers.
constexpr const char* kForwardOnly = "for i in 0 .. micro_batches { Fwd i }\n";

TEST(cut, the_declaration_is_the_programs_split) {
  Diagnostics d;
  const auto p = test::compile_text(std::string("cut 0-2,3-4,5-6\n") + kForwardOnly, config(3, 2), d);
  ASSERT_TRUE(p) << d.all().front().message;
  const std::vector<LayerRange> expected = {{0, 3}, {3, 5}, {5, 7}};
  EXPECT_EQ(p->cut, expected);
  EXPECT_EQ(p->layer_split, expected);
  EXPECT_EQ(chunk_layers(*p, 1, 0).begin, 3);
  EXPECT_EQ(cut_text(p->cut), "0-2,3-4,5-6");
}

TEST(cut, it_follows_the_other_headers_and_a_single_layer_is_one_number) {
  Diagnostics d;
  const auto p = test::compile_text(
      std::string("schedule mine\nplacement looped\ncut 0,1-5,6\ncheck stages 3 micro_batches 2\n") +
          kForwardOnly,
      config(3, 2), d);
  ASSERT_TRUE(p) << d.all().front().message;
  EXPECT_EQ(p->cut, (std::vector<LayerRange>{{0, 1}, {1, 6}, {6, 7}}));
}

TEST(cut, an_explicit_split_overrides_it) {
  Diagnostics d;
  ExpandOptions options;
  options.split = {{0, 1}, {1, 2}, {2, 7}};
  const auto p =
      test::compile_text(std::string("cut 0-2,3-4,5-6\n") + kForwardOnly, config(3, 2), d, options);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->layer_split, options.split);
  EXPECT_EQ(p->cut.size(), 3U);
}

// A cut of another model (10 layers, say a PyTorch model's) is kept for
// the per-layer costs that time it; the default model gets its own split.
TEST(cut, a_cut_of_another_model_is_kept_but_does_not_split_this_one) {
  Diagnostics d;
  const auto p = test::compile_text(std::string("cut 0-4,5-9\n") + kForwardOnly, config(2, 2), d);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->cut, (std::vector<LayerRange>{{0, 5}, {5, 10}}));
  EXPECT_TRUE(cut_for_model(*p, p->layer_widths).empty());
  ASSERT_EQ(p->layer_split.size(), 2U);
  EXPECT_EQ(p->layer_split.back().end, 7);
}

TEST(cut, the_piece_count_must_be_the_programs_and_both_numbers_are_named) {
  Diagnostics d;
  EXPECT_FALSE(test::compile_text(std::string("cut 0-2,3-6\n") + kForwardOnly, config(3, 2), d));
  ASSERT_EQ(test::codes(d), std::vector<std::string>{"PV1019"});
  EXPECT_EQ(d.all().front().message,
            "the cut has 2 pieces but the program has 3 model pieces (3 stages x 1 chunks)");
  EXPECT_EQ(d.all().front().location.range.begin, 4U);
  Diagnostics v;
  EXPECT_FALSE(test::compile_text(std::string("placement v\ncut 0-2,3-6\n") + kForwardOnly, config(2, 2), v));
  ASSERT_EQ(test::codes(v), std::vector<std::string>{"PV1019"});
  EXPECT_NE(v.all().front().message.find("has 4 model pieces (2 stages x 2 chunks, placement v)"),
            std::string::npos)
      << v.all().front().message;
}

TEST(cut, bad_cuts_are_refused_where_they_are_written) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"cut 0-2,,3-6\n", "piece 1 (``) is not a layer"},
           {"cut 0-2,4-6\n", "piece 1 (`4-6`) starts at layer 4, not at 3"},
           {"cut 0-2,3-1\n", "piece 1 (`3-1`) is empty"},
           {"cut 1-2,3-6\n", "piece 0 (`1-2`) starts at layer 1, not at 0"},
           {"cut 0-2,3-6\ncut 0-2,3-6\n", "a second 'cut' line"}}) {
    Diagnostics d;
    EXPECT_FALSE(test::compile_text(text + kForwardOnly, config(2, 2), d)) << text;
    ASSERT_FALSE(d.all().empty()) << text;
    EXPECT_EQ(test::codes(d).front(), "PV1019") << text;
    EXPECT_NE(d.all().front().message.find(why), std::string::npos) << d.all().front().message;
  }
}

}  // namespace
}  // namespace pipevm
