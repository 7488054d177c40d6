// The shipped schedules (schedules/*.pipe, found at test time) against their
// published bubble formulas, and the simulator's memory figures against the
// checker's. A schedule that is not shipped yet is skipped, not failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "check.hpp"
#include "compile.hpp"
#include "programs.hpp"
#include "simulate.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

fs::path schedule_path(const std::string& name) {
  return fs::path(PIPEVM_SOURCE_DIR) / "schedules" / (name + ".pipe");
}

bool shipped(const std::string& name) {
  return fs::exists(schedule_path(name));
}

// Null when the schedule's `require` rejects the configuration; fails the
// test on any other error.
std::optional<Program> compile_schedule(const std::string& name, Config config) {
  Diagnostics diagnostics;
  const auto file = read_source(schedule_path(name).string(), diagnostics);
  if (!file) {
    ADD_FAILURE() << "cannot read " << name;
    return std::nullopt;
  }
  auto program = compile(file, config, diagnostics);
  if (!program) {
    for (const Diagnostic& d : diagnostics.all()) {
      EXPECT_EQ(d.kind, DiagnosticKind::RequireFailed) << name << ": " << d.message;
    }
  }
  return program;
}

Simulation simulate_ok(const Program& program, const Costs& costs) {
  Diagnostics diagnostics;
  auto simulation = simulate(program, costs, diagnostics);
  EXPECT_TRUE(simulation.has_value())
      << program.name << ": " << (diagnostics.empty() ? "" : diagnostics.all()[0].message);
  return simulation.value_or(Simulation{});
}

// Idle time of the busiest-idle rank: the pipeline bubble in time units.
double bubble_time(const Simulation& s) {
  double idle = 0;
  for (const RankFigures& r : s.ranks) idle = std::max(idle, r.idle);
  return idle;
}

Costs costs_of(std::initializer_list<std::pair<const char*, double>> keys) {
  Costs costs;
  std::string error;
  for (const auto& [key, value] : keys) EXPECT_TRUE(set_cost(costs, key, value, error)) << error;
  return costs;
}

TEST(schedules, gpipe_and_1f1b_match_the_textbook_bubble) {
  for (const std::string name : {"gpipe", "1f1b"}) {
    if (!shipped(name)) continue;
    for (int p : {2, 4, 8}) {
      for (int m : {1, 4, 8, 16}) {
        const auto program = compile_schedule(name, {p, m, 1, 1});
        if (!program) continue;
        const double expected = static_cast<double>(p - 1) / (m + p - 1);
        const Simulation s = simulate_ok(*program, testing::textbook());
        EXPECT_NEAR(s.bubble_fraction, expected, 0.01 * expected)
            << name << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(schedules, naive_keeps_one_stage_busy_at_a_time) {
  if (!shipped("naive")) GTEST_SKIP() << "schedules/naive.pipe is not shipped";
  for (int p : {2, 4, 8}) {
    const auto program = compile_schedule("naive", {p, 4, 1, 1});
    ASSERT_TRUE(program.has_value());
    const double expected = static_cast<double>(p - 1) / p;
    EXPECT_NEAR(simulate_ok(*program, testing::textbook()).bubble_fraction, expected,
                0.01 * expected);
  }
}

TEST(schedules, grid_of_gpipe_two_stages_two_micro_batches) {
  if (!shipped("gpipe")) GTEST_SKIP() << "schedules/gpipe.pipe is not shipped";
  const auto program = compile_schedule("gpipe", {2, 2, 1, 1});
  ASSERT_TRUE(program.has_value());
  const Simulation s = simulate_ok(*program, testing::textbook());
  EXPECT_EQ(render_grid(*program, s.timeline, 18),
            "stage 0 |F0F1......B0BBB1BB|\n"
            "stage 1 |..F0F1B0BBB1BB....|\n"
            "         0         5\n");
}

// Megatron's interleaved 1F1B: with per-chunk costs F = 1, B = 2 the bubble
// is (p-1)(F+B) against an ideal v*m*(F+B): it shrinks by the factor v.
TEST(schedules, interleaved_bubble_shrinks_by_the_chunks) {
  if (!shipped("interleaved-1f1b"))
    GTEST_SKIP() << "schedules/interleaved-1f1b.pipe is not shipped";
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {8, 16}) {
        const auto program = compile_schedule("interleaved-1f1b", {p, m, v, 1});
        if (!program) continue;
        const double expected = static_cast<double>(p - 1) / (v * m + p - 1);
        EXPECT_NEAR(simulate_ok(*program, testing::textbook()).bubble_fraction, expected,
                    0.01 * expected)
            << "p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

// Interleaved 1F1B at m = p warms up as Megatron does (all_warmup_
// microbatches: every forward first): the same time as the general
// warm-up, every stage holding all v*m chunk activations.
TEST(schedules, interleaved_at_m_equal_p_runs_every_forward_first) {
  if (!shipped("interleaved-1f1b"))
    GTEST_SKIP() << "schedules/interleaved-1f1b.pipe is not shipped";
  const auto program = compile_schedule("interleaved-1f1b", {4, 4, 2, 1});
  ASSERT_TRUE(program);
  const Simulation s = simulate_ok(*program, costs_of({{"fwd", 1}, {"bwd", 2}}));
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 33);
  for (const StageFigures& stage : s.stages) EXPECT_EQ(stage.peak_activations, 8) << stage.stage;
  const auto more = compile_schedule("interleaved-1f1b", {4, 8, 2, 1});
  ASSERT_TRUE(more);
  std::vector<int> peaks;
  for (const StageFigures& stage : simulate_ok(*more, default_costs()).stages) {
    peaks.push_back(stage.peak_activations);
  }
  EXPECT_EQ(peaks, (std::vector<int>{11, 9, 7, 5}));  // m > p: unchanged
}

// ZB-H1 (Qi et al., 2024) with F = B = W = 1: a bubble of (p-1)(F+B-W),
// a third of 1F1B's (p-1)(F+B+W).
TEST(schedules, zb_h1_bubble_is_a_third_of_1f1b) {
  if (!shipped("zb-h1")) GTEST_SKIP() << "schedules/zb-h1.pipe is not shipped";
  const Costs costs = costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}});
  for (int p : {2, 4, 8}) {
    for (int m : {8, 16}) {
      const auto program = compile_schedule("zb-h1", {p, m, 1, 1});
      if (!program) continue;
      const double bubble = bubble_time(simulate_ok(*program, costs));
      EXPECT_NEAR(bubble, p - 1.0, 0.01 * (p - 1)) << "p=" << p << " m=" << m;
      if (const auto baseline = compile_schedule("1f1b", {p, m, 1, 1})) {
        EXPECT_NEAR(bubble / bubble_time(simulate_ok(*baseline, costs)), 1.0 / 3, 0.01)
            << "p=" << p << " m=" << m;
      }
    }
  }
}

// The Zero Bubble paper's bubble (Qi et al., ICLR 2024, Sec. 5.3): each
// stage's time from its first forward's start to its last pass's end, the
// longest of them less the work of a stage. Steps run back to back there,
// so the wait of stage s for its first input (s forwards) is not counted.
double span_bubble(const Program& program, const Simulation& s, double work) {
  double longest = 0;
  for (int rank = 0; rank < program.ranks(); ++rank) {
    double first = s.timeline.makespan;
    double last = 0;
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(rank)];
         i < program.rank_begin[static_cast<std::size_t>(rank) + 1]; ++i) {
      const Activity a = activity_of(program.code[i].op);
      if (a != Activity::forward && a != Activity::backward_input &&
          a != Activity::backward_weight) {
        continue;
      }
      first = std::min(first, s.timeline.times[i].started);
      last = std::max(last, s.timeline.times[i].ended);
    }
    longest = std::max(longest, last - first);
  }
  return longest - work;
}

// ZB-H2 (Qi et al., ICLR 2024, Table 2): bubble (p-1)(F+B'-2W), B' the
// input part of the backward (the header's (p-1)(F+B-3W), B whole), with
// free messages, for every m >= 2p-1 (the whole warm-up fits) and any F,
// B', W: exact whatever F and B' are, and zero once the weight passes
// outgrow the gaps (2W >= F+B'). One step from time 0 (pipevm's makespan)
// still carries the last stage's wait for its first input, (p-1)F, where
// that is the larger.
TEST(schedules, zb_h2_bubble_is_the_papers) {
  if (!shipped("zb-h2")) GTEST_SKIP() << "schedules/zb-h2.pipe is not shipped";
  struct Point {
    double f, i, w;
  };
  for (const Point c : {Point{1, 1, 1}, Point{2, 1, 1}, Point{1, 2, 1}, Point{1, 1, 0.5},
                        Point{18.522, 18.086, 9.337}, Point{3, 2, 1}, Point{1, 1, 2}}) {
    const Costs costs = costs_of({{"fwd", c.f}, {"bwd-input", c.i}, {"bwd-weight", c.w}});
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {2 * p - 1, 2 * p, 3 * p + 1, 24}) {
        const auto program = compile_schedule("zb-h2", {p, m, 1, 1});
        ASSERT_TRUE(program);
        const Simulation s = simulate_ok(*program, costs);
        const double formula = std::max(0.0, (p - 1) * (c.f + c.i - 2 * c.w));
        EXPECT_NEAR(span_bubble(*program, s, m * (c.f + c.i + c.w)), formula, 1e-9)
            << "p=" << p << " m=" << m << " F=" << c.f << " B'=" << c.i << " W=" << c.w;
        EXPECT_NEAR(s.timeline.makespan, m * (c.f + c.i + c.w) + std::max((p - 1) * c.f, formula),
                    1e-9)
            << "p=" << p << " m=" << m << " F=" << c.f << " B'=" << c.i << " W=" << c.w;
      }
    }
  }
}

// ZB-H1 in the same measure, (p-1)(F+B'-W): ZB-H2 saves (p-1)W of it.
TEST(schedules, zb_h2_saves_a_weight_pass_per_stage_over_zb_h1) {
  if (!shipped("zb-h2") || !shipped("zb-h1")) GTEST_SKIP() << "zb-h1 or zb-h2 is not shipped";
  const Costs costs = costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}});
  for (int p : {2, 4, 8}) {
    const int m = 2 * p;
    const auto h1 = compile_schedule("zb-h1", {p, m, 1, 1});
    const auto h2 = compile_schedule("zb-h2", {p, m, 1, 1});
    ASSERT_TRUE(h1 && h2);
    const double work = 3.0 * m;
    EXPECT_DOUBLE_EQ(span_bubble(*h1, simulate_ok(*h1, costs), work), p - 1.0) << "p=" << p;
    EXPECT_DOUBLE_EQ(span_bubble(*h2, simulate_ok(*h2, costs), work), 0) << "p=" << p;
  }
}

// DualPipe (DeepSeek-V3 report) and DualPipeV (DeepSeek's DualPipe
// repository): bubble (p/2-1)(F&B + B - 3W) and (p-1)(F&B + B - 3W), B a
// full backward, F&B an overlapped forward+backward (FwdBwd, the fwd-bwd
// key). With F = I = W the largest idle of a stage equals the formula
// exactly, whatever F&B costs (stages nearer the ends may idle less when
// F&B < F + B); docs/schedules.md shows the other ratios, where the
// formula is not exact.
TEST(schedules, dualpipe_and_dualpipev_idle_equals_the_published_bubble) {
  for (const std::string name : {"dualpipe", "dualpipev"}) {
    if (!shipped(name)) continue;
    for (const double overlapped : {3.0, 2.5, 2.0}) {
      const Costs costs =
          costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}, {"fwd-bwd", overlapped}});
      for (int p : {2, 4, 6, 8}) {
        for (int m : {2 * p, 2 * p + 4, 20}) {
          const auto program = compile_schedule(name, {p, m, 2, 1});
          if (!program) continue;
          const double factor = name == "dualpipe" ? p / 2 - 1 : p - 1;
          const double formula = factor * (overlapped + 2 - 3);
          EXPECT_DOUBLE_EQ(bubble_time(simulate_ok(*program, costs)), formula)
              << name << " p=" << p << " m=" << m << " F&B=" << overlapped;
        }
      }
    }
  }
}

// Interleaved zero bubble against the Zero Bubble paper's ZB-1p figure
// (DeepSeek's table: ZB1P), (p-1)(F+B-2W) in chunk costs, B the whole
// backward: exact at F = I = W (p-1, a third of 1F1B's) and at F = 2;
// where W > I the formula drops below what any order reaches
// (docs/schedules.md).
TEST(schedules, interleaved_zb_idle_equals_zb1p) {
  struct Point {
    double f, i, w;
  };
  for (const std::string name : {"interleaved-zb"}) {
    for (const Point c : {Point{1, 1, 1}, Point{2, 1, 1}, Point{2, 2, 2}}) {
      const Costs costs = costs_of({{"fwd", c.f}, {"bwd-input", c.i}, {"bwd-weight", c.w}});
      for (int p : {2, 4, 8}) {
        for (int m : {2 * p, 3 * p, 24}) {
          const auto program = compile_schedule(name, {p, m, 2, 1});
          if (!program) continue;
          const double formula = (p - 1) * (c.f + c.i + c.w - 2 * c.w);
          EXPECT_DOUBLE_EQ(bubble_time(simulate_ok(*program, costs)), formula)
              << name << " p=" << p << " m=" << m << " F=" << c.f << " I=" << c.i;
        }
      }
    }
  }
}

// ZB-V (V-ZB of the controllable-memory paper): no bubble by the Zero
// Bubble paper's rate (every stage busy from its first forward to its last
// pass) at equal chunk costs, for every m >= 2p.
TEST(schedules, zb_v_has_no_bubble_at_equal_costs) {
  for (const double cost : {1.0, 2.0}) {
    const Costs costs = costs_of({{"fwd", cost}, {"bwd-input", cost}, {"bwd-weight", cost}});
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {2 * p, 2 * p + 1, 3 * p, 24}) {
        const auto program = compile_schedule("zb-v", {p, m, 2, 1});
        ASSERT_TRUE(program) << "p=" << p << " m=" << m;
        EXPECT_EQ(simulate_ok(*program, costs).bubble_rate_zb, 0) << "p=" << p << " m=" << m;
      }
    }
  }
}

// The turn of a V sends nothing: on one stage every hand-over is a turn,
// so a message's cost changes nothing; on four, the last stage's two
// chunks hand each other their values with no point-to-point instruction.
TEST(schedules, v_turn_costs_no_message) {
  const Costs free = costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}});
  const Costs slow = costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}, {"send", 10}});
  for (const std::string name : {"zb-v", "v-half", "v-min", "dualpipev"}) {
    const auto one = compile_schedule(name, {1, 4, 2, 1});
    ASSERT_TRUE(one) << name;
    EXPECT_EQ(simulate_ok(*one, slow).timeline.makespan, simulate_ok(*one, free).timeline.makespan)
        << name;
    const auto four = compile_schedule(name, {4, 8, 2, 1});
    ASSERT_TRUE(four) << name;
    const std::span<const Instruction> last = four->rank(3);
    EXPECT_TRUE(std::none_of(last.begin(), last.end(), [](const Instruction& in) {
      return info(in.op).cls == OpClass::p2p && in.peer == 3;
    })) << name << ": stage 3 sends itself a message";
  }
}

// Looped BFS: GPipe's bubble in chunk costs, (p-1)(F+B), when m >= p; with
// fewer micro-batches than stages each of the v-1 chunk changes waits
// (p-m)(F+B) more.
TEST(schedules, looped_bfs_idle_is_gpipes_in_chunk_costs) {
  if (!shipped("looped-bfs")) GTEST_SKIP() << "schedules/looped-bfs.pipe is not shipped";
  const Costs costs = costs_of({{"fwd", 1}, {"bwd", 2}});
  for (int v : {2, 3}) {
    for (int p : {2, 4, 8}) {
      for (int m : {1, 3, p, 2 * p + 1}) {
        const auto program = compile_schedule("looped-bfs", {p, m, v, 1});
        ASSERT_TRUE(program);
        const double formula = (p - 1) * 3.0 + (v - 1) * std::max(0, p - m) * 3.0;
        EXPECT_DOUBLE_EQ(bubble_time(simulate_ok(*program, costs)), formula)
            << "p=" << p << " m=" << m << " v=" << v;
      }
    }
  }
}

// The mirror sum is an instruction, so it has a time: with an all-reduce
// cost, every rank spends it in `AllReduce over mirror`, after its last
// backward and before its step, and the makespan grows by it.
TEST(schedules, dualpipe_mirror_sum_takes_its_time) {
  if (!shipped("dualpipe")) GTEST_SKIP() << "schedules/dualpipe.pipe is not shipped";
  const auto program = compile_schedule("dualpipe", {4, 8, 2, 1});
  ASSERT_TRUE(program);
  const Costs free = costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}});
  const Costs priced =
      costs_of({{"fwd", 1}, {"bwd-input", 1}, {"bwd-weight", 1}, {"allreduce", 5}});
  const Simulation cheap = simulate_ok(*program, free);
  const Simulation dear = simulate_ok(*program, priced);
  EXPECT_DOUBLE_EQ(dear.timeline.makespan, cheap.timeline.makespan + 5);
  int sums = 0;
  for (std::size_t i = 0; i < program->code.size(); ++i) {
    const Instruction& in = program->code[i];
    if (in.op != Opcode::AllReduce || group_of(in) != Group::mirror) continue;
    ++sums;
    const InstructionTime& t = dear.timeline.times[i];
    EXPECT_DOUBLE_EQ(t.ended - t.started, 5) << "instruction " << i;
    EXPECT_EQ(activity_of(in.op), Activity::communication);
  }
  EXPECT_EQ(sums, 4);  // one per rank
}

// Every shipped schedule that the checker accepts simulates to its end, and
// both count the same peak of stashed activations per stage.
TEST(schedules, every_checked_schedule_simulates_with_the_checkers_memory) {
  std::size_t simulated = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(PIPEVM_SOURCE_DIR) / "schedules")) {
    if (entry.path().extension() != ".pipe") continue;
    const std::string name = entry.path().stem().string();
    for (const Config config : {Config{4, 8, 1, 1}, Config{4, 8, 2, 1}, Config{2, 4, 1, 2}}) {
      Diagnostics diagnostics;
      const auto file = read_source(entry.path().string(), diagnostics);
      ASSERT_TRUE(file) << name;
      const auto program = compile(file, config, diagnostics);
      if (!program) continue;
      const CheckResult checked = check(*program);
      if (!checked.ok()) continue;
      const Simulation s = simulate_ok(*program, default_costs());
      ASSERT_EQ(s.stages.size(), checked.memory.size()) << name;
      for (std::size_t stage = 0; stage < s.stages.size(); ++stage) {
        EXPECT_EQ(s.stages[stage].peak_activations, checked.memory[stage].peak_activations)
            << name << " stage " << stage << " chunks " << config.chunks << " dp " << config.dp;
      }
      ++simulated;
    }
  }
  EXPECT_GT(simulated, 0u);
}

// Posted order agrees with `check --p2p-order posted` on every shipped
// schedule: with eager sends (NCCL buffering them) the simulation runs to
// its end unless the checker finds a deadlock under any buffering (PV2001);
// with rendezvous sends it runs only where the checker finds nothing.
TEST(schedules, posted_order_agrees_with_the_checker) {
  CheckOptions posted_order;
  posted_order.p2p_posted_order = true;
  std::size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(PIPEVM_SOURCE_DIR) / "schedules")) {
    if (entry.path().extension() != ".pipe") continue;
    const std::string name = entry.path().stem().string();
    for (const Config config : {Config{4, 8, 1, 1}, Config{4, 8, 2, 1}}) {
      Diagnostics diagnostics;
      const auto file = read_source(entry.path().string(), diagnostics);
      ASSERT_TRUE(file) << name;
      const auto program = compile(file, config, diagnostics);
      if (!program || !check(*program).ok()) continue;
      const CheckResult checked = check(*program, posted_order);
      const bool deadlock =
          std::any_of(checked.diagnostics.begin(), checked.diagnostics.end(),
                      [](const Diagnostic& d) { return d.kind == DiagnosticKind::Deadlock; });
      for (const TransferModel transfer : {TransferModel::eager, TransferModel::rendezvous}) {
        Costs costs = default_costs();
        costs.transfer = transfer;
        Diagnostics refused;
        const bool runs = simulate(*program, costs, refused, {}, SimulateOptions{true}).has_value();
        const bool expected = transfer == TransferModel::eager ? !deadlock : checked.ok();
        EXPECT_EQ(runs, expected) << name << " chunks " << config.chunks << " transfer "
                                  << pipevm::name(transfer);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace pipevm
