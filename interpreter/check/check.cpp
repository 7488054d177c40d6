// The checker's entry point and what its passes share: the reporter (capped,
// located diagnostics), the model's message widths, and the result's JSON,
// text and SARIF forms. It links the program once (link.hpp); the passes
// that turn the link and the streams into findings live in
// check_matching.cpp, check_replicas.cpp, check_ranks.cpp,
// check_memory_policy.cpp and check_progress.cpp.
#include "check.hpp"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "check_internal.hpp"
#include "topology.hpp"

namespace pipevm {

namespace check_detail {

namespace {
constexpr std::size_t kKindCount = 0
#define PIPEVM_DIAGNOSTIC(name, code, cls) +1
#include "diagnostic_kinds.def"
    ;
}  // namespace

Reporter::Reporter(const Program& program, std::size_t max_per_kind)
    : program_(program), max_per_kind_(max_per_kind), per_kind_(kKindCount, 0) {}

Diagnostic* Reporter::report(DiagnosticKind kind, std::string message, Location location) {
  std::size_t& count = per_kind_[static_cast<std::size_t>(kind)];
  ++count;
  if (count > max_per_kind_) {
    ++suppressed_;
    return nullptr;
  }
  Diagnostic d;
  d.kind = kind;
  d.message = std::move(message);
  d.location = std::move(location);
  diagnostics_.push_back(std::move(d));
  return &diagnostics_.back();
}

void Reporter::note(Diagnostic* diagnostic, std::string message, Location location) {
  if (diagnostic) diagnostic->notes.push_back(Note{std::move(message), std::move(location)});
}

bool Reporter::reported(DiagnosticKind kind) const {
  return per_kind_[static_cast<std::size_t>(kind)] > 0;
}

int Reporter::rank_of_index(std::size_t index) const {
  const auto& begins = program_.rank_begin;
  const auto it = std::upper_bound(begins.begin(), begins.end(), index);
  return static_cast<int>(it - begins.begin()) - 1;
}

Location Reporter::at(std::size_t index) const {
  const int rank = rank_of_index(index);
  return Location{program_.file, program_.source_of(program_.code[index]), rank,
                  stage_of(program_.config, rank)};
}

Location Reporter::end_of(int rank) const {
  const auto stream = program_.rank(rank);
  if (stream.empty()) return Location{program_.file, {}, rank, stage_of(program_.config, rank)};
  return at(program_.rank_begin[static_cast<std::size_t>(rank)] + stream.size() - 1);
}

std::string Reporter::rank_name(int rank) const {
  return "rank " + std::to_string(rank) + " (stage " +
         std::to_string(stage_of(program_.config, rank)) + ")";
}

std::string Reporter::describe(std::size_t index) const {
  const Location where = at(index);
  std::string out = rank_name(where.rank) + " ";
  if (where.file) {
    const LineColumn p = where.file->position(where.range.begin);
    out += where.file->name() + ":" + std::to_string(p.line) + ":" + std::to_string(p.column) +
           " ";
  }
  return out + "`" + disassemble(program_.code[index]) + "`";
}

int chunks_per_rank(const Program& program) {
  return std::max(1, pipevm::chunks_per_rank(program.placement, program.config));
}

}  // namespace check_detail

namespace {
// Unrolled steps repeat a finding once per step: keep the first.
void drop_repeats(std::vector<Diagnostic>& diagnostics) {
  std::vector<Diagnostic> kept;
  for (Diagnostic& d : diagnostics) {
    const bool seen = std::any_of(kept.begin(), kept.end(), [&](const Diagnostic& k) {
      return k.kind == d.kind && k.message == d.message;
    });
    if (!seen) kept.push_back(std::move(d));
  }
  diagnostics = std::move(kept);
}
}  // namespace

CheckResult check(const Program& stepped, const CheckOptions& options) {
  using namespace check_detail;
  CheckResult result;
  {
    Reporter topology(stepped, options.max_diagnostics_per_kind);
    if (!check_topology(stepped, topology)) {
      result.diagnostics = topology.take_diagnostics();
      result.instructions = stepped.code.size();
      return result;
    }
    result.diagnostics = topology.take_diagnostics();
  }
  // Requests carried over the step boundary: one step between the
  // exchange before it and the wait after it (`one`) for what a step does
  // alone (dataflow, replicas, messages), several (`program`) for pairing
  // across rounds, completion and progress.
  const int steps = steps_to_unroll(stepped);
  const Program one_step = steps > 1 ? unroll_steps(stepped, 1) : Program{};
  const Program unrolled = steps > 1 ? unroll_steps(stepped, steps) : Program{};
  const Program& one = steps > 1 ? one_step : stepped;
  const Program& program = steps > 1 ? unrolled : stepped;
  result.instructions = program.code.size();
  Reporter reporter(program, options.max_diagnostics_per_kind);
  Reporter step_reporter(one, options.max_diagnostics_per_kind);
  Reporter& alone = steps > 1 ? step_reporter : reporter;
  const std::vector<LayerRange> cut = cut_for_model(program, options.layer_widths);
  const std::vector<LayerRange>& split = options.split.empty() ? cut : options.split;
  const std::vector<int> widths =
      split.empty() ? piece_boundary_widths(options.layer_widths,
                                            model_pieces(program.placement, program.config))
                    : piece_boundary_widths(options.layer_widths, split);
  const Link linked = link(program, LinkOptions{widths});
  const Link one_link = steps > 1 ? link(one, LinkOptions{widths}) : Link{};
  const Link& one_linked = steps > 1 ? one_link : linked;

  report_messages(one, one_linked, widths, alone);
  const std::vector<bool> quiet = check_replicas(one, one_linked, alone);
  report_collectives(program, linked, reporter);
  check_ranks(one, one_linked, alone, quiet, result.memory);
  check_shards(one, alone, quiet);
  check_layers(one, alone, quiet);
  check_holds(one, alone, quiet);
  check_memory_policy(one, one_linked, alone, quiet);
  check_progress(program, linked, reporter, options.p2p_posted_order);
  check_gossip_flight(program, linked, reporter);

  std::vector<Diagnostic> found = alone.take_diagnostics();
  if (steps > 1) {
    std::vector<Diagnostic> more = reporter.take_diagnostics();
    found.insert(found.end(), more.begin(), more.end());
    drop_repeats(found);
  }
  result.diagnostics.insert(result.diagnostics.end(), found.begin(), found.end());
  result.suppressed = reporter.suppressed() + (steps > 1 ? alone.suppressed() : 0);
  return result;
}

nlohmann::json memory_to_json(const std::vector<StageMemory>& memory) {
  nlohmann::json out = nlohmann::json::array();
  for (const StageMemory& m : memory) {
    out.push_back({{"stage", m.stage},
                   {"peak_activations", m.peak_activations},
                   {"peak_in_flight", m.peak_in_flight}});
  }
  return out;
}

std::string memory_to_text(const std::vector<StageMemory>& memory) {
  std::string out;
  for (const StageMemory& m : memory) {
    out += "stage " + std::to_string(m.stage) + ": peak " + std::to_string(m.peak_activations) +
           (m.peak_activations == 1 ? " activation" : " activations") + " held, " +
           std::to_string(m.peak_in_flight) +
           (m.peak_in_flight == 1 ? " message" : " messages") + " in flight\n";
  }
  return out;
}

namespace {

std::string_view describe_class(DiagnosticClass cls) {
  switch (cls) {
    case DiagnosticClass::parse: return "The text is not a program.";
    case DiagnosticClass::require: return "A require of the schedule is false for this configuration.";
    case DiagnosticClass::deadlock: return "Ranks wait for each other in a cycle under any buffering.";
    case DiagnosticClass::buffering_hazard:
      return "The schedule finishes only if MPI buffers some blocking sends.";
    case DiagnosticClass::unmatched: return "A message is sent and never received, or the reverse.";
    case DiagnosticClass::wrong_peer:
      return "A peer is outside the pipeline, the rank itself, or not the neighbouring stage.";
    case DiagnosticClass::size_mismatch: return "Sender and receiver disagree on a message's size.";
    case DiagnosticClass::collective_order:
      return "Members of a group issue collectives in different orders, or wait in a cycle.";
    case DiagnosticClass::collective_missing:
      return "A member of a group never issues a collective the others issue.";
    case DiagnosticClass::nonblocking_misuse:
      return "A request is never waited, waited twice, or its buffer used while pending.";
    case DiagnosticClass::dataflow:
      return "A stage uses a value before it is computed, or computes it not exactly once.";
    case DiagnosticClass::topology:
      return "A gossip topology's round is not a partition of the replicas, or its rounds never "
             "connect them.";
    case DiagnosticClass::runtime: return "Running the program failed.";
  }
  return "";
}

nlohmann::json sarif_location(const Location& location, const std::string& message) {
  nlohmann::json region = {{"startLine", 1}, {"startColumn", 1}};
  std::string uri = "unknown";
  if (location.file) {
    const LineColumn p = location.file->position(location.range.begin);
    region = {{"startLine", p.line}, {"startColumn", p.column}};
    uri = location.file->name();
  }
  nlohmann::json out = {
      {"physicalLocation", {{"artifactLocation", {{"uri", uri}}}, {"region", region}}}};
  if (!message.empty()) out["message"] = {{"text", message}};
  return out;
}

}  // namespace

nlohmann::json to_sarif(const std::vector<Diagnostic>& diagnostics, const std::string& version) {
  // Rules in code order, so that the output does not depend on which
  // diagnostic came first.
  std::map<int, DiagnosticKind> used;
  for (const Diagnostic& d : diagnostics) used.emplace(code_number(d.kind), d.kind);
  nlohmann::json rules = nlohmann::json::array();
  std::map<int, std::size_t> rule_index;
  for (const auto& [number, kind] : used) {
    rule_index[number] = rules.size();
    rules.push_back({{"id", code(kind)},
                     {"name", std::string(name(kind))},
                     {"shortDescription", {{"text", std::string(describe_class(class_of(kind)))}}},
                     {"properties", {{"class", std::string(name(class_of(kind)))}}}});
  }
  nlohmann::json results = nlohmann::json::array();
  for (const Diagnostic& d : diagnostics) {
    nlohmann::json result = {{"ruleId", code(d.kind)},
                             {"ruleIndex", rule_index[code_number(d.kind)]},
                             {"level", d.severity == Severity::error ? "error" : "warning"},
                             {"message", {{"text", d.message}}},
                             {"locations", nlohmann::json::array({sarif_location(d.location, "")})}};
    if (!d.notes.empty()) {
      nlohmann::json related = nlohmann::json::array();
      for (std::size_t i = 0; i < d.notes.size(); ++i) {
        nlohmann::json r = sarif_location(d.notes[i].location, d.notes[i].message);
        r["id"] = i;
        related.push_back(std::move(r));
      }
      result["relatedLocations"] = std::move(related);
    }
    results.push_back(std::move(result));
  }
  nlohmann::json driver = {{"name", "pipevm"},
                           {"version", version},
                           {"rules", std::move(rules)}};
  return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs", nlohmann::json::array({{{"tool", {{"driver", std::move(driver)}}},
                                            {"results", std::move(results)}}})}};
}

}  // namespace pipevm
