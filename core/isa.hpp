// The instruction set as C++: the Opcode enum and, per opcode, what it does
// (its row of isa.def: operands, class, direction, completion, group,
// values consumed and produced, cost), all expanded from isa.def. Also the
// compact Instruction record that a Program stores, one per executed step
// of one rank, and the operand syntax the parser, the disassembler and the
// docs share.
//
// The columns are what interpreters read instead of lists of opcodes: a
// switch over Opcode (or over a column's enum) has no `default:`, so that a
// new row makes the compiler name every place that must decide about it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipevm {

enum class Opcode : std::uint8_t {
#define PIPEVM_OPCODE(name, operands, cls, direction, completion, group, over, consumes, \
                      produces, cost, doc)                                                \
  name,
#include "isa.def"
};

inline constexpr std::size_t kOpcodeCount = 0
#define PIPEVM_OPCODE(name, operands, cls, direction, completion, group, over, consumes, produces, \
                      cost, doc)                                                                   \
  +1
#include "isa.def"
    ;

// What follows the opcode's name; see isa.def.
enum class OperandSyntax : std::uint8_t {
  none,
  cell,
  layered,
  message,
  wait,
  pair,
  piece,
  reduction,
  value
};

// What kind of step an instruction is.
enum class OpClass : std::uint8_t { data, compute, p2p, wait, collective, optimizer };

// Which way a point-to-point instruction's value travels; `operand` when a
// send|recv operand says it (Wait); to_host and from_host for a copy between
// the device and host memory (Offload, Reload) and the wait that completes it.
enum class Direction : std::uint8_t { none, send, recv, operand, to_host, from_host };

// When an instruction is done: on its own (local), when its partners are
// there (blocking), or later, when a wait-class instruction completes the
// request it posts (request).
enum class Completion : std::uint8_t { local, blocking, request };

// Who an instruction talks to (groups.def).
enum class Group : std::uint8_t {
#define PIPEVM_GROUP(name, doc) name,
#include "groups.def"
};
inline constexpr std::size_t kGroupCount = 0
#define PIPEVM_GROUP(name, doc) +1
#include "groups.def"
    ;

// What a dataflow step reads or makes. Per (chunk, micro-batch) cell:
// input, target, activation, output_gradient, input_gradient,
// weight_gradient; `message` is the value a message's act|grad operand
// names. Per rank: gradient (the accumulated gradients), reduced_gradient.
// Per chunk: weights (the gathered whole copy of a sharded chunk). Per
// cell again: stash, what its backward reads, on the device (last, so that
// a missing activation or gradient is reported before it).
enum class Value : std::uint8_t {
  input,
  target,
  activation,
  output_gradient,
  input_gradient,
  weight_gradient,
  message,
  gradient,
  reduced_gradient,
  weights,
  stash,
};
inline constexpr std::size_t kValueCount = 11;

// The simulator's cost of an instruction (costs.hpp turns it into time).
enum class CostKind : std::uint8_t {
  none,  // takes no time of its own (a wait lasts as long as its requests)
  load,
  fwd,
  bwd,
  bwd_input,
  bwd_weight,
  bwd_allreduce,  // a backward's compute, then an all-reduce
  allreduce,
  allgather,           // gathers a chunk's weight shards
  reduce_scatter,      // sums the gradients, each member keeping its shard
  bwd_reduce_scatter,  // a backward's compute, then a reduce-scatter
  message,
  zero_grad,
  optimizer,
  fwd_bwd,    // an overlapped forward and backward (FwdBwd); default fwd + bwd
  recompute,  // a forward run again from a checkpoint (Recompute); default fwd
  host_copy,  // a copy on the rank's host link (Offload, Reload): latency + bytes / bandwidth
};

// A small set of enum values, as bits.
template <class E>
class EnumSet {
 public:
  constexpr EnumSet() = default;
  template <class... Es>
  static constexpr EnumSet of(Es... values) {
    EnumSet set;
    ((set.bits_ |= bit(values)), ...);
    return set;
  }
  constexpr bool contains(E value) const { return (bits_ & bit(value)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr EnumSet with(E value) const { return EnumSet(bits_ | bit(value)); }
  constexpr std::uint32_t bits() const { return bits_; }
  constexpr EnumSet without(E value) const {
    return EnumSet(bits_ & static_cast<std::uint32_t>(~bit(value)));
  }
  friend constexpr bool operator==(EnumSet, EnumSet) = default;

 private:
  constexpr explicit EnumSet(std::uint32_t bits) : bits_(bits) {}
  static constexpr std::uint32_t bit(E value) { return 1u << static_cast<unsigned>(value); }
  std::uint32_t bits_ = 0;
};
using ValueSet = EnumSet<Value>;
using GroupSet = EnumSet<Group>;

struct OpcodeInfo {
  std::string_view name;
  OperandSyntax operands;
  OpClass cls;
  Direction direction;
  Completion completion;
  Group group;     // the group it talks to when the source names none
  GroupSet over;   // the groups `over G` may name; empty when it takes no `over`
  ValueSet consumes;
  ValueSet produces;
  CostKind cost;
  std::string_view doc;
};

inline constexpr std::array<OpcodeInfo, kOpcodeCount> kOpcodeInfo = {{
#define PIPEVM_OPCODE(name, operands, cls, direction, completion, group, over, consumes, produces, \
                      cost, doc)                                                                   \
  {#name,                                                                                          \
   OperandSyntax::operands,                                                                        \
   OpClass::cls,                                                                                   \
   Direction::direction,                                                                           \
   Completion::completion,                                                                         \
   Group::group,                                                                                   \
   [] {                                                                                            \
     using enum Group;                                                                             \
     return GroupSet::of over;                                                                     \
   }(),                                                                                            \
   [] {                                                                                            \
     using enum Value;                                                                             \
     return ValueSet::of consumes;                                                                 \
   }(),                                                                                            \
   [] {                                                                                            \
     using enum Value;                                                                             \
     return ValueSet::of produces;                                                                 \
   }(),                                                                                            \
   CostKind::cost,                                                                                 \
   doc},
#include "isa.def"
}};

constexpr const OpcodeInfo& info(Opcode op) { return kOpcodeInfo[static_cast<std::size_t>(op)]; }
constexpr std::string_view name(Opcode op) { return info(op).name; }
std::string_view name(OpClass cls);
std::string_view name(Group group);
std::string_view describe(Group group);  // the line of groups.def
std::optional<Group> group_from_name(std::string_view word);
std::string_view name(Value value);
std::string_view name(CostKind cost);

// The opcode spelled exactly `word`, if any.
std::optional<Opcode> opcode_from_name(std::string_view word);
// The opcode name closest to `word` (edit distance, case-insensitive), for
// "did you mean" hints; empty when nothing is close.
std::string_view nearest_opcode_name(std::string_view word);

// What is sent: an activation (flows to the next stage) or a gradient (flows
// back). Hold and Drop also name a weight gradient (wgrad), which is never sent.
enum class MessageKind : std::uint8_t { none = 0, act = 1, grad = 2, wgrad = 3 };
// Which pending requests a Wait completes.
enum class WaitDirection : std::uint8_t { none = 0, send = 1, recv = 2 };
std::string_view name(MessageKind kind);
std::string_view name(WaitDirection direction);

// Point-to-point sends and receives, blocking or not, by the table's columns.
constexpr bool is_send(Opcode op) {
  return info(op).cls == OpClass::p2p && info(op).direction == Direction::send;
}
constexpr bool is_recv(Opcode op) {
  return info(op).cls == OpClass::p2p && info(op).direction == Direction::recv;
}
// Posts a request that a wait-class instruction completes.
constexpr bool posts_request(Opcode op) { return info(op).completion == Completion::request; }
// Copies between the device and host memory (Offload, Reload), or waits for
// one (WaitOffload, WaitReload): no other rank takes part.
constexpr bool is_host_copy(Opcode op) {
  return info(op).direction == Direction::to_host || info(op).direction == Direction::from_host;
}
constexpr bool is_collective(Opcode op) { return info(op).cls == OpClass::collective; }
// Applies the reduced gradients to the parameters (an optimizer step).
constexpr bool is_step(Opcode op) { return info(op).consumes.contains(Value::reduced_gradient); }
// Computes a backward (an input or a weight gradient).
constexpr bool is_backward(Opcode op) {
  return info(op).produces.contains(Value::input_gradient) ||
         info(op).produces.contains(Value::weight_gradient);
}

// The value a message carries, as its sender reads it and its receiver
// makes it: an activation leaves as `activation` and arrives as the next
// piece's `input`; a gradient leaves as `input_gradient` and arrives as the
// previous piece's `output_gradient`.
constexpr Value message_value(MessageKind kind, bool sending) {
  if (kind == MessageKind::act) return sending ? Value::activation : Value::input;
  return sending ? Value::input_gradient : Value::output_gradient;
}

// The operands an opcode takes, in the order they are written; declared
// once for the parser, the disassembler and docs/isa.md.
struct OperandParts {
  bool direction = false;    // send|recv (Wait)
  bool kind = false;         // act|grad (Hold, Drop: act|grad|wgrad)
  bool micro_batch = false;  // mb (required when taken)
  bool chunk = false;        // [chunk C]
  bool peer = false;         // [to S] for sends, [from S] for receives
  bool group = false;        // [over G]
  bool second_cell = false;  // with mb [chunk C]: a second (micro-batch, chunk) cell
  bool layer = false;        // [layer L]: one layer of the model (a global index)
};
constexpr OperandParts operand_parts_of(const OpcodeInfo& row) {
  OperandParts parts;
  switch (row.operands) {
    case OperandSyntax::none: break;
    case OperandSyntax::cell: parts.micro_batch = parts.chunk = true; break;
    case OperandSyntax::layered:
      parts.micro_batch = parts.chunk = parts.layer = true;
      break;
    case OperandSyntax::message:
      parts.kind = parts.micro_batch = parts.chunk = parts.peer = true;
      break;
    case OperandSyntax::wait:
      parts.direction = parts.kind = parts.micro_batch = parts.chunk = true;
      break;
    case OperandSyntax::pair: parts.micro_batch = parts.chunk = parts.second_cell = true; break;
    case OperandSyntax::piece:
      parts.chunk = parts.layer = true;
      break;
    case OperandSyntax::reduction:
      parts.layer = true;
      break;
    case OperandSyntax::value:
      parts.kind = parts.micro_batch = parts.chunk = parts.layer = true;
      break;
  }
  parts.group = !row.over.empty();
  return parts;
}
inline constexpr std::array<OperandParts, kOpcodeCount> kOperandParts = [] {
  std::array<OperandParts, kOpcodeCount> parts{};
  for (std::size_t i = 0; i < kOpcodeCount; ++i) parts[i] = operand_parts_of(kOpcodeInfo[i]);
  return parts;
}();
constexpr const OperandParts& operand_parts(Opcode op) {
  return kOperandParts[static_cast<std::size_t>(op)];
}
// "act|grad mb [chunk C] [to S]", "[layer L] [over dp|mirror]", "" for none.
std::string operand_syntax(Opcode op);

// One instruction of one rank's stream. 16 bytes: the source position is an
// index into the Program's table of source ranges, shared by every
// instruction that one statement of the schedule produced. Which fields
// mean something depends on the opcode's operands (operand_parts).
struct Instruction {
  Opcode op = Opcode::WaitAll;
  MessageKind kind = MessageKind::none;           // act|grad operand
  WaitDirection direction = WaitDirection::none;  // send|recv operand
  Group group = Group::none;  // `over G`; none: the row's group (group_of)
  std::uint32_t micro_batch = 0;
  // p2p: the partner stage, resolved (may be out of range); a row taking
  // [layer L]: the layer, kNoLayer when none is named (layer_of).
  std::int16_t peer = -1;
  std::uint16_t chunk = 0;
  // Bits 0-30: the index into Program::sources; bit 31: the source said
  // `to S` / `from S` (explicit_peer). One word, so that building an
  // instruction writes it whole.
  std::uint32_t source_bits = 0;

  static constexpr std::uint32_t kExplicitPeer = 0x8000'0000u;
  constexpr std::uint32_t source() const { return source_bits & ~kExplicitPeer; }
  constexpr bool explicit_peer() const { return (source_bits & kExplicitPeer) != 0; }
  constexpr void set_source(std::uint32_t index, bool explicit_peer) {
    source_bits = (index & ~kExplicitPeer) | (explicit_peer ? kExplicitPeer : 0u);
  }
};
static_assert(sizeof(Instruction) == 16, "Instruction must stay compact");

// --- two-cell instructions (operand syntax `pair`: FwdBwd) -------------------
//
// A two-cell row is two cell rows issued as one step: its first cell runs
// the first half, its second cell the second, in that order (FwdBwd: Fwd on
// the first cell, Bwd on the second). The first cell lives where every cell
// does (micro_batch, chunk), so a reader that knows nothing of pairs sees
// the first half; the second cell lives in the fields a cell row leaves
// unused: its micro-batch in `peer` (16 bits), its chunk in the `kind` byte.
// The expansion refuses a second cell that does not fit (kPairMaxMicroBatch,
// kPairMaxChunk); docs/design-notes.md says why not an array beside `code`.
struct Cell {
  std::uint32_t micro_batch = 0;
  std::uint16_t chunk = 0;
};
inline constexpr std::uint32_t kPairMaxMicroBatch = 0xffff;
inline constexpr std::uint16_t kPairMaxChunk = 0xff;

// The rows a two-cell row runs, one per cell; both equal to `op` for the others.
struct Halves {
  Opcode first;
  Opcode second;
};
constexpr Halves halves(Opcode op) {
  if (op == Opcode::FwdBwd) return {Opcode::Fwd, Opcode::Bwd};
  return {op, op};
}
constexpr bool is_pair(Opcode op) { return info(op).operands == OperandSyntax::pair; }

constexpr Cell first_cell(const Instruction& in) { return {in.micro_batch, in.chunk}; }
constexpr Cell second_cell(const Instruction& in) {
  return {static_cast<std::uint16_t>(in.peer), static_cast<std::uint8_t>(in.kind)};
}
constexpr void set_second_cell(Instruction& in, Cell cell) {
  in.peer = static_cast<std::int16_t>(static_cast<std::uint16_t>(cell.micro_batch));
  in.kind = static_cast<MessageKind>(static_cast<std::uint8_t>(cell.chunk));
}
// How many halves an instruction runs as: 2 for a two-cell row, else 1.
constexpr int half_count(const Instruction& in) { return is_pair(in.op) ? 2 : 1; }
// Half `which` (0 or 1) of a two-cell instruction, as a plain instruction
// of its own row on its own cell; `in` itself for other rows.
constexpr Instruction half(const Instruction& in, int which) {
  if (!is_pair(in.op)) return in;
  Instruction h = in;
  const Cell cell = which == 0 ? first_cell(in) : second_cell(in);
  h.op = which == 0 ? halves(in.op).first : halves(in.op).second;
  h.micro_batch = cell.micro_batch;
  h.chunk = cell.chunk;
  h.peer = -1;
  h.kind = MessageKind::none;
  return h;
}

// One instruction in the language's own syntax, e.g. "Recv act 3 chunk 1 from 2".
std::string disassemble(const Instruction& instruction);

// --- one layer of the model (operand `layer L`) ------------------------------
//
// Rows whose operands take [layer L] keep the layer, a global index into the
// model's layers, in `peer` (which no such row uses otherwise); kNoLayer
// means the instruction names none: the whole chunk (compute, AllGather,
// Release) or every gradient of the rank (AllReduce, ReduceScatter).
inline constexpr int kNoLayer = -1;
inline constexpr int kMaxLayer = 0x7fff;
constexpr int layer_of(const Instruction& in) {
  return operand_parts(in.op).layer ? in.peer : kNoLayer;
}
constexpr void set_layer(Instruction& in, int layer) {
  in.peer = static_cast<std::int16_t>(layer);
}

// The group an instruction talks to: the one its `over` named, else its row's.
constexpr Group group_of(const Instruction& in) {
  return in.group != Group::none ? in.group : info(in.op).group;
}

// Whether two instructions are the same step: the opcode and what every
// operand resolves to (not where in the source they come from, nor whether
// the source spelled the peer out).
constexpr bool same_operands(const Instruction& a, const Instruction& b) {
  return a.op == b.op && a.kind == b.kind && a.direction == b.direction &&
         a.micro_batch == b.micro_batch && a.peer == b.peer && a.chunk == b.chunk &&
         group_of(a) == group_of(b);
}

}  // namespace pipevm
