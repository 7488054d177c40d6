// The overlapped forward+backward pair (FwdBwd, a two-cell row) in the front
// end: its `with` syntax parses, expands into one instruction that keeps
// both cells, disassembles back to what was written, and is refused with a
// usage line where it is misused. What the interpreters do with it is
// tested in tests/check (corpus), tests/simulate and tests/vm.
#include <gtest/gtest.h>

#include "support.hpp"

namespace pipevm {
namespace {

using test::compile_text;
using test::config;

constexpr const char* kPair = R"(placement mirror
ZeroGrad
LoadInput 0
Fwd 0
LoadTarget 0
LoadInput 1 chunk 1
FwdBwd 1 chunk 1 with 0
LoadTarget 1 chunk 1
Bwd 1 chunk 1
)";

TEST(pair, expands_into_one_instruction_with_both_cells) {
  Diagnostics d;
  const auto program = compile_text(kPair, config(1, 2, 2), d);
  ASSERT_TRUE(program) << (d.empty() ? "" : d.all()[0].message);
  const auto stream = program->rank(0);
  const auto pair = std::find_if(stream.begin(), stream.end(),
                                 [](const Instruction& in) { return in.op == Opcode::FwdBwd; });
  ASSERT_NE(pair, stream.end());
  EXPECT_EQ(first_cell(*pair).micro_batch, 1u);
  EXPECT_EQ(first_cell(*pair).chunk, 1u);
  EXPECT_EQ(second_cell(*pair).micro_batch, 0u);
  EXPECT_EQ(second_cell(*pair).chunk, 0u);
  EXPECT_EQ(disassemble(*pair), "FwdBwd 1 chunk 1 with 0");
  const Instruction forward = half(*pair, 0);
  const Instruction backward = half(*pair, 1);
  EXPECT_EQ(disassemble(forward), "Fwd 1 chunk 1");
  EXPECT_EQ(disassemble(backward), "Bwd 0");
}

TEST(pair, disassembly_parses_back_to_the_same_instruction) {
  Instruction in;
  in.op = Opcode::FwdBwd;
  in.micro_batch = 70000;
  in.chunk = 3;
  set_second_cell(in, Cell{65535, 255});
  EXPECT_EQ(disassemble(in), "FwdBwd 70000 chunk 3 with 65535 chunk 255");
  const Cell second = second_cell(in);
  EXPECT_EQ(second.micro_batch, 65535u);
  EXPECT_EQ(second.chunk, 255u);
  Diagnostics d;
  const auto program = compile_text("FwdBwd 5 chunk 1 with 3 chunk 0\n", config(1, 8, 2), d);
  ASSERT_TRUE(program);
  ASSERT_EQ(program->rank(0).size(), 1u);
  EXPECT_EQ(disassemble(program->rank(0)[0]), "FwdBwd 5 chunk 1 with 3");
  EXPECT_EQ(operand_syntax(Opcode::FwdBwd), "mb [chunk C] with mb [chunk C]");
}

std::string first_error(const std::string& text, const Config& c) {
  Diagnostics d;
  EXPECT_FALSE(compile_text(text, c, d)) << text;
  return d.empty() ? std::string() : d.all()[0].message;
}

TEST(pair, misuse_says_what_the_pair_takes) {
  const Config c = config(1, 4, 2);
  EXPECT_EQ(first_error("FwdBwd 1\n", c),
            "FwdBwd needs a second cell ('with mb [chunk C]'); usage: FwdBwd mb [chunk C] with "
            "mb [chunk C]");
  EXPECT_EQ(first_error("Fwd 1 with 2\n", c),
            "Fwd takes one cell, no 'with'; usage: Fwd mb [chunk C] [layer L]");
  EXPECT_EQ(first_error("FwdBwd 1 with\n", c), "expected a micro-batch after 'with'");
  EXPECT_NE(first_error("FwdBwd 1 with 4\n", c).find("micro-batch 4 is out of range"),
            std::string::npos);
  EXPECT_NE(first_error("FwdBwd 1 with 0 chunk 2\n", c).find("chunk 2 is out of range"),
            std::string::npos);
  EXPECT_EQ(first_error("FwdBwd 1 with 70000\n", config(1, 70001, 1)),
            "the second micro-batch of FwdBwd must be at most 65535");
}

}  // namespace
}  // namespace pipevm
