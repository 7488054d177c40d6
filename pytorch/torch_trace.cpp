// Reading pass durations from a torch.profiler trace (torch_trace.hpp).
// std::regex has no named groups, so the label's `(?<name>...)` groups are
// rewritten as plain groups and their numbers remembered.
#include "torch_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

// GCC 12 with -fsanitize=address warns that std::regex's compiler reads a
// std::function it has not initialised (-Wmaybe-uninitialized, GCC bug
// 105562, a false positive): the sanitizer preset builds with -Werror.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>

namespace pipevm::pytorch {

namespace {

using nlohmann::json;

constexpr std::size_t kLongestLabel = 256;

struct LabelPattern {
  std::regex expression;
  std::size_t stage_group = 0;
  std::size_t kind_group = 0;
  std::size_t mb_group = 0;  // 0: the label names no micro-batch
};

// Rewrites `(?<name>` as `(`, numbering capture groups as ECMAScript does
// (by their opening parenthesis, skipping escapes, classes and `(?:`).
std::optional<LabelPattern> compile_label(const std::string& pattern, std::string& error) {
  std::string plain;
  std::map<std::string, std::size_t> groups;
  std::size_t captures = 0;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      plain += pattern.substr(i, 2);
      ++i;
      continue;
    }
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(' && pattern.compare(i, 3, "(?<") == 0 && i + 3 < pattern.size() &&
               pattern[i + 3] != '=' && pattern[i + 3] != '!') {
      const std::size_t close = pattern.find('>', i + 3);
      if (close == std::string::npos) {
        error = "--label: the group at character " + std::to_string(i + 1) + " has no closing '>'";
        return std::nullopt;
      }
      groups[pattern.substr(i + 3, close - i - 3)] = ++captures;
      plain += '(';
      i = close;
      continue;
    } else if (c == '(' && (i + 1 >= pattern.size() || pattern[i + 1] != '?')) {
      ++captures;
    }
    plain += c;
  }
  LabelPattern label;
  try {
    label.expression = std::regex(plain, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    error = "--label: not a regular expression (" + std::string(e.what()) + ")";
    return std::nullopt;
  }
  for (const char* name : {"stage", "kind"}) {
    if (!groups.contains(name)) {
      error = std::string("--label: the expression needs a named group (?<") + name +
              ">...); it may also name (?<mb>...)";
      return std::nullopt;
    }
  }
  label.stage_group = groups["stage"];
  label.kind_group = groups["kind"];
  if (groups.contains("mb")) label.mb_group = groups["mb"];
  return label;
}

std::optional<TracePass> pass_named(const std::string& kind) {
  static const std::map<std::string, TracePass> names = {
      {"F", TracePass::forward},         {"fwd", TracePass::forward},
      {"B", TracePass::backward},        {"bwd", TracePass::backward},
      {"I", TracePass::backward_input},  {"bwd-input", TracePass::backward_input},
      {"W", TracePass::backward_weight}, {"bwd-weight", TracePass::backward_weight}};
  const auto found = names.find(kind);
  if (found == names.end()) return std::nullopt;
  return found->second;
}

std::optional<int> whole_number(const std::string& text) {
  int value = 0;
  const auto [end, failed] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (failed != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

struct Labelled {
  double start = 0;
  double duration = 0;
  int stage = 0;
  TracePass pass = TracePass::forward;
  int micro_batch = -1;  // -1: the label names none
  int step = 0;
};

// `ProfilerStep#N` spans (start, end, N): the steps torch.profiler marks
// when the profiled loop calls prof.step().
struct StepSpan {
  double start = 0;
  double end = 0;
  int number = 0;
};

const json* events_of(const json& trace, std::string& error) {
  if (trace.is_array()) return &trace;
  if (trace.is_object()) {
    const auto found = trace.find("traceEvents");
    if (found != trace.end() && found->is_array()) return &*found;
  }
  error = "not a Chrome trace: expected an array of events or an object with \"traceEvents\"";
  return nullptr;
}

// Steps by the occurrence of each (stage, pass, micro-batch): the k-th is step k.
void number_by_occurrence(std::vector<Labelled>& events) {
  std::map<std::tuple<int, TracePass, int>, int> seen;
  for (Labelled& e : events) e.step = seen[{e.stage, e.pass, e.micro_batch}]++;
}

// Steps by the ProfilerStep span each event starts in; false when some event
// starts in none.
bool number_by_profiler_steps(std::vector<Labelled>& events, std::vector<StepSpan> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const StepSpan& a, const StepSpan& b) { return a.number < b.number; });
  for (Labelled& e : events) {
    const auto in = std::find_if(spans.begin(), spans.end(), [&](const StepSpan& s) {
      return e.start >= s.start && e.start < s.end;
    });
    if (in == spans.end()) return false;
    e.step = static_cast<int>(in - spans.begin());
  }
  return true;
}

}  // namespace

std::optional<TraceDurations> read_torch_trace(std::string_view json_text, const TraceOptions& options,
                                               std::string& error) {
  const auto label = compile_label(options.label, error);
  if (!label) return std::nullopt;
  json trace;
  try {
    trace = json::parse(json_text);
  } catch (const json::parse_error& e) {
    error = "not JSON: at byte " + std::to_string(e.byte) + ", " +
            std::string(e.what()).substr(std::string(e.what()).find(':') + 2);
    return std::nullopt;
  }
  const json* events = events_of(trace, error);
  if (events == nullptr) return std::nullopt;

  std::vector<Labelled> labelled;
  std::vector<StepSpan> spans;
  for (const json& event : *events) {
    if (!event.is_object()) continue;
    // A complete event ("ph": "X"); `ph` of another type is some other record.
    const auto phase = event.find("ph");
    if (phase == event.end() || !phase->is_string() || phase->get_ref<const std::string&>() != "X") continue;
    const auto name = event.find("name");
    const auto ts = event.find("ts");
    const auto dur = event.find("dur");
    if (name == event.end() || !name->is_string() || ts == event.end() || !ts->is_number() ||
        dur == event.end() || !dur->is_number()) {
      continue;
    }
    const std::string text = name->get<std::string>();
    const double start = ts->get<double>();
    const double duration = dur->get<double>();
    // Labels are short: a long name is some other event, and std::regex
    // recurses per character, so matching it could exhaust the stack.
    if (text.size() > kLongestLabel || !std::isfinite(start) || !std::isfinite(duration) ||
        duration < 0) {
      continue;
    }
    if (text.rfind("ProfilerStep#", 0) == 0) {
      if (const auto number = whole_number(text.substr(13))) {
        spans.push_back({start, start + duration, *number});
      }
      continue;
    }
    std::smatch match;
    if (!std::regex_match(text, match, label->expression)) continue;
    const auto stage = whole_number(match[label->stage_group].str());
    const auto pass = pass_named(match[label->kind_group].str());
    const auto mb = label->mb_group == 0 ? std::optional<int>(-1)
                                          : whole_number(match[label->mb_group].str());
    if (!stage || !pass || !mb) {
      error = "event \"" + text + "\" matches the label, but its stage and micro-batch must be " +
              "whole numbers and its kind one of F, B, I, W, fwd, bwd, bwd-input, bwd-weight";
      return std::nullopt;
    }
    labelled.push_back({start, duration, *stage, *pass, *mb, 0});
  }
  if (labelled.empty()) {
    error = "no event of the trace is named like the label " + options.label +
            ": PyTorch's pipelining runtime writes `PP:<stage><F|B|I|W><mb>` annotations (e.g. "
            "PP:1I3); around your own passes add `with torch.profiler.record_function(\"PP:1I3\")`, "
            "or give --label with named groups stage and kind (and mb)";
    return std::nullopt;
  }
  std::stable_sort(labelled.begin(), labelled.end(),
                   [](const Labelled& a, const Labelled& b) { return a.start < b.start; });
  if (label->mb_group != 0) {
    number_by_occurrence(labelled);
  } else if (!spans.empty()) {
    if (!number_by_profiler_steps(labelled, spans)) {
      error = "a labelled event starts outside every ProfilerStep#N span of the trace";
      return std::nullopt;
    }
  } else if (options.skip_steps > 0) {
    error = "the label names no micro-batch (?<mb>...) and the trace has no ProfilerStep#N events, "
            "so its steps cannot be told apart: give --skip-steps 0";
    return std::nullopt;
  }

  TraceDurations out;
  out.labelled_events = static_cast<int>(labelled.size());
  for (const Labelled& e : labelled) out.steps = std::max(out.steps, e.step + 1);
  for (const Labelled& e : labelled) {
    if (e.step < options.skip_steps) continue;
    if (out.samples.size() <= static_cast<std::size_t>(e.stage)) {
      out.samples.resize(static_cast<std::size_t>(e.stage) + 1);
    }
    out.samples[static_cast<std::size_t>(e.stage)][static_cast<std::size_t>(e.pass)].push_back(
        e.duration);
  }
  if (out.samples.empty()) {
    error = "the trace holds " + std::to_string(out.steps) + " step" + (out.steps == 1 ? "" : "s") +
            " and --skip-steps " + std::to_string(options.skip_steps) +
            " leaves none: profile more steps, or skip fewer";
    return std::nullopt;
  }
  return out;
}

}  // namespace pipevm::pytorch

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
