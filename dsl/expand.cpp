// expand(): evaluates a resolved Schedule once per world rank into a
// Program. A tree walker over the flat AST: names are slots of one array,
// procedures have fixed slots (no recursion), so the steady state neither
// looks up strings nor allocates, except when the code array grows.
// Errors (ranges, division by zero, overflow, runaway loops, a false
// `require`) are reported with the rank and stop the expansion.
#include <algorithm>
#include <limits>
#include <string>

#include "ast.hpp"
#include "compile.hpp"

namespace pipevm {

namespace {

// Thrown after the diagnostic is reported; unwinds to expand().
struct ExpansionStopped {};

constexpr int kMaxExecutionDepth = 4000;

class Expander {
 public:
  Expander(const Schedule& schedule, const Config& config, Diagnostics& diagnostics,
           const ExpandOptions& options, Program& program)
      : s_(schedule),
        config_(config),
        d_(diagnostics),
        options_(options),
        program_(program),
        slots_(schedule.slot_count, 0) {
    // A loop may spin without emitting; bound its iterations too.
    const std::uint64_t limit = options.max_instructions;
    iteration_limit_ = limit > std::numeric_limits<std::uint64_t>::max() / 16 ? limit : limit * 16;
  }

  bool run() {
    const int ranks = config_.ranks();
    program_.rank_begin.assign(1, 0);
    try {
      for (int r = 0; r < ranks; ++r) {
        if (options_.only_rank < 0 || options_.only_rank == r) expand_rank(r);
        program_.rank_begin.push_back(program_.code.size());
        reserve_for_remaining(r + 1, ranks);
      }
    } catch (const ExpansionStopped&) {
      return false;
    }
    return true;
  }

 private:
  const Schedule& s_;
  const Config& config_;
  Diagnostics& d_;
  const ExpandOptions& options_;
  Program& program_;
  std::vector<std::int64_t> slots_;
  std::vector<std::uint32_t> call_stack_;  // call statements, for notes
  std::uint64_t iterations_ = 0;
  int depth_ = 0;  // blocks being executed, procedure bodies included
  std::uint64_t longest_rank_ = 0;
  std::uint64_t iteration_limit_ = 0;
  int rank_ = 0;
  int stage_ = 0;
  // This rank's default peers, by (chunk, message kind, sending), filled as
  // they are first needed: every message of a rank asks for one of a few.
  static constexpr std::size_t kKinds = 4;  // MessageKind's values
  static constexpr std::int32_t kUnknownPeer = std::numeric_limits<std::int32_t>::min();
  std::vector<std::int32_t> default_peers_;

  // Grows the code array from the longest rank so far instead of doubling
  // (doubling a 400 MB array needs 1.2 GB at the moment of the copy). Ranks
  // of one schedule are alike, so this reallocates once or twice, early.
  void reserve_for_remaining(int done, int ranks) {
    std::vector<Instruction>& code = program_.code;
    const std::size_t begin = program_.rank_begin[program_.rank_begin.size() - 2];
    longest_rank_ = std::max<std::uint64_t>(longest_rank_, code.size() - begin);
    if (options_.only_rank >= 0 || done >= ranks) return;
    const std::uint64_t needed =
        code.size() + longest_rank_ * static_cast<std::uint64_t>(ranks - done);
    if (code.capacity() >= needed) return;
    code.reserve(std::min<std::uint64_t>(needed + needed / 64, options_.max_instructions + 1));
  }

  void expand_rank(int rank) {
    rank_ = rank;
    stage_ = stage_of(config_, rank);
    default_peers_.assign(static_cast<std::size_t>(std::max(config_.chunks, 1)) * kKinds * 2,
                          kUnknownPeer);
    slots_[kStage] = stage_;
    slots_[kStages] = config_.stages;
    slots_[kMicroBatches] = config_.micro_batches;
    slots_[kChunks] = config_.chunks;
    slots_[kDpRank] = dp_rank_of(config_, rank);
    slots_[kDp] = config_.dp;
    const LayerRange first_chunk = chunk_layers(program_, stage_, 0);
    slots_[kLayers] = layer_count(program_.layer_widths);
    slots_[kLayerBegin] = first_chunk.begin;
    slots_[kLayerEnd] = first_chunk.end;
    call_stack_.clear();
    depth_ = 0;
    execute(s_.top);
  }

  [[noreturn]] void fail(DiagnosticKind kind, std::string message, SourceRange range) {
    Diagnostic& d = d_.report(kind, std::move(message), Location{s_.file, range, rank_, stage_});
    for (auto it = call_stack_.rbegin(); it != call_stack_.rend(); ++it) {
      const Stmt& call = s_.stmts[*it];
      d.notes.push_back(Note{"in '" + s_.procedures[call.procedure].name + "', called here",
                             Location{s_.file, call.range, rank_, stage_}});
    }
    throw ExpansionStopped{};
  }

  [[noreturn]] void overflow(const Expr& e) {
    fail(DiagnosticKind::IntegerOverflow, "integer overflow: the result does not fit in 64 bits",
         e.range);
  }

  // The value of an expression; a name or a number without a call, since
  // most operands are one (a call to eval costs more than its work there).
  std::int64_t value(std::uint32_t index) {
    const Expr& e = s_.exprs[index];
    if (e.op == ExprOp::variable) return slots_[static_cast<std::size_t>(e.value)];
    if (e.op == ExprOp::constant) return e.value;
    return eval(index);
  }

  std::int64_t eval(std::uint32_t index) {
    const Expr& e = s_.exprs[index];
    std::int64_t result = 0;
    switch (e.op) {
      case ExprOp::constant:
        return e.value;
      case ExprOp::variable:
        return slots_[static_cast<std::size_t>(e.value)];
      case ExprOp::negate: {
        const std::int64_t v = value(e.lhs);
        if (v == std::numeric_limits<std::int64_t>::min()) overflow(e);
        return -v;
      }
      case ExprOp::logical_not:
        return value(e.lhs) == 0 ? 1 : 0;
      case ExprOp::logical_and:
        return value(e.lhs) != 0 && value(e.rhs) != 0 ? 1 : 0;
      case ExprOp::logical_or:
        return value(e.lhs) != 0 || value(e.rhs) != 0 ? 1 : 0;
      default:
        break;
    }
    const std::int64_t a = value(e.lhs);
    const std::int64_t b = value(e.rhs);
    switch (e.op) {
      case ExprOp::add:
        if (__builtin_add_overflow(a, b, &result)) overflow(e);
        return result;
      case ExprOp::subtract:
        if (__builtin_sub_overflow(a, b, &result)) overflow(e);
        return result;
      case ExprOp::multiply:
        if (__builtin_mul_overflow(a, b, &result)) overflow(e);
        return result;
      case ExprOp::divide: {
        if (b == 0) division_by_zero(e);
        if (b == -1) {
          if (a == std::numeric_limits<std::int64_t>::min()) overflow(e);
          return -a;
        }
        std::int64_t q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) --q;
        return q;
      }
      case ExprOp::modulo: {
        if (b == 0) division_by_zero(e);
        if (b == -1) return 0;
        std::int64_t r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
      case ExprOp::equal:
        return a == b ? 1 : 0;
      case ExprOp::not_equal:
        return a != b ? 1 : 0;
      case ExprOp::less:
        return a < b ? 1 : 0;
      case ExprOp::less_equal:
        return a <= b ? 1 : 0;
      case ExprOp::greater:
        return a > b ? 1 : 0;
      case ExprOp::greater_equal:
        return a >= b ? 1 : 0;
      case ExprOp::minimum:
        return std::min(a, b);
      case ExprOp::maximum:
        return std::max(a, b);
      default:
        return 0;
    }
  }

  [[noreturn]] void division_by_zero(const Expr& e) {
    const SourceRange divisor = s_.exprs[e.rhs].range;
    const std::string_view text =
        std::string_view(s_.file->text()).substr(divisor.begin, divisor.end - divisor.begin);
    fail(DiagnosticKind::DivisionByZero,
         "division by zero: '" + std::string(text) + "' is 0 on this rank", divisor);
  }

  void execute(Block block) {
    // The parser bounds nesting per file and per call chain, but a chain of
    // calls from deeply nested blocks multiplies the two: bound the product.
    if (++depth_ > kMaxExecutionDepth) {
      const SourceRange at =
          block.begin < block.end ? s_.stmts[s_.block_items[block.begin]].range : SourceRange{};
      fail(DiagnosticKind::NestingTooDeep,
           "blocks and calls nested more than " + std::to_string(kMaxExecutionDepth) +
               " deep during expansion",
           at);
    }
    for (std::uint32_t i = block.begin; i < block.end; ++i) execute(s_.stmts[s_.block_items[i]]);
    --depth_;
  }

  void count_iteration(const Stmt& loop) {
    if (++iterations_ > iteration_limit_) {
      fail(DiagnosticKind::ExpansionLimit,
           "runaway expansion: loops ran more than " + std::to_string(iteration_limit_) +
               " iterations (16 x --max-instructions)",
           loop.range);
    }
  }

  void execute(const Stmt& st) {
    switch (st.kind) {
      case StmtKind::let:
        slots_[st.slot] = value(st.first);
        return;
      case StmtKind::for_range: {
        const std::int64_t low = value(st.first);
        const std::int64_t high = value(st.second);
        if (st.reversed) {
          for (std::int64_t i = high; i > low;) {
            --i;
            count_iteration(st);
            slots_[st.slot] = i;
            execute(st.body);
          }
        } else {
          for (std::int64_t i = low; i < high; ++i) {
            count_iteration(st);
            slots_[st.slot] = i;
            execute(st.body);
          }
        }
        return;
      }
      case StmtKind::if_else:
        execute(value(st.first) != 0 ? st.body : st.otherwise);
        return;
      case StmtKind::stage_only:
        if (st.stage == stage_) execute(st.body);
        return;
      case StmtKind::call: {
        const Procedure& procedure = s_.procedures[st.procedure];
        for (std::uint32_t a = st.args_begin; a < st.args_end; ++a) {
          slots_[procedure.params[a - st.args_begin]] = value(s_.call_args[a]);
        }
        call_stack_.push_back(static_cast<std::uint32_t>(&st - s_.stmts.data()));
        execute(procedure.body);
        call_stack_.pop_back();
        return;
      }
      case StmtKind::instruction:
        emit(st);
        return;
      case StmtKind::require:
        if (eval(st.first) == 0) {
          Diagnostic d;
          d.kind = DiagnosticKind::RequireFailed;
          d.message = s_.messages[st.message];
          d.location = Location{s_.file, s_.exprs[st.first].range, rank_, stage_};
          d.notes.push_back(Note{"with stages = " + std::to_string(config_.stages) +
                                     ", micro_batches = " + std::to_string(config_.micro_batches) +
                                     ", chunks = " + std::to_string(config_.chunks) +
                                     ", dp = " + std::to_string(config_.dp),
                                 Location{}});
          d_.report(std::move(d));
          throw ExpansionStopped{};
        }
        return;
    }
  }

  // A micro-batch operand, in range. Every instruction has one: the report
  // stays out of line so that the check costs a compare.
  std::uint32_t micro_batch(std::uint32_t expression) {
    const std::int64_t mb = value(expression);
    if (mb < 0 || mb >= config_.micro_batches) micro_batch_out_of_range(mb, expression);
    return static_cast<std::uint32_t>(mb);
  }

  [[noreturn, gnu::cold]] void micro_batch_out_of_range(std::int64_t mb, std::uint32_t expression) {
    fail(DiagnosticKind::MicroBatchOutOfRange,
         "micro-batch " + std::to_string(mb) +
             " is out of range: micro_batches = " + std::to_string(config_.micro_batches) +
             ", so 0 .. " + std::to_string(config_.micro_batches - 1),
         s_.exprs[expression].range);
  }

  // A chunk operand, in range.
  std::uint16_t chunk(std::uint32_t expression) {
    const std::int64_t c = value(expression);
    if (c < 0 || c >= config_.chunks) chunk_out_of_range(c, expression);
    return static_cast<std::uint16_t>(c);
  }

  [[noreturn, gnu::cold]] void chunk_out_of_range(std::int64_t c, std::uint32_t expression) {
    fail(DiagnosticKind::ChunkOutOfRange,
         "chunk " + std::to_string(c) + " is out of range: chunks = " +
             std::to_string(config_.chunks) + ", so 0 .. " + std::to_string(config_.chunks - 1),
         s_.exprs[expression].range);
  }

  // A layer operand: a layer of the model, and on a compute step one of its
  // chunk's layers.
  int layer(std::uint32_t expression, const Instruction& in) {
    const std::int64_t l = eval(expression);
    const int layers = layer_count(program_.layer_widths);
    const SourceRange where = s_.exprs[expression].range;
    // Hold and Drop of an act or grad name a boundary between layers: the
    // input of layer L, or, one past the last layer, the output.
    const bool boundary =
        info(in.op).operands == OperandSyntax::value && in.kind != MessageKind::wgrad;
    const int past = boundary ? 1 : 0;
    if (l < 0 || l >= layers + past || l > kMaxLayer) {
      fail(DiagnosticKind::LayerOutOfRange,
           "layer " + std::to_string(l) + " is out of range: the model has " +
               std::to_string(layers) + " layers, so 0 .. " + std::to_string(layers - 1) +
               (boundary ? " (" + std::to_string(layers) + ": the model's output)" : ""),
           where);
    }
    if (operand_parts(in.op).micro_batch) {
      const LayerRange held = chunk_layers(program_, stage_, in.chunk);
      if (l < held.begin || l >= held.end + past) {
        const std::string chunk = config_.chunks > 1 || in.chunk > 0
                                      ? "chunk " + std::to_string(in.chunk) + " of stage "
                                      : "stage ";
        fail(DiagnosticKind::LayerOutOfRange,
             "layer " + std::to_string(l) + " is not held by " + chunk + std::to_string(stage_) +
                 (held.size() == 0 ? std::string(": the model's ") + std::to_string(layers) +
                                         " layers cannot be cut into the program's pieces"
                                   : ", which holds layers " + std::to_string(held.begin) + " .. " +
                                         std::to_string(held.end - 1) +
                                         (boundary ? " (" + std::to_string(held.end) +
                                                         ": its output)"
                                                   : "")),
             where);
      }
    }
    return static_cast<int>(l);
  }

  // The second cell of a two-cell instruction, in range and in the 16 + 8
  // bits the Instruction keeps it in (isa.hpp).
  Cell second_cell(const Stmt& st) {
    Cell cell;
    cell.micro_batch = micro_batch(st.second_micro_batch);
    if (cell.micro_batch > kPairMaxMicroBatch) {
      fail(DiagnosticKind::InvalidOperand,
           "the second micro-batch of " + std::string(name(st.op)) + " must be at most " +
               std::to_string(kPairMaxMicroBatch),
           s_.exprs[st.second_micro_batch].range);
    }
    if (st.second_chunk == kNoIndex) return cell;
    cell.chunk = chunk(st.second_chunk);
    if (cell.chunk > kPairMaxChunk) {
      fail(DiagnosticKind::InvalidOperand,
           "the second chunk of " + std::string(name(st.op)) + " must be at most " +
               std::to_string(kPairMaxChunk),
           s_.exprs[st.second_chunk].range);
    }
    return cell;
  }

  // default_peer for this rank, remembered (the chunk is in range by now).
  int default_peer_of(const Stmt& st, std::uint16_t chunk) {
    const std::size_t at =
        (static_cast<std::size_t>(chunk) * kKinds + static_cast<std::size_t>(st.message_kind)) * 2 +
        (st.sending ? 1 : 0);
    std::int32_t& peer = default_peers_[at];
    if (peer == kUnknownPeer) {
      peer = default_peer(s_.placement, config_, stage_, st.message_kind, chunk, st.sending);
    }
    return peer;
  }

  void emit(const Stmt& st) {
    Instruction in;
    in.op = st.op;
    in.kind = st.message_kind;
    in.direction = st.direction;
    in.group = st.group;
    bool explicit_peer = false;
    if (st.micro_batch != kNoIndex) in.micro_batch = micro_batch(st.micro_batch);
    if (st.chunk != kNoIndex) in.chunk = chunk(st.chunk);
    if (operand_parts(st.op).second_cell) set_second_cell(in, second_cell(st));
    if (operand_parts(st.op).layer)
      set_layer(in, st.layer == kNoIndex ? kNoLayer : layer(st.layer, in));
    if (operand_parts(st.op).peer) {
      if (st.peer != kNoIndex) {
        const std::int64_t peer = eval(st.peer);
        if (peer < std::numeric_limits<std::int16_t>::min() ||
            peer > std::numeric_limits<std::int16_t>::max()) {
          fail(DiagnosticKind::InvalidOperand,
               "peer stage " + std::to_string(peer) +
                   " is not a stage number (it must fit in 16 bits)",
               s_.exprs[st.peer].range);
        }
        in.peer = static_cast<std::int16_t>(peer);
        explicit_peer = true;
      } else {
        in.peer = static_cast<std::int16_t>(default_peer_of(st, in.chunk));
      }
    }
    if (program_.code.size() >= options_.max_instructions) {
      fail(DiagnosticKind::ExpansionLimit,
           "runaway expansion: more than " + std::to_string(options_.max_instructions) +
               " instructions (raise --max-instructions if this is intended)",
           st.range);
    }
    // A statement is at least two bytes of a file under 4 GiB: 31 bits hold its index.
    in.set_source(st.source, explicit_peer);
    program_.code.push_back(in);
  }
};

// The topology the command line gives, else the one the schedule names,
// built for the configuration's dp; false (reported) when it names none
// that fits.
bool resolve_topology(const Schedule& schedule, const ExpandOptions& options, Program& program,
                      Diagnostics& diagnostics) {
  if (options.topology) {
    program.topology = options.topology;
    return true;
  }
  const std::string& spec =
      options.topology_name.empty() ? schedule.topology : options.topology_name;
  if (spec.empty()) return true;
  std::string error;
  auto built = builtin_topology(spec, program.config.dp, error);
  if (!built) {
    diagnostics.report(DiagnosticKind::InvalidTopology, error);
    return false;
  }
  program.topology = std::make_shared<const Topology>(std::move(*built));
  return true;
}

// How the placement makes `model_pieces` pieces, for errors.
std::string pieces_phrase(Placement placement, const Config& config) {
  const std::string stages = std::to_string(config.stages) + " stages";
  switch (placement) {
    case Placement::looped:
      return stages + " x " + std::to_string(config.chunks) + " chunks";
    case Placement::v:
      return stages + " x 2 chunks, placement v";
    case Placement::mirror:
      return stages + ", placement mirror";
  }
  return stages;
}

}  // namespace

std::optional<Program> expand(const Schedule& schedule, const Config& config,
                              Diagnostics& diagnostics, const ExpandOptions& options) {
  // Instructions store stages in 16 bits, chunks in 16 and micro-batches in 32.
  if (config.stages < 1 || config.stages > std::numeric_limits<std::int16_t>::max() ||
      config.chunks < 1 || config.chunks > std::numeric_limits<std::uint16_t>::max() ||
      config.micro_batches < 1 || config.dp < 1) {
    diagnostics.report(DiagnosticKind::InvalidOperand,
                       "configuration out of range: stages must be 1 .. 32767, chunks 1 .. "
                       "65535, micro_batches and dp at least 1");
    return std::nullopt;
  }
  Program program;
  program.file = schedule.file;
  program.name = name_of(schedule);
  program.placement = schedule.placement;
  program.config = config;
  program.sources = schedule.instruction_sources;
  program.carried = schedule.carried;
  program.layer_widths =
      options.layer_widths.empty() ? default_layer_widths() : options.layer_widths;
  const int pieces = model_pieces(program.placement, config);
  if (!schedule.cut.empty() && static_cast<int>(schedule.cut.size()) != pieces) {
    diagnostics.report(DiagnosticKind::InvalidCut,
                       "the cut has " + std::to_string(schedule.cut.size()) + " pieces but the program has " +
                           std::to_string(pieces) + " model pieces (" + pieces_phrase(program.placement, config) +
                           ")",
                       Location{schedule.file, schedule.cut_at});
    return std::nullopt;
  }
  program.cut = schedule.cut;
  if (static_cast<int>(options.split.size()) == pieces) {
    program.layer_split = options.split;
  } else if (!cut_for_model(program, program.layer_widths).empty()) {
    program.layer_split = program.cut;
  } else if (program.layer_widths.size() >= 2 && pieces <= layer_count(program.layer_widths)) {
    program.layer_split = split_layers(program.layer_widths, pieces);
  }
  if (!resolve_topology(schedule, options, program, diagnostics)) return std::nullopt;
  if (!Expander(schedule, config, diagnostics, options, program).run()) return std::nullopt;
  if (!program.topology) {
    const auto gossip =
        std::find_if(program.code.begin(), program.code.end(),
                     [](const Instruction& in) { return group_of(in) == Group::gossip; });
    if (gossip != program.code.end()) {
      diagnostics.report(DiagnosticKind::InvalidTopology,
                         std::string(name(gossip->op)) +
                             " exchanges with a gossip group, but no topology is given: name one "
                             "with `topology NAME` or --topology (" +
                             std::string(builtin_topology_names()) + ", or FILE.yaml)",
                         Location{program.file, program.source_of(*gossip)});
      return std::nullopt;
    }
  }
  return program;
}

}  // namespace pipevm
