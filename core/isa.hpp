// The instruction set as C++: the Opcode enum and the per-opcode facts, all
// expanded from isa.def. Also the compact Instruction record that a Program
// stores, one per executed step of one rank.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pipevm {

enum class Opcode : std::uint8_t {
#define PIPEVM_OPCODE(name, shape, group, doc) name,
#include "isa.def"
};

inline constexpr std::size_t kOpcodeCount = 0
#define PIPEVM_OPCODE(name, shape, group, doc) +1
#include "isa.def"
    ;

// What operands an opcode takes; see isa.def.
enum class OperandShape : std::uint8_t { None, MicroBatch, Message, Wait };
enum class OpcodeGroup : std::uint8_t { data, compute, p2p, collective, optimizer };

// What is sent: an activation (flows to the next stage) or a gradient (flows back).
enum class MessageKind : std::uint8_t { none = 0, act = 1, grad = 2 };
// Which pending requests a Wait completes.
enum class WaitDirection : std::uint8_t { none = 0, send = 1, recv = 2 };

struct OpcodeInfo {
  std::string_view name;
  OperandShape shape;
  OpcodeGroup group;
  std::string_view doc;
};

inline constexpr std::array<OpcodeInfo, kOpcodeCount> kOpcodeInfo = {{
#define PIPEVM_OPCODE(name, shape, group, doc) \
  {#name, OperandShape::shape, OpcodeGroup::group, doc},
#include "isa.def"
}};

constexpr const OpcodeInfo& info(Opcode op) { return kOpcodeInfo[static_cast<std::size_t>(op)]; }
constexpr std::string_view name(Opcode op) { return info(op).name; }
std::string_view name(OperandShape shape);
std::string_view name(OpcodeGroup group);
std::string_view name(MessageKind kind);
std::string_view name(WaitDirection direction);

// The opcode spelled exactly `word`, if any.
std::optional<Opcode> opcode_from_name(std::string_view word);
// The opcode name closest to `word` (edit distance, case-insensitive), for
// "did you mean" hints; empty when nothing is close.
std::string_view nearest_opcode_name(std::string_view word);

// Send/ISend and Recv/IRecv.
constexpr bool is_send(Opcode op) { return op == Opcode::Send || op == Opcode::ISend; }
constexpr bool is_recv(Opcode op) { return op == Opcode::Recv || op == Opcode::IRecv; }
constexpr bool is_nonblocking(Opcode op) { return op == Opcode::ISend || op == Opcode::IRecv; }

// One instruction of one rank's stream. 16 bytes: the source position is an
// index into the Program's table of source ranges, shared by every
// instruction that one statement of the schedule produced.
struct Instruction {
  Opcode op = Opcode::WaitAll;
  MessageKind kind = MessageKind::none;           // Message and Wait shapes
  WaitDirection direction = WaitDirection::none;  // Wait shape
  std::uint8_t explicit_peer = 0;  // 1 when the source said `to S` / `from S`
  std::uint32_t micro_batch = 0;
  std::int16_t peer = -1;  // Message shape: the partner stage, resolved (may be out of range)
  std::uint16_t chunk = 0;
  std::uint32_t source = 0;  // index into Program::sources
};
static_assert(sizeof(Instruction) == 16, "Instruction must stay compact");

}  // namespace pipevm
