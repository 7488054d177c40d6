// The language, construct by construct: each program's expansion is checked
// against the stream it must produce. Also PEGTL's grammar analysis.
#include <gtest/gtest.h>

#include <tao/pegtl/contrib/analyze.hpp>

#include "ast.hpp"
#include "grammar.hpp"
#include "support.hpp"

namespace pipevm {
namespace {

using test::config;
using Lines = std::vector<std::string>;

// Rank `rank`'s stream of `text` with P=4, M=8 unless told otherwise.
Lines run(const std::string& text, int rank = 0, Config c = config(4, 8)) {
  Diagnostics d;
  const auto program = test::compile_text(text, c, d);
  EXPECT_TRUE(program.has_value()) << (d.empty() ? "" : d.all().front().message);
  if (!program) return {};
  return test::stream(*program, rank);
}

TEST(grammar, analysis_finds_no_problems) {
  EXPECT_EQ(tao::pegtl::analyze<grammar::program>(), 0u);
}

TEST(parse, statements_end_at_newline_or_semicolon) {
  EXPECT_EQ(run("Fwd 0; Bwd 0 # a comment\nZeroGrad\n\n  OptimizerStep"),
            (Lines{"Fwd 0", "Bwd 0", "ZeroGrad", "OptimizerStep"}));
}

TEST(parse, arithmetic_precedence) {
  EXPECT_EQ(run("Fwd 1 + 2 * 3\nFwd (1 + 2) * 2\nFwd 7 - 2 - 3"),
            (Lines{"Fwd 7", "Fwd 6", "Fwd 2"}));
}

TEST(parse, division_floors_and_modulo_takes_the_divisor_sign) {
  EXPECT_EQ(run("Fwd -7 / 2 + 5\nFwd -7 % 3\nFwd 7 % -3 + 3\nFwd 7 / 2"),
            (Lines{"Fwd 1", "Fwd 2", "Fwd 1", "Fwd 3"}));
}

TEST(parse, comparisons_and_logic_give_zero_or_one) {
  EXPECT_EQ(run("Fwd (2 < 3) + (3 <= 3) + (4 > 5) + (4 >= 4) + (1 == 1) + (1 != 1)\n"
                "Fwd not 0 and 1 or 0\nFwd 5 and 7\nFwd not 3\nFwd 0 or 0"),
            (Lines{"Fwd 4", "Fwd 1", "Fwd 1", "Fwd 0", "Fwd 0"}));
}

TEST(parse, min_and_max) {
  EXPECT_EQ(run("Fwd min(3, stages)\nFwd max(stage, 2)\nFwd min(max(1, 2), 7)"),
            (Lines{"Fwd 3", "Fwd 2", "Fwd 2"}));
}

TEST(parse, builtin_names) {
  EXPECT_EQ(run("Fwd stage\nFwd stages\nFwd micro_batches - 1\nFwd chunks\nFwd dp_rank\nFwd dp", 5,
                config(3, 8, 1, 2)),
            (Lines{"Fwd 2", "Fwd 3", "Fwd 7", "Fwd 1", "Fwd 1", "Fwd 2"}));
}

TEST(parse, for_ranges_are_half_open_and_may_be_reversed) {
  EXPECT_EQ(run("for i in 1 .. 3 { Fwd i }\nfor i in reversed(0 .. 3) { Bwd i }\n"
                "for i in 3 .. 1 { ZeroGrad }"),
            (Lines{"Fwd 1", "Fwd 2", "Bwd 2", "Bwd 1", "Bwd 0"}));
}

TEST(parse, if_else_if_else_and_else_on_the_next_line) {
  const std::string text =
      "if stage == 0 { Fwd 0 } else if stage == 1 { Fwd 1 }\n"
      "else { Fwd 2 }\n"
      "if stage > 1 {\n    Bwd 0\n}\nelse {\n    Bwd 1\n}\n";
  EXPECT_EQ(run(text, 0), (Lines{"Fwd 0", "Bwd 1"}));
  EXPECT_EQ(run(text, 1), (Lines{"Fwd 1", "Bwd 1"}));
  EXPECT_EQ(run(text, 3), (Lines{"Fwd 2", "Bwd 0"}));
}

TEST(parse, stage_blocks_run_on_their_stage_only) {
  const std::string text = "stage 0 { Fwd 0 }\nstage 2 {\n  Fwd 2\n}\nstage 9 { Fwd 1 }";
  EXPECT_EQ(run(text, 0), (Lines{"Fwd 0"}));
  EXPECT_EQ(run(text, 1), (Lines{}));
  EXPECT_EQ(run(text, 2), (Lines{"Fwd 2"}));
}

TEST(parse, let_scopes_nest_and_shadow) {
  EXPECT_EQ(run("let x = 1\nfor i in 0 .. 2 {\n  let x = i + 5\n  Fwd x\n}\nFwd x"),
            (Lines{"Fwd 5", "Fwd 6", "Fwd 1"}));
}

TEST(parse, procedures_are_hoisted_and_read_earlier_globals) {
  EXPECT_EQ(run("let base = 2\nforward(1)\nproc forward(mb) { Fwd mb + base; twice(mb) }\n"
                "proc twice(\n    mb\n) { Bwd mb; Bwd mb }"),
            (Lines{"Fwd 3", "Bwd 1", "Bwd 1"}));
}

TEST(parse, procedure_arguments_may_span_lines) {
  EXPECT_EQ(run("proc two(a, b) { Fwd a; Fwd b }\ntwo(\n  1,\n  2\n)"), (Lines{"Fwd 1", "Fwd 2"}));
}

TEST(parse, operand_expressions_stop_before_keywords) {
  Diagnostics d;
  const auto p = test::compile_text(
      "stage 2 { Recv act stage - 1 chunk chunks - 1 from stage - 1 }\n"
      "stage 1 { Send grad 0 to stage - 1 }",
      config(4, 8, 2), d);
  ASSERT_TRUE(p);
  const Instruction recv = p->rank(2)[0];
  EXPECT_EQ(recv.op, Opcode::Recv);
  EXPECT_EQ(recv.kind, MessageKind::act);
  EXPECT_EQ(recv.micro_batch, 1u);
  EXPECT_EQ(recv.chunk, 1u);
  EXPECT_EQ(recv.peer, 1);
  EXPECT_TRUE(recv.explicit_peer());
  EXPECT_EQ(test::stream(*p, 1), (Lines{"Send grad 0 to 0"}));
}

TEST(parse, wait_operands) {
  EXPECT_EQ(run("ISend act 0\nWait send act 0\nIRecv grad 1 chunk 1\nWait recv grad 1 chunk 1", 1,
                config(4, 8, 2)),
            (Lines{"ISend act 0", "Wait send act 0", "IRecv grad 1 chunk 1",
                   "Wait recv grad 1 chunk 1"}));
}

TEST(parse, over_names_a_collective_group) {
  Diagnostics d;
  const auto p = test::compile_text("placement mirror\nAllReduce\nAllReduce over dp\nAllReduce over mirror",
                                    config(2, 1, 2), d);
  ASSERT_TRUE(p);
  EXPECT_EQ(group_of(p->rank(0)[0]), Group::dp);
  EXPECT_EQ(group_of(p->rank(0)[1]), Group::dp);
  EXPECT_EQ(group_of(p->rank(0)[2]), Group::mirror);
  // The row's own group is what the source would have said anyway.
  EXPECT_EQ(test::stream(*p, 0), (Lines{"AllReduce", "AllReduce", "AllReduce over mirror"}));
  for (const char* wrong : {"AllReduce over world", "AllReduce over pipeline",
                            "BwdAllReduce 0 over mirror", "Fwd 0 over dp"}) {
    Diagnostics errors;
    EXPECT_FALSE(test::compile_text(wrong, config(2, 1), errors)) << wrong;
    EXPECT_EQ(test::codes(errors), (std::vector<std::string>{"PV1001"})) << wrong;
  }
}

TEST(parse, headers_give_name_and_placement) {
  Diagnostics d;
  const auto named = parse(test::source("schedule zb-v_2\nplacement v\nFwd 0"), d);
  ASSERT_TRUE(named);
  EXPECT_EQ(name_of(*named), "zb-v_2");
  EXPECT_EQ(placement_of(*named), Placement::v);
  const auto unnamed = parse(test::source("# nothing\n", "dir/my-schedule.pipe"), d);
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(name_of(*unnamed), "my-schedule");
  EXPECT_EQ(placement_of(*unnamed), Placement::looped);
  EXPECT_TRUE(d.empty());
}

TEST(parse, one_source_range_per_instruction_statement) {
  Diagnostics d;
  const auto p =
      test::compile_text("for i in 0 .. 3 {\n  Fwd i\n  Bwd i # done\n}", config(2, 3), d);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->sources.size(), 2u);
  EXPECT_EQ(p->code.size(), 12u);
  const auto text = [&](const Instruction& in) {
    const SourceRange r = p->source_of(in);
    return p->file->text().substr(r.begin, r.end - r.begin);
  };
  EXPECT_EQ(text(p->rank(1)[2]), "Fwd i");
  EXPECT_EQ(text(p->rank(1)[3]), "Bwd i");
  EXPECT_EQ(p->file->position(p->source_of(p->rank(0)[1]).begin).line, 3u);
}

}  // namespace
}  // namespace pipevm

namespace pipevm {
namespace {

TEST(parse, a_missing_brace_points_back_at_the_opening) {
  Diagnostics d;
  EXPECT_FALSE(parse(test::source("stage 0 {\n  if 1 { Fwd 0 }\n  for i in 0 .. 2 {\n"), d));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.all()[0].message, "expected '}' to close the for body");
  ASSERT_EQ(d.all()[0].notes.size(), 1u);
  const SourceFile& file = *d.all()[0].notes[0].location.file;
  const LineColumn opened = file.position(d.all()[0].notes[0].location.range.begin);
  EXPECT_EQ(opened.line, 3u);
  EXPECT_EQ(opened.column, 19u);
}

}  // namespace
}  // namespace pipevm
