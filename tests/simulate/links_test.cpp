// The link model (interpreter/simulate/links.hpp) on hand-built programs: messages
// cost latency + bytes / bandwidth of their link class with bytes from the
// model's shapes, all-reduces run a ring, and the traffic per class.
#include <gtest/gtest.h>

#include "links.hpp"
#include "programs.hpp"
#include "simulate.hpp"

namespace pipevm {
namespace {

using testing::gpipe;
using testing::make_program;
using testing::op;
using testing::textbook;

// Two layers, 10 -> 20 -> 5: cut into two pieces at the 20-wide boundary;
// 220 + 105 = 325 parameters (1,300 bytes).
const std::vector<int> kWidths = {10, 20, 5};

double makespan(const Program& program, const Costs& costs, const Network& network) {
  Diagnostics diagnostics;
  const auto simulation = simulate(program, costs, diagnostics, network);
  EXPECT_TRUE(simulation.has_value());
  EXPECT_TRUE(diagnostics.empty());
  return simulation ? simulation->timeline.makespan : -1;
}

Costs two_classes() {
  Costs costs = textbook();  // F = 1, B = 2
  costs.send = 0.5;
  costs.bandwidth = 160;
  costs.cross_host_send = 1;
  costs.cross_host_bandwidth = 80;
  return costs;
}

TEST(links, a_message_costs_its_link_class_latency_and_model_bytes) {
  // Micro-batch rows 2: one activation or gradient is 20 x 2 x 4 = 160 bytes.
  const Program program = gpipe(2, 1);
  Network network{{}, kWidths, 2, {}, {}};
  // One host: 0.5 + 160 / 160 = 1.5 per message, F + message + F + B + message + B.
  EXPECT_DOUBLE_EQ(makespan(program, two_classes(), network), 1 + 1.5 + 1 + 2 + 1.5 + 2);
  network.host_of_rank = {0, 0};
  EXPECT_DOUBLE_EQ(makespan(program, two_classes(), network), 1 + 1.5 + 1 + 2 + 1.5 + 2);
  // Across hosts: 1 + 160 / 80 = 3.
  network.host_of_rank = {0, 1};
  EXPECT_DOUBLE_EQ(makespan(program, two_classes(), network), 1 + 3 + 1 + 2 + 3 + 2);
  // Rows need not divide: 2.5 rows, 200 bytes, 1 + 2.5.
  network.micro_batch_rows = 2.5;
  EXPECT_DOUBLE_EQ(makespan(program, two_classes(), network), 1 + 3.5 + 1 + 2 + 3.5 + 2);
}

TEST(links, given_message_sizes_override_the_model) {
  Costs costs = two_classes();
  costs.act_bytes = 80;    // 1 + 1
  costs.grad_bytes = 400;  // 1 + 5
  const Network network{{0, 1}, kWidths, 2, {}, {}};
  EXPECT_DOUBLE_EQ(makespan(gpipe(2, 1), costs, network), 1 + 2 + 1 + 2 + 6 + 2);
  // Without a model and without sizes, a message is its latency alone.
  EXPECT_DOUBLE_EQ(makespan(gpipe(2, 1), two_classes(), Network{{0, 1}, {}, 0, {}, {}}),
                   1 + 1 + 1 + 2 + 1 + 2);
}

// One stage, `dp` replicas: each runs Fwd then AllReduce over the dp group.
Program replicas(int dp) {
  std::vector<std::vector<Instruction>> streams(static_cast<std::size_t>(dp),
                                                {op(Opcode::Fwd, 0), op(Opcode::AllReduce)});
  return make_program({1, 1, 1, dp}, streams);
}

TEST(links, an_all_reduce_is_a_ring_of_2_n_minus_1_steps_of_bytes_over_n) {
  Costs costs = two_classes();
  costs.cross_host_bandwidth = 65;
  // 4 replicas, 1,300 bytes: 6 steps of 325 bytes. Across hosts each step
  // is 1 + 325 / 65 = 6: 36 after the forward.
  EXPECT_DOUBLE_EQ(makespan(replicas(4), costs, {{0, 0, 1, 1}, kWidths, 2, {}, {}}), 1 + 36);
  // All on one host: 6 x (0.5 + 325 / 160).
  EXPECT_DOUBLE_EQ(makespan(replicas(4), costs, {{0, 0, 0, 0}, kWidths, 2, {}, {}}),
                   1 + 6 * (0.5 + 325.0 / 160));
  // Two replicas on two hosts: 2 steps of 650 bytes, 2 x (1 + 10); the
  // bytes per link are 2(n-1)/n = 1 times the gradients.
  EXPECT_DOUBLE_EQ(makespan(replicas(2), costs, {{0, 1}, kWidths, 2, {}, {}}), 1 + 22);
  // The fixed `allreduce` (the arithmetic) is added to the ring.
  costs.allreduce = 3;
  EXPECT_DOUBLE_EQ(makespan(replicas(2), costs, {{0, 1}, kWidths, 2, {}, {}}), 1 + 3 + 22);
  // A group of one exchanges nothing.
  EXPECT_DOUBLE_EQ(makespan(replicas(1), costs, {{0}, kWidths, 2, {}, {}}), 1);
}

TEST(links, a_bwd_all_reduce_reduces_its_chunk_and_an_all_reduce_every_chunk) {
  // One stage, two chunks (looped: pieces 0 and 1), two replicas.
  const std::vector<Instruction> stream = {op(Opcode::BwdAllReduce, 0, 1), op(Opcode::AllReduce)};
  const Program program = make_program({1, 1, 2, 2}, {stream, stream});
  const Link linked = link(program);
  const Network network{{0, 1}, kWidths, 2, {}, {}};
  const Costs costs = two_classes();
  const LinkCosts links(program, linked, costs, network);
  EXPECT_DOUBLE_EQ(links.collective_bytes(0), 105 * 4);  // chunk 1: the 20 -> 5 layer
  EXPECT_DOUBLE_EQ(links.collective_bytes(1), 325 * 4);  // both pieces
  EXPECT_EQ(links.slot_class(linked.to[0]), LinkClass::across_hosts);
  // BwdAllReduce: its backward (2) overlaps the ring, 2 x (1 + 210 / 80).
  EXPECT_DOUBLE_EQ(links.reduction(linked.to[0]), 2 * (1 + 210.0 / 80));
  EXPECT_DOUBLE_EQ(links.reduction(linked.to[1]), 2 * (1 + 650.0 / 80));
}

TEST(links, traffic_counts_what_crosses_hosts) {
  const Program program = gpipe(2, 2);
  const Link linked = link(program);
  const Costs costs = two_classes();
  Network network{{0, 1}, kWidths, 2, {}, {}};
  LinkTraffic traffic = link_traffic(program, linked, LinkCosts(program, linked, costs, network));
  EXPECT_EQ(traffic.messages[static_cast<int>(LinkClass::across_hosts)], 4);
  EXPECT_EQ(traffic.messages[static_cast<int>(LinkClass::same_host)], 0);
  EXPECT_DOUBLE_EQ(traffic.message_bytes[static_cast<int>(LinkClass::across_hosts)], 4 * 160);
  network.host_of_rank = {3, 3};
  traffic = link_traffic(program, linked, LinkCosts(program, linked, costs, network));
  EXPECT_EQ(traffic.messages[static_cast<int>(LinkClass::same_host)], 4);
  EXPECT_EQ(traffic.messages[static_cast<int>(LinkClass::across_hosts)], 0);

  const Program dp = replicas(4);
  const Link dp_linked = link(dp);
  network.host_of_rank = {0, 0, 1, 1};
  traffic = link_traffic(dp, dp_linked, LinkCosts(dp, dp_linked, costs, network));
  EXPECT_EQ(traffic.collectives[static_cast<int>(LinkClass::across_hosts)], 1);
  EXPECT_DOUBLE_EQ(traffic.collective_bytes[static_cast<int>(LinkClass::across_hosts)], 1300);
}

}  // namespace
}  // namespace pipevm
