// What a syntax error says, one line per grammar rule that the parser commits
// to, and the PEGTL control that raises them. A rule missing from the table
// never fails where it is required (blanks, optional parts), so the plain
// "syntax error" fallback is never the whole story in practice.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include <tao/pegtl.hpp>

#include "grammar.hpp"

namespace pipevm::grammar {

template <typename Rule>
inline constexpr const char* error_message = nullptr;

// clang-format off
template <> inline constexpr const char* error_message<expr> = "expected an expression";
template <> inline constexpr const char* error_message<unary> = "expected an operand after the operator";
template <> inline constexpr const char* error_message<mul_expr> = "expected an operand after the operator";
template <> inline constexpr const char* error_message<add_expr> = "expected an operand after the comparison";
template <> inline constexpr const char* error_message<not_expr> = "expected an operand after 'not' or 'and'";
template <> inline constexpr const char* error_message<and_expr> = "expected an operand after 'or'";
template <> inline constexpr const char* error_message<open_paren> = "expected '('";
template <> inline constexpr const char* error_message<close_paren> = "expected ')' to close the parenthesis";
template <> inline constexpr const char* error_message<comma> = "expected ',' between the two arguments of min/max";
template <> inline constexpr const char* error_message<stmt> = "expected a statement: for, if, stage, let, a procedure call or an instruction";
template <> inline constexpr const char* error_message<item> = "expected a statement: require, proc, for, if, stage, let, a procedure call or an instruction";
template <> inline constexpr const char* error_message<stmt_end> = "expected the end of the statement (a newline or ';')";
template <> inline constexpr const char* error_message<stmt_list> = "expected statements";
template <> inline constexpr const char* error_message<for_close> = "expected '}' to close the for body";
template <> inline constexpr const char* error_message<if_close> = "expected '}' to close the if body";
template <> inline constexpr const char* error_message<else_close> = "expected '}' to close the else body";
template <> inline constexpr const char* error_message<stage_close> = "expected '}' to close the stage body";
template <> inline constexpr const char* error_message<proc_close> = "expected '}' to close the procedure body";
template <> inline constexpr const char* error_message<nested<block<for_close>>> = "expected '{' to open the for body";
template <> inline constexpr const char* error_message<nested<block<if_close>>> = "expected '{' to open the if body";
template <> inline constexpr const char* error_message<nested<block<stage_close>>> = "expected '{' to open the stage body";
template <> inline constexpr const char* error_message<nested<block<proc_close>>> = "expected '{' to open the procedure body";
template <> inline constexpr const char* error_message<sor<nested<if_stmt>, nested<block<else_close>>>> = "expected 'if' or '{' after 'else'";
template <> inline constexpr const char* error_message<let_name> = "expected a name after 'let'";
template <> inline constexpr const char* error_message<equals> = "expected '=' after the name in 'let'";
template <> inline constexpr const char* error_message<for_var> = "expected the loop variable's name after 'for'";
template <> inline constexpr const char* error_message<kw_in> = "expected 'in' after the loop variable";
template <> inline constexpr const char* error_message<range> = "expected a range: 'a .. b' or 'reversed(a .. b)'";
template <> inline constexpr const char* error_message<range_bounds> = "expected a range 'a .. b' inside reversed(...)";
template <> inline constexpr const char* error_message<dots> = "expected '..' between the bounds of the range";
template <> inline constexpr const char* error_message<stage_number> = "expected a stage number after 'stage'";
template <> inline constexpr const char* error_message<arguments> = "expected the arguments of the call";
template <> inline constexpr const char* error_message<argument> = "expected an argument after ','";
template <> inline constexpr const char* error_message<micro_batch> = "expected a micro-batch after 'with'";
template <> inline constexpr const char* error_message<chunk_number> = "expected the chunk number after 'chunk'";
template <> inline constexpr const char* error_message<layer_number> = "expected the layer number after 'layer'";
template <> inline constexpr const char* error_message<peer_stage> = "expected a stage after 'to' or 'from'";
template <> inline constexpr const char* error_message<group_name> = "expected a group after 'over' (such as dp or mirror)";
template <> inline constexpr const char* error_message<string_body> = "expected the text of the message";
template <> inline constexpr const char* error_message<string_close> = "unterminated string: expected '\"' before the end of the line";
template <> inline constexpr const char* error_message<colon> = "expected ':' and a message after the condition of 'require'";
template <> inline constexpr const char* error_message<string_literal> = "expected a message in double quotes after ':'";
template <> inline constexpr const char* error_message<params> = "expected the parameter names";
template <> inline constexpr const char* error_message<param> = "expected a parameter name after ','";
template <> inline constexpr const char* error_message<proc_name> = "expected the procedure's name after 'proc'";
template <> inline constexpr const char* error_message<schedule_name> = "expected the schedule's name after 'schedule' (letters, digits, - and _)";
template <> inline constexpr const char* error_message<placement_name> = "expected 'looped', 'v' or 'mirror' after 'placement'";
template <> inline constexpr const char* error_message<check_bounds> = "expected a count or a range 'a..b' after the dimension in 'check'";
template <> inline constexpr const char* error_message<check_value> = "expected the range's last value after '..'";
template <> inline constexpr const char* error_message<check_items> = "expected stages, micro_batches, dp or chunks after 'check'";
// clang-format on

// Where the blocks being parsed were opened, innermost last: a missing '}'
// is reported at the end of the input, so the note points at the opening.
struct ParseState {
  std::vector<std::size_t> open_braces;  // byte offsets
};

// A block that never closes.
struct unclosed_block : parse_error {
  unclosed_block(const char* message, const position& where, std::size_t opened_at)
      : parse_error(message, where), opened(opened_at) {}
  std::size_t opened;
};

template <typename Rule>
inline constexpr bool closes_block =
    std::is_same_v<Rule, for_close> || std::is_same_v<Rule, if_close> ||
    std::is_same_v<Rule, else_close> || std::is_same_v<Rule, stage_close> ||
    std::is_same_v<Rule, proc_close>;

// Raises the table's message where a committed rule fails, and keeps the
// stack of open blocks.
template <typename Rule>
struct control : normal<Rule> {
  template <typename Input, typename... States>
  static void success(const Input& in, ParseState& state, States&&... /*states*/) {
    if constexpr (std::is_same_v<Rule, open_brace>) {
      state.open_braces.push_back(in.iterator().byte - 1);
    } else if constexpr (closes_block<Rule>) {
      state.open_braces.pop_back();
    }
  }

  template <typename Input, typename... States>
  [[noreturn]] static void raise(const Input& in, ParseState& state, States&&... /*states*/) {
    if constexpr (closes_block<Rule>) {
      throw unclosed_block(error_message<Rule>, in.position(), state.open_braces.back());
    } else if constexpr (error_message<Rule> != nullptr) {
      throw parse_error(error_message<Rule>, in);
    } else {
      throw parse_error("syntax error", in);
    }
  }
};

}  // namespace pipevm::grammar
