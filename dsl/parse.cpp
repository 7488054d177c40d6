// parse(): text -> PEGTL parse tree -> resolved Schedule. Syntax errors come
// from the grammar's error table (errors.hpp); everything that can be known
// without a configuration is checked here too: opcodes and their operand
// shapes, names, procedures, argument counts and recursion (resolve.hpp).
// Evaluation lives in expand.cpp.
#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string>

#include <tao/pegtl.hpp>
#include <tao/pegtl/contrib/parse_tree.hpp>

#include "ast.hpp"
#include "compile.hpp"
#include "errors.hpp"
#include "grammar.hpp"
#include "layer_costs.hpp"
#include "quote.hpp"
#include "resolve.hpp"

namespace pipevm {

namespace {

namespace pt = tao::pegtl::parse_tree;
namespace g = grammar;
using Node = pt::node;

// Replaces a node by its only child; keeps the text range otherwise (unlike
// PEGTL's fold_one) so that expressions can point at their source.
struct fold_keep : pt::apply<fold_keep> {
  template <typename N, typename... States>
  static void transform(std::unique_ptr<N>& n, States&&... /*states*/) {
    if (n->children.size() == 1) n = std::move(n->children.front());
  }
};

template <typename Rule>
using selector = pt::selector<
    Rule,
    pt::store_content::on<
        g::integer, g::name_ref, g::mul_op, g::add_op, g::cmp_op, g::let_name, g::for_var,
        g::call_name, g::proc_name, g::param, g::opcode, g::direction, g::message_kind,
        g::stage_number, g::string_body, g::schedule_name, g::placement_name, g::topology_name,
        g::carried_opcode, g::cut_text, g::negate, g::not_op, g::min_call, g::max_call, g::expr, g::micro_batch,
        g::chunk_number, g::layer_number, g::peer_stage, g::argument, g::let_stmt, g::for_stmt,
        g::reversed_range, g::forward_range, g::if_stmt, g::else_clause, g::stage_stmt,
        g::call_stmt, g::instruction, g::chunk_clause, g::layer_clause, g::to_clause,
        g::from_clause, g::over_clause, g::group_name, g::second_cell, g::require_item,
        g::proc_item, g::check_header, g::check_item, g::check_dimension, g::check_value>,
    fold_keep::on<g::and_expr, g::not_expr, g::cmp_expr, g::add_expr, g::mul_expr, g::unary,
                  g::primary, g::paren_expr>>;

constexpr std::string_view kDigits = "0123456789";

SourceRange range_of(const Node& n) {
  return {static_cast<std::uint32_t>(n.m_begin.byte), static_cast<std::uint32_t>(n.m_end.byte)};
}

// Deepest expression tree the evaluator walks recursively (a long chain of
// `a + b + ...` nests without parentheses).
constexpr int kMaxExpressionDepth = 1000;

class Builder {
 public:
  Builder(Schedule& schedule, Diagnostics& diagnostics)
      : s_(schedule), d_(diagnostics), names_(schedule, diagnostics) {}

  void build(const Node& root) {
    std::vector<const Node*> items;
    for (const auto& child : root.children) {
      const Node& n = *child;
      if (n.is_type<g::schedule_name>()) {
        s_.name = std::string(n.string_view());
      } else if (n.is_type<g::placement_name>()) {
        const auto word = n.string_view();
        s_.placement = word == "v"        ? Placement::v
                       : word == "mirror" ? Placement::mirror
                                          : Placement::looped;
      } else if (n.is_type<g::check_header>()) {
        declared_sweep(n);
      } else if (n.is_type<g::topology_name>()) {
        s_.topology = std::string(n.string_view());
      } else if (n.is_type<g::carried_opcode>()) {
        carry(n);
      } else if (n.is_type<g::cut_text>()) {
        cut(n);
      } else {
        items.push_back(&n);
      }
    }
    // Procedures and top-level lets are known before any body is resolved:
    // procedures can be called before their definition, and read the
    // top-level lets defined before the call.
    for (const Node* n : items) {
      if (n->is_type<g::proc_item>()) {
        std::vector<SourceRange> params;
        for (const auto& c : n->children) {
          if (c->is_type<g::param>()) params.push_back(range_of(*c));
        }
        names_.declare_procedure(range_of(*n->children.front()), params);
      } else if (n->is_type<g::let_stmt>()) {
        names_.declare_global(range_of(*n->children.front()));
      }
    }
    std::uint32_t proc = 0;
    for (const Node* n : items) {
      if (!n->is_type<g::proc_item>()) continue;
      names_.enter_procedure(proc);
      std::size_t first_statement = 1;  // after the name
      for (; first_statement < n->children.size() &&
             n->children[first_statement]->is_type<g::param>();
           ++first_statement) {
        names_.bind_parameter(proc, first_statement - 1, range_of(*n->children[first_statement]));
      }
      s_.procedures[proc].body = statements(n->children, first_statement);
      names_.leave_procedure();
      ++proc;
    }
    std::vector<std::uint32_t> top;
    for (const Node* n : items) {
      if (n->is_type<g::proc_item>()) continue;
      if (n->is_type<g::let_stmt>()) {
        const std::uint32_t value = expr(*n->children[1]);
        Stmt st;
        st.kind = StmtKind::let;
        st.first = value;
        st.slot = names_.define_global(range_of(*n->children.front()));
        st.range = range_of(*n);
        top.push_back(add(st));
      } else if (const auto index = statement(*n)) {
        top.push_back(*index);
      }
    }
    s_.top = block(top);
    names_.finish();
    flat_stages(items);
  }

 private:
  Schedule& s_;
  Diagnostics& d_;
  Resolver names_;
  std::vector<int> depth_;  // per expression: height of its tree

  // `check stages 2..8 micro_batches 4 ...`
  void declared_sweep(const Node& header) {
    DeclaredSweep sweep;
    sweep.range = range_of(header);
    std::vector<std::string_view> seen;
    for (const auto& item : header.children) {
      // The lookahead at<check_dimension> leaves a node of its own: skip it.
      if (!item->is_type<g::check_item>() || item->children.size() < 2) continue;
      const std::string_view dimension = item->children.front()->string_view();
      if (std::find(seen.begin(), seen.end(), dimension) != seen.end()) {
        error(DiagnosticKind::Redefinition,
              quote(dimension) + " is named twice in one 'check' line", range_of(*item));
        continue;
      }
      seen.push_back(dimension);
      std::vector<int> values;
      for (std::size_t i = 1; i < item->children.size(); ++i) {
        const Node& value = *item->children[i];
        const std::string_view text = value.string_view();
        int v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > (1 << 30)) {
          error(DiagnosticKind::InvalidOperand,
                std::string(text) + " is not a count from 1 to 2^30", range_of(value));
          return;
        }
        values.push_back(v);
      }
      const ValueRange range{values.front(), values.back()};
      if (range.first > range.last) {
        error(DiagnosticKind::InvalidOperand, "the range is empty: its first value is larger",
              range_of(*item));
        return;
      }
      if (dimension == "stages") sweep.stages = range;
      if (dimension == "micro_batches") sweep.micro_batches = range;
      if (dimension == "dp") sweep.dp = range;
      if (dimension == "chunks") sweep.chunks = range;
    }
    s_.sweeps.push_back(sweep);
  }

  // A flat program: nothing at the top level but `stage N { ... }` blocks.
  void flat_stages(const std::vector<const Node*>& items) {
    int highest = -1;
    for (const Node* n : items) {
      if (n->is_type<g::require_item>()) continue;
      if (!n->is_type<g::stage_stmt>()) return;
      const std::string_view text = n->children.front()->string_view();
      int stage = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), stage);
      if (ec != std::errc() || end != text.data() + text.size()) return;
      highest = std::max(highest, stage);
    }
    if (highest >= 0) s_.flat_stages = highest + 1;
  }

  Location at(SourceRange range) const { return Location{s_.file, range, -1, -1}; }
  void error(DiagnosticKind kind, std::string message, SourceRange range) {
    d_.report(kind, std::move(message), at(range));
  }

  std::uint32_t add(const Stmt& st) {
    s_.stmts.push_back(st);
    return static_cast<std::uint32_t>(s_.stmts.size() - 1);
  }
  Block block(const std::vector<std::uint32_t>& items) {
    Block b;
    b.begin = static_cast<std::uint32_t>(s_.block_items.size());
    s_.block_items.insert(s_.block_items.end(), items.begin(), items.end());
    b.end = static_cast<std::uint32_t>(s_.block_items.size());
    return b;
  }

  // --- expressions -----------------------------------------------------------
  std::uint32_t add(const Expr& e, int depth) {
    s_.exprs.push_back(e);
    depth_.push_back(depth);
    return static_cast<std::uint32_t>(s_.exprs.size() - 1);
  }
  int depth(std::uint32_t e) const { return depth_[e]; }

  std::uint32_t constant(std::int64_t value, SourceRange range) {
    Expr e;
    e.value = value;
    e.range = range;
    return add(e, 1);
  }

  std::uint32_t combine(ExprOp op, std::uint32_t lhs, std::uint32_t rhs) {
    Expr e;
    e.op = op;
    e.lhs = lhs;
    e.rhs = rhs;
    e.range = {s_.exprs[lhs].range.begin,
               rhs == kNoIndex ? s_.exprs[lhs].range.end : s_.exprs[rhs].range.end};
    const int height = 1 + std::max(depth(lhs), rhs == kNoIndex ? 0 : depth(rhs));
    return add(e, height);
  }

  bool too_deep(std::uint32_t e) {
    if (depth(e) <= kMaxExpressionDepth) return false;
    error(DiagnosticKind::NestingTooDeep,
          "expression too deeply nested (more than " + std::to_string(kMaxExpressionDepth) +
              " operations in a chain)",
          s_.exprs[e].range);
    return true;
  }

  static ExprOp binary_op(std::string_view symbol) {
    if (symbol == "+") return ExprOp::add;
    if (symbol == "-") return ExprOp::subtract;
    if (symbol == "*") return ExprOp::multiply;
    if (symbol == "/") return ExprOp::divide;
    if (symbol == "%") return ExprOp::modulo;
    if (symbol == "==") return ExprOp::equal;
    if (symbol == "!=") return ExprOp::not_equal;
    if (symbol == "<") return ExprOp::less;
    if (symbol == "<=") return ExprOp::less_equal;
    if (symbol == ">") return ExprOp::greater;
    return ExprOp::greater_equal;
  }

  static bool is_or_level(const Node& n) {
    return n.is_type<g::expr>() || n.is_type<g::micro_batch>() || n.is_type<g::chunk_number>() ||
           n.is_type<g::layer_number>() || n.is_type<g::peer_stage>() || n.is_type<g::argument>();
  }

  std::uint32_t expr(const Node& n) {
    if (n.is_type<g::integer>()) return integer(n);
    if (n.is_type<g::name_ref>()) {
      Expr e;
      e.op = ExprOp::variable;
      e.range = range_of(n);
      e.value = names_.lookup(e.range);
      return add(e, 1);
    }
    if (n.is_type<g::negate>() || n.is_type<g::not_op>()) {
      const std::uint32_t operand = expr(*n.children.front());
      const std::uint32_t e =
          combine(n.is_type<g::negate>() ? ExprOp::negate : ExprOp::logical_not, operand, kNoIndex);
      s_.exprs[e].range = range_of(n);
      return e;
    }
    if (n.is_type<g::min_call>() || n.is_type<g::max_call>()) {
      const std::uint32_t a = expr(*n.children[0]);
      const std::uint32_t b = expr(*n.children[1]);
      const std::uint32_t e =
          combine(n.is_type<g::min_call>() ? ExprOp::minimum : ExprOp::maximum, a, b);
      s_.exprs[e].range = range_of(n);
      return e;
    }
    if (is_or_level(n) || n.is_type<g::and_expr>()) {
      const ExprOp op = is_or_level(n) ? ExprOp::logical_or : ExprOp::logical_and;
      std::uint32_t result = expr(*n.children.front());
      for (std::size_t i = 1; i < n.children.size(); ++i) {
        result = combine(op, result, expr(*n.children[i]));
        if (too_deep(result)) break;
      }
      return result;
    }
    // cmp_expr, add_expr, mul_expr: operand (operator operand)*
    std::uint32_t result = expr(*n.children.front());
    for (std::size_t i = 1; i + 1 < n.children.size(); i += 2) {
      const ExprOp op = binary_op(n.children[i]->string_view());
      result = combine(op, result, expr(*n.children[i + 1]));
      if (too_deep(result)) break;
    }
    return result;
  }

  std::uint32_t integer(const Node& n) {
    const std::string_view text = n.string_view();
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      error(DiagnosticKind::IntegerOverflow,
            "integer " + std::string(text) + " does not fit in 64 bits", range_of(n));
      value = 0;
    }
    return constant(value, range_of(n));
  }

  // --- statements ------------------------------------------------------------
  // Converts children[from..] that are statements into a block.
  Block statements(const Node::children_t& children, std::size_t from) {
    std::vector<std::uint32_t> items;
    for (std::size_t i = from; i < children.size(); ++i) {
      if (const auto index = statement(*children[i])) items.push_back(*index);
    }
    return block(items);
  }

  Block scoped_statements(const Node::children_t& children, std::size_t from) {
    names_.push_scope();
    const Block b = statements(children, from);
    names_.pop_scope();
    return b;
  }

  std::optional<std::uint32_t> statement(const Node& n) {
    Stmt st;
    st.range = range_of(n);
    if (n.is_type<g::let_stmt>()) {
      st.kind = StmtKind::let;
      st.first = expr(*n.children[1]);
      st.slot = names_.bind_local(range_of(*n.children[0]));
    } else if (n.is_type<g::for_stmt>()) {
      st.kind = StmtKind::for_range;
      const Node& range = *n.children[1];
      st.reversed = range.is_type<g::reversed_range>();
      st.first = expr(*range.children[0]);
      st.second = expr(*range.children[1]);
      names_.push_scope();
      st.slot = names_.bind_local(range_of(*n.children[0]));
      st.body = statements(n.children, 2);
      names_.pop_scope();
    } else if (n.is_type<g::if_stmt>()) {
      st.kind = StmtKind::if_else;
      st.first = expr(*n.children[0]);
      std::size_t end = n.children.size();
      if (n.children.back()->is_type<g::else_clause>()) --end;
      names_.push_scope();
      std::vector<std::uint32_t> then_items;
      for (std::size_t i = 1; i < end; ++i) {
        if (const auto index = statement(*n.children[i])) then_items.push_back(*index);
      }
      names_.pop_scope();
      st.body = block(then_items);
      if (end < n.children.size()) st.otherwise = scoped_statements(n.children.back()->children, 0);
    } else if (n.is_type<g::stage_stmt>()) {
      st.kind = StmtKind::stage_only;
      st.stage = s_.exprs[integer(*n.children[0])].value;
      st.body = scoped_statements(n.children, 1);
    } else if (n.is_type<g::call_stmt>()) {
      return call(n, st);
    } else if (n.is_type<g::instruction>()) {
      return instruction(n, st);
    } else if (n.is_type<g::require_item>()) {
      st.kind = StmtKind::require;
      st.first = expr(*n.children[0]);
      st.message = static_cast<std::uint32_t>(s_.messages.size());
      s_.messages.emplace_back(n.children.size() > 1 ? n.children[1]->string_view() : "");
    } else {
      error(DiagnosticKind::SyntaxError, "unexpected statement", st.range);
      return std::nullopt;
    }
    return add(st);
  }

  std::optional<std::uint32_t> call(const Node& n, Stmt st) {
    st.kind = StmtKind::call;
    st.args_begin = static_cast<std::uint32_t>(s_.call_args.size());
    std::vector<std::uint32_t> args;
    for (std::size_t i = 1; i < n.children.size(); ++i) args.push_back(expr(*n.children[i]));
    st.args_begin = static_cast<std::uint32_t>(s_.call_args.size());
    s_.call_args.insert(s_.call_args.end(), args.begin(), args.end());
    st.args_end = static_cast<std::uint32_t>(s_.call_args.size());
    const auto callee = names_.call(range_of(*n.children[0]), st.range, args.size());
    if (!callee) return std::nullopt;
    st.procedure = *callee;
    return add(st);
  }

  std::optional<std::uint32_t> instruction(const Node& n, Stmt st);

  // `carry OP`: the requests OP posts cross the step boundary. Only a
  // collective that posts a request (GossipStart) can be carried: its
  // pairing does not depend on operands the next step would have to repeat.
  void carry(const Node& n) {
    const std::string_view word = n.string_view();
    const auto op = opcode_from_name(word);
    if (!op || !posts_request(*op) || !is_collective(*op)) {
      error(DiagnosticKind::InvalidOperand,
            "'carry' names an instruction whose request crosses the step boundary; '" +
                std::string(word) + "' is not one (GossipStart is)",
            range_of(n));
      return;
    }
    s_.carried.push_back(*op);
    s_.carried_at.push_back(range_of(n));
  }

  // `cut 0-2,3-4,5`: read against the layers it names itself (its highest
  // layer + 1); whether that is the model's count is the run's question.
  void cut(const Node& n) {
    const std::string_view text = n.string_view();
    if (!s_.cut.empty()) {
      error(DiagnosticKind::InvalidCut, "a second 'cut' line: a program records one cut", range_of(n));
      return;
    }
    int highest = 0;
    for (std::size_t at = text.find_first_of(kDigits); at != std::string_view::npos;
         at = text.find_first_of(kDigits, text.find_first_not_of(kDigits, at))) {
      int layer = std::numeric_limits<int>::max() - 1;
      std::from_chars(text.data() + at, text.data() + text.size(), layer);
      highest = std::max(highest, std::min(layer, std::numeric_limits<int>::max() - 1));
    }
    const int layers = highest + 1;
    std::string why;
    auto parsed = parse_cut(text, layers, why);
    if (!parsed) {
      error(DiagnosticKind::InvalidCut, "'cut " + std::string(text) + "': " + why, range_of(n));
      return;
    }
    s_.cut = std::move(*parsed);
    s_.cut_at = range_of(n);
  }
};

// Checks an instruction's operands against what its opcode takes
// (operand_parts, from isa.def).
std::optional<std::uint32_t> Builder::instruction(const Node& n, Stmt st) {
  const Node& opcode_node = *n.children.front();
  const std::string_view word = opcode_node.string_view();
  const auto op = opcode_from_name(word);
  if (!op) {
    std::string message = "unknown instruction '" + std::string(word) + "'";
    const std::string_view nearest = nearest_opcode_name(word);
    if (!nearest.empty()) message += "; did you mean '" + std::string(nearest) + "'?";
    error(DiagnosticKind::UnknownOpcode, std::move(message), range_of(opcode_node));
    return std::nullopt;
  }
  st.kind = StmtKind::instruction;
  st.op = *op;
  st.sending = is_send(*op);
  st.group = info(*op).group;
  const OperandParts takes = operand_parts(*op);
  std::string usage(word);
  if (const std::string syntax = operand_syntax(*op); !syntax.empty()) usage += " " + syntax;
  const bool takes_any = takes.direction || takes.kind || takes.micro_batch || takes.chunk ||
                         takes.layer || takes.peer || takes.group;
  const auto misuse = [&](const Node& part, const std::string& what) {
    error(DiagnosticKind::SyntaxError, what + "; usage: " + usage, range_of(part));
    return std::nullopt;
  };
  const auto not_an_operand = [&](const Node& part) {
    return misuse(part, quote(part.string_view()) + " is not an operand of " + std::string(word));
  };
  const auto takes_no = [&](const Node& part, const std::string& what) {
    return misuse(part,
                  std::string(word) + (takes_any ? " takes no " + what : " takes no operands"));
  };
  SourceRange statement_range = range_of(opcode_node);
  bool has_mb = false;
  bool has_kind = false;
  bool has_direction = false;
  for (std::size_t i = 1; i < n.children.size(); ++i) {
    const Node& part = *n.children[i];
    statement_range.end = range_of(part).end;
    if (part.is_type<g::direction>()) {
      if (!takes.direction) return not_an_operand(part);
      st.direction = part.string_view() == "send" ? WaitDirection::send : WaitDirection::recv;
      has_direction = true;
    } else if (part.is_type<g::message_kind>()) {
      if (!takes.kind) return not_an_operand(part);
      const std::string_view kind = part.string_view();
      st.message_kind = kind == "act"    ? MessageKind::act
                        : kind == "grad" ? MessageKind::grad
                                         : MessageKind::wgrad;
      if (st.message_kind == MessageKind::wgrad && info(*op).operands != OperandSyntax::value) {
        return misuse(part, "'wgrad' (a weight gradient) is never sent; only Hold and Drop name it");
      }
      has_kind = true;
    } else if (part.is_type<g::micro_batch>()) {
      if (!takes.micro_batch) return takes_no(part, "micro-batch");
      st.micro_batch = expr(part);
      has_mb = true;
    } else if (part.is_type<g::chunk_clause>()) {
      if (!takes.chunk) return takes_no(part, "chunk");
      st.chunk = expr(*part.children.front());
    } else if (part.is_type<g::layer_clause>()) {
      if (!takes.layer) return takes_no(part, "layer");
      // A piece is a chunk's weights or one layer's: not both.
      if (!takes.micro_batch && st.chunk != kNoIndex) {
        return misuse(part, std::string(word) + " names a chunk or a layer, not both");
      }
      st.layer = expr(*part.children.front());
    } else if (part.is_type<g::to_clause>() || part.is_type<g::from_clause>()) {
      const bool to = part.is_type<g::to_clause>();
      if (!takes.peer) return misuse(part, std::string(word) + " has no peer");
      if (to && !st.sending) {
        return misuse(part,
                      "'to' names where a send goes; " + std::string(word) + " takes 'from S'");
      }
      if (!to && st.sending) {
        return misuse(part, "'from' names where a receive comes from; " + std::string(word) +
                                " takes 'to S'");
      }
      st.peer = expr(*part.children.front());
    } else if (part.is_type<g::second_cell>()) {
      if (!takes.second_cell) return misuse(part, std::string(word) + " takes one cell, no 'with'");
      for (const auto& cell_part : part.children) {
        if (cell_part->is_type<g::micro_batch>()) st.second_micro_batch = expr(*cell_part);
        if (cell_part->is_type<g::chunk_clause>()) {
          st.second_chunk = expr(*cell_part->children.front());
        }
      }
    } else if (part.is_type<g::over_clause>()) {
      if (!takes.group) return misuse(part, std::string(word) + " names no group");
      const Node& group_word = *part.children.front();
      const auto group = group_from_name(group_word.string_view());
      if (!group || !info(*op).over.contains(*group)) {
        return misuse(group_word, quote(group_word.string_view()) + " is not a group " +
                                      std::string(word) + " can use");
      }
      st.group = *group;
    }
  }
  const SourceRange after_opcode{range_of(opcode_node).end, range_of(opcode_node).end + 1};
  const auto lacks = [&](const std::string& what) {
    error(DiagnosticKind::SyntaxError, std::string(word) + " needs " + what + "; usage: " + usage,
          after_opcode);
    return std::nullopt;
  };
  if (takes.direction && !has_direction) return lacks("'send' or 'recv'");
  if (takes.kind && !has_kind) {
    return lacks(info(*op).operands == OperandSyntax::value ? "'act', 'grad' or 'wgrad'"
                                                            : "'act' or 'grad'");
  }

  if (takes.micro_batch && !has_mb) return lacks("a micro-batch");
  if (takes.second_cell && st.second_micro_batch == kNoIndex) {
    return lacks("a second cell ('with mb [chunk C]')");
  }
  st.range = statement_range;
  st.source = static_cast<std::uint32_t>(s_.instruction_sources.size());
  s_.instruction_sources.push_back(statement_range);
  return add(st);
}

// Blanks the line holding `offset` so that parsing can go on after a syntax
// error: the line's braces are kept as `if 0 {` and `}` so that the blocks
// around it still pair. False when the line cannot be replaced in its own
// length (the offsets of what follows must not move) or was blanked already.
bool blank_statement(std::string& text, std::size_t offset) {
  std::size_t begin = text.rfind('\n', offset == 0 ? 0 : offset - 1);
  begin = begin == std::string::npos || offset == 0 ? 0 : begin + 1;
  if (offset < text.size() && text[offset] == '\n' && offset > 0 && text[offset - 1] == '\n') {
    begin = offset;
  }
  std::size_t end = text.find('\n', offset);
  if (end == std::string::npos) end = text.size();
  int opens = 0, closes = 0;
  bool blank = true;
  for (std::size_t i = begin; i < end; ++i) {
    if (text[i] == '#') break;
    if (text[i] == '{') ++opens;
    if (text[i] == '}') (opens > 0 ? --opens : ++closes);
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') blank = false;
  }
  std::string replacement;
  for (int i = 0; i < closes; ++i) replacement += "};";
  for (int i = 0; i < opens; ++i) replacement += "if 0 {";
  if (blank || replacement.size() > end - begin) return false;
  if (text.compare(begin, replacement.size(), replacement) == 0 &&
      text.find_first_not_of(' ', begin + replacement.size()) >= end) {
    return false;  // blanked already: the error is not on this line
  }
  replacement.resize(end - begin, ' ');
  text.replace(begin, end - begin, replacement);
  return true;
}

}  // namespace

std::shared_ptr<const Schedule> parse(std::shared_ptr<const SourceFile> file,
                                      Diagnostics& diagnostics) {
  auto schedule = std::make_shared<Schedule>();
  schedule->file = file;
  std::unique_ptr<Node> root;
  // Statement-level recovery: after a syntax error the line is blanked and the
  // text parsed again, up to kMaxSyntaxErrors errors.
  std::string text = file->text();
  std::size_t syntax_errors = 0;
  const auto syntax_error = [&](const tao::pegtl::parse_error& e) {
    const auto offset = static_cast<std::uint32_t>(e.positions().front().byte);
    diagnostics.report(DiagnosticKind::SyntaxError, std::string(e.message()),
                       Location{file, {offset, offset + 1}, -1, -1});
    ++syntax_errors;
    return offset;
  };
  while (true) {
    try {
      tao::pegtl::memory_input<> in(text, file->name());
      g::ParseState state;
      root = pt::parse<g::program, selector, tao::pegtl::nothing, g::control>(in, state);
      break;
    } catch (const g::unclosed_block& e) {
      const auto offset = static_cast<std::uint32_t>(e.positions().front().byte);
      const auto opened = static_cast<std::uint32_t>(e.opened);
      Diagnostic& d = diagnostics.report(DiagnosticKind::SyntaxError, std::string(e.message()),
                                         Location{file, {offset, offset + 1}, -1, -1});
      d.notes.push_back(Note{"the block opens here", Location{file, {opened, opened + 1}, -1, -1}});
      return nullptr;
    } catch (const g::nesting_error& e) {
      const auto offset = static_cast<std::uint32_t>(e.positions().front().byte);
      diagnostics.report(DiagnosticKind::NestingTooDeep,
                         "blocks, parentheses or unary operators nested more than " +
                             std::to_string(g::kMaxNesting) + " deep",
                         Location{file, {offset, offset + 1}, -1, -1});
      return nullptr;
    } catch (const tao::pegtl::parse_error& e) {
      const std::uint32_t offset = syntax_error(e);
      if (syntax_errors >= kMaxSyntaxErrors || !blank_statement(text, offset)) return nullptr;
    }
  }
  if (syntax_errors > 0) return nullptr;
  if (!root) {
    diagnostics.report(DiagnosticKind::SyntaxError, "not a schedule",
                       Location{file, {0, 1}, -1, -1});
    return nullptr;
  }
  // Procedures are resolved before the top level: report in text order.
  Diagnostics found;
  Builder(*schedule, found).build(*root);
  std::vector<Diagnostic> sorted = found.all();
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.location.range.begin < b.location.range.begin;
  });
  for (Diagnostic& d : sorted) diagnostics.report(std::move(d));
  if (found.has_errors()) return nullptr;
  return schedule;
}

}  // namespace pipevm
