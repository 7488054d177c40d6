// schedules/v-half.pipe and schedules/v-min.pipe against the building
// blocks they write out (building_blocks.hpp) and the authors' generator
// (block_order with their reordering; references/controllable-memory.md):
// V-Half idles as its bare block does at equal costs, its bubble pinned
// above theirs; V-Min idles no more than the authors' order. Both hold
// the authors' peak. Memory per stage over a sweep is
// tests/schedules/library_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "building_blocks.hpp"
#include "compile.hpp"
#include "synthesize.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {
namespace {

Problem equal_costs(int stages, int micro_batches) {
  Request request;
  request.placement = Placement::v;
  request.config = Config{stages, micro_batches, 2, 1};
  request.costs.fwd = 1;
  request.costs.bwd_input = 1;
  request.costs.bwd_weight = 1;
  return problem_of(request);
}

ComputeOrder order_of_file(const std::string& name, const Config& config) {
  Diagnostics diagnostics;
  const auto program = compile(
      read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + name + ".pipe", diagnostics), config,
      diagnostics);
  EXPECT_TRUE(program) << name;
  if (!program) return {};
  std::string error;
  const auto order = compute_order_of(*program, error);
  EXPECT_TRUE(order) << name << ": " << error;
  return order ? *order : ComputeOrder{};
}

// The Zero Bubble rate the search scores orders by (timed_order.hpp).
double bubble(const ComputeOrder& order, const Problem& problem) {
  const auto timed = time_order(order, problem.costs);
  EXPECT_TRUE(timed) << "the order deadlocks";
  return timed ? timed->simulation.bubble_rate_zb : 1;
}

double largest(const std::vector<double>& peaks) { return *std::max_element(peaks.begin(), peaks.end()); }

std::string describe(int p, int m) { return "p " + std::to_string(p) + " m " + std::to_string(m); }

// The micro-batch counts of the sweep: 1, p, 2p, 2p+1, 3p+1, 8p.
std::vector<int> sweep(int p) { return {1, p, 2 * p, 2 * p + 1, 3 * p + 1, 8 * p}; }

// V-Half over a sweep idles exactly as its bare block does (repeated,
// squeezed, not reordered: block_order without "reorder") and holds what
// it holds at the peak; from m = 2p on that peak is the authors'
// reordered schedule's and the header's (p+2)//2 micro-batches of two
// chunk activations.
TEST(v_family, v_half_is_the_bare_block_at_the_authors_peak) {
  for (int p = 1; p <= 8; ++p) {
    for (const int m : {1, p, 2 * p + 1}) {
      const Problem problem = equal_costs(p, m);
      const std::string what = "v-half " + describe(p, m);
      const ComputeOrder file = order_of_file("v-half", problem.config);
      const auto bare = block_order(problem, v_half_block(p), false);
      ASSERT_TRUE(bare) << what;
      EXPECT_NEAR(bubble(file, problem), bubble(*bare, problem), 1e-9) << what;
      const double peak = largest(peak_memory(file, 1));
      EXPECT_EQ(peak, largest(peak_memory(*bare, 1))) << what;
      EXPECT_EQ(peak, 2 * std::min(m, (p + 2) / 2)) << what;
      if (m >= 2 * p) {
        const auto authors = block_order(problem, v_half_block(p), true);
        ASSERT_TRUE(authors) << what;
        EXPECT_EQ(peak, largest(peak_memory(*authors, 1))) << what;
      }
    }
  }
}

// V-Min over the sweep idles no more than the authors' order (their
// warm-up and cool-down reordering included) and holds exactly the
// header's peak, (p+4)//3 micro-batches of two chunk activations.
TEST(v_family, v_min_no_worse_than_the_authors_at_their_peak) {
  for (int p = 1; p <= 8; ++p) {
    for (const int m : sweep(p)) {
      const Problem problem = equal_costs(p, m);
      const std::string what = "v-min " + describe(p, m);
      const ComputeOrder file = order_of_file("v-min", problem.config);
      const auto authors = block_order(problem, v_min_block(p), true);
      ASSERT_TRUE(authors) << what;
      EXPECT_LE(bubble(file, problem), bubble(*authors, problem) + 1e-9) << what;
      EXPECT_EQ(largest(peak_memory(file, 1)), 2 * std::min(m, (p + 4) / 3)) << what;
    }
  }
}

// The authors' figures at F = B = W (the Zero Bubble rate): V-Min p 4, m 8
// 0.1864 and p 6, m 12 0.1910 (where the block has its gap), met; V-Half
// 0.0943 needs the reordering the file leaves out: the file's 0.2 is
// pinned here.
TEST(v_family, bubbles_against_the_authors_figures) {
  const Problem problem = equal_costs(4, 8);
  EXPECT_NEAR(bubble(order_of_file("v-min", problem.config), problem), 0.1864, 5e-5);
  EXPECT_NEAR(bubble(order_of_file("v-half", problem.config), problem), 0.2, 1e-9);
  const Problem gap = equal_costs(6, 12);
  EXPECT_NEAR(bubble(order_of_file("v-min", gap.config), gap), 0.1910, 5e-5);
}

}  // namespace
}  // namespace pipevm::synthesis
