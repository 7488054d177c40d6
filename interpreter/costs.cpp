// The cost model's keys, their parsing from flags and YAML, the YAML writer,
// and medians from measured runs. The semantics of time (who waits for whom)
// is the simulator's, not this file's.
#include "costs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "median.hpp"
#include "read_file.hpp"
#include "shortest_text.hpp"

namespace pipevm {

namespace {

// Every key but `bwd`, `fwd-bwd`, `ring-send` and the eager limits is a
// plain number; those are optional (derived from others, or the runtime's,
// when unset). `transfer` is a name, not a number: set_cost_text.
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

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

bool parse_number(std::string_view text, double& value) {
  text = trim(text);
  if (text.empty()) return false;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  return status == std::errc() && end == text.data() + text.size();
}

constexpr std::string_view kStagesKey = "stages";
constexpr std::string_view kTransferKey = "transfer";

const KeyField* field_named(std::string_view key) {
  for (const KeyField& f : key_fields()) {
    if (f.key.name == key) return &f;
  }
  return nullptr;
}

// "line:col" of a place in the file (1-based); empty when unknown.
std::string position_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
}

// Why a cost file is refused, and where.
struct Refusal {
  YAML::Mark where = YAML::Mark::null_mark();
  std::string message;
};

bool refuse(const YAML::Node& at, std::string message, Refusal& refusal) {
  refusal = {at.Mark(), std::move(message)};
  return false;
}

constexpr std::string_view kChunksKey = "chunks";

std::string per_stage_key_names() {
  std::string names;
  for (const KeyField& f : key_fields()) {
    if (f.key.per_stage) names += ' ' + std::string(f.key.name);
  }
  return names;
}

// One entry of `stages:` or of a stage's `chunks:`: a mapping of per-stage
// keys applied on top of `entry`; `which` names it in errors ("stage 1",
// "stage 1 chunk 0"). A stage's `chunks:` (not a chunk's) is handed back
// in `chunks`, to be read once the stage's own keys are set.
bool parse_entry(const YAML::Node& item, const std::string& which, Costs& entry,
                 std::optional<YAML::Node>* chunks, Refusal& refusal) {
  if (!item.IsMap()) {
    const std::string list(chunks != nullptr ? kStagesKey : kChunksKey);
    return refuse(item, which + " of '" + list + "' is not a mapping of keys to numbers (fwd: 1)",
                  refusal);
  }
  for (const auto& key_value : item) {
    const std::string key = key_value.first.IsScalar() ? key_value.first.Scalar() : std::string();
    if (chunks != nullptr && key == kChunksKey) {
      *chunks = key_value.second;
      continue;
    }
    const KeyField* field = field_named(key);
    if (field == nullptr || !field->key.per_stage) {
      return refuse(key_value.first,
                    which + ": '" + key + "' is not a cost that differs by stage (those are:" +
                        per_stage_key_names() + (chunks != nullptr ? " chunks)" : ")"),
                    refusal);
    }
    double value = 0;
    if (!key_value.second.IsScalar() || !parse_number(key_value.second.Scalar(), value)) {
      return refuse(key_value.second, which + ": cost '" + key + "' is not a number", refusal);
    }
    std::string error;
    if (!set_cost(entry, key, value, error)) {
      return refuse(key_value.second, which + ": " + error, refusal);
    }
  }
  return true;
}

// `stages:` of a cost file: one mapping of per-stage keys per stage, each
// starting from the file's (and the flags') other keys, and in it
// optionally `chunks:`, one mapping of the same keys per chunk, each
// starting from the stage's values.
bool parse_stages(const YAML::Node& list, Costs& costs, Refusal& refusal) {
  if (!list.IsSequence()) {
    return refuse(list, "'stages' is a list with one mapping per stage (- fwd: 1)", refusal);
  }
  Costs base = costs;
  base.stages.clear();
  std::vector<Costs> stages;
  for (const auto& item : list) {
    const std::string which = "stage " + std::to_string(stages.size());
    Costs stage = base;
    std::optional<YAML::Node> chunks;
    if (!parse_entry(item, which, stage, &chunks, refusal)) return false;
    if (chunks) {
      if (!chunks->IsSequence()) {
        return refuse(*chunks, which + ": 'chunks' is a list with one mapping per chunk (- fwd: 1)",
                      refusal);
      }
      std::vector<Costs> of_chunks;
      for (const auto& chunk_item : *chunks) {
        Costs chunk = stage;
        if (!parse_entry(chunk_item, which + " chunk " + std::to_string(of_chunks.size()), chunk,
                         nullptr, refusal)) {
          return false;
        }
        of_chunks.push_back(std::move(chunk));
      }
      stage.chunks = std::move(of_chunks);
    }
    stages.push_back(std::move(stage));
  }
  costs.stages = std::move(stages);
  return true;
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
    std::vector<CostKey> out{{kTransferKey,
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
  error = "unknown cost '" + std::string(key) + "' (keys: " + std::string(kTransferKey);
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

bool set_cost_text(Costs& costs, std::string_view key, std::string_view text, std::string& error) {
  text = trim(text);
  if (key == kTransferKey) {
    if (parse_transfer_model(text, costs.transfer)) return true;
    error = "cost 'transfer' is auto, eager or rendezvous, not '" + std::string(text) + "'";
    return false;
  }
  double value = 0;
  if (!parse_number(text, value)) {
    error = "cost '" + std::string(key) + "' is not a number";
    return false;
  }
  return set_cost(costs, key, value, error);
}

bool parse_cost_flags(std::string_view text, Costs& costs, std::string& error) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    const auto equals = item.find('=');
    const std::string_view key = trim(item.substr(0, equals));
    double value = 0;
    if (equals != std::string_view::npos && key == kTransferKey) {
      if (!set_cost_text(costs, key, item.substr(equals + 1), error)) return false;
      continue;
    }
    if (equals == std::string_view::npos || !parse_number(item.substr(equals + 1), value)) {
      error = "expected key=number in --cost, got '" + std::string(item) + "'";
      return false;
    }
    if (!set_cost(costs, key, value, error)) return false;
  }
  return true;
}

namespace {

bool parse_costs(std::string_view yaml_text, Costs& costs, Refusal& refusal) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    refusal = {e.mark, "not YAML: " + e.msg};
    return false;
  }
  if (root.IsNull()) return true;
  if (!root.IsMap()) {
    return refuse(root, "a cost file is a mapping of keys to numbers (fwd: 1)", refusal);
  }
  std::optional<YAML::Node> stages;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return refuse(entry.first, "a cost file's keys are names (fwd: 1), not sequences or mappings",
                    refusal);
    }
    const std::string key = entry.first.Scalar();
    if (key == kStagesKey) {
      stages = entry.second;
      continue;
    }
    if (!entry.second.IsScalar()) {
      return refuse(entry.second, "cost '" + key + "' is not a number", refusal);
    }
    std::string error;
    if (!set_cost_text(costs, key, entry.second.Scalar(), error)) {
      return refuse(entry.second, error, refusal);
    }
  }
  return !stages || parse_stages(*stages, costs, refusal);
}

}  // namespace

bool parse_costs_yaml(std::string_view yaml_text, Costs& costs, std::string& error) {
  Refusal refusal;
  if (parse_costs(yaml_text, costs, refusal)) return true;
  const std::string where = position_of(refusal.where);
  error = where.empty() ? refusal.message : where + ": " + refusal.message;
  return false;
}

bool read_costs_yaml(const std::string& path, Costs& costs, std::string& error) {
  std::string text;
  if (!read_input_file(path, kMaxYamlBytes, "cost files", text, error)) {
    error = "cannot read cost file '" + path + "': " + error;
    return false;
  }
  Refusal refusal;
  if (parse_costs(text, costs, refusal)) return true;
  const std::string where = position_of(refusal.where);
  error = path + (where.empty() ? "" : ":" + where) + ": " + refusal.message;
  return false;
}

namespace {

// One list item of per-stage keys, `indent` before its dash.
void write_entry(std::ostream& out, const Costs& entry, const std::string& indent) {
  std::string prefix = indent + "- ";
  for (const KeyField& f : key_fields()) {
    if (!f.key.per_stage) continue;
    if (f.field == nullptr) {
      const auto& v = entry.*(f.optional);
      if (!v) continue;
      out << prefix << f.key.name << ": " << shortest_text(*v) << '\n';
    } else {
      out << prefix << f.key.name << ": " << shortest_text(entry.*(f.field)) << '\n';
    }
    prefix = indent + "  ";
  }
}

}  // namespace

void write_costs_yaml(std::ostream& out, const Costs& costs, std::string_view comment) {
  out << "# pipevm cost model (pipevm simulate --costs FILE); time unit: microseconds\n";
  if (!comment.empty()) out << "# " << comment << '\n';
  if (costs.transfer != TransferModel::automatic) {
    out << kTransferKey << ": " << name(costs.transfer) << '\n';
  }
  for (const KeyField& f : key_fields()) {
    if (f.field == nullptr) {
      if (const auto& v = costs.*(f.optional))
        out << f.key.name << ": " << shortest_text(*v) << '\n';
    } else {
      out << f.key.name << ": " << shortest_text(costs.*(f.field)) << '\n';
    }
  }
  if (costs.stages.empty()) return;
  out << kStagesKey << ":  # per pipeline stage, stage 0 first\n";
  for (const Costs& stage : costs.stages) {
    write_entry(out, stage, "  ");
    if (stage.chunks.empty()) continue;
    out << "    " << kChunksKey << ":  # per model chunk of this stage, chunk 0 first\n";
    for (const Costs& chunk : stage.chunks) write_entry(out, chunk, "      ");
  }
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
    out << separator << kTransferKey << '=' << name(costs.transfer);
  }
  if (!costs.stages.empty()) {
    out << " (compute per stage for " << costs.stages.size() << " stages";
    const bool per_chunk = std::any_of(costs.stages.begin(), costs.stages.end(),
                                       [](const Costs& stage) { return !stage.chunks.empty(); });
    out << (per_chunk ? ", per chunk)" : ")");
  }
  const std::string text = out.str();
  return text.empty() ? "all zero" : text;
}

LinkFit fit_link(const std::vector<MessageTiming>& timings) {
  LinkFit fit;
  if (timings.empty()) return fit;
  const auto n = static_cast<double>(timings.size());
  double mean_bytes = 0;
  double mean_time = 0;
  for (const MessageTiming& t : timings) {
    mean_bytes += t.bytes / n;
    mean_time += t.microseconds / n;
  }
  double covariance = 0;
  double variance = 0;
  for (const MessageTiming& t : timings) {
    covariance += (t.bytes - mean_bytes) * (t.microseconds - mean_time);
    variance += (t.bytes - mean_bytes) * (t.bytes - mean_bytes);
  }
  if (variance <= 0 || covariance <= 0) {
    std::vector<double> times;
    for (const MessageTiming& t : timings) times.push_back(t.microseconds);
    fit.latency = median(std::move(times));
    return fit;
  }
  const double microseconds_per_byte = covariance / variance;
  fit.bandwidth = 1 / microseconds_per_byte;
  fit.latency = std::max(0.0, mean_time - microseconds_per_byte * mean_bytes);
  return fit;
}

void set_link_costs(Costs& costs, const MeasuredLinks& links) {
  if (links.same_host) {
    costs.send = links.same_host->latency;
    costs.bandwidth = links.same_host->bandwidth;
  }
  if (links.across_hosts) {
    costs.cross_host_send = links.across_hosts->latency;
    costs.cross_host_bandwidth = links.across_hosts->bandwidth;
  }
  if (links.host_memory) {
    costs.host_latency = links.host_memory->latency;
    costs.host_bandwidth = links.host_memory->bandwidth;
  }
}

namespace {

bool is_collective(CostKind kind) {
  return kind == CostKind::allreduce || kind == CostKind::allgather ||
         kind == CostKind::reduce_scatter;
}

using Durations = std::map<CostKind, std::vector<double>>;

// A collective's measured duration is mostly the wait for the group's last
// member. The simulator starts the reduction at the last arrival, so each
// occurrence counts once, as its shortest duration over the replicas of a
// stage (the n-th collective of a kind on each replica is one occurrence:
// the checker proves that members issue them in one order).
void add_collectives(const Program& program, const std::vector<MeasuredInstruction>& measured,
                     Durations& all_stages, std::vector<Durations>& per_stage) {
  // (stage, kind) -> per replica, its collectives' durations in start order.
  std::map<std::pair<int, CostKind>, std::map<int, std::vector<std::pair<std::int64_t, double>>>>
      occurrences;
  for (const MeasuredInstruction& m : measured) {
    const CostKind kind = info(program.rank(m.rank)[m.index].op).cost;
    if (!is_collective(kind)) continue;
    occurrences[{stage_of(program.config, m.rank), kind}][m.rank].emplace_back(
        m.start_ns, static_cast<double>(m.end_ns - m.start_ns) / 1000.0);
  }
  for (auto& [stage_kind, replicas] : occurrences) {
    std::size_t count = SIZE_MAX;
    for (auto& [rank, list] : replicas) {
      std::sort(list.begin(), list.end());
      count = std::min(count, list.size());
    }
    for (std::size_t n = 0; n < count; ++n) {
      double shortest = std::numeric_limits<double>::infinity();
      for (const auto& [rank, list] : replicas) shortest = std::min(shortest, list[n].second);
      all_stages[stage_kind.second].push_back(shortest);
      const auto stage = static_cast<std::size_t>(stage_kind.first);
      if (stage < per_stage.size()) per_stage[stage][stage_kind.second].push_back(shortest);
    }
  }
}

// The medians of `durations` over `base`: a kind that never ran keeps the
// base's value (a chunk's, its stage's).
Costs medians_over(Costs base, Durations& durations) {
  const auto median_of = [&](CostKind kind, auto set) {
    if (!durations[kind].empty()) set(median(durations[kind]));
  };
  median_of(CostKind::fwd, [&](double v) { base.fwd = v; });
  median_of(CostKind::bwd_input, [&](double v) { base.bwd_input = v; });
  median_of(CostKind::bwd_weight, [&](double v) { base.bwd_weight = v; });
  median_of(CostKind::bwd, [&](double v) { base.bwd = v; });
  median_of(CostKind::fwd_bwd, [&](double v) { base.fwd_bwd = v; });
  median_of(CostKind::recompute, [&](double v) { base.recompute = v; });
  median_of(CostKind::load, [&](double v) { base.load = v; });
  median_of(CostKind::zero_grad, [&](double v) { base.zero_grad = v; });
  median_of(CostKind::optimizer, [&](double v) { base.optimizer = v; });
  median_of(CostKind::allreduce, [&](double v) { base.allreduce = v; });
  median_of(CostKind::allgather, [&](double v) { base.allgather = v; });
  median_of(CostKind::reduce_scatter, [&](double v) { base.reduce_scatter = v; });
  return base;
}

}  // namespace

Costs costs_from_measurements(const Program& program,
                              const std::vector<MeasuredInstruction>& all_measured) {
  std::vector<MeasuredInstruction> measured;
  for (const MeasuredInstruction& m : all_measured) {
    if (m.rank >= 0 && m.rank < program.ranks() && m.index < program.rank(m.rank).size()) {
      measured.push_back(m);
    }
  }
  const auto stages = static_cast<std::size_t>(std::max(program.config.stages, 1));
  const auto chunks =
      static_cast<std::size_t>(std::max(chunks_per_rank(program.placement, program.config), 1));
  Durations all_stages;
  std::vector<Durations> per_stage(stages);
  std::vector<std::vector<Durations>> per_chunk(stages, std::vector<Durations>(chunks));
  for (const MeasuredInstruction& m : measured) {
    const double microseconds = static_cast<double>(m.end_ns - m.start_ns) / 1000.0;
    const Instruction& in = program.rank(m.rank)[m.index];
    const CostKind kind = info(in.op).cost;
    if (is_collective(kind)) continue;
    all_stages[kind].push_back(microseconds);
    const auto stage = static_cast<std::size_t>(stage_of(program.config, m.rank));
    if (stage >= stages) continue;
    per_stage[stage][kind].push_back(microseconds);
    if (in.chunk < chunks) per_chunk[stage][in.chunk][kind].push_back(microseconds);
  }
  add_collectives(program, measured, all_stages, per_stage);
  Costs costs = medians_over(Costs{}, all_stages);
  // Stages hold different pieces of the model: one median over all of them
  // would make the slowest stage, which paces the pipeline, look faster;
  // so do a rank's chunks when it holds several (the default MLP's first
  // layer does 56% of its multiply-adds).
  if (stages == 1 && chunks == 1) return costs;
  const Costs overall = costs;
  for (std::size_t s = 0; s < stages; ++s) {
    Costs stage = medians_over(overall, per_stage[s]);
    std::vector<Costs> of_chunks;
    for (std::size_t k = 0; chunks > 1 && k < chunks; ++k) {
      of_chunks.push_back(medians_over(stage, per_chunk[s][k]));
    }
    stage.chunks = std::move(of_chunks);
    costs.stages.push_back(std::move(stage));
  }
  return costs;
}

}  // namespace pipevm
