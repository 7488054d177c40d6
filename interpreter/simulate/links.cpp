// The link model (links.hpp): link classes, message and gradient sizes from
// the model's shapes, the ring all-reduce, and the traffic per class.
#include "links.hpp"

#include <algorithm>
#include <stdexcept>

#include "model_shape.hpp"

namespace pipevm {

std::string_view name(LinkClass link_class) {
  switch (link_class) {
    case LinkClass::same_host:
      return "same host";
    case LinkClass::across_hosts:
      return "across hosts";
  }
  return "?";
}

LinkCosts::LinkCosts(const Program& program, const Link& link, const Costs& costs,
                     const Network& network)
    : program_(program), link_(link), costs_(costs), network_(network) {
  if (network.layer_widths.empty() || network.micro_batch_rows <= 0) return;
  const int pieces = model_pieces(program.placement, program.config);
  try {
    const std::vector<LayerRange> cut = cut_for_model(program, network.layer_widths);
    const std::vector<LayerRange> split = cut.empty() ? split_layers(network.layer_widths, pieces) : cut;
    piece_widths_ = piece_boundary_widths(network.layer_widths, split);
    for (const LayerRange& piece : split) {
      piece_bytes_.push_back(static_cast<double>(parameter_count(network.layer_widths, piece)) *
                             kBytesPerValue);
    }
  } catch (const std::invalid_argument&) {
    // More pieces than layers: sizes stay unknown, as for the checker.
    piece_widths_.clear();
    piece_bytes_.clear();
  }
}

int LinkCosts::rank_of(std::size_t instruction) const {
  const auto after =
      std::upper_bound(program_.rank_begin.begin(), program_.rank_begin.end(), instruction);
  return static_cast<int>(after - program_.rank_begin.begin()) - 1;
}

LinkClass LinkCosts::class_between(int rank_a, int rank_b) const {
  const std::vector<int>& host = network_.host_of_rank;
  const auto a = static_cast<std::size_t>(rank_a);
  const auto b = static_cast<std::size_t>(rank_b);
  if (a >= host.size() || b >= host.size() || host[a] == host[b]) return LinkClass::same_host;
  return LinkClass::across_hosts;
}

double LinkCosts::transfer(LinkClass link_class, double bytes) const {
  const bool same = link_class == LinkClass::same_host;
  const double latency = same ? costs_.send : costs_.cross_host_send;
  const double bandwidth = same ? costs_.bandwidth : costs_.cross_host_bandwidth;
  return latency + (bandwidth > 0 ? bytes / bandwidth : 0);
}

double LinkCosts::message_bytes(std::size_t instruction) const {
  const Instruction& in = program_.code[instruction];
  const double given = in.kind == MessageKind::act ? costs_.act_bytes : costs_.grad_bytes;
  if (given == 0 && !network_.boundary_bytes.empty()) {
    const int boundary = message_boundary(program_, stage_of(program_.config, rank_of(instruction)), in);
    const bool known = boundary >= 0 && static_cast<std::size_t>(boundary) < network_.boundary_bytes.size();
    return known ? network_.boundary_bytes[static_cast<std::size_t>(boundary)] : 0;
  }
  if (given > 0 || piece_widths_.empty()) return given;
  const int width =
      message_width(program_, piece_widths_, stage_of(program_.config, rank_of(instruction)), in);
  return width < 0 ? 0 : width * network_.micro_batch_rows * kBytesPerValue;
}

LinkClass LinkCosts::message_class(std::size_t instruction) const {
  const std::uint32_t partner = link_.to[instruction];
  if (partner == kNoLink) return LinkClass::same_host;
  return class_between(rank_of(instruction), rank_of(partner));
}

double LinkCosts::message_time(std::size_t instruction) const {
  return transfer(message_class(instruction), message_bytes(instruction));
}

bool LinkCosts::eager(std::size_t instruction) const {
  switch (costs_.transfer) {
    case TransferModel::eager: return true;
    case TransferModel::rendezvous: return false;
    case TransferModel::automatic:
      break;
  }
  const double limit = message_class(instruction) == LinkClass::same_host
                           ? costs_.same_host_eager_limit()
                           : costs_.across_hosts_eager_limit();
  return message_bytes(instruction) <= limit;
}

LinkClass LinkCosts::slot_class(std::uint32_t slot) const {
  const auto first = link_.slot_ranks.begin() + link_.slot_begin[slot];
  const auto last = link_.slot_ranks.begin() + link_.slot_begin[slot + 1];
  for (auto member = first; member != last; ++member) {
    if (class_between(*first, *member) == LinkClass::across_hosts) return LinkClass::across_hosts;
  }
  return LinkClass::same_host;
}

double LinkCosts::collective_bytes(std::size_t instruction) const {
  if (piece_bytes_.empty()) return 0;
  const Instruction& in = program_.code[instruction];
  const int stage = stage_of(program_.config, rank_of(instruction));
  const auto piece_bytes = [&](int chunk) {
    const int piece = piece_at(position_of(program_.placement, program_.config, stage, chunk));
    return piece_bytes_[static_cast<std::size_t>(piece)];
  };
  // One layer's (`layer L`); a BwdAllReduce the gradients of the chunk it
  // computes, an AllGather its chunk's weights; an AllReduce or a
  // ReduceScatter those of every chunk of its rank.
  if (const int layer = layer_of(in); layer != kNoLayer) {
    return layer + 1 < static_cast<int>(network_.layer_widths.size())
               ? static_cast<double>(parameter_count(network_.layer_widths, {layer, layer + 1})) *
                     kBytesPerValue
               : 0;
  }
  if (is_backward(in.op) || operand_parts(in.op).chunk) return piece_bytes(in.chunk);
  double bytes = 0;
  for (int chunk = 0; chunk < program_.config.chunks; ++chunk) bytes += piece_bytes(chunk);
  return bytes;
}

double LinkCosts::host_copy_time(std::size_t instruction) const {
  const std::vector<std::uint64_t>& bytes = network_.host_copy_bytes;
  return costs_.host_copy_time(
      instruction < bytes.size() ? static_cast<double>(bytes[instruction]) : 0.0);
}

double LinkCosts::reduction(std::uint32_t slot) const {
  const std::uint32_t members = link_.slot_size(slot);
  if (members <= 1) return 0;
  const std::uint32_t first = link_.slot_members[link_.slot_begin[slot]];
  if (first == kNoLink) return 0;
  const CostKind kind = info(program_.code[first].op).cost;
  const double steps = 2.0 * (members - 1);
  const double step_bytes = collective_bytes(first) / members;
  const LinkClass link_class = slot_class(slot);
  const double step =
      link_class == LinkClass::same_host
          ? costs_.ring_latency() + (costs_.bandwidth > 0 ? step_bytes / costs_.bandwidth : 0)
          : transfer(link_class, step_bytes);
  return costs_.reduction(kind, static_cast<int>(members)) + steps * step;
}

LinkTraffic link_traffic(const Program& program, const Link& link, const LinkCosts& costs) {
  LinkTraffic traffic;
  for (std::size_t i = 0; i < program.code.size(); ++i) {
    if (!is_send(program.code[i].op) || link.to[i] == kNoLink) continue;
    const auto c = static_cast<std::size_t>(costs.message_class(i));
    ++traffic.messages[c];
    traffic.message_bytes[c] += costs.message_bytes(i);
  }
  for (std::uint32_t s = 0; s + 1 < link.slot_begin.size(); ++s) {
    const std::uint32_t first = link.slot_members[link.slot_begin[s]];
    if (link.slot_size(s) <= 1 || first == kNoLink) continue;
    const auto c = static_cast<std::size_t>(costs.slot_class(s));
    ++traffic.collectives[c];
    traffic.collective_bytes[c] += costs.collective_bytes(first);
  }
  return traffic;
}

}  // namespace pipevm
