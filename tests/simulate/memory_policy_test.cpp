// The simulator's memory policies: a Recompute costs `recompute` (by default
// the forward's), Offload and Reload run on their rank's host link one at a
// time beside compute, and a late Reload stalls the backward after its
// WaitReload, which the grid draws as H; the peak of activations counts a
// stash off the device from the wait that completes its Offload to its
// Reload. On small programs written in the language, and on the shipped
// 1f1b-recompute and 1f1b-offload.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "compile.hpp"
#include "simulate.hpp"
#include "svg.hpp"
#include "trace.hpp"

namespace pipevm {
namespace {

Program compiled(const std::string& text, Config config) {
  Diagnostics diagnostics;
  auto program = compile(std::make_shared<const SourceFile>("t.pipe", text), config, diagnostics);
  EXPECT_TRUE(program.has_value()) << (diagnostics.empty() ? "" : diagnostics.all()[0].message);
  return program.value_or(Program{});
}

Program shipped(const std::string& name, Config config) {
  Diagnostics diagnostics;
  const auto file = read_source(
      (std::filesystem::path(PIPEVM_SOURCE_DIR) / "schedules" / (name + ".pipe")).string(),
      diagnostics);
  auto program = compile(file, config, diagnostics);
  EXPECT_TRUE(program.has_value()) << name;
  return program.value_or(Program{});
}

Simulation run(const Program& program, const Costs& costs, const Network& network = {}) {
  Diagnostics diagnostics;
  auto simulation = simulate(program, costs, diagnostics, network);
  EXPECT_TRUE(simulation.has_value());
  EXPECT_TRUE(diagnostics.empty()) << (diagnostics.empty() ? "" : diagnostics.all()[0].message);
  return simulation.value_or(Simulation{});
}

// One stage, one micro-batch: forward, the copy out and back, backward.
constexpr const char* kOffloaded = R"(ZeroGrad
LoadInput 0
Fwd 0
Offload 0
WaitOffload 0
Reload 0
LoadTarget 0
WaitReload 0
Bwd 0
OptimizerStep
)";

TEST(memory_policy, recompute_costs_the_forward_unless_given) {
  const Program program = compiled(R"(ZeroGrad
LoadInput 0
FwdCheckpoint 0
LoadTarget 0
Recompute 0
Bwd 0
OptimizerStep
)",
                                   Config{1, 1});
  Costs costs = default_costs();
  costs.fwd = 2;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 2 + 2 + 2);
  costs.recompute = 0.5;
  const Simulation s = run(program, costs);
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 2 + 0.5 + 2);
  EXPECT_NE(render_grid(program, s.timeline, 9).find('R'), std::string::npos)
      << render_grid(program, s.timeline, 9);
}

TEST(memory_policy, copies_run_on_the_host_link_and_a_late_reload_stalls) {
  const Program program = compiled(kOffloaded, Config{1, 1});
  Costs costs = default_costs();
  // Free copies: the stash goes and comes back at no cost.
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 1 + 2);
  // 1,000 bytes each way at 500 bytes per unit and latency 1: 3 units each,
  // one after the other on the link; the backward waits for both.
  costs.host_latency = 1;
  costs.host_bandwidth = 500;
  Network network;
  network.host_copy_bytes.assign(program.code.size(), 0);
  network.host_copy_bytes[3] = 1000;  // Offload 0
  network.host_copy_bytes[5] = 1000;  // Reload 0
  const Simulation s = run(program, costs, network);
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 1 + 3 + 3 + 2);
  ASSERT_EQ(s.timeline.copies.size(), 2U);
  EXPECT_DOUBLE_EQ(s.timeline.copies[0].begin, 1);
  EXPECT_DOUBLE_EQ(s.timeline.copies[1].end, 7);
  const std::string grid = render_grid(program, s.timeline, 9);
  EXPECT_NE(grid.find("HHH"), std::string::npos) << "the stall on the reload: " << grid;
  EXPECT_EQ(segments_of(program, s.timeline, 0).at(1).activity, Activity::host_copy);
}

// The trace puts each copy on its rank's host-link track, and the stall
// on the rank's own; the SVG draws the copies along the row's foot.
TEST(memory_policy, trace_and_svg_show_the_copies_and_the_stall) {
  const Program program = compiled(kOffloaded, Config{1, 1});
  Costs costs = default_costs();
  costs.host_latency = 2;
  const Simulation s = run(program, costs);
  const nlohmann::json trace = chrome_trace(program, s.timeline);
  int copies = 0;
  bool track = false;
  bool stall = false;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["args"].contains("name") &&
        event["args"]["name"].get<std::string>().find("host link") != std::string::npos) {
      track = event["tid"] == 1;
    }
    if (event["ph"] != "X" || event.value("cat", "") != "host-copy") continue;
    if (event["tid"] == 1) {
      ++copies;
      EXPECT_EQ(event["dur"], 2.0) << event.dump();
    } else if (event["name"] == "WaitReload 0") {
      stall = event["dur"] == 2.0;
    }
  }
  EXPECT_TRUE(track);
  EXPECT_EQ(copies, 2);
  EXPECT_TRUE(stall) << "the wait for the reload lasts the copy";
  std::ostringstream svg;
  write_svg(svg, program, s.timeline, "offload");
  EXPECT_NE(svg.str().find("`Reload 0` on the host link"), std::string::npos);
  EXPECT_NE(svg.str().find(">host-copy<"), std::string::npos) << "in the legend";
}

TEST(memory_policy, copies_overlap_compute_on_the_host_link) {
  // The offload of micro-batch 0 runs while micro-batch 1 is forwarded.
  const Program program = compiled(R"(ZeroGrad
LoadInput 0
Fwd 0
Offload 0
LoadInput 1
Fwd 1
WaitOffload 0
LoadTarget 1
Bwd 1
Reload 0
LoadTarget 0
WaitReload 0
Bwd 0
OptimizerStep
)",
                                   Config{1, 2});
  Costs costs = default_costs();
  costs.host_latency = 1;
  const Simulation s = run(program, costs);
  // The offload (1 unit) hides under Fwd 1; the reload (1 unit) stalls.
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 1 + 1 + 2 + 1 + 2);
}

TEST(memory_policy, peak_activations_leave_the_device_with_the_offload) {
  EXPECT_EQ(peak_activations(compiled(kOffloaded, Config{1, 1})), std::vector<int>{1});
  for (const int stages : {2, 4}) {
    const Config config{stages, 8};
    const std::vector<int> plain = peak_activations(shipped("1f1b", config));
    const std::vector<int> offload = peak_activations(shipped("1f1b-offload", config));
    const std::vector<int> recompute = peak_activations(shipped("1f1b-recompute", config));
    for (int s = 0; s < stages; ++s) {
      EXPECT_EQ(plain[static_cast<std::size_t>(s)], stages - s);
      EXPECT_EQ(offload[static_cast<std::size_t>(s)], 1) << "stage " << s;
      EXPECT_EQ(recompute[static_cast<std::size_t>(s)], 1) << "stage " << s;
    }
  }
}

TEST(memory_policy, shipped_forms_keep_1f1b_bubble_when_copies_and_recomputation_are_free) {
  for (const int stages : {2, 4}) {
    const Config config{stages, 8};
    Costs costs = default_costs();
    costs.recompute = 0;
    const double plain = run(shipped("1f1b", config), costs).timeline.makespan;
    EXPECT_DOUBLE_EQ(run(shipped("1f1b-offload", config), costs).timeline.makespan, plain);
    EXPECT_DOUBLE_EQ(run(shipped("1f1b-recompute", config), costs).timeline.makespan, plain);
    // Recomputation at the forward's cost: every backward is one forward longer.
    costs.recompute.reset();
    EXPECT_GT(run(shipped("1f1b-recompute", config), costs).timeline.makespan, plain);
  }
}

}  // namespace
}  // namespace pipevm
