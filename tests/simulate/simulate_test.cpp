// The simulator's semantics on hand-built programs: bubble formulas, the
// terminal grid, messages with latency, collectives, peak activations, and
// the programs it refuses (deadlock, unmatched, malformed waits).
#include <gtest/gtest.h>

#include "programs.hpp"
#include "simulate.hpp"

namespace pipevm {
namespace {

using testing::gpipe;
using testing::make_program;
using testing::message;
using testing::one_f_one_b;
using testing::op;
using testing::textbook;
using testing::wait;

Simulation run(const Program& program, const Costs& costs) {
  Diagnostics diagnostics;
  auto simulation = simulate(program, costs, diagnostics);
  EXPECT_TRUE(simulation.has_value());
  EXPECT_TRUE(diagnostics.empty());
  return simulation.value_or(Simulation{});
}

// The same costs with every message a rendezvous (the tests of that rule;
// their messages weigh 0 bytes, which `auto` sends eagerly).
Costs rendezvous(Costs costs) {
  costs.transfer = TransferModel::rendezvous;
  return costs;
}

double textbook_bubble(int p, int m) {
  return static_cast<double>(p - 1) / (m + p - 1);
}

TEST(engine, bubble_of_gpipe_and_1f1b_is_the_textbook_formula) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 4, 8, 16}) {
      const double expected = textbook_bubble(p, m);
      EXPECT_NEAR(run(gpipe(p, m), textbook()).bubble_fraction, expected, 0.01 * expected)
          << "gpipe p=" << p << " m=" << m;
      EXPECT_NEAR(run(one_f_one_b(p, m), textbook()).bubble_fraction, expected, 0.01 * expected)
          << "1f1b p=" << p << " m=" << m;
    }
  }
}

TEST(engine, makespan_and_figures_of_gpipe) {
  const Simulation s = run(gpipe(4, 8), textbook());
  EXPECT_DOUBLE_EQ(s.timeline.makespan, (8 + 4 - 1) * 3.0);
  ASSERT_EQ(s.stages.size(), 4u);
  for (const StageFigures& stage : s.stages) {
    EXPECT_DOUBLE_EQ(stage.busy, 8 * 3.0);
    EXPECT_DOUBLE_EQ(stage.idle, 3 * 3.0);
    EXPECT_EQ(stage.peak_activations, 8);
  }
}

TEST(engine, peak_activations_of_1f1b_shrink_along_the_pipeline) {
  const Simulation s = run(one_f_one_b(4, 8), textbook());
  ASSERT_EQ(s.stages.size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(s.stages[static_cast<std::size_t>(stage)].peak_activations, 4 - stage);
  }
}

TEST(engine, grid_of_gpipe_two_stages_two_micro_batches) {
  const Program program = gpipe(2, 2);
  const Simulation s = run(program, textbook());
  EXPECT_EQ(render_grid(program, s.timeline, 18),
            "stage 0 |F0F1......B0BBB1BB|\n"
            "stage 1 |..F0F1B0BBB1BB....|\n"
            "         0         5\n");
}

TEST(engine, grid_fits_the_width_with_round_slots) {
  const Program program = one_f_one_b(4, 8);
  const Simulation s = run(program, textbook());  // makespan 33
  const std::string grid = render_grid(program, s.timeline, 100);
  const std::string first_row = grid.substr(0, grid.find('\n'));
  EXPECT_EQ(first_row.size(), std::string("stage 0 |").size() + 66 + 1);  // slot 0.5
  EXPECT_EQ(nice_step(0.33), 0.5);
  EXPECT_EQ(nice_step(0.1), 0.1);
  EXPECT_EQ(nice_step(3), 5);
  EXPECT_EQ(nice_step(11), 20);
}

TEST(engine, grid_numbers_only_instructions_with_a_micro_batch) {
  Costs costs;
  costs.fwd = 2;
  costs.optimizer = 2;
  const Program program =
      make_program({1, 1, 1, 1}, {{op(Opcode::Fwd, 0), op(Opcode::OptimizerStep)}});
  const std::string grid = render_grid(program, run(program, costs).timeline, 10);
  EXPECT_EQ(grid.substr(0, grid.find('\n')), "stage 0 |F0FFOOOO|");  // slot 0.5
  EXPECT_EQ(format_time(0.5), "0.5");
  EXPECT_EQ(format_time(33), "33");
  EXPECT_EQ(format_time(123456.7), "123457");
  EXPECT_EQ(format_time(1.6e301), "1.6e+301");
}

TEST(engine, messages_cost_latency_and_bytes_over_bandwidth) {
  Costs costs = textbook();
  costs.send = 0.5;
  EXPECT_DOUBLE_EQ(run(gpipe(2, 1), costs).timeline.makespan, 1 + 0.5 + 1 + 2 + 0.5 + 2);
  costs.bandwidth = 100;
  costs.act_bytes = 100;
  costs.grad_bytes = 200;
  EXPECT_DOUBLE_EQ(run(gpipe(2, 1), costs).timeline.makespan, 1 + 1.5 + 1 + 2 + 2.5 + 2);
}

TEST(engine, blocking_receive_waits_then_transfers) {
  Costs costs;
  costs.fwd = 3;
  costs.send = 1;
  costs.transfer = TransferModel::rendezvous;
  const Program program = make_program(
      {2, 1, 1, 1}, {{op(Opcode::Fwd), message(Opcode::Send, MessageKind::act, 0, 1)},
                     {message(Opcode::Recv, MessageKind::act, 0, 0), op(Opcode::Fwd)}});
  const Simulation s = run(program, costs);
  const InstructionTime& recv = s.timeline.times[2];
  EXPECT_DOUBLE_EQ(recv.issued, 0);
  EXPECT_DOUBLE_EQ(recv.started, 3);
  EXPECT_DOUBLE_EQ(recv.ended, 4);
  EXPECT_DOUBLE_EQ(s.timeline.times[1].ended, 4);  // the blocking send returns with it
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 7);
  EXPECT_DOUBLE_EQ(s.ranks[1].communication, 1);
  ASSERT_EQ(s.timeline.flows.size(), 1u);
  EXPECT_EQ(s.timeline.flows[0].send, 1u);
  EXPECT_EQ(s.timeline.flows[0].recv, 2u);
}

TEST(engine, wait_completes_the_oldest_matching_request) {
  Costs costs;
  costs.fwd = 1;
  costs.transfer = TransferModel::rendezvous;  // a send's request waits for its receive
  const Program program = make_program(
      {2, 2, 1, 1}, {{message(Opcode::ISend, MessageKind::act, 0, 1),
                      message(Opcode::ISend, MessageKind::act, 1, 1),
                      wait(WaitDirection::send, MessageKind::act, 1), op(Opcode::Fwd, 0),
                      wait(WaitDirection::send, MessageKind::act, 0)},
                     {op(Opcode::Fwd), op(Opcode::Fwd), op(Opcode::Fwd),
                      message(Opcode::Recv, MessageKind::act, 0, 0),
                      message(Opcode::Recv, MessageKind::act, 1, 0)}});
  const Simulation s = run(program, costs);
  EXPECT_DOUBLE_EQ(s.timeline.times[2].ended, 3);  // Wait send act 1: received at 3
  EXPECT_DOUBLE_EQ(s.timeline.times[3].ended, 4);
  EXPECT_DOUBLE_EQ(s.timeline.times[4].ended, 4);  // act 0 arrived before
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 4);
}

TEST(engine, blocking_sends_towards_each_other_deadlock) {
  const Program program =
      make_program({2, 1, 1, 1}, {{message(Opcode::Send, MessageKind::act, 0, 1),
                                   message(Opcode::Recv, MessageKind::grad, 0, 1)},
                                  {message(Opcode::Send, MessageKind::grad, 0, 0),
                                   message(Opcode::Recv, MessageKind::act, 0, 0)}});
  Diagnostics diagnostics;
  EXPECT_FALSE(simulate(program, rendezvous(textbook()), diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  const Diagnostic& d = diagnostics.all().front();
  EXPECT_EQ(d.kind, DiagnosticKind::Deadlock);
  EXPECT_NE(d.message.find("pipevm check"), std::string::npos);
  ASSERT_EQ(d.notes.size(), 2u);
  EXPECT_NE(d.notes[0].message.find("rank 0 waits at `Send act 0` for rank 1"), std::string::npos)
      << d.notes[0].message;
}

TEST(engine, unmatched_send_and_wrong_peer_are_refused) {
  Diagnostics diagnostics;
  const Program unmatched = make_program(
      {2, 1, 1, 1}, {{message(Opcode::ISend, MessageKind::act, 0, 1), op(Opcode::WaitAll)}, {}});
  EXPECT_FALSE(simulate(unmatched, textbook(), diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::UnmatchedSend);

  diagnostics.clear();
  const Program self =
      make_program({2, 1, 1, 1}, {{message(Opcode::Send, MessageKind::act, 0, 0)}, {}});
  EXPECT_FALSE(simulate(self, textbook(), diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::WrongPeer);
  EXPECT_EQ(diagnostics.all()[0].location.rank, 0);
}

TEST(engine, a_rank_may_message_itself_where_the_lane_turns) {
  Costs costs;
  costs.fwd = 1;
  costs.send = 0.5;
  costs.transfer = TransferModel::rendezvous;
  // One stage, two looped chunks: chunk 0 hands its activation to chunk 1 on the same rank.
  const Program program = make_program(
      {1, 1, 2, 1}, {{op(Opcode::Fwd, 0, 0), message(Opcode::ISend, MessageKind::act, 0, 0),
                      message(Opcode::Recv, MessageKind::act, 0, 0, 1), op(Opcode::Fwd, 0, 1),
                      op(Opcode::WaitAll)}});
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 2.5);
  Program blocking = program;
  blocking.code[1].op = Opcode::Send;
  Diagnostics diagnostics;
  EXPECT_FALSE(simulate(blocking, costs, diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::Deadlock);
}

TEST(engine, wait_without_request_is_refused) {
  Diagnostics diagnostics;
  const Program program =
      make_program({1, 1, 1, 1}, {{wait(WaitDirection::recv, MessageKind::grad, 0)}});
  EXPECT_FALSE(simulate(program, textbook(), diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::WaitWithoutRequest);
}

TEST(engine, all_reduce_starts_when_the_last_replica_arrives) {
  Costs costs;
  costs.fwd = 1;
  costs.allreduce = 3;
  // One stage, two data-parallel replicas: rank 1 arrives one unit late.
  const Program program =
      make_program({1, 2, 1, 2}, {{op(Opcode::Fwd, 0), op(Opcode::AllReduce)},
                                  {op(Opcode::Fwd, 0), op(Opcode::Fwd, 1), op(Opcode::AllReduce)}});
  const Simulation s = run(program, costs);
  EXPECT_DOUBLE_EQ(s.timeline.times[1].started, 2);
  EXPECT_DOUBLE_EQ(s.timeline.times[1].ended, 5);
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 5);
  EXPECT_DOUBLE_EQ(s.ranks[0].busy, 1);
  EXPECT_DOUBLE_EQ(s.ranks[0].communication, 3);
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_DOUBLE_EQ(s.stages[0].busy, 1.5);  // mean of the replicas

  const Program alone = make_program({1, 1, 1, 1}, {{op(Opcode::Fwd, 0), op(Opcode::AllReduce)}});
  EXPECT_DOUBLE_EQ(run(alone, costs).timeline.makespan, 1);  // a group of one exchanges nothing
}

TEST(engine, backward_all_reduce_overlaps_the_reduction) {
  Costs costs;
  costs.fwd = 1;
  costs.bwd = 2;
  costs.allreduce = 1;
  const Program program =
      make_program({1, 1, 1, 2}, {{op(Opcode::Fwd, 0), op(Opcode::BwdAllReduce, 0)},
                                  {op(Opcode::Fwd, 0), op(Opcode::BwdAllReduce, 0)}});
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 3);
  costs.allreduce = 5;
  const Simulation s = run(program, costs);
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 6);
  EXPECT_DOUBLE_EQ(s.ranks[0].busy, 3);
  EXPECT_EQ(s.ranks[0].peak_activations, 1);
}

TEST(engine, collectives_that_do_not_pair_are_refused) {
  Diagnostics diagnostics;
  const Program order =
      make_program({1, 1, 1, 2}, {{op(Opcode::AllReduce)}, {op(Opcode::BwdAllReduce, 0)}});
  EXPECT_FALSE(simulate(order, textbook(), diagnostics).has_value());
  ASSERT_FALSE(diagnostics.empty());
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::CollectiveOrder);

  diagnostics.clear();
  const Program missing = make_program({1, 1, 1, 2}, {{op(Opcode::AllReduce)}, {}});
  EXPECT_FALSE(simulate(missing, textbook(), diagnostics).has_value());
  ASSERT_FALSE(diagnostics.empty());
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::CollectiveMissing);
}

TEST(engine, one_f_one_b_with_blocking_sends_hangs_under_rendezvous) {
  Program program = one_f_one_b(4, 8);
  for (Instruction& in : program.code) {
    if (in.op == Opcode::ISend) in.op = Opcode::Send;
  }
  Diagnostics diagnostics;
  EXPECT_FALSE(simulate(program, rendezvous(textbook()), diagnostics).has_value());
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.all()[0].kind, DiagnosticKind::Deadlock);
}

// Eager: the message leaves with its send and arrives `send` later; a
// receive posted after the arrival takes nothing; the blocking Send returns
// when posted.
TEST(engine, eager_message_leaves_when_sent) {
  Costs costs;
  costs.fwd = 3;
  costs.send = 1;
  costs.transfer = TransferModel::eager;
  const Program program = make_program(
      {2, 1, 1, 1},
      {{op(Opcode::Fwd), message(Opcode::Send, MessageKind::act, 0, 1)},
       {op(Opcode::Fwd), op(Opcode::Fwd), message(Opcode::Recv, MessageKind::act, 0, 0)}});
  const Simulation eager = run(program, costs);
  EXPECT_DOUBLE_EQ(eager.timeline.times[1].ended, 3);  // the Send returns at once
  EXPECT_DOUBLE_EQ(eager.timeline.times[4].issued, 6);
  EXPECT_DOUBLE_EQ(eager.timeline.times[4].ended, 6);  // arrived at 4
  costs.transfer = TransferModel::rendezvous;
  const Simulation rendezvous = run(program, costs);
  EXPECT_DOUBLE_EQ(rendezvous.timeline.times[1].ended, 7);  // waits for the receive
  EXPECT_DOUBLE_EQ(rendezvous.timeline.times[4].ended, 7);
}

TEST(engine, eager_sends_towards_each_other_finish) {
  const Program program =
      make_program({2, 1, 1, 1}, {{message(Opcode::Send, MessageKind::act, 0, 1),
                                   message(Opcode::Recv, MessageKind::grad, 0, 1)},
                                  {message(Opcode::Send, MessageKind::grad, 0, 0),
                                   message(Opcode::Recv, MessageKind::act, 0, 0)}});
  Costs costs = textbook();
  costs.send = 0.5;
  costs.transfer = TransferModel::eager;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 0.5);
}

// auto: eager up to the eager limit of the link's class, by the message's bytes.
TEST(engine, auto_is_eager_up_to_the_limit) {
  Costs costs;
  costs.fwd = 3;
  costs.send = 1;
  const Program program = make_program(
      {2, 1, 1, 1},
      {{op(Opcode::Fwd), message(Opcode::Send, MessageKind::act, 0, 1)},
       {op(Opcode::Fwd), op(Opcode::Fwd), message(Opcode::Recv, MessageKind::act, 0, 0)}});
  costs.act_bytes = kSameHostEagerLimit;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.times[1].ended, 3);
  costs.act_bytes = kSameHostEagerLimit + 1;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.times[1].ended, 7);
  costs.eager_limit = kSameHostEagerLimit + 1;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.times[1].ended, 3);
}

// Rank 1 posts the receive of activation 1 before that of activation 0. In
// posted order the second waits for the first, so the forward of 0 waits
// for activation 1 (sent at 2, arrived 2.5) instead of 0 (arrived 1.5).
Program early_receive() {
  return make_program(
      {2, 2, 1, 1},
      {{op(Opcode::Fwd, 0), message(Opcode::ISend, MessageKind::act, 0, 1), op(Opcode::Fwd, 1),
        message(Opcode::ISend, MessageKind::act, 1, 1), op(Opcode::WaitAll)},
       {message(Opcode::IRecv, MessageKind::act, 1, 0),
        message(Opcode::IRecv, MessageKind::act, 0, 0),
        wait(WaitDirection::recv, MessageKind::act, 0), op(Opcode::Fwd, 0),
        wait(WaitDirection::recv, MessageKind::act, 1), op(Opcode::Fwd, 1)}});
}

TEST(engine, posted_order_holds_what_follows_an_early_receive) {
  Costs costs;
  costs.fwd = 1;
  costs.send = 0.5;
  costs.transfer = TransferModel::eager;
  const Program program = early_receive();
  const Simulation independent = run(program, costs);
  EXPECT_DOUBLE_EQ(independent.timeline.makespan, 3.5);
  EXPECT_TRUE(independent.timeline.holds.empty());
  Diagnostics diagnostics;
  const auto posted = simulate(program, costs, diagnostics, {}, SimulateOptions{true});
  ASSERT_TRUE(posted.has_value());
  EXPECT_DOUBLE_EQ(posted->timeline.makespan, 4.5);
  ASSERT_EQ(posted->timeline.holds.size(), 1u);
  const Hold& hold = posted->timeline.holds[0];
  EXPECT_EQ(hold.blocker, 5u);  // IRecv act 1
  EXPECT_EQ(hold.held, 6u);     // IRecv act 0
  EXPECT_DOUBLE_EQ(hold.begin, 0);
  EXPECT_DOUBLE_EQ(hold.end, 2.5);
  // Rank 1 waits behind its receive from 0 to 2.5: `#`, then its forwards.
  EXPECT_EQ(render_grid(program, posted->timeline, 9),
            "stage 0 |F0F1.....|\nstage 1 |#####F0F1|\n"
            "         0\n");
}

// Under rendezvous rank 0's first send waits for rank 1's receive of 0,
// which waits behind the receive of 1, whose send waits behind the first:
// stuck, as `pipevm check --p2p-order posted` reports (a buffering hazard
// there: it finishes only if the sends are buffered).
TEST(engine, posted_order_hangs_with_rendezvous_sends) {
  Costs costs = textbook();
  costs.transfer = TransferModel::rendezvous;
  Diagnostics diagnostics;
  EXPECT_FALSE(simulate(early_receive(), costs, diagnostics, {}, SimulateOptions{true}));
  ASSERT_EQ(diagnostics.size(), 1u);
  const Diagnostic& d = diagnostics.all().front();
  EXPECT_EQ(d.kind, DiagnosticKind::Deadlock);
  EXPECT_NE(d.message.find("in the order posted"), std::string::npos) << d.message;
  ASSERT_FALSE(d.notes.empty());
  EXPECT_NE(d.notes.back().message.find("behind `IRecv act 1`"), std::string::npos)
      << d.notes.back().message;
}

TEST(engine, activations_without_a_backward_stay_to_the_end) {
  Program program = make_program({1, 2, 1, 1}, {{op(Opcode::Fwd, 0), op(Opcode::Fwd, 1)}});
  EXPECT_EQ(peak_activations(program), std::vector<int>{2});
}

TEST(engine, split_backward_frees_activations_at_the_weight_gradient) {
  const Program program = make_program(
      {1, 2, 1, 1}, {{op(Opcode::Fwd, 0), op(Opcode::Fwd, 1), op(Opcode::BwdInput, 0),
                      op(Opcode::BwdInput, 1), op(Opcode::BwdWeight, 0), op(Opcode::Fwd, 0, 1),
                      op(Opcode::BwdWeight, 1), op(Opcode::Bwd, 0, 1)}});
  EXPECT_EQ(peak_activations(program), std::vector<int>{2});
  Costs costs;
  costs.fwd = 1;
  costs.bwd_input = 2;
  costs.bwd_weight = 3;
  const Simulation s = run(program, costs);
  EXPECT_DOUBLE_EQ(s.timeline.makespan, 3 * 1 + 2 * 2 + 2 * 3 + 5);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 0);
}

// A pipeline goes at the pace of its slowest stage: with stage 1's forward
// and backward twice stage 0's, GPipe's steady state is stage 1's.
TEST(engine, compute_per_stage_paces_the_pipeline) {
  Costs costs = textbook();  // F = 1, B = 2 for every stage
  EXPECT_DOUBLE_EQ(run(gpipe(2, 4), costs).timeline.makespan, (4 + 1) * 3);
  Costs slow = textbook();
  slow.fwd = 2;
  slow.bwd = 4;
  costs.stages = {textbook(), slow};
  // Stage 0's first forward, then stage 1's 4 forwards and 4 backwards,
  // then stage 0's last backward.
  EXPECT_DOUBLE_EQ(run(gpipe(2, 4), costs).timeline.makespan, 1 + 4 * (2 + 4) + 2);
}

// A rank of two chunks of different widths: each instruction takes its
// chunk's cost; a chunk without an entry, its stage's.
TEST(engine, compute_per_chunk_times_each_chunk) {
  const Program program =
      make_program({1, 1, 2, 1}, {{op(Opcode::Fwd, 0, 0), op(Opcode::Fwd, 0, 1),
                                   op(Opcode::Bwd, 0, 1), op(Opcode::Bwd, 0, 0)}});
  Costs costs = textbook();
  costs.stages = {textbook()};
  costs.stages[0].fwd = 2;
  costs.stages[0].bwd = 4;
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 2 + 2 + 4 + 4);
  Costs wide = costs.stages[0];
  wide.fwd = 3;
  wide.bwd = 5;
  costs.stages[0].chunks = {wide};  // chunk 1: no entry
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 3 + 2 + 4 + 5);
  Costs narrow = costs.stages[0];
  narrow.fwd = 1;
  narrow.bwd = 2;
  costs.stages[0].chunks.push_back(narrow);
  EXPECT_DOUBLE_EQ(run(program, costs).timeline.makespan, 3 + 1 + 2 + 5);
}

TEST(engine, large_pipelines_simulate_in_linear_time) {
  const Program program = one_f_one_b(64, 512);
  const Simulation s = run(program, textbook());
  EXPECT_NEAR(s.bubble_fraction, textbook_bubble(64, 512), 1e-9);
}

}  // namespace
}  // namespace pipevm
