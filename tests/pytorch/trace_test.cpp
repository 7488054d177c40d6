// torch.profiler traces read into pass durations: PyTorch's `PP:` labels and
// a user's, both trace shapes, steps by occurrence or by ProfilerStep
// spans, and the refusals that say what to change.
#include <gtest/gtest.h>

#include <string>

#include "torch_trace.hpp"
#include "trace_costs.hpp"

namespace pipevm::pytorch {
namespace {

std::string event(const std::string& name, double ts, double dur) {
  return R"({"name": ")" + name + R"(", "ph": "X", "ts": )" + std::to_string(ts) +
         R"(, "dur": )" + std::to_string(dur) + R"(, "pid": 0, "tid": 1, "args": {}})";
}

std::string array_of(const std::vector<std::string>& events) {
  std::string out = "[";
  for (const std::string& e : events) out += (out.size() > 1 ? ", " : "") + e;
  return out + "]";
}

const std::vector<double>& samples(const TraceDurations& d, int stage, TracePass pass) {
  return d.samples.at(static_cast<std::size_t>(stage)).at(static_cast<std::size_t>(pass));
}

TEST(trace, pipelining_labels_by_stage_and_pass_first_step_skipped) {
  // Two steps of stage 0 and 1, forwards and split backwards; the first step is slower.
  std::vector<std::string> events;
  double t = 0;
  for (int step = 0; step < 2; ++step) {
    const double slow = step == 0 ? 100 : 0;
    for (int mb = 0; mb < 2; ++mb) {
      events.push_back(event("PP:0F" + std::to_string(mb), t += 10, 5 + slow));
      events.push_back(event("PP:1F" + std::to_string(mb), t += 10, 6 + slow));
      events.push_back(event("PP:1I" + std::to_string(mb), t += 10, 7 + mb));
      events.push_back(event("PP:1W" + std::to_string(mb), t += 10, 3));
      events.push_back(event("aten::mm", t += 1, 2));
    }
  }
  std::string error;
  const auto d = read_torch_trace(array_of(events), TraceOptions{}, error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(d->steps, 2);
  EXPECT_EQ(d->labelled_events, 16);
  ASSERT_EQ(d->samples.size(), 2u);
  EXPECT_EQ(samples(*d, 0, TracePass::forward), (std::vector<double>{5, 5}));
  EXPECT_EQ(samples(*d, 1, TracePass::backward_input), (std::vector<double>{7, 8}));
  EXPECT_TRUE(samples(*d, 0, TracePass::backward).empty());
}

TEST(trace, kineto_object_with_fractional_timestamps) {
  const std::string text = R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 7, "tid": 7,
     "ts": 1700000000000.125, "dur": 12.5},
    {"ph": "X", "cat": "user_annotation", "name": "PP:0B0", "pid": 7, "tid": 7,
     "ts": 1700000000020.750, "dur": 30.25},
    {"ph": "i", "name": "PP:0F0", "ts": 1, "pid": 7, "tid": 7}]})";
  TraceOptions options;
  options.skip_steps = 0;
  std::string error;
  const auto d = read_torch_trace(text, options, error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(samples(*d, 0, TracePass::forward), (std::vector<double>{12.5}));
  EXPECT_EQ(samples(*d, 0, TracePass::backward), (std::vector<double>{30.25}));
}

TEST(trace, a_users_label_with_named_groups_and_profiler_steps) {
  const std::string text = array_of({
      event("ProfilerStep#4", 0, 100), event("ProfilerStep#5", 100, 100),
      event("stage2/fwd", 10, 9), event("stage2/bwd-weight", 20, 4),
      event("stage2/fwd", 110, 3), event("stage2/bwd-weight", 120, 2),
      event("stage(2)/fwd", 130, 99)});
  TraceOptions options;
  options.label = R"(stage(?<stage>\d+)/(?<kind>[a-z-]+))";
  std::string error;
  const auto d = read_torch_trace(text, options, error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(d->steps, 2);
  ASSERT_EQ(d->samples.size(), 3u);
  EXPECT_EQ(samples(*d, 2, TracePass::forward), (std::vector<double>{3}));
  EXPECT_EQ(samples(*d, 2, TracePass::backward_weight), (std::vector<double>{2}));
}

TEST(trace, groups_are_counted_past_classes_escapes_and_non_capturing_groups) {
  const std::string text = array_of({event("x(1)[F]-0", 0, 4)});
  TraceOptions options;
  options.label = R"((?:x)\((?<stage>\d)\)[[](?<kind>[^\]]+)\]-(\d))";
  options.skip_steps = 0;
  std::string error;
  const auto d = read_torch_trace(text, options, error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(samples(*d, 1, TracePass::forward), (std::vector<double>{4}));
}

TEST(trace, refusals_say_what_to_change) {
  std::string error;
  EXPECT_FALSE(read_torch_trace(array_of({event("aten::mm", 0, 1)}), TraceOptions{}, error));
  EXPECT_NE(error.find("record_function"), std::string::npos) << error;
  EXPECT_FALSE(read_torch_trace("{\"traceEvents\": 3}", TraceOptions{}, error));
  EXPECT_NE(error.find("not a Chrome trace"), std::string::npos) << error;
  EXPECT_FALSE(read_torch_trace("[{", TraceOptions{}, error));
  EXPECT_NE(error.find("not JSON: at byte"), std::string::npos) << error;
  EXPECT_FALSE(read_torch_trace(array_of({event("PP:0F0", 0, 1)}), TraceOptions{}, error));
  EXPECT_NE(error.find("holds 1 step and --skip-steps 1 leaves none"), std::string::npos) << error;

  TraceOptions no_kind;
  no_kind.label = R"(PP:(?<stage>\d+))";
  EXPECT_FALSE(read_torch_trace("[]", no_kind, error));
  EXPECT_NE(error.find("(?<kind>"), std::string::npos) << error;

  TraceOptions no_mb;
  no_mb.label = R"(PP:(?<stage>\d+)(?<kind>[FBIW])\d+)";
  EXPECT_FALSE(read_torch_trace(array_of({event("PP:0F0", 0, 1)}), no_mb, error));
  EXPECT_NE(error.find("--skip-steps 0"), std::string::npos) << error;

  TraceOptions bad_kind;
  bad_kind.label = R"(PP:(?<stage>\d+)(?<kind>[A-Z])\d+)";
  bad_kind.skip_steps = 0;
  EXPECT_FALSE(read_torch_trace(array_of({event("PP:0X0", 0, 1)}), bad_kind, error));
  EXPECT_NE(error.find("one of F, B, I, W"), std::string::npos) << error;
}

TEST(trace_costs, v_placement_puts_global_stages_on_their_ranks_and_chunks) {
  // 2 ranks, V: global stages 0 and 3 on rank 0 (chunks 0 and 1), 1 and 2 on rank 1.
  std::vector<std::string> events;
  for (int global = 0; global < 4; ++global) {
    events.push_back(event("PP:" + std::to_string(global) + "F0", global * 10.0, 1 + global));
    events.push_back(event("PP:" + std::to_string(global) + "B0", global * 10.0 + 5, 10));
  }
  api::TraceCostRequest request;
  request.trace.skip_steps = 0;
  request.chunks = 2;
  request.placement = Placement::v;
  std::string error;
  const auto out = api::costs_from_torch_trace(array_of(events), "t.json", request, error);
  ASSERT_TRUE(out) << error;
  const Costs& costs = out->costs;
  EXPECT_EQ(costs.fwd, 2.5);  // the median of 1, 2, 3, 4
  ASSERT_EQ(costs.stages.size(), 2u);
  ASSERT_EQ(costs.stages[0].chunks.size(), 2u);
  EXPECT_EQ(costs.stages[0].chunks[0].fwd, 1);
  EXPECT_EQ(costs.stages[0].chunks[1].fwd, 4);
  EXPECT_EQ(costs.stages[1].chunks[0].fwd, 2);
  EXPECT_EQ(costs.stages[1].chunks[1].fwd, 3);
  EXPECT_EQ(costs.stages[1].fwd, 2.5);
  EXPECT_EQ(costs.stages[1].bwd, 10);
  EXPECT_NE(out->comment.find("fwd, bwd over 1 step (0 skipped)"), std::string::npos) << out->comment;

  request.chunks = 3;
  EXPECT_FALSE(api::costs_from_torch_trace(array_of(events), "t.json", request, error));
  EXPECT_EQ(error, "t.json: the trace names stages 0 to 3, which 3 chunks per rank do not divide into ranks");
}

}  // namespace
}  // namespace pipevm::pytorch
