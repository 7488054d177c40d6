// Names, lookup, operand syntax and the disassembler, all driven by isa.def.
#include "isa.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "nearest_name.hpp"
#include "program.hpp"

namespace pipevm {

std::string_view name(OpClass cls) {
  switch (cls) {
    case OpClass::data: return "data";
    case OpClass::compute: return "compute";
    case OpClass::p2p: return "point-to-point";
    case OpClass::wait: return "waits";
    case OpClass::collective: return "collective";
    case OpClass::optimizer: return "optimizer";
  }
  return "?";
}

namespace {
struct GroupInfo {
  std::string_view name;
  std::string_view doc;
};
constexpr std::array<GroupInfo, kGroupCount> kGroupInfo = {{
#define PIPEVM_GROUP(name, doc) {#name, doc},
#include "groups.def"
}};
}  // namespace

std::string_view name(Group group) { return kGroupInfo[static_cast<std::size_t>(group)].name; }
std::string_view describe(Group group) { return kGroupInfo[static_cast<std::size_t>(group)].doc; }

std::optional<Group> group_from_name(std::string_view word) {
  for (std::size_t g = 0; g < kGroupCount; ++g) {
    if (kGroupInfo[g].name == word) return static_cast<Group>(g);
  }
  return std::nullopt;
}

std::string_view name(Value value) {
  switch (value) {
    case Value::input: return "input";
    case Value::target: return "target";
    case Value::activation: return "activation";
    case Value::output_gradient: return "output gradient";
    case Value::input_gradient: return "input gradient";
    case Value::weight_gradient: return "weight gradient";
    case Value::message: return "the message's value";
    case Value::gradient: return "accumulated gradients";
    case Value::reduced_gradient: return "reduced gradients";
    case Value::weights: return "gathered weights";
    case Value::stash: return "stash";
  }
  return "?";
}

std::string_view name(CostKind cost) {
  switch (cost) {
    case CostKind::none: return "";
    case CostKind::load: return "load";
    case CostKind::fwd: return "fwd";
    case CostKind::bwd: return "bwd";
    case CostKind::bwd_input: return "bwd-input";
    case CostKind::bwd_weight: return "bwd-weight";
    case CostKind::bwd_allreduce: return "bwd + allreduce";
    case CostKind::fwd_bwd: return "fwd-bwd";
    case CostKind::allreduce: return "allreduce";
    case CostKind::allgather: return "allgather";
    case CostKind::reduce_scatter: return "reduce-scatter";
    case CostKind::bwd_reduce_scatter: return "bwd + reduce-scatter";
    case CostKind::message: return "send + bytes / bandwidth";
    case CostKind::zero_grad: return "zero-grad";
    case CostKind::optimizer: return "optimizer";
    case CostKind::recompute: return "recompute";
    case CostKind::host_copy: return "host-latency + bytes / host-bandwidth";
  }
  return "?";
}

std::string_view name(MessageKind kind) {
  switch (kind) {
    case MessageKind::none: return "";
    case MessageKind::act: return "act";
    case MessageKind::grad: return "grad";
    case MessageKind::wgrad: return "wgrad";
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

std::string_view nearest_opcode_name(std::string_view word) {
  std::vector<std::string_view> names;
  for (const auto& op : kOpcodeInfo) names.push_back(op.name);
  return nearest_name(word, names);
}

std::string operand_syntax(Opcode op) {
  const OperandParts parts = operand_parts(op);
  std::string out;
  const auto add = [&out](std::string_view part) {
    if (!out.empty()) out += ' ';
    out += part;
  };
  if (parts.direction) add("send|recv");
  if (parts.kind) add(info(op).operands == OperandSyntax::value ? "act|grad|wgrad" : "act|grad");
  if (parts.micro_batch) add("mb");
  if (parts.chunk && parts.layer && !parts.micro_batch) {
    add("[chunk C | layer L]");
  } else {
    if (parts.chunk) add("[chunk C]");
    if (parts.layer) add("[layer L]");
  }
  if (parts.second_cell) add("with mb [chunk C]");
  if (parts.peer) add(is_send(op) ? "[to S]" : "[from S]");
  if (parts.group) {
    std::string groups;
    for (std::size_t g = 0; g < kGroupCount; ++g) {
      if (!info(op).over.contains(static_cast<Group>(g))) continue;
      if (!groups.empty()) groups += '|';
      groups += name(static_cast<Group>(g));
    }
    add("[over " + groups + "]");
  }
  return out;
}

std::string disassemble(const Instruction& in) {
  const OperandParts parts = operand_parts(in.op);
  std::string out(name(in.op));
  if (parts.direction) {
    out += ' ';
    out += name(in.direction);
  }
  if (parts.kind) {
    out += ' ';
    out += name(in.kind);
  }
  if (parts.micro_batch) out += ' ' + std::to_string(in.micro_batch);
  if (parts.chunk && in.chunk != 0) out += " chunk " + std::to_string(in.chunk);
  if (parts.second_cell) {
    const Cell second = second_cell(in);
    out += " with " + std::to_string(second.micro_batch);
    if (second.chunk != 0) out += " chunk " + std::to_string(second.chunk);
  }
  if (parts.layer && layer_of(in) != kNoLayer) out += " layer " + std::to_string(layer_of(in));
  if (parts.peer && in.explicit_peer()) {
    out += is_send(in.op) ? " to " : " from ";
    out += std::to_string(in.peer);
  }
  if (parts.group && group_of(in) != info(in.op).group) {
    out += " over ";
    out += name(group_of(in));
  }
  return out;
}

}  // namespace pipevm
