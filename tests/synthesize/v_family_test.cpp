// schedules/v-half.pipe and schedules/v-min.pipe against the building
// blocks they write out (building_blocks.hpp) and the authors' figures
// (references/controllable-memory.md): each file idles as its bare block
// does at equal costs and holds the authors' peak; V-Min meets the
// authors' bubble, V-Half's is pinned below theirs. Memory per stage over
// a sweep is tests/schedules/library_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

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

// Over a sweep the files idle exactly as the bare blocks do (repeated,
// squeezed, not reordered: block_order without "reorder") and hold what they
// hold at the peak; from m = 2p on that peak is the authors' reordered
// schedule's and the headers' (p+2)//2 and (p+4)//3 micro-batches of two
// chunk activations.
TEST(v_family, files_are_the_bare_blocks_at_the_authors_peak) {
  for (int p = 1; p <= 8; ++p) {
    for (const int m : {1, p, 2 * p + 1}) {
      const Problem problem = equal_costs(p, m);
      const struct {
        const char* file;
        BuildingBlock block;
        int micro_batches_at_peak;
      } rows[] = {{"v-half", v_half_block(p), (p + 2) / 2}, {"v-min", v_min_block(p), (p + 4) / 3}};
      for (const auto& row : rows) {
        const std::string what = std::string(row.file) + " " + describe(p, m);
        const ComputeOrder file = order_of_file(row.file, problem.config);
        const auto bare = block_order(problem, row.block, false);
        ASSERT_TRUE(bare) << what;
        EXPECT_NEAR(bubble(file, problem), bubble(*bare, problem), 1e-9) << what;
        const double peak = largest(peak_memory(file, 1));
        EXPECT_EQ(peak, largest(peak_memory(*bare, 1))) << what;
        EXPECT_EQ(peak, 2 * std::min(m, row.micro_batches_at_peak)) << what;
        if (m >= 2 * p) {
          const auto authors = block_order(problem, row.block, true);
          ASSERT_TRUE(authors) << what;
          EXPECT_EQ(peak, largest(peak_memory(*authors, 1))) << what;
        }
      }
    }
  }
}

// The authors' figures at p 4, m 8, F = B = W (the Zero Bubble rate):
// V-Min 0.1864, met, and met wherever p % 3 != 0; V-Half 0.0943 needs the
// reordering the file leaves out: the file's 0.2 is pinned here.
TEST(v_family, bubbles_against_the_authors_figures) {
  const Problem problem = equal_costs(4, 8);
  EXPECT_NEAR(bubble(order_of_file("v-min", problem.config), problem), 0.1864, 5e-5);
  EXPECT_NEAR(bubble(order_of_file("v-half", problem.config), problem), 0.2, 1e-9);
  for (int p = 1; p <= 8; ++p) {
    if (p % 3 == 0) continue;
    for (const int m : {2 * p, 3 * p + 1}) {
      const Problem each = equal_costs(p, m);
      const auto authors = block_order(each, v_min_block(p), true);
      ASSERT_TRUE(authors) << describe(p, m);
      EXPECT_NEAR(bubble(order_of_file("v-min", each.config), each), bubble(*authors, each), 1e-9)
          << describe(p, m);
    }
  }
}

}  // namespace
}  // namespace pipevm::synthesis
