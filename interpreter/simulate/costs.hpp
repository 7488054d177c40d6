// The simulator's cost model: how long each instruction takes, and how long a
// message takes to travel, under keys users write (`--cost fwd=1,bwd=2`,
// cost files). What the simulator does with these numbers lives in
// simulate.hpp; reading and writing the keys as flags and YAML is
// config/cost_files.hpp's, fitting them to a real run's measurements
// cost_fit.hpp's. This file only knows durations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa.hpp"
#include "layer_costs.hpp"
#include "program.hpp"

namespace pipevm {

// When a message's data moves (docs/simulator.md, "Timing semantics").
// eager: it leaves when its send is posted and arrives latency + bytes /
// bandwidth later; the send, blocking or not, completes at once. rendezvous:
// the transfer starts when both sides have posted, and the send completes
// with it. automatic: what the runtime's MPI does, eager up to the eager
// limit of the message's link class (by its bytes), rendezvous above.
enum class TransferModel : std::uint8_t { automatic, eager, rendezvous };
std::string_view name(TransferModel model);  // "auto", "eager", "rendezvous"
// Reads "auto", "eager" or "rendezvous"; false for anything else.
bool parse_transfer_model(std::string_view text, TransferModel& model);

// The eager limits `pipevm run` leaves in force (bytes): Open MPI 4.1's
// shared-memory transport (btl vader: `ompi_info --param btl vader --level
// 9`, btl_vader_eager_limit) between ranks of one host, and the TCP limit
// runtime/mpi_comm.cpp raises to 4 MiB between hosts.
inline constexpr double kSameHostEagerLimit = 4096;
inline constexpr double kCrossHostEagerLimit = 4194304;

// Durations in one time unit of the user's choosing; traces read it as
// microseconds, and measured profiles are written in microseconds. A cost
// that is not given is 0, so `fwd=1,bwd=2` is the textbook model.
struct Costs {
  double fwd = 0;             // Fwd
  std::optional<double> bwd;  // Bwd and BwdAllReduce's compute; unset: bwd_input + bwd_weight
  double bwd_input = 0;       // BwdInput
  double bwd_weight = 0;      // BwdWeight
  double load = 0;            // LoadInput, LoadTarget
  double zero_grad = 0;       // ZeroGrad
  double optimizer = 0;       // OptimizerStep
  double allreduce = 0;       // one data-parallel all-reduce of all gradients
  double allgather = 0;       // one AllGather of a chunk's weight shards
  double reduce_scatter = 0;  // one ReduceScatter of the gradients
  double send = 0;            // latency of one message between ranks of one host
  double bandwidth = 0;       // bytes per time unit between ranks of one host; 0: infinite
  double act_bytes = 0;       // size of one activation message; 0: from the model (links.hpp)
  double grad_bytes = 0;      // size of one gradient message; 0: from the model
  // The same between ranks on different hosts (links.hpp); bandwidth 0: infinite.
  double cross_host_send = 0;
  double cross_host_bandwidth = 0;
  std::optional<double> fwd_bwd;  // FwdBwd; unset: fwd + backward() (no overlap)
  std::optional<double> recompute;  // Recompute; unset: fwd
  // The rank's link to host memory (Offload, Reload): one copy at a time,
  // beside compute; bandwidth in bytes per time unit, 0: infinite.
  double host_latency = 0;
  double host_bandwidth = 0;
  // The latency of one step of a collective's ring on one host; unset: send.
  std::optional<double> ring_send;
  // 0: compute and optimizer costs are per instruction. R > 0: they are per
  // layer and R rows: a forward or backward costs its key x its layers x its
  // micro-batch's rows / R, a step its key x the layers it updates.
  double compute_rows = 0;
  // How messages move, and the eager limits of `automatic` (bytes; unset:
  // the runtime's, above).
  TransferModel transfer = TransferModel::automatic;
  std::optional<double> eager_limit;
  std::optional<double> cross_host_eager_limit;

  // Compute per pipeline stage, for stages whose pieces differ (a profile
  // of a pipeline measures each): entry s holds stage s's values of the
  // per-stage keys (fwd, bwd, bwd-input, bwd-weight, fwd-bwd, recompute,
  // load, zero-grad, optimizer); its other fields and its own `stages` are
  // unused. A stage without an entry takes the keys above.
  std::vector<Costs> stages;
  // Where `stages` was read ("costs.yaml:4:1"), for errors about it; empty
  // when it was given otherwise.
  std::string stages_source;
  // In an entry of `stages` only: the same keys per model chunk of that
  // stage (chunk 0 first), for ranks that hold several chunks of different
  // widths. A chunk without an entry takes its stage's values.
  std::vector<Costs> chunks;
  // Per model layer, first layer first (a cost file's `layers:`): what a
  // piece of a cut costs is the sum over its layers (piece_cost). Empty
  // when the costs are per stage or per instruction only.
  std::vector<LayerCost> layers;

  double backward() const { return bwd.value_or(bwd_input + bwd_weight); }
  double overlapped() const { return fwd_bwd.value_or(fwd + backward()); }
  double ring_latency() const { return ring_send.value_or(send); }
  double recomputation() const { return recompute.value_or(fwd); }
  // One copy of `bytes` between the device and host memory.
  double host_copy_time(double bytes) const {
    return host_latency + (host_bandwidth > 0 ? bytes / host_bandwidth : 0);
  }
  double same_host_eager_limit() const { return eager_limit.value_or(kSameHostEagerLimit); }
  double across_hosts_eager_limit() const {
    return cross_host_eager_limit.value_or(kCrossHostEagerLimit);
  }
  // The time an instruction of cost `kind` keeps its rank working (compute,
  // data, optimizer), excluding its communication and waits for partners.
  double duration(CostKind kind) const;
  // The same on a rank of pipeline stage `stage`: its entry of `stages`.
  double duration(CostKind kind, int stage) const;
  // The same for model chunk `chunk` of `stage`: the chunk's entry, else
  // the stage's, else the keys above.
  double duration(CostKind kind, int stage, int chunk) const;
  // The entry those come from: the chunk's, else the stage's, else this.
  const Costs& entry(int stage, int chunk) const;
  // The time instruction `in` keeps a rank of `stage` working: its chunk's
  // cost; an overlapped pair (FwdBwd) whose halves' chunks differ and whose
  // first chunk sets no fwd-bwd takes its forward's chunk's fwd plus its
  // backward's chunk's backward.
  double duration(const Instruction& in, int stage) const;
  // The time one collective of cost `kind` takes to reduce over `members`
  // ranks once the last has arrived (0 for a group of one).
  double reduction(CostKind kind, int members) const;
  // The time one message of `kind` between ranks of one host takes from the
  // moment sender and receiver are both ready, sized by act-bytes and
  // grad-bytes (the simulator prices messages by link class and model shape:
  // links.hpp).
  double message_time(MessageKind kind) const;
};

// One key of the cost model, as written in flags and YAML files.
struct CostKey {
  std::string_view name;   // "bwd-input"
  std::string_view doc;    // one line for docs and --help
  bool per_stage = false;  // may differ by stage (Costs::stages)
};
// Every key, in the order they are documented and written: `transfer`
// (the name of a TransferModel) first, then the numbers.
const std::vector<CostKey>& cost_keys();
inline constexpr std::string_view kTransferCostKey = "transfer";
// The numeric key of that name; null for `transfer` and unknown names.
const CostKey* find_cost_key(std::string_view name);
// A numeric key's value in `costs`; nullopt for an optional key left unset
// (bwd, fwd-bwd, ring-send, the eager limits), `transfer` and unknown names.
std::optional<double> cost_value(const Costs& costs, std::string_view key);

// The textbook default when the user gives no cost: F = 1, B = 2 split as
// BwdInput = BwdWeight = 1 (the zero-bubble papers' F = B = W), free messages.
Costs default_costs();

// Sets one key (a per-stage key in every entry of `stages` and of their
// `chunks` too); false
// (with `error` set) for an unknown key or a negative or non-finite value.
bool set_cost(Costs& costs, std::string_view key, double value, std::string& error);
// Whether the costs are so large that a timeline of `config` could exceed
// the largest double: every cost of every stage, summed, times stages x
// chunks x micro-batches x 4 (passes and messages) is not finite. Commands
// refuse such costs before they start ("the costs overflow ...").
bool costs_may_overflow(const Costs& costs, const Config& config);
// Empty when `stages` is empty or has one entry per stage of `config`;
// else the error, at stages_source when known: commands refuse it before
// they start.
std::string stage_entries_error(const Costs& costs, const Config& config);
inline constexpr std::string_view kCostsOverflow =
    "the costs overflow: a time of the timeline exceeds the largest number (about 1.8e308); "
    "give the costs in a larger unit";

// "fwd=1 bwd=2 ..." with the non-zero keys only, for headers of reports.
std::string describe(const Costs& costs);
// The costs as `--cost` takes them ("fwd=1,bwd-input=1,bwd-weight=1,
// send=0.25"), so that parsing the text as flags (over zero costs) gives
// `costs` back; empty when the costs are per stage or per layer, which no
// flag says.
std::string flag_text(const Costs& costs);
// The comment line that records a program's costs in its header (`pipevm
// synthesize` writes it, followed by flag_text): `simulate` of the program
// times it with them when no costs are given.
inline constexpr std::string_view kCostsHeaderPrefix = "# costs: ";
// The first line of every header `pipevm synthesize` writes.
inline constexpr std::string_view kSynthesizedHeaderLine =
    "# Synthesized by `pipevm synthesize` (docs/synthesize.md).";

}  // namespace pipevm
