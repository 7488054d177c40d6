// The cut chosen with the schedule (synthesize/cut_search.hpp): the min-max
// dynamic program against every cut, a cut's costs and bytes, and issue
// 37's item 3 on a randomized set: the joint result's simulated makespan is
// never longer than synthesize's own order on the even and on the min-max
// cut under the same limit; on small instances the gap of the heuristic
// search to enumerating every cut is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "check.hpp"
#include "cut_search.hpp"

namespace pipevm::synthesis {
namespace {

std::vector<LayerCost> random_layers(std::mt19937& random, int count) {
  std::uniform_real_distribution<double> time(0.2, 3.0);
  std::uniform_real_distribution<double> bytes(100, 2000);
  std::vector<LayerCost> layers;
  for (int l = 0; l < count; ++l) {
    LayerCost layer;
    layer.fwd = time(random);
    layer.bwd_input = time(random);
    layer.bwd_weight = time(random) / 2;
    layer.activation_bytes = std::round(bytes(random));
    layer.weight_activation_bytes = std::round(layer.activation_bytes / 3);
    layer.parameter_bytes = std::round(bytes(random) / 2);
    layer.output_bytes = 64;
    layers.push_back(layer);
  }
  return layers;
}

CutRequest cut_request(const std::vector<LayerCost>& layers, int stages, int micro_batches) {
  CutRequest request;
  request.layers = layers;
  request.request.config.stages = stages;
  request.request.config.micro_batches = micro_batches;
  request.request.costs = Costs{};
  request.request.costs.send = 0.1;
  request.request.time_limit_seconds = 0;
  return request;
}

double makespan(const CutResult& result) { return result.result.simulation.timeline.makespan; }

double slowest(const std::vector<LayerCost>& layers, const std::vector<LayerRange>& cut) {
  double slowest = 0;
  for (const LayerRange& piece : cut) slowest = std::max(slowest, piece_time(piece_cost(layers, piece)));
  return slowest;
}

TEST(cut, all_cuts_lists_each_cut_once) {
  const auto cuts = all_cuts(8, 4);
  EXPECT_EQ(cuts.size(), 35U);  // C(7, 3)
  for (const auto& cut : cuts) {
    std::string error;
    EXPECT_TRUE(parse_cut(cut_text(cut), 8, error)) << error;
  }
  EXPECT_TRUE(all_cuts(3, 4).empty());
}

TEST(cut, min_max_is_the_best_of_every_cut) {
  std::mt19937 random(37);
  for (int trial = 0; trial < 40; ++trial) {
    const int count = 4 + trial % 7;
    const int pieces = 1 + trial % std::min(count, 5);
    const auto layers = random_layers(random, count);
    const auto cut = min_max_cut(layers, pieces);
    ASSERT_TRUE(cut);
    double best = std::numeric_limits<double>::infinity();
    for (const auto& each : all_cuts(count, pieces)) best = std::min(best, slowest(layers, each));
    EXPECT_DOUBLE_EQ(slowest(layers, *cut), best) << cut_text(*cut);
  }
}

TEST(cut, min_max_keeps_within_what_is_allowed) {
  std::vector<LayerCost> layers(6);
  for (LayerCost& layer : layers) {
    layer.fwd = 1;
    layer.activation_bytes = 10;
  }
  // The first piece may hold one layer's bytes only.
  const auto cut = min_max_cut(layers, 3, [](int piece, const PieceCost& p) {
    return piece != 0 || p.activation_bytes <= 10;
  });
  ASSERT_TRUE(cut);
  EXPECT_EQ((*cut)[0].size(), 1) << cut_text(*cut);
  EXPECT_DOUBLE_EQ(slowest(layers, *cut), 3);
  EXPECT_FALSE(min_max_cut(layers, 3, [](int, const PieceCost& p) { return p.activation_bytes <= 10; }));
}

TEST(cut, costs_follow_the_placements_piece_order) {
  std::vector<LayerCost> layers(8);
  for (int l = 0; l < 8; ++l) layers[static_cast<std::size_t>(l)].fwd = l + 1;
  Config config;
  config.stages = 2;
  config.chunks = 2;
  const auto cut = even_cut(8, 4);  // 0-1,2-3,4-5,6-7
  const Costs looped = costs_of_cut(Costs{}, layers, cut, Placement::looped, config);
  // looped: stage 0 runs pieces 0 and 2; v: pieces 0 and 3.
  EXPECT_DOUBLE_EQ(looped.duration(CostKind::fwd, 0, 1), 5 + 6);
  EXPECT_DOUBLE_EQ(looped.duration(CostKind::fwd, 1, 0), 3 + 4);
  const Costs v = costs_of_cut(Costs{}, layers, cut, Placement::v, config);
  EXPECT_DOUBLE_EQ(v.duration(CostKind::fwd, 0, 1), 7 + 8);
  EXPECT_DOUBLE_EQ(v.duration(CostKind::fwd, 1, 1), 5 + 6);
}

TEST(cut, stage_bytes_count_parameters_and_held_activations) {
  std::vector<LayerCost> layers(2);
  layers[0] = {1, 1, 1, 100, 30, 7, 0};
  layers[1] = {1, 1, 1, 50, 10, 3, 0};
  ComputeOrder order;
  order.config.stages = 2;
  order.config.micro_batches = 2;
  using K = PassKind;
  order.stages = {{{K::forward, 0, 0}, {K::forward, 1, 0}, {K::backward_input, 0, 0}, {K::backward_weight, 0, 0},
                   {K::backward_input, 1, 0}, {K::backward_weight, 1, 0}},
                  {{K::forward, 0, 0}, {K::backward_input, 0, 0}, {K::forward, 1, 0}, {K::backward_input, 1, 0},
                   {K::backward_weight, 0, 0}, {K::backward_weight, 1, 0}}};
  const auto bytes = stage_bytes(order, layers, even_cut(2, 2));
  // Stage 0: two forwards held (200) + 7; stage 1: 10 + 50 at the second forward, + 3.
  EXPECT_EQ(bytes, (std::vector<std::uint64_t>{207, 63}));
}

TEST(cut, a_fixed_cut_is_recorded_and_checked) {
  std::mt19937 random(5);
  CutRequest request = cut_request(random_layers(random, 7), 3, 6);
  request.choice = CutChoice::given;
  std::string error;
  ASSERT_TRUE(parse_cut("0,1-4,5-6", 7, error));
  request.cut = *parse_cut("0,1-4,5-6", 7, error);
  const auto result = synthesize_cut(request, error);
  ASSERT_TRUE(result) << error;
  EXPECT_EQ(cut_text(result->cut), "0,1-4,5-6");
  EXPECT_EQ(result->result.program.cut, result->cut);
  EXPECT_NE(result->result.text.find("\ncut 0,1-4,5-6\n"), std::string::npos) << result->result.text;
  EXPECT_TRUE(check(result->result.program).ok());
  request.cut = even_cut(7, 2);
  EXPECT_FALSE(synthesize_cut(request, error));
  EXPECT_NE(error.find("has 2 pieces"), std::string::npos) << error;
}

TEST(cut, refuses_more_pieces_than_layers_and_a_limit_below_any_cut) {
  std::mt19937 random(6);
  CutRequest request = cut_request(random_layers(random, 3), 4, 4);
  std::string error;
  EXPECT_FALSE(synthesize_cut(request, error));
  EXPECT_NE(error.find("cannot cut 3 layers into 4"), std::string::npos) << error;
  request = cut_request(random_layers(random, 6), 2, 4);
  request.memory_bytes = 10;
  EXPECT_FALSE(synthesize_cut(request, error));
  EXPECT_NE(error.find("the least that works is"), std::string::npos) << error;
}

// One instance of the randomized set, and its baselines under the same limit.
struct Instance {
  int layers = 0;
  int stages = 0;
  Placement placement = Placement::looped;
  int chunks = 1;
  bool binding = false;
};

constexpr int kTrials = 16;

// Issue 37, item 3: never longer than the even or the min-max cut with
// synthesize's own order; every piece non-empty; the program clean.
TEST(cut, never_longer_than_the_even_or_the_min_max_cut) {
  std::mt19937 random(2026);
  std::uniform_int_distribution<int> layer_count(6, 10);
  std::uniform_int_distribution<int> stage_count(2, 4);
  int instances = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Instance at{layer_count(random), stage_count(random), Placement::looped, 1, trial % 2 == 1};
    if (trial % 4 == 2 && at.layers >= 2 * at.stages) {
      at.placement = trial % 8 == 2 ? Placement::v : Placement::looped;
      at.chunks = 2;
    }
    CutRequest request = cut_request(random_layers(random, at.layers), at.stages, 2 * at.stages);
    request.request.placement = at.placement;
    request.request.config.chunks = at.chunks;
    request.enumerate_small = false;
    std::string error;
    const auto free = synthesize_cut(request, error);
    ASSERT_TRUE(free) << error;
    if (at.binding) {
      // Between the least any cut needs and what the unlimited result holds.
      const std::uint64_t most = *std::max_element(free->stage_bytes.begin(), free->stage_bytes.end());
      request.memory_bytes = most * 7 / 10;
    }
    const auto joint = at.binding ? synthesize_cut(request, error) : free;
    CutRequest fixed = request;
    fixed.choice = CutChoice::even;
    const auto even = synthesize_cut(fixed, error);
    fixed.choice = CutChoice::given;
    fixed.cut = *min_max_cut(request.layers, model_pieces(at.placement, request.request.config));
    const auto min_max = synthesize_cut(fixed, error);
    if (!joint) {
      EXPECT_FALSE(even);
      EXPECT_FALSE(min_max);
      continue;
    }
    ++instances;
    for (const LayerRange& piece : joint->cut) EXPECT_GT(piece.size(), 0);
    EXPECT_EQ(joint->result.program.cut, joint->cut);
    EXPECT_TRUE(check(joint->result.program).ok()) << joint->result.text;
    if (request.memory_bytes > 0) {
      for (const std::uint64_t bytes : joint->stage_bytes) EXPECT_LE(bytes, request.memory_bytes);
    }
    if (even) {
      EXPECT_LE(makespan(*joint), makespan(*even) * (1 + 1e-9)) << cut_text(joint->cut);
    }
    if (min_max) {
      EXPECT_LE(makespan(*joint), makespan(*min_max) * (1 + 1e-9)) << cut_text(joint->cut);
    }
    std::printf("layers %d stages %d chunks %d %s limit %llu: joint %s %.3f, even %.3f, min-max %.3f\n",
                at.layers, at.stages, at.chunks, at.binding ? "binding" : "none",
                static_cast<unsigned long long>(request.memory_bytes), cut_text(joint->cut).c_str(),
                makespan(*joint), even ? makespan(*even) : 0.0, min_max ? makespan(*min_max) : 0.0);
  }
  EXPECT_GE(instances, 12);
}

// Small instances: the heuristic search against every cut. Enumeration is
// never longer; the gap is printed (docs/synthesize.md quotes it).
TEST(cut, small_instances_gap_to_enumeration) {
  std::mt19937 random(8);
  std::uniform_int_distribution<int> layer_count(5, kEnumerateLayers);
  std::uniform_int_distribution<int> stage_count(2, kEnumerateStages);
  double worst = 0;
  double total = 0;
  int instances = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    CutRequest request = cut_request(random_layers(random, layer_count(random)), 0, 0);
    request.request.config.stages = stage_count(random);
    request.request.config.micro_batches = 2 * request.request.config.stages;
    std::string error;
    if (trial % 2 == 1) {
      const auto free = synthesize_cut(request, error);
      ASSERT_TRUE(free) << error;
      request.memory_bytes = *std::max_element(free->stage_bytes.begin(), free->stage_bytes.end()) * 7 / 10;
    }
    const auto every = synthesize_cut(request, error);
    request.enumerate_small = false;
    const auto searched = synthesize_cut(request, error);
    ASSERT_EQ(every.has_value(), searched.has_value()) << error;
    if (!every) continue;
    EXPECT_LE(makespan(*every), makespan(*searched) * (1 + 1e-9));
    const double gap = (makespan(*searched) - makespan(*every)) / makespan(*every);
    worst = std::max(worst, gap);
    total += gap;
    ++instances;
  }
  ASSERT_GT(instances, 0);
  std::printf("gap of the search to enumeration on %d small instances: mean %.2f%%, worst %.2f%%\n", instances,
              100 * total / instances, 100 * worst);
}

}  // namespace
}  // namespace pipevm::synthesis
