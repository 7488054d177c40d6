// What the simulator writes: the JSON summary, Chrome traces (simulated and
// measured), SVG pictures and the text report.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "programs.hpp"
#include "simulate.hpp"
#include "svg.hpp"
#include "trace.hpp"

namespace pipevm {
namespace {

Simulation run(const Program& program) {
  Diagnostics diagnostics;
  auto simulation = simulate(program, testing::textbook(), diagnostics);
  EXPECT_TRUE(simulation.has_value());
  return simulation.value_or(Simulation{});
}

TEST(report, json_has_the_documented_keys_and_is_stable) {
  const Program program = testing::one_f_one_b(4, 8);
  const std::string first = to_json(run(program)).dump(2);
  const std::string second = to_json(run(program)).dump(2);
  EXPECT_EQ(first, second);
  const auto json = nlohmann::json::parse(first);
  std::set<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"makespan", "bubble_fraction", "bubble_rate_zb", "held",
                                         "per_stage"}));
  EXPECT_DOUBLE_EQ(json["makespan"].get<double>(), 33);
  EXPECT_NEAR(json["bubble_fraction"].get<double>(), 3.0 / 11, 1e-12);
  ASSERT_EQ(json["per_stage"].size(), 4u);
  EXPECT_EQ(json["per_stage"][1]["stage"], 1);
  EXPECT_EQ(json["per_stage"][1]["peak_activations"], 3);
  EXPECT_DOUBLE_EQ(json["per_stage"][1]["busy"].get<double>(), 24);
  EXPECT_DOUBLE_EQ(json["per_stage"][1]["idle"].get<double>(), 9);
  // Stage 1 starts its first forward at 1 and ends its last backward at 31:
  // the paper's cost is stage 0's 33 (0 to 33), its bubble 9 of it.
  EXPECT_DOUBLE_EQ(json["per_stage"][1]["first_start"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(json["per_stage"][1]["last_end"].get<double>(), 31);
  EXPECT_NEAR(json["bubble_rate_zb"].get<double>(), 9.0 / 33, 1e-12);
  EXPECT_EQ(json["held"], 0);
}

// Checks the structure Perfetto and Chrome need; returns the number of flow
// pairs (where the arrows land is trace_arrows_test.cpp's business).
std::size_t check_chrome_trace(const nlohmann::json& trace, int ranks) {
  EXPECT_TRUE(trace.is_object());
  EXPECT_TRUE(trace.contains("traceEvents"));
  std::set<int> named_threads;
  std::map<std::uint64_t, int> starts;
  std::map<std::uint64_t, int> finishes;
  std::size_t slices = 0;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string phase = event.at("ph");
    EXPECT_EQ(event.at("pid"), 0);
    if (phase == "M" && event.at("name") == "thread_name")
      named_threads.insert(event.at("tid").get<int>());
    if (phase == "X") {
      ++slices;
      EXPECT_GE(event.at("ts").get<double>(), 0);
      EXPECT_GE(event.at("dur").get<double>(), 0);
      EXPECT_LT(event.at("tid").get<int>(), ranks);
      EXPECT_TRUE(event.at("name").is_string());
    }
    if (event.contains("bind_id")) {
      EXPECT_EQ(phase, "X");
      const auto id = event.at("bind_id").get<std::uint64_t>();
      if (event.value("flow_out", false)) ++starts[id];
      if (event.value("flow_in", false)) ++finishes[id];
    }
  }
  EXPECT_EQ(static_cast<int>(named_threads.size()), ranks);
  EXPECT_GT(slices, 0u);
  EXPECT_EQ(starts.size(), finishes.size());
  for (const auto& [id, count] : starts) {
    EXPECT_EQ(count, 1) << id;
    EXPECT_EQ(finishes[id], 1) << id;
  }
  return starts.size();
}

TEST(report, trace_is_chrome_json_with_paired_flows) {
  const Program program = testing::one_f_one_b(4, 8);
  const Simulation simulation = run(program);
  std::ostringstream out;
  write_chrome_trace(out, program, simulation.timeline);
  const auto trace = nlohmann::json::parse(out.str());
  // Every one of the 3 links carries 8 activations and 8 gradients.
  EXPECT_EQ(check_chrome_trace(trace, 4), 3u * 16u);
  // A slice per instruction and one per message for its arrow to end on.
  std::size_t slices = 0;
  for (const auto& event : trace["traceEvents"]) slices += event["ph"] == "X" ? 1u : 0u;
  EXPECT_EQ(slices, program.code.size() + 3u * 16u);
}

TEST(report, flows_of_non_blocking_receives_end_at_their_wait) {
  using testing::message;
  using testing::op;
  const Program program = testing::make_program(
      {2, 1, 1, 1},
      {{op(Opcode::Fwd), message(Opcode::ISend, MessageKind::act, 0, 1), op(Opcode::WaitAll)},
       {message(Opcode::IRecv, MessageKind::act, 0, 0), op(Opcode::LoadTarget),
        testing::wait(WaitDirection::recv, MessageKind::act, 0), op(Opcode::Fwd)}});
  const Simulation simulation = run(program);
  const auto trace = chrome_trace(program, simulation.timeline);
  std::size_t ends = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (!event.value("flow_in", false)) continue;
    ++ends;
    // On rank 1, within its Wait, no earlier than the ISend.
    EXPECT_EQ(event["tid"], 1);
    EXPECT_EQ(event["name"], "act 0 from rank 0");
    const double at = event["ts"].get<double>();
    EXPECT_GE(at, simulation.timeline.times[5].issued);
    EXPECT_LE(at, simulation.timeline.times[5].ended);
    EXPECT_GE(at, simulation.timeline.times[1].issued);
  }
  EXPECT_EQ(ends, 1u);
  EXPECT_DOUBLE_EQ(simulation.timeline.times[5].ended, 1);
}

TEST(report, measured_runs_give_the_same_trace_format) {
  const Program program = testing::gpipe(2, 2);
  const Simulation simulation = run(program);
  // Pretend the simulated times (as milliseconds) were measured from t = 5 s.
  std::vector<MeasuredInstruction> measured;
  for (int r = 0; r < program.ranks(); ++r) {
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < program.rank(r).size(); ++i) {
      const InstructionTime& t = simulation.timeline.times[begin + i];
      measured.push_back({r, i, 5'000'000'000 + static_cast<std::int64_t>(t.issued * 1e6),
                          5'000'000'000 + static_cast<std::int64_t>(t.ended * 1e6)});
    }
  }
  const Timeline timeline = timeline_from_measurements(program, measured);
  EXPECT_DOUBLE_EQ(timeline.makespan, 9000);
  EXPECT_EQ(timeline.flows.size(), simulation.timeline.flows.size());
  EXPECT_EQ(check_chrome_trace(chrome_trace(program, timeline), 2), 4u);
  Simulation figures;
  figures.timeline = timeline;
  summarize(program, figures);
  EXPECT_NEAR(figures.bubble_fraction, simulation.bubble_fraction, 1e-9);
}

TEST(report, svg_draws_every_block_with_a_legend) {
  const Program program = testing::gpipe(2, 2);
  const Simulation simulation = run(program);
  std::ostringstream out;
  write_svg(out, program, simulation.timeline, "gpipe <2 stages>");
  const std::string svg = out.str();
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("gpipe &lt;2 stages&gt;"), std::string::npos);
  EXPECT_NE(svg.find("<title>Fwd 1</title>"), std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">backward-weight</text>"), std::string::npos);
  std::size_t blocks = 0;
  for (auto at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) {
    ++blocks;
  }
  EXPECT_EQ(blocks, 8u);  // 2 ranks x (2 Fwd + 2 Bwd)
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// At sizes where a 960-pixel plot leaves a forward a few pixels wide, the
// plot widens so that every block still carries its micro-batch.
TEST(report, svg_keeps_every_micro_batch_label_at_large_sizes) {
  const Program program = testing::one_f_one_b(8, 64);
  std::ostringstream out;
  write_svg(out, program, run(program).timeline, "1f1b");
  const std::string svg = out.str();
  const std::size_t blocks = count(svg, "stroke-width=\"0.5\"><title>");
  EXPECT_EQ(blocks, 8u * 64u * 2u);
  // Block labels carry a fill; the axis's tick labels do not.
  EXPECT_EQ(count(svg, "text-anchor=\"middle\" fill="), blocks);
  EXPECT_NE(svg.find(">63</text>"), std::string::npos);
  EXPECT_NE(svg.find("time (cost units"), std::string::npos);
}

// An overlapped pair is one block, labelled with both micro-batches.
TEST(report, svg_draws_an_overlapped_pair_as_one_block_with_both_labels) {
  Instruction pair = testing::op(Opcode::FwdBwd, 1, 1);
  set_second_cell(pair, Cell{0, 0});
  const Program program = testing::make_program(
      Config{1, 2, 2, 1},
      {{testing::op(Opcode::LoadInput, 0), testing::op(Opcode::Fwd, 0),
        testing::op(Opcode::LoadTarget, 0), testing::op(Opcode::LoadInput, 1, 1), pair,
        testing::op(Opcode::LoadTarget, 1, 1), testing::op(Opcode::Bwd, 1, 1)}});
  const Simulation simulation = run(program);
  EXPECT_DOUBLE_EQ(simulation.timeline.makespan, 1 + 3 + 2);  // the pair costs F + B
  std::ostringstream out;
  write_svg(out, program, simulation.timeline, "pair");
  const std::string svg = out.str();
  EXPECT_EQ(count(svg, "<title>FwdBwd 1 chunk 1 with 0</title>"), 1u);
  EXPECT_NE(svg.find(">1+0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">forward-backward</text>"), std::string::npos);
}

TEST(report, text_report_shows_grid_and_figures) {
  const Program program = testing::gpipe(2, 2);
  const Simulation simulation = run(program);
  const std::string text = render_text(program, simulation, testing::textbook(), 18);
  EXPECT_NE(text.find("gpipe: 2 stages, 2 micro-batches; costs fwd=1 bwd=2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("stage 0 |F0F1......B0BBB1BB|"), std::string::npos) << text;
  EXPECT_NE(text.find("makespan 9   bubble 33.3%"), std::string::npos) << text;
  EXPECT_NE(text.find("    0         6         3                 2"), std::string::npos) << text;
}

}  // namespace
}  // namespace pipevm
