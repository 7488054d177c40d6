// The simulator's cost model: how long each instruction takes, and how long a
// message takes to travel. Costs come from command-line flags
// (`--cost fwd=1,bwd=2`), from a YAML file of the same keys, or from a real
// run's measurements (costs_from_measurements, which `pipevm run --profile`
// writes with write_costs_yaml). What the simulator does with these numbers
// lives in simulate.hpp; this file only knows durations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isa.hpp"
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
  // In an entry of `stages` only: the same keys per model chunk of that
  // stage (chunk 0 first), for ranks that hold several chunks of different
  // widths. A chunk without an entry takes its stage's values.
  std::vector<Costs> chunks;

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
// Every key, in the order they are documented and written.
const std::vector<CostKey>& cost_keys();

// The textbook default when the user gives no cost: F = 1, B = 2 split as
// BwdInput = BwdWeight = 1 (the zero-bubble papers' F = B = W), free messages.
Costs default_costs();

// Sets one key (a per-stage key in every entry of `stages` and of their
// `chunks` too); false
// (with `error` set) for an unknown key or a negative or non-finite value.
bool set_cost(Costs& costs, std::string_view key, double value, std::string& error);
// Sets one key from its text: `transfer` from a model's name, every other
// key from a number (set_cost).
bool set_cost_text(Costs& costs, std::string_view key, std::string_view text, std::string& error);
// Applies "fwd=1,bwd=2,send=0.1" on top of `costs`.
bool parse_cost_flags(std::string_view text, Costs& costs, std::string& error);
// Applies a YAML mapping of the same keys (e.g. `fwd: 1`, `transfer: eager`) read from `path`;
// `stages:`, a list of mappings of per-stage keys (stage 0 first), replaces
// `stages`, each entry starting from the file's other keys; an entry's
// `chunks:`, a list of mappings of the same keys (chunk 0 first), gives
// its `chunks`, each starting from the stage's values. An error names the
// position: "path:line:col: message" (parse_costs_yaml: "line:col: message").
bool read_costs_yaml(const std::string& path, Costs& costs, std::string& error);
bool parse_costs_yaml(std::string_view yaml_text, Costs& costs, std::string& error);
// Writes every key that is set (a YAML mapping, with a comment header), and
// `stages:` when there are entries, with each entry's `chunks:`.
void write_costs_yaml(std::ostream& out, const Costs& costs, std::string_view comment = {});
// "fwd=1 bwd=2 ..." with the non-zero keys only, for headers of reports.
std::string describe(const Costs& costs);

// One message size timed between two ranks (run --profile's start-up
// ping-pong, runtime/link_probe.hpp): bytes and one-way microseconds.
struct MessageTiming {
  double bytes = 0;
  double microseconds = 0;
};
// Latency (microseconds) and bandwidth (bytes per microsecond) of one link
// class, as the cost keys send and bandwidth (or cross-host-send and
// cross-host-bandwidth) take them.
struct LinkFit {
  double latency = 0;
  double bandwidth = 0;  // 0: no measurable time per byte (the keys' "infinite")
};
// The least-squares line time = latency + bytes / bandwidth through the
// timings: its slope gives the bandwidth, its intercept the latency (never
// below 0). Timings of one size only, or a slope <= 0 (noise larger than
// the bytes' time), give bandwidth 0 and the median time as latency.
LinkFit fit_link(const std::vector<MessageTiming>& timings);

// The fits of both link classes, each where a pair of its class was timed.
struct MeasuredLinks {
  std::optional<LinkFit> same_host;
  std::optional<LinkFit> across_hosts;
  std::optional<LinkFit> host_memory;  // copies to host memory and back (Offload, Reload)
};
// send and bandwidth from `same_host`, cross-host-send and
// cross-host-bandwidth from `across_hosts`, host-latency and host-bandwidth
// from `host_memory`; an unset class changes nothing.
void set_link_costs(Costs& costs, const MeasuredLinks& links);

// One instruction a rank really executed: the VM's observer reports these.
struct MeasuredInstruction {
  int rank = 0;
  std::size_t index = 0;  // position in the rank's stream (Program::rank(rank))
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// The median duration of each cost kind of compute, data and optimizer
// instruction and of AllReduce in a real run, in microseconds (a
// BwdAllReduce counts for neither: its reduction overlaps its compute; a
// collective counts once per occurrence, its shortest over a stage's
// replicas: the others' durations are mostly waiting for that one);
// with more than one stage, also per stage (`stages`); with more than one
// chunk per rank, also per chunk of each stage (`chunks` of every stage's
// entry, a chunk's kinds that never ran keeping the stage's medians; an
// overlapped pair counts for its first half's chunk).
// Message costs are left 0: a blocking receive's duration is mostly waiting
// for its sender, not transfer (run --profile measures them apart, fit_link).
Costs costs_from_measurements(const Program& program,
                              const std::vector<MeasuredInstruction>& measured);

}  // namespace pipevm
