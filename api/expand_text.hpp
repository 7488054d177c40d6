// What `pipevm expand` and Python's `pipevm.expand` make of a Program: its
// ranks' streams as text in the language's own syntax (each rank a
// `stage S { ... }` block that parses back to the same stream), and, with
// the ranks placed on hosts, which messages and all-reduces cross hosts.
// The JSON and PyTorch-table forms are cli/'s.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "costs.hpp"
#include "host_placement.hpp"
#include "link.hpp"
#include "links.hpp"
#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm::api {

// Where the ranks run (config/host_placement.hpp, from --hosts or --hostfile).
using config::HostPlacement;

// Where the ranks run and who each message and collective talks to: the
// link pass's pairs and slots under the placement. Keeps references to
// `program` and `where`.
struct HostView {
  const HostPlacement& placement;
  Link link;
  Network network;
  Costs no_costs;  // LinkCosts keeps a reference: only the classes are read
  LinkCosts costs;

  HostView(const Program& program, const HostPlacement& where)
      : placement(where),
        link(pipevm::link(
            program, {piece_boundary_widths(default_layer_widths(),
                                            model_pieces(program.placement, program.config))})),
        network{where.host_of_rank, {}, 0, {}, {}},
        costs(program, link, no_costs, network) {}

  const std::string& host(int rank) const {
    return placement
        .names[static_cast<std::size_t>(placement.host_of_rank[static_cast<std::size_t>(rank)])];
  }
  // For a message or collective that crosses hosts, what it crosses to; empty otherwise.
  std::string crossing(const Program& program, std::size_t i) const {
    const Instruction& in = program.code[i];
    const OpClass cls = info(in.op).cls;
    if (cls == OpClass::p2p && link.to[i] != kNoLink &&
        costs.message_class(i) == LinkClass::across_hosts) {
      const int peer = owner(program, link.to[i]);
      return std::string(is_send(in.op) ? "to" : "from") + " rank " + std::to_string(peer) +
             " on " + host(peer);
    }
    if (cls == OpClass::collective && link.to[i] != kNoLink &&
        costs.slot_class(link.to[i]) == LinkClass::across_hosts) {
      return "its group spans hosts";
    }
    return {};
  }
  static int owner(const Program& program, std::size_t i) {
    const auto after = std::upper_bound(program.rank_begin.begin(), program.rank_begin.end(), i);
    return static_cast<int>(after - program.rank_begin.begin()) - 1;
  }
};

// The program as a flat schedule: a header (name, configuration, placement,
// topology, carries, the `check` line), then each rank's block (only
// `only_rank` when it is not -1); `from_table` names each rank's row of its
// PyTorch table; `hosts` comments each rank's host and what crosses hosts.
std::string expanded_text(const Program& program, int only_rank, bool from_table,
                          const HostView* hosts = nullptr);

}  // namespace pipevm::api
