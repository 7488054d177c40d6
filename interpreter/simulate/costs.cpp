// The cost model: its keys, what each instruction and collective costs
// under them, and the one-line description reports print. Reading and
// writing cost files and flags is config/cost_files.cpp's; fitting costs to
// measured runs is cost_fit.cpp's; the semantics of time (who waits for
// whom) is the simulator's.
#include "costs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "shortest_text.hpp"

namespace pipevm {

namespace {

// Every key but `bwd`, `fwd-bwd`, `ring-send` and the eager limits is a
// plain number; those are optional (derived from others, or the runtime's,
// when unset). `transfer` is a name, not a number (config/cost_files.hpp's
// set_cost_text reads it).
struct KeyField {
  CostKey key;
  double Costs::*field;                              // null for an optional key
  std::optional<double> Costs::*optional = nullptr;  // the optional key's field
};

const std::vector<KeyField>& key_fields() {
  static const std::vector<KeyField> fields = {
      {{"fwd", "Fwd: forward of one micro-batch through one chunk", true}, &Costs::fwd},
      {{"bwd", "Bwd (and BwdAllReduce's compute); default bwd-input + bwd-weight", true},
       nullptr,
       &Costs::bwd},
      {{"fwd-bwd", "FwdBwd, an overlapped forward+backward pair; default fwd + bwd", true},
       nullptr,
       &Costs::fwd_bwd},
      {{"recompute", "Recompute: a forward run again from its checkpoint; default fwd", true},
       nullptr,
       &Costs::recompute},
      {{"ring-send",
        "latency of one step of a collective's ring between ranks of one host; default send"},
       nullptr,
       &Costs::ring_send},
      {{"bwd-input", "BwdInput: the input-gradient half of a backward", true}, &Costs::bwd_input},
      {{"bwd-weight", "BwdWeight: the weight-gradient half of a backward", true},
       &Costs::bwd_weight},
      {{"load", "LoadInput and LoadTarget", true}, &Costs::load},
      {{"zero-grad", "ZeroGrad", true}, &Costs::zero_grad},
      {{"optimizer", "OptimizerStep", true}, &Costs::optimizer},
      {{"allreduce", "AllReduce over its group, added to the ring's transfer (free when dp = 1)"},
       &Costs::allreduce},
      {{"allgather", "AllGather of one chunk's weight shards (free over a group of one)"},
       &Costs::allgather},
      {{"reduce-scatter", "ReduceScatter of the gradients over the group (free over one rank)"},
       &Costs::reduce_scatter},
      {{"send", "latency of one message between ranks of one host"}, &Costs::send},
      {{"bandwidth", "bytes per time unit between ranks of one host; 0 means infinite"},
       &Costs::bandwidth},
      {{"cross-host-send", "latency of one message between ranks on different hosts"},
       &Costs::cross_host_send},
      {{"cross-host-bandwidth", "bytes per time unit between hosts; 0 means infinite"},
       &Costs::cross_host_bandwidth},
      {{"host-latency", "latency of one copy between the device and host memory (Offload, Reload)"},
       &Costs::host_latency},
      {{"host-bandwidth",
        "bytes per time unit of the link to host memory, one copy at a time; 0 means infinite"},
       &Costs::host_bandwidth},
      {{"compute-rows",
        "0: compute and optimizer costs per instruction; R: per layer and R rows (a step: per "
        "layer it updates)"},
       &Costs::compute_rows},
      {{"eager-limit",
        "transfer=auto: messages of at most this many bytes between ranks of one host are eager "
        "(default 4096, Open MPI's shared memory)"},
       nullptr,
       &Costs::eager_limit},
      {{"cross-host-eager-limit",
        "transfer=auto: the same between hosts (default 4194304, what pipevm run sets for TCP)"},
       nullptr,
       &Costs::cross_host_eager_limit},
      {{"act-bytes", "bytes of one activation message; 0: from the model's shapes"},
       &Costs::act_bytes},
      {{"grad-bytes", "bytes of one gradient message; 0: from the model's shapes"},
       &Costs::grad_bytes},
  };
  return fields;
}

const KeyField* field_named(std::string_view key) {
  for (const KeyField& f : key_fields()) {
    if (f.key.name == key) return &f;
  }
  return nullptr;
}

}  // namespace

double Costs::duration(CostKind kind) const {
  switch (kind) {
    case CostKind::load: return load;
    case CostKind::fwd: return fwd;
    case CostKind::bwd:
    case CostKind::bwd_allreduce:
    case CostKind::bwd_reduce_scatter: return backward();
    case CostKind::bwd_input: return bwd_input;
    case CostKind::bwd_weight: return bwd_weight;
    case CostKind::fwd_bwd: return overlapped();
    case CostKind::recompute: return recomputation();
    case CostKind::zero_grad: return zero_grad;
    case CostKind::optimizer: return optimizer;
    // Communication: timed by its partners, not by the rank alone; a host
    // copy by the rank's host link, beside its compute.
    case CostKind::host_copy:
    case CostKind::none:
    case CostKind::allreduce:
    case CostKind::allgather:
    case CostKind::reduce_scatter:
    case CostKind::message: return 0;
  }
  return 0;
}

double Costs::duration(CostKind kind, int stage) const {
  const auto entry = static_cast<std::size_t>(stage);
  return stage >= 0 && entry < stages.size() ? stages[entry].duration(kind) : duration(kind);
}

const Costs& Costs::entry(int stage, int chunk) const {
  const auto at = static_cast<std::size_t>(stage);
  if (stage < 0 || at >= stages.size()) return *this;
  const std::vector<Costs>& of_stage = stages[at].chunks;
  const auto which = static_cast<std::size_t>(chunk);
  return chunk >= 0 && which < of_stage.size() ? of_stage[which] : stages[at];
}

double Costs::duration(CostKind kind, int stage, int chunk) const {
  return entry(stage, chunk).duration(kind);
}

double Costs::duration(const Instruction& in, int stage) const {
  const CostKind kind = info(in.op).cost;
  if (kind != CostKind::fwd_bwd) return duration(kind, stage, in.chunk);
  const Instruction forward = half(in, 0);
  const Instruction backward = half(in, 1);
  if (forward.chunk == backward.chunk) return duration(kind, stage, in.chunk);
  const Costs& first = entry(stage, forward.chunk);
  if (first.fwd_bwd) return *first.fwd_bwd;
  return first.duration(CostKind::fwd) + duration(CostKind::bwd, stage, backward.chunk);
}

double Costs::reduction(CostKind kind, int members) const {
  if (members <= 1) return 0;
  switch (kind) {
    case CostKind::allreduce:
    case CostKind::bwd_allreduce: return allreduce;
    case CostKind::allgather: return allgather;
    case CostKind::reduce_scatter:
    case CostKind::bwd_reduce_scatter: return reduce_scatter;
    case CostKind::none:
    case CostKind::load:
    case CostKind::fwd:
    case CostKind::bwd:
    case CostKind::bwd_input:
    case CostKind::bwd_weight:
    case CostKind::fwd_bwd:
    case CostKind::recompute:
    case CostKind::host_copy:
    case CostKind::message:
    case CostKind::zero_grad:
    case CostKind::optimizer: return 0;
  }
  return 0;
}

double Costs::message_time(MessageKind kind) const {
  const double bytes = kind == MessageKind::act ? act_bytes : grad_bytes;
  return send + (bandwidth > 0 ? bytes / bandwidth : 0);
}

const std::vector<CostKey>& cost_keys() {
  static const std::vector<CostKey> keys = [] {
    std::vector<CostKey> out{{kTransferCostKey,
                              "auto (default): eager up to the eager limits, rendezvous above; "
                              "eager: a message leaves when sent; rendezvous: when both sides "
                              "posted"}};
    for (const KeyField& f : key_fields()) out.push_back(f.key);
    return out;
  }();
  return keys;
}

Costs default_costs() {
  Costs costs;
  costs.fwd = 1;
  costs.bwd_input = 1;
  costs.bwd_weight = 1;
  return costs;
}

const CostKey* find_cost_key(std::string_view name) {
  const KeyField* field = field_named(name);
  return field == nullptr ? nullptr : &field->key;
}

std::optional<double> cost_value(const Costs& costs, std::string_view key) {
  const KeyField* field = field_named(key);
  if (field == nullptr) return std::nullopt;
  if (field->field == nullptr) return costs.*(field->optional);
  return costs.*(field->field);
}

bool set_cost(Costs& costs, std::string_view key, double value, std::string& error) {
  if (!std::isfinite(value) || value < 0) {
    error = "cost '" + std::string(key) + "' must be a finite number >= 0";
    return false;
  }
  for (const KeyField& f : key_fields()) {
    if (f.key.name != key) continue;
    const auto set = [&](Costs& c) {
      if (f.field == nullptr) {
        c.*(f.optional) = value;
      } else {
        c.*(f.field) = value;
      }
    };
    set(costs);
    if (!f.key.per_stage) return true;
    for (Costs& stage : costs.stages) {
      set(stage);
      std::for_each(stage.chunks.begin(), stage.chunks.end(), set);
    }
    return true;
  }
  error = "unknown cost '" + std::string(key) + "' (keys: " + std::string(kTransferCostKey);
  for (const KeyField& f : key_fields()) {
    error += ' ';
    error += f.key.name;
  }
  error += ")";
  return false;
}

std::string_view name(TransferModel model) {
  switch (model) {
    case TransferModel::automatic: return "auto";
    case TransferModel::eager: return "eager";
    case TransferModel::rendezvous: return "rendezvous";
  }
  return "?";
}

bool parse_transfer_model(std::string_view text, TransferModel& model) {
  for (const TransferModel m :
       {TransferModel::automatic, TransferModel::eager, TransferModel::rendezvous}) {
    if (text == name(m)) {
      model = m;
      return true;
    }
  }
  return false;
}

bool costs_may_overflow(const Costs& costs, const Config& config) {
  // The keys that are times (not bandwidths, limits or byte counts).
  static constexpr std::array<std::string_view, 16> kTimes = {
      "fwd",         "bwd",        "fwd-bwd",        "recompute", "ring-send",
      "bwd-input",   "bwd-weight", "load",           "zero-grad", "optimizer",
      "allreduce",   "allgather",  "reduce-scatter", "send",      "cross-host-send",
      "host-latency"};
  const auto sum = [](const Costs& entry) {
    double total = 0;
    for (const std::string_view key : kTimes) total += cost_value(entry, key).value_or(0);
    return total;
  };
  double largest = sum(costs);
  for (const Costs& stage : costs.stages) {
    largest = std::max(largest, sum(stage));
    for (const Costs& chunk : stage.chunks) largest = std::max(largest, sum(chunk));
  }
  const double passes = 4.0 * config.stages * config.chunks * config.micro_batches;
  return !std::isfinite(largest * passes);
}

std::string stage_entries_error(const Costs& costs, const Config& config) {
  const std::size_t entries = costs.stages.size();
  if (entries == 0 || entries == static_cast<std::size_t>(config.stages)) return {};
  return (costs.stages_source.empty() ? std::string() : costs.stages_source + ": ") +
         "the costs give " + std::to_string(entries) + " `stages:` entries, for a program of " +
         std::to_string(config.stages) + " stages: give one entry per stage, stage 0 first";
}

std::string flag_text(const Costs& costs) {
  if (!costs.stages.empty() || !costs.layers.empty()) return "";
  // Flags start from zero costs: a zero key need not be written, but the
  // compute keys always are, so that none reads as left unset.
  std::ostringstream out;
  out << "fwd=" << shortest_text(costs.fwd) << ",bwd-input=" << shortest_text(costs.bwd_input)
      << ",bwd-weight=" << shortest_text(costs.bwd_weight);
  for (const KeyField& f : key_fields()) {
    const bool written =
        f.key.name == "fwd" || f.key.name == "bwd-input" || f.key.name == "bwd-weight";
    if (f.field != nullptr && !written && costs.*(f.field) != 0) {
      out << ',' << f.key.name << '=' << shortest_text(costs.*(f.field));
    } else if (f.field == nullptr && (costs.*(f.optional)).has_value()) {
      out << ',' << f.key.name << '=' << shortest_text(*(costs.*(f.optional)));
    }
  }
  if (costs.transfer != TransferModel::automatic) {
    out << ',' << kTransferCostKey << '=' << name(costs.transfer);
  }
  return out.str();
}

std::string describe(const Costs& costs) {
  std::ostringstream out;
  const char* separator = "";
  for (const KeyField& f : key_fields()) {
    const double value = f.field == nullptr ? (costs.*(f.optional)).value_or(0) : costs.*(f.field);
    if (value == 0) continue;
    out << separator << f.key.name << '=' << value;
    separator = " ";
  }
  if (!costs.bwd && costs.backward() > 0) out << " (bwd=" << costs.backward() << ")";
  if (costs.transfer != TransferModel::automatic) {
    out << separator << kTransferCostKey << '=' << name(costs.transfer);
  }
  if (!costs.stages.empty()) {
    out << " (compute per stage for " << costs.stages.size() << " stages";
    const bool per_chunk = std::any_of(costs.stages.begin(), costs.stages.end(),
                                       [](const Costs& stage) { return !stage.chunks.empty(); });
    out << (per_chunk ? ", per chunk)" : ")");
  }
  if (!costs.layers.empty()) out << " (per layer for " << costs.layers.size() << " layers)";
  std::string text = out.str();
  // Only per-stage or per-layer figures: no leading space before them.
  if (!text.empty() && text.front() == ' ') text.erase(0, 1);
  return text.empty() ? "all zero" : text;
}

}  // namespace pipevm
