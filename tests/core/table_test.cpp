// What the instruction table says an instruction does, the groups and who
// belongs to them, and the one rule for the model's pieces: the facts every
// interpreter reads from the core.
#include <gtest/gtest.h>

#include <vector>

#include "isa.hpp"
#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm {
namespace {

// The columns agree with each other, so that an interpreter reading one
// column can rely on the others.
TEST(table, columns_are_consistent) {
  for (std::size_t i = 0; i < kOpcodeCount; ++i) {
    const auto op = static_cast<Opcode>(i);
    const OpcodeInfo& row = info(op);
    const bool talks = row.group != Group::none;
    switch (row.cls) {
      case OpClass::p2p:
        EXPECT_TRUE(row.direction == Direction::send || row.direction == Direction::recv)
            << row.name;
        EXPECT_EQ(row.group, Group::pipeline) << row.name;
        EXPECT_TRUE(operand_parts(op).peer && operand_parts(op).kind) << row.name;
        EXPECT_EQ(row.cost, CostKind::message) << row.name;
        break;
      case OpClass::wait:
        EXPECT_EQ(row.completion, Completion::blocking) << row.name;
        // Only a wait for a group's collective requests (GossipWait) names a group.
        EXPECT_TRUE(!talks || row.group == Group::gossip) << row.name;
        break;
      case OpClass::collective:
        EXPECT_TRUE(talks) << row.name;
        EXPECT_NE(row.completion, Completion::local) << row.name;
        // It sums gradients, gathers weight shards, or (gossip) averages parameters.
        EXPECT_TRUE(row.produces.contains(Value::reduced_gradient) ||
                    row.produces.contains(Value::weights) || op == Opcode::GossipStart ||
                    op == Opcode::GlobalAverage)
            << row.name;
        break;
      case OpClass::data:
      case OpClass::compute:
      case OpClass::optimizer:
        EXPECT_FALSE(talks) << row.name << " talks to another rank but its class does not";
        // Only a copy to or from host memory posts a request (its wait completes it).
        EXPECT_EQ(row.completion,
                  is_host_copy(op) ? Completion::request : Completion::local)
            << row.name;
        break;
    }
    // A host copy and the wait that completes it name their direction and one cell.
    if (is_host_copy(op)) {
      EXPECT_TRUE(row.cls == OpClass::data || row.cls == OpClass::wait) << row.name;
      EXPECT_EQ(row.operands, OperandSyntax::cell) << row.name;
      EXPECT_EQ(row.cost, row.cls == OpClass::data ? CostKind::host_copy : CostKind::none)
          << row.name;
    }
    // What reads a stash is a backward, or moves it to host memory.
    if (row.consumes.contains(Value::stash)) {
      EXPECT_TRUE(is_backward(op) || row.direction == Direction::to_host) << row.name;
    }
    // `over` may name the row's own group, and only a collective takes it.
    if (!row.over.empty()) {
      EXPECT_EQ(row.cls, OpClass::collective) << row.name;
      EXPECT_TRUE(row.over.contains(row.group)) << row.name;
    }
    EXPECT_EQ(row.direction == Direction::operand, operand_parts(op).direction) << row.name;
  }
}

TEST(table, operand_syntax_is_declared_once) {
  EXPECT_EQ(operand_syntax(Opcode::Send), "act|grad mb [chunk C] [to S]");
  EXPECT_EQ(operand_syntax(Opcode::IRecv), "act|grad mb [chunk C] [from S]");
  EXPECT_EQ(operand_syntax(Opcode::Wait), "send|recv act|grad mb [chunk C]");
  EXPECT_EQ(operand_syntax(Opcode::LoadInput), "mb [chunk C]");
  EXPECT_EQ(operand_syntax(Opcode::Fwd), "mb [chunk C] [layer L]");
  EXPECT_EQ(operand_syntax(Opcode::AllReduce), "[layer L] [over dp|mirror]");
  EXPECT_EQ(operand_syntax(Opcode::AllGather), "[chunk C | layer L] [over dp|world]");
  EXPECT_EQ(operand_syntax(Opcode::Release), "[chunk C | layer L]");
  EXPECT_EQ(operand_syntax(Opcode::WaitAll), "");
  EXPECT_EQ(operand_syntax(Opcode::Offload), "mb [chunk C]");
  EXPECT_EQ(operand_syntax(Opcode::WaitReload), "mb [chunk C]");
  Instruction sum;
  sum.op = Opcode::AllReduce;
  EXPECT_EQ(disassemble(sum), "AllReduce");
  sum.group = Group::mirror;
  EXPECT_EQ(disassemble(sum), "AllReduce over mirror");
  set_layer(sum, 3);
  EXPECT_EQ(disassemble(sum), "AllReduce layer 3 over mirror");
  EXPECT_EQ(layer_of(sum), 3);
  Instruction send;
  send.op = Opcode::Send;
  send.peer = 3;
  EXPECT_EQ(layer_of(send), kNoLayer) << "a send's peer is no layer";
}

std::vector<int> members(Group group, Placement placement, const Config& config, int rank) {
  std::vector<int> out;
  group_members(group, placement, config, group_instance(group, placement, config, rank), out);
  return out;
}

TEST(groups, mirror_pairs_the_two_holders_of_each_piece) {
  const Config even{4, 8, 2, 2};  // ranks 0-3 are dp rank 0, 4-7 dp rank 1
  EXPECT_EQ(members(Group::mirror, Placement::mirror, even, 1), (std::vector<int>{1, 2}));
  EXPECT_EQ(members(Group::mirror, Placement::mirror, even, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(members(Group::mirror, Placement::mirror, even, 7), (std::vector<int>{4, 7}));
  EXPECT_EQ(group_instance_count(Group::mirror, Placement::mirror, even), 4);
  const Config odd{3, 4, 2, 1};
  EXPECT_EQ(members(Group::mirror, Placement::mirror, odd, 1), (std::vector<int>{1}));
  EXPECT_EQ(members(Group::mirror, Placement::mirror, odd, 2), (std::vector<int>{0, 2}));
  // Each piece is held once under the other placements.
  EXPECT_EQ(members(Group::mirror, Placement::v, even, 5), (std::vector<int>{5}));
  EXPECT_EQ(members(Group::dp, Placement::mirror, even, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(groups_holding_copies(Placement::mirror, odd),
            GroupSet::of(Group::mirror));
  EXPECT_EQ(groups_holding_copies(Placement::looped, even), GroupSet::of(Group::dp));
}

TEST(model_shape, pieces_follow_the_compute_balanced_split) {
  // The first layer is half the compute: it is a piece of its own.
  EXPECT_EQ(piece_boundary_widths(default_layer_widths(), 2), (std::vector<int>{784, 128, 10}));
  EXPECT_EQ(piece_boundary_widths({1, 2, 3}, 2), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(piece_boundary_widths(default_layer_widths(), 8).empty());
  EXPECT_EQ(layer_count(default_layer_widths()), 7);
  EXPECT_EQ(parameter_count({4, 3, 2}, {0, 2}), 4u * 3 + 3 + 3 * 2 + 2);
}

}  // namespace
}  // namespace pipevm
