// Hostile input: random bytes, deep nesting, long chains. Each must end in
// a diagnostic, never a crash or a stack overflow.
#include <gtest/gtest.h>

#include <random>

#include "support.hpp"

namespace pipevm {
namespace {

std::vector<std::string> diagnose(std::string text, std::uint64_t max_instructions = 10'000) {
  Diagnostics d;
  ExpandOptions options;
  options.max_instructions = max_instructions;
  const auto p = test::compile_text(std::move(text), test::config(4, 8), d, options);
  EXPECT_FALSE(p.has_value());
  return test::codes(d);
}

TEST(robustness, a_megabyte_of_random_bytes) {
  std::mt19937 random(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string text(1 << 20, '\0');
  for (char& c : text) c = static_cast<char>(byte(random));
  const auto found = diagnose(text);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front(), "PV1001");
}

TEST(robustness, ten_thousand_nested_blocks) {
  std::string blocks;
  for (int i = 0; i < 10'000; ++i) blocks += "if 1 {\n";
  EXPECT_EQ(diagnose(blocks), (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, ten_thousand_nested_parentheses) {
  EXPECT_EQ(diagnose("Fwd " + std::string(10'000, '(') + "0" + std::string(10'000, ')')),
            (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, ten_thousand_unary_operators) {
  std::string nots;
  for (int i = 0; i < 10'000; ++i) nots += "not ";
  EXPECT_EQ(diagnose("Fwd " + nots + "0"), (std::vector<std::string>{"PV1013"}));
  EXPECT_EQ(diagnose("Fwd " + std::string(10'000, '-') + "0"),
            (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, ten_thousand_else_ifs) {
  std::string chain = "if 0 { Fwd 0 }";
  for (int i = 0; i < 10'000; ++i) chain += " else if 0 { Fwd 0 }";
  EXPECT_EQ(diagnose(chain), (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, a_long_operator_chain) {
  std::string sum = "Fwd 0";
  for (int i = 0; i < 20'000; ++i) sum += " + 0";
  EXPECT_EQ(diagnose(sum), (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, a_long_chain_of_procedure_calls) {
  std::string text = "p0()\n";
  for (int i = 0; i < 5'000; ++i) {
    text += "proc p" + std::to_string(i) + "() { p" + std::to_string(i + 1) + "() }\n";
  }
  text += "proc p5000() { Fwd 0 }\n";
  const auto found = diagnose(text);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front(), "PV1013");
}

TEST(robustness, deep_blocks_in_a_chain_of_calls) {
  // Each procedure nests 250 blocks (under the parser's limit) and calls the
  // next: 20 of them nest 5,000 deep at run time.
  std::string text = "p0()\n";
  for (int i = 0; i < 20; ++i) {
    text += "proc p" + std::to_string(i) + "() {\n";
    for (int j = 0; j < 250; ++j) text += "if 1 {\n";
    text += i + 1 < 20 ? "p" + std::to_string(i + 1) + "()\n" : std::string("Fwd 0\n");
    for (int j = 0; j < 250; ++j) text += "}\n";
    text += "}\n";
  }
  EXPECT_EQ(diagnose(text), (std::vector<std::string>{"PV1013"}));
}

TEST(robustness, loops_that_never_emit_are_stopped) {
  EXPECT_EQ(diagnose("for i in 0 .. 9223372036854775807 { let x = i }", 1000),
            (std::vector<std::string>{"PV1010"}));
}

TEST(robustness, extreme_integers_overflow_cleanly) {
  EXPECT_EQ(diagnose("Fwd -9223372036854775807 - 1 - 1"), (std::vector<std::string>{"PV1012"}));
  EXPECT_EQ(diagnose("Fwd (-9223372036854775807 - 1) / -1"), (std::vector<std::string>{"PV1012"}));
  EXPECT_EQ(diagnose("Fwd -(-9223372036854775807 - 1)"), (std::vector<std::string>{"PV1012"}));
  EXPECT_EQ(diagnose("for i in reversed(-9223372036854775807 - 1 .. -9223372036854775807 + 1) {\n"
                     " Fwd i }"),
            (std::vector<std::string>{"PV1008"}));
}

TEST(robustness, the_nesting_limit_itself_is_accepted) {
  Diagnostics d;
  std::string text;
  // Blocks and parentheses count together: 120 + 120 is under the limit of 256.
  for (int i = 0; i < 120; ++i) text += "if 1 {\n";
  text += "Fwd " + std::string(120, '(') + "1" + std::string(120, ')') + "\n";
  for (int i = 0; i < 120; ++i) text += "}\n";
  const auto p = test::compile_text(text, test::config(4, 8), d);
  ASSERT_TRUE(p) << (d.empty() ? "" : d.all().front().message);
  EXPECT_EQ(test::stream(*p, 0), (std::vector<std::string>{"Fwd 1"}));
}

}  // namespace
}  // namespace pipevm
