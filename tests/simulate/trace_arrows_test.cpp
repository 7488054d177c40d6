// Trace arrows as Perfetto draws them. First the model of Perfetto's JSON
// import (perfetto_model.hpp) on small hand-written traces, one rule each;
// then the traces `pipevm simulate --trace` writes for the shipped schedules,
// with and without message costs: every message's arrow must leave its
// send's slice and land on its receive's, never earlier than it starts.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "compile.hpp"
#include "cost_files.hpp"
#include "costs.hpp"
#include "perfetto_model.hpp"
#include "simulate.hpp"
#include "trace.hpp"
#include "trace_arrows.hpp"

namespace pipevm {
namespace {

using testing::perfetto::import_json_trace;
using Json = nlohmann::json;

Json slice(int tid, double ts, double dur, const std::string& name) {
  return {{"ph", "X"}, {"pid", 0}, {"tid", tid}, {"ts", ts}, {"dur", dur}, {"name", name}};
}
Json flow(const std::string& phase, int tid, double ts, int id) {
  Json event = {{"ph", phase}, {"pid", 0},   {"tid", tid}, {"ts", ts},
                {"id", id},    {"cat", "c"}, {"name", "m"}};
  if (phase == "f") event["bp"] = "e";
  return event;
}
Json with_flow(Json event, int id, const char* direction) {
  event["bind_id"] = id;
  event[direction] = true;
  return event;
}
std::string name_of(const testing::perfetto::Import& imported, std::size_t slice) {
  return imported.slices[slice].name;
}

TEST(perfetto_model, reads_times_as_perfetto_does) {
  using testing::perfetto::duration_ns;
  using testing::perfetto::timestamp_ns;
  EXPECT_EQ(timestamp_ns(Json(2.3)), 2300);
  EXPECT_EQ(timestamp_ns(Json(2.0 + 0.3)), 2300);  // 2.3000000000000003: extra digits dropped
  EXPECT_EQ(timestamp_ns(Json(1.2999999999999998)), 1299);
  EXPECT_EQ(timestamp_ns(Json(7)), 7000);
  EXPECT_EQ(timestamp_ns(Json(1.5e-3)), 1);
  EXPECT_EQ(duration_ns(Json(1.001)), 1000);  // 1000.9999999999999 truncated
  EXPECT_EQ(duration_ns(Json(2)), 2000);
}

TEST(perfetto_model, drops_an_arrow_whose_end_comes_first) {
  const auto imported = import_json_trace(Json::array(
      {slice(0, 5, 1, "send"), slice(1, 0, 10, "recv"), flow("s", 0, 5, 1), flow("f", 1, 0, 1)}));
  EXPECT_TRUE(imported.flows.empty());
  EXPECT_EQ(imported.stats.flow_end_without_start, 1);
}

TEST(perfetto_model, binds_v1_events_to_the_zero_length_slice_begun_last) {
  // At the same instant, longer slices are read first and the zero-length
  // one nests in them: it takes the arrow meant for "recv".
  const auto imported = import_json_trace(
      Json::array({slice(0, 0, 1, "send"), slice(1, 1, 0, "isend"), slice(1, 1, 4, "recv"),
                   flow("s", 0, 0.5, 1), flow("f", 1, 1, 1)}));
  ASSERT_EQ(imported.flows.size(), 1u);
  EXPECT_EQ(name_of(imported, imported.flows[0].out), "send");
  EXPECT_EQ(name_of(imported, imported.flows[0].in), "isend");
  EXPECT_EQ(imported.slices[imported.flows[0].in].depth, 1);
}

TEST(perfetto_model, binds_to_a_slice_that_has_ended_until_the_next_begins) {
  const auto imported = import_json_trace(Json::array(
      {slice(0, 0, 1, "send"), slice(1, 0, 1, "old"), flow("s", 0, 0, 1), flow("f", 1, 3, 1)}));
  ASSERT_EQ(imported.flows.size(), 1u);
  EXPECT_EQ(name_of(imported, imported.flows[0].in), "old");
}

TEST(perfetto_model, binds_an_end_without_bp_to_the_next_slice) {
  Json end = flow("f", 1, 2, 1);
  end.erase("bp");
  const auto imported = import_json_trace(Json::array(
      {slice(0, 0, 1, "send"), flow("s", 0, 0, 1), end, slice(1, 1, 1, "a"), slice(1, 4, 1, "b")}));
  ASSERT_EQ(imported.flows.size(), 1u);
  EXPECT_EQ(name_of(imported, imported.flows[0].in), "b");
}

TEST(perfetto_model, keeps_v1_flows_of_different_categories_apart) {
  Json end = flow("f", 1, 2, 1);
  end["cat"] = "other";
  const auto imported = import_json_trace(
      Json::array({slice(0, 0, 1, "send"), slice(1, 2, 1, "recv"), flow("s", 0, 0, 1), end}));
  EXPECT_TRUE(imported.flows.empty());
  EXPECT_EQ(imported.stats.flow_end_without_start, 1);
}

TEST(perfetto_model, binds_v2_events_to_their_own_slice) {
  const auto imported = import_json_trace(
      Json::array({slice(0, 0, 1, "fwd"), with_flow(slice(0, 1, 0, "isend"), 7, "flow_out"),
                   slice(0, 1, 0, "other"), slice(1, 1, 4, "recv"),
                   with_flow(slice(1, 1, 0, "arrive"), 7, "flow_in"), slice(1, 1, 0, "last")}));
  ASSERT_EQ(imported.flows.size(), 1u);
  EXPECT_EQ(name_of(imported, imported.flows[0].out), "isend");
  EXPECT_EQ(name_of(imported, imported.flows[0].in), "arrive");
}

TEST(perfetto_model, turns_around_an_arrow_whose_end_slice_starts_first) {
  const auto imported = import_json_trace(Json::array(
      {slice(1, 0, 10, "recv"), slice(0, 5, 1, "send"), flow("s", 0, 5, 2), flow("f", 1, 6, 2)}));
  ASSERT_EQ(imported.flows.size(), 1u);
  EXPECT_EQ(name_of(imported, imported.flows[0].out), "recv");
  EXPECT_EQ(name_of(imported, imported.flows[0].in), "send");
}

TEST(perfetto_model, drops_a_slice_that_overhangs_its_parent) {
  const auto imported =
      import_json_trace(Json::array({slice(0, 0, 2, "a"), slice(0, 1, 5, "overhang")}));
  EXPECT_EQ(imported.slices.size(), 1u);
  EXPECT_EQ(imported.stats.slice_dropped_overlapping, 1);
}

// A shipped schedule, simulated with `costs`, written as a trace and
// imported as Perfetto would.
testing::ArrowReport arrows_of(const std::string& schedule, Config config,
                               const std::string& costs) {
  Diagnostics diagnostics;
  const auto source =
      read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + schedule + ".pipe", diagnostics);
  EXPECT_TRUE(source);
  if (!source) return {};
  const auto program = compile(source, config, diagnostics);
  EXPECT_TRUE(program) << schedule;
  if (!program) return {};
  Costs cost_model;
  std::string error;
  EXPECT_TRUE(config::parse_cost_flags(costs, cost_model, error)) << error;
  const auto simulation = simulate(*program, cost_model, diagnostics);
  EXPECT_TRUE(simulation) << schedule;
  if (!simulation) return {};
  return testing::check_trace_arrows(*program, chrome_trace(*program, simulation->timeline));
}

void expect_every_arrow_lands(const testing::ArrowReport& report, std::size_t messages) {
  EXPECT_EQ(report.messages, messages);
  EXPECT_TRUE(report.all_landed())
      << report.summary()
      << "\n  first: " << (report.problems.empty() ? "" : report.problems.front());
}

const Config p4m8{.stages = 4, .micro_batches = 8};
const Config p4m8v2{.stages = 4, .micro_batches = 8, .chunks = 2};
const Config p4m8dp2{.stages = 4, .micro_batches = 8, .dp = 2};

TEST(trace_arrows, one_f_one_b_arrows_land_with_message_costs) {
  // 3 links x 8 micro-batches x (activation + gradient).
  expect_every_arrow_lands(arrows_of("1f1b", p4m8, "fwd=1,bwd=2,send=0.3"), 48);
}

TEST(trace_arrows, zero_bubble_arrows_land_with_message_costs) {
  expect_every_arrow_lands(arrows_of("zb-h1", p4m8, "fwd=1,bwd-input=1,bwd-weight=1,send=0.3"), 48);
}

TEST(trace_arrows, dualpipe_arrows_land_with_message_costs) {
  // Two lanes of 4 micro-batches, each over 3 links both ways.
  expect_every_arrow_lands(arrows_of("dualpipe", p4m8v2, "fwd=1,bwd=2,send=0.3"), 48);
}

TEST(trace_arrows, arrows_land_for_every_shipped_schedule_with_and_without_costs) {
  struct Case {
    std::string schedule;
    Config config;
  };
  const Case cases[] = {{"gpipe", p4m8},
                        {"naive", p4m8},
                        {"1f1b", p4m8dp2},
                        {"1f1b-nonblocking", p4m8},
                        {"gpipe-allreduce", p4m8dp2},
                        {"inference", p4m8},
                        {"zb-h1", p4m8},
                        {"interleaved-1f1b", p4m8v2},
                        {"dualpipe", p4m8v2},
                        {"dualpipev", p4m8v2}};
  for (const Case& c : cases) {
    for (const char* costs : {"fwd=1,bwd=2", "fwd=1,bwd=2,send=0.3,allreduce=1",
                              "fwd=1,bwd-input=0.5,bwd-weight=0.7,send=0.25"}) {
      const testing::ArrowReport report = arrows_of(c.schedule, c.config, costs);
      EXPECT_GT(report.messages, 0u) << c.schedule;
      EXPECT_TRUE(report.all_landed())
          << c.schedule << " " << costs << ": " << report.summary()
          << "\n  first: " << (report.problems.empty() ? "" : report.problems.front());
    }
  }
}

}  // namespace
}  // namespace pipevm
