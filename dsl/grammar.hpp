// The grammar of .pipe schedules (docs/language.md), as PEGTL 3.x rules, one
// rule per line. Rules only: the syntax tree is built from PEGTL's parse tree
// in parse.cpp, and error messages live in errors.hpp.
//
// Statements end at a newline or `;`; inside a statement only blanks and
// comments separate tokens, except between a call's or a procedure's
// parentheses. The grammar commits (must / if_must) only after a keyword or a
// delimiter that nothing else can start with.
#pragma once

#include <cstddef>

#include <tao/pegtl.hpp>
#include <tao/pegtl/contrib/analyze_traits.hpp>

namespace pipevm::grammar {

using namespace tao::pegtl;

// Deepest nesting of blocks, parentheses and unary operators: deeper input
// is refused with PV1013 rather than overflowing the parser's stack.
inline constexpr std::size_t kMaxNesting = 256;

// Thrown by `nested` when the input nests deeper than kMaxNesting.
struct nesting_error : parse_error {
  using parse_error::parse_error;
};

// Matches Rule one nesting level deeper; counts in the input's depth field.
template <typename Rule>
struct nested {
  using rule_t = nested;
  using subs_t = type_list<Rule>;

  template <apply_mode A, rewind_mode M, template <typename...> class Action,
            template <typename...> class Control, typename Input, typename... States>
  static bool match(Input& in, States&&... st) {
    if (in.private_depth >= kMaxNesting) {
      throw nesting_error("nesting too deep", in);
    }
    ++in.private_depth;
    struct leave {
      std::size_t& depth;
      ~leave() { --depth; }
    } guard{in.private_depth};
    return Control<Rule>::template match<A, M, Action, Control>(in, st...);
  }
};

// clang-format off
// --- lexical -----------------------------------------------------------------
struct comment : seq<one<'#'>, star<not_one<'\n'>>> {};
struct blank : sor<one<' ', '\t', '\r'>, comment> {};
struct sp : star<blank> {};
struct ws : star<sor<blank, one<'\n'>>> {};
struct ident_first : ranges<'a', 'z', 'A', 'Z', '_'> {};
struct ident_other : ranges<'a', 'z', 'A', 'Z', '0', '9', '_'> {};
struct identifier : seq<ident_first, star<ident_other>> {};

struct kw_schedule : TAO_PEGTL_KEYWORD("schedule") {};
struct kw_placement : TAO_PEGTL_KEYWORD("placement") {};
struct kw_require : TAO_PEGTL_KEYWORD("require") {};
struct kw_let : TAO_PEGTL_KEYWORD("let") {};
struct kw_proc : TAO_PEGTL_KEYWORD("proc") {};
struct kw_for : TAO_PEGTL_KEYWORD("for") {};
struct kw_in : TAO_PEGTL_KEYWORD("in") {};
struct kw_if : TAO_PEGTL_KEYWORD("if") {};
struct kw_else : TAO_PEGTL_KEYWORD("else") {};
struct kw_stage : TAO_PEGTL_KEYWORD("stage") {};
struct kw_reversed : TAO_PEGTL_KEYWORD("reversed") {};
struct kw_and : TAO_PEGTL_KEYWORD("and") {};
struct kw_or : TAO_PEGTL_KEYWORD("or") {};
struct kw_not : TAO_PEGTL_KEYWORD("not") {};
struct kw_min : TAO_PEGTL_KEYWORD("min") {};
struct kw_max : TAO_PEGTL_KEYWORD("max") {};
struct kw_act : TAO_PEGTL_KEYWORD("act") {};
struct kw_grad : TAO_PEGTL_KEYWORD("grad") {};
struct kw_wgrad : TAO_PEGTL_KEYWORD("wgrad") {};
struct kw_send : TAO_PEGTL_KEYWORD("send") {};
struct kw_recv : TAO_PEGTL_KEYWORD("recv") {};
struct kw_chunk : TAO_PEGTL_KEYWORD("chunk") {};
struct kw_to : TAO_PEGTL_KEYWORD("to") {};
struct kw_from : TAO_PEGTL_KEYWORD("from") {};
struct kw_over : TAO_PEGTL_KEYWORD("over") {};
struct kw_with : TAO_PEGTL_KEYWORD("with") {};
struct kw_layer : TAO_PEGTL_KEYWORD("layer") {};
// `stage` is missing on purpose: it is a keyword only at the start of a statement.
struct reserved : sor<kw_schedule, kw_placement, kw_require, kw_let, kw_proc, kw_for, kw_in, kw_if, kw_else, kw_reversed, kw_and, kw_or, kw_not, kw_min, kw_max, kw_act, kw_grad, kw_wgrad, kw_send, kw_recv, kw_chunk, kw_layer, kw_to, kw_from, kw_over> {};
struct name : seq<not_at<reserved>, identifier> {};
struct integer : plus<digit> {};

// --- expressions ---------------------------------------------------------------
struct expr;
struct open_paren : one<'('> {};
struct close_paren : one<')'> {};
struct comma : one<','> {};
struct name_ref : name {};
struct paren_expr : if_must<open_paren, sp, expr, sp, close_paren> {};
struct min_call : if_must<kw_min, sp, open_paren, ws, expr, ws, comma, ws, expr, ws, close_paren> {};
struct max_call : if_must<kw_max, sp, open_paren, ws, expr, ws, comma, ws, expr, ws, close_paren> {};
struct primary : sor<integer, nested<min_call>, nested<max_call>, name_ref, nested<paren_expr>> {};
struct unary;
struct negate : if_must<one<'-'>, sp, unary> {};
struct unary : sor<nested<negate>, primary> {};
struct mul_op : one<'*', '/', '%'> {};
struct mul_expr : seq<unary, star<sp, mul_op, sp, must<unary>>> {};
struct add_op : one<'+', '-'> {};
struct add_expr : seq<mul_expr, star<sp, add_op, sp, must<mul_expr>>> {};
struct cmp_op : sor<string<'=', '='>, string<'!', '='>, string<'<', '='>, string<'>', '='>, one<'<'>, one<'>'>> {};
struct cmp_expr : seq<add_expr, opt<sp, cmp_op, sp, must<add_expr>>> {};
struct not_expr;
struct not_op : if_must<kw_not, sp, not_expr> {};
struct not_expr : sor<nested<not_op>, cmp_expr> {};
struct and_expr : seq<not_expr, star<sp, kw_and, sp, must<not_expr>>> {};
struct or_expr : seq<and_expr, star<sp, kw_or, sp, must<and_expr>>> {};
struct expr : or_expr {};

// --- statements --------------------------------------------------------------
struct stmt;
struct stmt_end : sor<one<';'>, one<'\n'>, at<one<'}'>>, eof> {};
struct stmt_list : star<not_at<one<'}'>>, not_at<eof>, must<stmt>, sp, must<stmt_end>, ws> {};
struct open_brace : one<'{'> {};
template <typename Close>
struct block : if_must<open_brace, ws, stmt_list, Close> {};
struct for_close : one<'}'> {};
struct if_close : one<'}'> {};
struct else_close : one<'}'> {};
struct stage_close : one<'}'> {};
struct proc_close : one<'}'> {};

struct let_name : name {};
struct equals : one<'='> {};
struct let_stmt : if_must<kw_let, sp, let_name, sp, equals, sp, expr> {};

struct for_var : name {};
struct dots : string<'.', '.'> {};
struct range_bounds : seq<expr, sp, must<dots>, sp, must<expr>> {};
struct reversed_range : if_must<kw_reversed, sp, open_paren, sp, range_bounds, sp, close_paren> {};
struct forward_range : range_bounds {};
struct range : sor<reversed_range, forward_range> {};
struct for_stmt : if_must<kw_for, sp, for_var, sp, kw_in, sp, range, sp, nested<block<for_close>>> {};

struct if_stmt;
struct else_clause : if_must<kw_else, sp, sor<nested<if_stmt>, nested<block<else_close>>>> {};
struct if_stmt : if_must<kw_if, sp, expr, sp, nested<block<if_close>>, opt<ws, else_clause>> {};

struct stage_number : integer {};
struct stage_stmt : if_must<kw_stage, sp, stage_number, sp, nested<block<stage_close>>> {};

struct call_name : name {};
struct argument : expr {};
struct arguments : opt<argument, star<ws, comma, ws, must<argument>>> {};
struct call_stmt : if_must<call_name, sp, open_paren, ws, arguments, ws, close_paren> {};

struct opcode : seq<upper, star<ident_other>> {};
struct direction : sor<kw_send, kw_recv> {};
struct message_kind : sor<kw_act, kw_grad, kw_wgrad> {};
struct micro_batch : expr {};
struct chunk_number : expr {};
struct peer_stage : expr {};
struct chunk_clause : if_must<kw_chunk, sp, chunk_number> {};
struct layer_number : expr {};
struct layer_clause : if_must<kw_layer, sp, layer_number> {};
struct to_clause : if_must<kw_to, sp, peer_stage> {};
struct from_clause : if_must<kw_from, sp, peer_stage> {};
struct group_name : identifier {};
struct over_clause : if_must<kw_over, sp, group_name> {};
// `with mb [chunk C]`: the second cell of a two-cell instruction (FwdBwd).
struct second_cell : if_must<kw_with, sp, micro_batch, opt<sp, chunk_clause>> {};
struct operands : seq<opt<direction, sp>, opt<message_kind, sp>, opt<micro_batch, sp>, opt<chunk_clause, sp>, opt<layer_clause, sp>, opt<second_cell, sp>, opt<sor<to_clause, from_clause>, sp>, opt<over_clause>> {};
struct instruction : seq<opcode, sp, operands> {};

struct stmt : sor<for_stmt, if_stmt, stage_stmt, let_stmt, instruction, call_stmt> {};

// --- top level -----------------------------------------------------------------
struct string_body : star<not_one<'"', '\n'>> {};
struct string_close : one<'"'> {};
struct string_literal : if_must<one<'"'>, string_body, string_close> {};
struct colon : one<':'> {};
struct require_item : if_must<kw_require, sp, expr, sp, colon, sp, string_literal> {};

struct param : name {};
struct params : opt<param, star<ws, comma, ws, must<param>>> {};
struct proc_name : name {};
struct proc_item : if_must<kw_proc, sp, proc_name, sp, open_paren, ws, params, ws, close_paren, sp, nested<block<proc_close>>> {};

struct item : sor<require_item, proc_item, stmt> {};
struct item_list : star<not_at<eof>, must<item>, sp, must<stmt_end>, ws> {};

struct schedule_name : plus<sor<ident_other, one<'-'>>> {};
struct schedule_header : if_must<kw_schedule, sp, schedule_name, sp, stmt_end> {};
struct placement_name : sor<TAO_PEGTL_KEYWORD("looped"), TAO_PEGTL_KEYWORD("v"), TAO_PEGTL_KEYWORD("mirror")> {};
struct placement_header : if_must<kw_placement, sp, placement_name, sp, stmt_end> {};
// `check stages 2..8 micro_batches 4..16 dp 1..2 chunks 1`: the configurations
// the schedule is checked for when the command line names none.
struct kw_check : TAO_PEGTL_KEYWORD("check") {};
struct check_dimension : sor<TAO_PEGTL_KEYWORD("stages"), TAO_PEGTL_KEYWORD("micro_batches"), TAO_PEGTL_KEYWORD("dp"), TAO_PEGTL_KEYWORD("chunks")> {};
struct check_value : integer {};
struct check_bounds : seq<check_value, opt<sp, dots, sp, must<check_value>>> {};
struct check_item : seq<check_dimension, sp, must<check_bounds>> {};
struct check_items : seq<check_item, star<sp, opt<comma, sp>, check_item>> {};
struct check_header : seq<kw_check, sp, at<check_dimension>, must<check_items, sp, stmt_end>> {};
struct kw_topology : TAO_PEGTL_KEYWORD("topology") {};
struct kw_carry : TAO_PEGTL_KEYWORD("carry") {};
struct topology_name : plus<sor<ident_other, one<'-', ':', '.', '/'>>> {};
struct topology_header : if_must<kw_topology, sp, topology_name, sp, stmt_end> {};
struct carried_opcode : seq<upper, star<ident_other>> {};
struct carry_header : if_must<kw_carry, sp, carried_opcode, sp, stmt_end> {};
// `cut 0-2,3-4,5`: the layers of each model piece, in model order.
struct kw_cut : TAO_PEGTL_KEYWORD("cut") {};
struct cut_text : plus<sor<digit, one<'-', ','>>> {};
struct cut_header : seq<kw_cut, sp, at<digit>, must<cut_text, sp, stmt_end>> {};
struct headers : seq<opt<schedule_header, ws>, star<sor<placement_header, check_header, topology_header, carry_header, cut_header>, ws>> {};

struct program : seq<ws, headers, item_list, eof> {};

// clang-format on

}  // namespace pipevm::grammar

namespace tao::pegtl {
// Lets analyze<>() see through the nesting guard.
template <typename Name, typename Rule>
struct analyze_traits<Name, pipevm::grammar::nested<Rule>> : analyze_seq_traits<Rule> {};
}  // namespace tao::pegtl
