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
  i.explicit_peer = 1;
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
