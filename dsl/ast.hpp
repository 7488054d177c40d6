// The syntax tree of a schedule, resolved and ready to evaluate: every name
// is a slot index, every call a procedure index, every instruction statement
// an index into the table of source ranges the Program shares. Nodes live in
// flat arrays and refer to each other by index, so evaluation allocates
// nothing. Parsing (parse.cpp) and name resolution (resolve.cpp) build it;
// expand.cpp walks it. Nothing here depends on a configuration.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compile.hpp"
#include "isa.hpp"
#include "program.hpp"
#include "source.hpp"

namespace pipevm {

inline constexpr std::uint32_t kNoIndex = 0xFFFFFFFFu;

enum class ExprOp : std::uint8_t {
  constant,  // value
  variable,  // value = slot
  negate,
  logical_not,
  add,
  subtract,
  multiply,
  divide,  // floor division
  modulo,  // floor modulo: the sign of the divisor
  equal,
  not_equal,
  less,
  less_equal,
  greater,
  greater_equal,
  logical_and,
  logical_or,
  minimum,
  maximum,
};

struct Expr {
  ExprOp op = ExprOp::constant;
  std::uint32_t lhs = kNoIndex;  // operands: indices into Schedule::exprs
  std::uint32_t rhs = kNoIndex;
  std::int64_t value = 0;  // constant, or the slot of a variable
  SourceRange range;
};

enum class StmtKind : std::uint8_t {
  let,
  for_range,
  if_else,
  stage_only,
  call,
  instruction,
  require
};

// A run of statements: indices [begin, end) into Schedule::block_items.
struct Block {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
};

struct Stmt {
  StmtKind kind = StmtKind::let;
  bool reversed = false;               // for: count down
  std::uint32_t slot = kNoIndex;       // let, for: the variable
  std::uint32_t first = kNoIndex;      // let value, for lower bound, if/require condition
  std::uint32_t second = kNoIndex;     // for upper bound
  std::int64_t stage = 0;              // stage_only
  Block body;                          // for, if (then), stage, call arguments live elsewhere
  Block otherwise;                     // if (else)
  std::uint32_t procedure = kNoIndex;  // call
  std::uint32_t args_begin = 0;        // call: arguments are Schedule::call_args[begin, end)
  std::uint32_t args_end = 0;
  std::uint32_t message = kNoIndex;  // require: index into Schedule::messages
  // instruction
  Opcode op = Opcode::WaitAll;
  MessageKind message_kind = MessageKind::none;
  WaitDirection direction = WaitDirection::none;
  bool sending = false;                  // the peer, if any, is a destination
  std::uint32_t micro_batch = kNoIndex;  // expressions; kNoIndex when absent
  std::uint32_t chunk = kNoIndex;
  std::uint32_t peer = kNoIndex;
  std::uint32_t second_micro_batch = kNoIndex;  // `with mb [chunk C]` (two-cell rows)
  std::uint32_t second_chunk = kNoIndex;
  std::uint32_t layer = kNoIndex;  // `layer L`
  Group group = Group::none;  // `over G`, else the opcode's own group
  std::uint32_t source = 0;  // index into Schedule::instruction_sources
  SourceRange range;
};

struct Procedure {
  std::string name;
  SourceRange range;                  // the name in its definition
  std::vector<std::uint32_t> params;  // slots
  Block body;
};

// Names every schedule can read; slots 0..8 in this order. The last three
// are the model's: its layer count and the layers [layer_begin, layer_end)
// of the rank's chunk 0.
inline constexpr const char* kBuiltinNames[] = {"stage",  "stages",      "micro_batches",
                                                "chunks", "dp_rank",     "dp",
                                                "layers", "layer_begin", "layer_end"};
inline constexpr std::uint32_t kBuiltinCount = 9;
enum BuiltinSlot : std::uint32_t {
  kStage,
  kStages,
  kMicroBatches,
  kChunks,
  kDpRank,
  kDp,
  kLayers,
  kLayerBegin,
  kLayerEnd
};

class Schedule {
 public:
  std::shared_ptr<const SourceFile> file;
  std::string name;  // from `schedule NAME`, empty if absent
  Placement placement = Placement::looped;
  std::vector<DeclaredSweep> sweeps;  // `check` headers
  int flat_stages = 0;                // implied_stages()
  std::string topology;  // `topology NAME`, empty if absent
  // `carry OP`: opcodes whose requests cross the step boundary, and where.
  std::vector<Opcode> carried;
  std::vector<SourceRange> carried_at;
  // `cut 0-2,3-4,5`: the layers of each model piece (empty if absent), and
  // where the line's cut text is.
  std::vector<LayerRange> cut;
  SourceRange cut_at;

  std::vector<Expr> exprs;
  std::vector<Stmt> stmts;
  std::vector<std::uint32_t> block_items;  // statement indices, grouped by Block
  std::vector<std::uint32_t> call_args;    // expression indices, grouped per call
  std::vector<Procedure> procedures;
  std::vector<std::string> messages;  // require texts
  std::vector<SourceRange> instruction_sources;
  Block top;  // the top-level statements in order
  std::uint32_t slot_count = kBuiltinCount;
};

}  // namespace pipevm
