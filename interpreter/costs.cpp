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

// `stages:` of a cost file: one mapping of per-stage keys per stage, each
// starting from the file's (and the flags') other keys.
bool parse_stages(const YAML::Node& list, Costs& costs, std::string& error) {
  if (!list.IsSequence()) {
    error = "'stages' is a list with one mapping per stage (- fwd: 1)";
    return false;
  }
  Costs base = costs;
  base.stages.clear();
  std::vector<Costs> stages;
  for (const auto& item : list) {
    const std::string which = "stage " + std::to_string(stages.size());
    if (!item.IsMap()) {
      error = which + " of 'stages' is not a mapping of keys to numbers (fwd: 1)";
      return false;
    }
    Costs stage = base;
    for (const auto& entry : item) {
      const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
      const KeyField* field = field_named(key);
      if (field == nullptr || !field->key.per_stage) {
        error = which + ": '" + key + "' is not a cost that differs by stage (those are:";
        for (const KeyField& f : key_fields()) {
          if (f.key.per_stage) error += ' ' + std::string(f.key.name);
        }
        error += ")";
        return false;
      }
      double value = 0;
      if (!entry.second.IsScalar() || !parse_number(entry.second.Scalar(), value)) {
        error = which + ": cost '" + key + "' is not a number";
        return false;
      }
      if (!set_cost(stage, key, value, error)) {
        error = which + ": " + error;
        return false;
      }
    }
    stages.push_back(std::move(stage));
  }
  costs.stages = std::move(stages);
  return true;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  const double upper = *middle;
  const double lower = *std::max_element(values.begin(), middle);
  return (lower + upper) / 2;
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
    case CostKind::zero_grad: return zero_grad;
    case CostKind::optimizer: return optimizer;
    // Communication: timed by its partners, not by the rank alone.
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
    if (f.key.per_stage) std::for_each(costs.stages.begin(), costs.stages.end(), set);
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

bool parse_costs_yaml(std::string_view yaml_text, Costs& costs, std::string& error) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    error = std::string("not YAML: ") + e.what();
    return false;
  }
  if (root.IsNull()) return true;
  if (!root.IsMap()) {
    error = "a cost file is a mapping of keys to numbers (fwd: 1)";
    return false;
  }
  std::optional<YAML::Node> stages;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      error = "a cost file's keys are names (fwd: 1), not sequences or mappings";
      return false;
    }
    const std::string key = entry.first.Scalar();
    if (key == kStagesKey) {
      stages = entry.second;
      continue;
    }
    if (!entry.second.IsScalar()) {
      error = "cost '" + key + "' is not a number";
      return false;
    }
    if (!set_cost_text(costs, key, entry.second.Scalar(), error)) return false;
  }
  return !stages || parse_stages(*stages, costs, error);
}

bool read_costs_yaml(const std::string& path, Costs& costs, std::string& error) {
  std::string text;
  if (!read_input_file(path, kMaxYamlBytes, "cost files", text, error)) {
    error = "cannot read cost file '" + path + "': " + error;
    return false;
  }
  if (!parse_costs_yaml(text, costs, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

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
    const char* indent = "  - ";
    for (const KeyField& f : key_fields()) {
      if (!f.key.per_stage) continue;
      if (f.field == nullptr) {
        const auto& v = stage.*(f.optional);
        if (!v) continue;
        out << indent << f.key.name << ": " << shortest_text(*v) << '\n';
      } else {
        out << indent << f.key.name << ": " << shortest_text(stage.*(f.field)) << '\n';
      }
      indent = "    ";
    }
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
  if (!costs.stages.empty()) out << " (compute per stage for " << costs.stages.size() << " stages)";
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

}  // namespace

Costs costs_from_measurements(const Program& program,
                              const std::vector<MeasuredInstruction>& all_measured) {
  std::vector<MeasuredInstruction> measured;
  for (const MeasuredInstruction& m : all_measured) {
    if (m.rank >= 0 && m.rank < program.ranks() && m.index < program.rank(m.rank).size()) {
      measured.push_back(m);
    }
  }
  Durations all_stages;
  std::vector<Durations> per_stage(static_cast<std::size_t>(std::max(program.config.stages, 1)));
  for (const MeasuredInstruction& m : measured) {
    const double microseconds = static_cast<double>(m.end_ns - m.start_ns) / 1000.0;
    const CostKind kind = info(program.rank(m.rank)[m.index].op).cost;
    if (is_collective(kind)) continue;
    all_stages[kind].push_back(microseconds);
    const auto stage = static_cast<std::size_t>(stage_of(program.config, m.rank));
    if (stage < per_stage.size()) per_stage[stage][kind].push_back(microseconds);
  }
  add_collectives(program, measured, all_stages, per_stage);
  const auto medians = [](Durations& durations) {
    const auto median_of = [&](std::initializer_list<CostKind> of) {
      std::vector<double> values;
      for (const CostKind kind : of) {
        const auto& d = durations[kind];
        values.insert(values.end(), d.begin(), d.end());
      }
      return median(std::move(values));
    };
    Costs costs;
    costs.fwd = median_of({CostKind::fwd});
    costs.bwd_input = median_of({CostKind::bwd_input});
    costs.bwd_weight = median_of({CostKind::bwd_weight});
    if (!durations[CostKind::bwd].empty()) costs.bwd = median_of({CostKind::bwd});
    if (!durations[CostKind::fwd_bwd].empty()) costs.fwd_bwd = median_of({CostKind::fwd_bwd});
    costs.load = median_of({CostKind::load});
    costs.zero_grad = median_of({CostKind::zero_grad});
    costs.optimizer = median_of({CostKind::optimizer});
    costs.allreduce = median_of({CostKind::allreduce});
    costs.allgather = median_of({CostKind::allgather});
    costs.reduce_scatter = median_of({CostKind::reduce_scatter});
    return costs;
  };
  Costs costs = medians(all_stages);
  // Stages hold different pieces of the model: one median over all of them
  // would make the slowest stage, which paces the pipeline, look faster.
  if (per_stage.size() > 1) {
    for (Durations& stage : per_stage) costs.stages.push_back(medians(stage));
  }
  return costs;
}

}  // namespace pipevm
