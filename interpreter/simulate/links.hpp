// The simulator's network: on which host each rank runs, what a message or
// an all-reduce costs on the links it uses, and how many bytes it carries.
//
// Two link classes: between ranks of one host (Costs::send, bandwidth) and
// between hosts (Costs::cross_host_send, cross_host_bandwidth). A message
// costs latency + bytes / bandwidth of its class; its bytes are act-bytes
// or grad-bytes when given, else the model's: the width of the piece
// boundary it crosses x the micro-batch's rows x 4 (float32). An
// all-reduce over n ranks runs a ring: 2(n-1) steps, each a message of
// bytes / n on the ring's slowest class (across hosts when any two members
// are on different hosts), so 2(n-1) latencies and 2(n-1)/n of the bytes
// per link, plus Costs::allreduce (the arithmetic). Its bytes are the
// gradients it reduces: the parameters of the rank's pieces (AllReduce) or
// of the instruction's chunk (BwdAllReduce).
//
// Not here: contention (concurrent messages share nothing), other collective
// algorithms (tree, hierarchical), where the hosts come from (the command
// line's --hosts, --hostfile and --layout, config/rank_layout.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "costs.hpp"
#include "link.hpp"
#include "program.hpp"

namespace pipevm {

// Bytes of one value in a message or a gradient: the runtime trains in float32.
inline constexpr double kBytesPerValue = 4;

struct Network {
  // The host of each program rank (any numbering); empty: all on one host.
  std::vector<int> host_of_rank;
  // The model (layer widths, input first) and the rows of one micro-batch
  // (batch / (dp x micro-batches); a fraction when it does not divide);
  // either empty or 0: sizes only from act-bytes and grad-bytes, and
  // all-reduces carry no bytes.
  std::vector<int> layer_widths;
  double micro_batch_rows = 0;
  // Per Program::code index, the bytes an Offload or Reload copies
  // (host_copy_bytes, core/memory_bytes.hpp); empty: a copy costs its
  // latency alone.
  std::vector<std::uint64_t> host_copy_bytes;
  // Per piece boundary (message_boundary, link.hpp), the bytes of one
  // message across it, from per-layer costs' output-bytes (layer_cut_costs.hpp);
  // empty: sizes from the layer widths.
  std::vector<double> boundary_bytes;
};

enum class LinkClass : std::uint8_t { same_host, across_hosts };
std::string_view name(LinkClass link_class);

// What every message and collective of a linked Program costs on a network.
class LinkCosts {
 public:
  LinkCosts(const Program& program, const Link& link, const Costs& costs, const Network& network);

  // The rows of one micro-batch (0 when the network gives none).
  double micro_batch_rows() const { return network_.micro_batch_rows; }

  // The class of the link between two ranks.
  LinkClass class_between(int rank_a, int rank_b) const;
  // A send or receive: the bytes its message carries.
  double message_bytes(std::size_t instruction) const;
  // A send or receive paired by the link: its class, and the time of its
  // transfer once both sides have posted.
  LinkClass message_class(std::size_t instruction) const;
  double message_time(std::size_t instruction) const;
  // Whether the message leaves when sent (eager) rather than when both
  // sides have posted (rendezvous): Costs::transfer, and for `automatic`
  // its bytes against the eager limit of its class.
  bool eager(std::size_t instruction) const;

  // A collective slot: the slowest class its ring uses, the bytes each
  // member reduces, and the time from the last arrival to its end (0 for a
  // group of one).
  LinkClass slot_class(std::uint32_t slot) const;
  double collective_bytes(std::size_t instruction) const;
  double reduction(std::uint32_t slot) const;

  // An Offload or Reload: its time on the rank's host link (host-latency +
  // bytes / host-bandwidth).
  double host_copy_time(std::size_t instruction) const;

 private:
  int rank_of(std::size_t instruction) const;
  double transfer(LinkClass link_class, double bytes) const;

  const Program& program_;
  const Link& link_;
  const Costs& costs_;
  const Network& network_;
  std::vector<int> piece_widths_;    // per piece boundary; empty: no model
  std::vector<double> piece_bytes_;  // gradient bytes of each model piece
};

// How much crosses hosts in one step: counts and bytes per class.
struct LinkTraffic {
  int messages[2] = {0, 0};  // index: LinkClass
  double message_bytes[2] = {0, 0};
  int collectives[2] = {0, 0};          // collective slots (one per group and round)
  double collective_bytes[2] = {0, 0};  // bytes each member reduces, summed over slots
};
LinkTraffic link_traffic(const Program& program, const Link& link, const LinkCosts& costs);

}  // namespace pipevm
