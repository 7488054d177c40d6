// Names, lookup and the disassembler, all driven by isa.def.
#include "isa.hpp"

#include <algorithm>
#include <cctype>

#include "program.hpp"

namespace pipevm {

std::string_view name(OperandShape shape) {
  switch (shape) {
    case OperandShape::None: return "";
    case OperandShape::MicroBatch: return "mb [chunk C]";
    case OperandShape::Message: return "act|grad mb [chunk C] [to S|from S]";
    case OperandShape::Wait: return "send|recv act|grad mb [chunk C]";
  }
  return "?";
}

std::string_view name(OpcodeGroup group) {
  switch (group) {
    case OpcodeGroup::data: return "data";
    case OpcodeGroup::compute: return "compute";
    case OpcodeGroup::p2p: return "point-to-point";
    case OpcodeGroup::collective: return "collective";
    case OpcodeGroup::optimizer: return "optimizer";
  }
  return "?";
}

std::string_view name(MessageKind kind) {
  switch (kind) {
    case MessageKind::none: return "";
    case MessageKind::act: return "act";
    case MessageKind::grad: return "grad";
  }
  return "?";
}

std::string_view name(WaitDirection direction) {
  switch (direction) {
    case WaitDirection::none: return "";
    case WaitDirection::send: return "send";
    case WaitDirection::recv: return "recv";
  }
  return "?";
}

std::optional<Opcode> opcode_from_name(std::string_view word) {
  for (std::size_t i = 0; i < kOpcodeCount; ++i) {
    if (kOpcodeInfo[i].name == word) return static_cast<Opcode>(i);
  }
  return std::nullopt;
}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string_view nearest_opcode_name(std::string_view word) {
  std::string_view best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& op : kOpcodeInfo) {
    const std::size_t d = edit_distance(word, op.name);
    if (d < best_distance) {
      best_distance = d;
      best = op.name;
    }
  }
  return best;
}

std::string disassemble(const Instruction& in) {
  std::string out(name(in.op));
  const auto shape = info(in.op).shape;
  if (shape == OperandShape::None) return out;
  if (shape == OperandShape::Wait) {
    out += ' ';
    out += name(in.direction);
  }
  if (shape == OperandShape::Message || shape == OperandShape::Wait) {
    out += ' ';
    out += name(in.kind);
  }
  out += ' ';
  out += std::to_string(in.micro_batch);
  if (in.chunk != 0) out += " chunk " + std::to_string(in.chunk);
  if (shape == OperandShape::Message && in.explicit_peer) {
    out += is_send(in.op) ? " to " : " from ";
    out += std::to_string(in.peer);
  }
  return out;
}

}  // namespace pipevm
