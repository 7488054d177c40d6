// The instruction-set table and the disassembler.
#include <gtest/gtest.h>

#include "isa.hpp"
#include "program.hpp"

namespace pipevm {
namespace {

TEST(isa, table_names_round_trip) {
  for (std::size_t i = 0; i < kOpcodeCount; ++i) {
    const auto op = static_cast<Opcode>(i);
    ASSERT_EQ(opcode_from_name(name(op)), op);
    EXPECT_FALSE(info(op).doc.empty()) << name(op);
  }
  EXPECT_FALSE(opcode_from_name("send").has_value());
}

TEST(isa, nearest_name_suggests_a_close_opcode) {
  EXPECT_EQ(nearest_opcode_name("Snd"), "Send");
  EXPECT_EQ(nearest_opcode_name("BwdAllreduce"), "BwdAllReduce");
  EXPECT_EQ(nearest_opcode_name("Optimizer"), "");
  EXPECT_EQ(nearest_opcode_name("Completely"), "");
}

TEST(isa, disassemble_writes_the_language_syntax) {
  Instruction i;
  i.op = Opcode::Recv;
  i.kind = MessageKind::grad;
  i.micro_batch = 3;
  i.peer = 2;
  EXPECT_EQ(disassemble(i), "Recv grad 3");
  i.set_source(0, true);
  i.chunk = 1;
  EXPECT_EQ(disassemble(i), "Recv grad 3 chunk 1 from 2");
  i.op = Opcode::ISend;
  EXPECT_EQ(disassemble(i), "ISend grad 3 chunk 1 to 2");
  Instruction w;
  w.op = Opcode::Wait;
  w.direction = WaitDirection::send;
  w.kind = MessageKind::act;
  w.micro_batch = 7;
  EXPECT_EQ(disassemble(w), "Wait send act 7");
  Instruction z;
  z.op = Opcode::ZeroGrad;
  EXPECT_EQ(disassemble(z), "ZeroGrad");
  Instruction f;
  f.op = Opcode::Fwd;
  f.micro_batch = 0;
  EXPECT_EQ(disassemble(f), "Fwd 0");
}

TEST(isa, source_file_positions) {
  const SourceFile file("x.pipe", "ab\ncd\r\n\nlast");
  EXPECT_EQ(file.position(0).line, 1u);
  EXPECT_EQ(file.position(4).line, 2u);
  EXPECT_EQ(file.position(4).column, 2u);
  EXPECT_EQ(file.line(2), "cd");
  EXPECT_EQ(file.line(3), "");
  EXPECT_EQ(file.line(4), "last");
  EXPECT_EQ(file.position(10).line, 4u);
}

}  // namespace
}  // namespace pipevm

namespace pipevm {
namespace {

TEST(isa, placement_positions_and_default_peers) {
  const Config c{4, 8, 2, 1};
  // looped: chunk 1 of stage 0 follows chunk 0 of stage 3.
  EXPECT_EQ(default_peer(Placement::looped, c, 3, MessageKind::act, 0, true), 0);
  EXPECT_EQ(default_peer(Placement::looped, c, 0, MessageKind::act, 1, false), 3);
  EXPECT_EQ(default_peer(Placement::looped, c, 3, MessageKind::act, 1, true), -1);
  EXPECT_EQ(default_peer(Placement::looped, c, 0, MessageKind::grad, 0, true), -1);
  // v: the last stage turns around on itself; chunk 1 flows back to stage 0.
  EXPECT_EQ(default_peer(Placement::v, c, 3, MessageKind::act, 0, true), 3);
  EXPECT_EQ(default_peer(Placement::v, c, 2, MessageKind::act, 1, true), 1);
  EXPECT_EQ(default_peer(Placement::v, c, 0, MessageKind::act, 1, true), -1);
  // mirror: lane 1 enters at the last stage.
  EXPECT_EQ(position_of(Placement::mirror, c, 3, 1).position, 0);
  EXPECT_EQ(default_peer(Placement::mirror, c, 3, MessageKind::act, 1, true), 2);
  EXPECT_EQ(default_peer(Placement::mirror, c, 0, MessageKind::grad, 1, true), 1);
  EXPECT_EQ(model_pieces(Placement::mirror, c), 4);
  EXPECT_EQ(model_pieces(Placement::looped, c), 8);
}

TEST(isa, message_keys_pair_a_send_with_its_receive) {
  const Config c{4, 8, 2, 1};
  Instruction send;
  send.op = Opcode::Send;
  send.kind = MessageKind::act;
  send.micro_batch = 5;
  Instruction recv = send;
  recv.op = Opcode::IRecv;
  recv.chunk = 1;
  // looped: stage 3 chunk 0 -> stage 0 chunk 1.
  EXPECT_EQ(message_key(Placement::looped, c, 3, send), message_key(Placement::looped, c, 0, recv));
  recv.chunk = 0;
  EXPECT_FALSE(message_key(Placement::looped, c, 3, send) ==
               message_key(Placement::looped, c, 0, recv));
  Instruction grad_send = send;
  grad_send.kind = MessageKind::grad;
  Instruction grad_recv = grad_send;
  grad_recv.op = Opcode::Recv;
  EXPECT_EQ(message_key(Placement::looped, c, 2, grad_send),
            message_key(Placement::looped, c, 1, grad_recv));
}

}  // namespace
}  // namespace pipevm

namespace pipevm {
namespace {

TEST(isa, peer_in_pipeline_allows_self_only_at_a_v_turn) {
  const Config c{4, 8, 2, 1};
  Instruction send;
  send.op = Opcode::ISend;
  send.kind = MessageKind::act;
  send.peer = 3;
  EXPECT_TRUE(peer_in_pipeline(Placement::v, c, 3, send));        // chunk 0 turns on stage 3
  EXPECT_FALSE(peer_in_pipeline(Placement::looped, c, 3, send));  // no turn in a looped lane
  send.peer = 4;
  EXPECT_FALSE(peer_in_pipeline(Placement::looped, c, 3, send));
  send.peer = 0;
  EXPECT_TRUE(peer_in_pipeline(Placement::looped, c, 3, send));
}

}  // namespace
}  // namespace pipevm
