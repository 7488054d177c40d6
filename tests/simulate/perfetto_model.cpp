// The model of Perfetto's JSON import; the rules are listed in the header.
#include "perfetto_model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

namespace pipevm::testing::perfetto {

namespace {

constexpr std::int64_t kMaxKey = std::numeric_limits<std::int64_t>::max();

// Perfetto keeps v1 flows apart by (id, category, name) and v2 flows by
// bind_id alone.
using FlowKey = std::tuple<int, std::uint64_t, std::string, std::string>;

std::uint64_t flow_identifier(const nlohmann::json& id) {
  if (id.is_number()) return id.get<std::uint64_t>();
  return std::stoull(id.get<std::string>(), nullptr, 16);
}

std::string text_of(const nlohmann::json& event, const char* key) {
  const auto it = event.find(key);
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct OpenFlow {
  std::size_t slice = 0;
  std::int64_t ts = 0;
};

class Importer {
 public:
  explicit Importer(const nlohmann::json& events) : events_(events) {}

  Import run() {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      if (events_[i].contains("ts")) order.push_back(i);
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> keys(events_.size());
    for (const std::size_t i : order) keys[i] = {timestamp_ns(events_[i].at("ts")), key_of(i)};
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
    for (const std::size_t i : order) process(i, keys[i].first);
    return std::move(result_);
  }

 private:
  using Track = std::pair<int, int>;  // (pid, tid)

  std::int64_t key_of(std::size_t i) const {
    const std::string phase = text_of(events_[i], "ph");
    if (phase == "E") return std::numeric_limits<std::int64_t>::min();
    if (phase == "X" && events_[i].contains("dur")) {
      return kMaxKey - timestamp_ns(events_[i].at("dur"));
    }
    return kMaxKey;
  }

  void process(std::size_t i, std::int64_t ts) {
    const nlohmann::json& event = events_[i];
    const std::string phase = text_of(event, "ph");
    const Track track{event.value("pid", 0), event.value("tid", event.value("pid", 0))};
    if (phase == "X") {
      if (!event.contains("dur")) return;
      begin_slice(i, track, ts, duration_ns(event.at("dur")));
      bind_v2(event, track);
    } else if ((phase == "i" || phase == "I") && text_of(event, "s").empty()) {
      begin_slice(i, track, ts, 0);
    } else if (phase == "i" || phase == "I") {
      if (text_of(event, "s") == "t") begin_slice(i, track, ts, 0);
    } else if (phase == "s" || phase == "t" || phase == "f") {
      if (!event.contains("id")) return;
      const FlowKey key{1, flow_identifier(event.at("id")), text_of(event, "cat"),
                        text_of(event, "name")};
      if (phase == "f" && text_of(event, "bp") != "e") {
        pending_ends_[track].push_back(key);
        return;
      }
      const std::optional<std::size_t> top = top_of(track);
      if (!top) {
        ++result_.stats.flow_no_enclosing_slice;
        return;
      }
      if (phase == "s") begin_flow(key, *top);
      if (phase == "t") step_flow(key, *top);
      if (phase == "f") end_flow(key, *top);
    }
  }

  std::optional<std::size_t> top_of(const Track& track) const {
    const auto it = stacks_.find(track);
    if (it == stacks_.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
  }

  void begin_slice(std::size_t event, const Track& track, std::int64_t ts, std::int64_t dur) {
    std::vector<std::size_t>& stack = stacks_[track];
    // Perfetto walks the stack from the top and, where a slice is over, pops
    // the top of the stack (which is that slice whenever slices nest).
    for (std::size_t k = stack.size(); k-- > 0;) {
      const Slice& open = result_.slices[stack[k]];
      const std::int64_t end = open.ts + open.dur;
      if (end < ts || (end == ts && !(open.dur == 0 && dur == 0))) {
        stack.pop_back();
        continue;
      }
      if (ts < end && ts + dur > end) {
        ++result_.stats.slice_dropped_overlapping;
        return;
      }
    }
    Slice slice;
    slice.event = event;
    slice.pid = track.first;
    slice.tid = track.second;
    slice.ts = ts;
    slice.dur = dur;
    slice.name = text_of(events_[event], "name");
    slice.depth = static_cast<int>(stack.size());
    if (!stack.empty()) slice.parent = stack.back();
    result_.slices.push_back(std::move(slice));
    const std::size_t id = result_.slices.size() - 1;
    stack.push_back(id);
    // A flow end without "bp": "e" binds to the next slice of its thread.
    const auto pending = pending_ends_.find(track);
    if (pending != pending_ends_.end()) {
      for (const FlowKey& key : pending->second) end_flow(key, id);
      pending_ends_.erase(pending);
    }
  }

  void bind_v2(const nlohmann::json& event, const Track& track) {
    if (!event.contains("bind_id")) return;
    const FlowKey key{2, flow_identifier(event.at("bind_id")), "", ""};
    const bool out = event.value("flow_out", false);
    const bool in = event.value("flow_in", false);
    const std::optional<std::size_t> top = top_of(track);
    if (!top || (!out && !in)) return;
    if (out && in) {
      step_flow(key, *top);
    } else if (out) {
      begin_flow(key, *top);
    } else {
      end_flow(key, *top);
    }
  }

  void begin_flow(const FlowKey& key, std::size_t slice) {
    if (!open_.emplace(key, OpenFlow{slice, result_.slices[slice].ts}).second) {
      ++result_.stats.flow_duplicate_id;
    }
  }

  void step_flow(const FlowKey& key, std::size_t slice) { end_flow(key, slice, true); }

  // An arrow from the flow's last slice to `slice`, from the one that starts
  // first to the other; a step then continues the flow from `slice`.
  void end_flow(const FlowKey& key, std::size_t slice, bool step = false) {
    const auto it = open_.find(key);
    if (it == open_.end()) {
      ++(step ? result_.stats.flow_step_without_start : result_.stats.flow_end_without_start);
      return;
    }
    const OpenFlow& from = it->second;
    const bool later_first = from.ts > result_.slices[slice].ts;
    result_.flows.push_back({later_first ? slice : from.slice, later_first ? from.slice : slice});
    if (step) it->second = {slice, result_.slices[slice].ts};
  }

  const nlohmann::json& events_;
  Import result_;
  std::map<Track, std::vector<std::size_t>> stacks_;
  std::map<Track, std::vector<FlowKey>> pending_ends_;
  std::map<FlowKey, OpenFlow> open_;
};

}  // namespace

std::int64_t timestamp_ns(const nlohmann::json& microseconds) {
  if (microseconds.is_number_integer()) return microseconds.get<std::int64_t>() * 1000;
  const std::string text = microseconds.dump();
  std::string digits;
  int exponent = 0;
  int fraction = 0;
  bool in_fraction = false;
  bool negative = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '-' && i == 0) {
      negative = true;
    } else if (c == '.') {
      in_fraction = true;
    } else if (c == 'e' || c == 'E') {
      exponent = std::stoi(text.substr(i + 1));
      break;
    } else {
      digits += c;
      if (in_fraction) ++fraction;
    }
  }
  const int shift = 3 + exponent - fraction;
  if (shift >= 0) {
    digits.append(static_cast<std::size_t>(shift), '0');
  } else {
    const std::size_t drop = static_cast<std::size_t>(-shift);
    digits = drop >= digits.size() ? "0" : digits.substr(0, digits.size() - drop);
  }
  const std::int64_t value = std::stoll(digits);
  return negative ? -value : value;
}

std::int64_t duration_ns(const nlohmann::json& microseconds) {
  if (microseconds.is_number_integer()) return microseconds.get<std::int64_t>() * 1000;
  return static_cast<std::int64_t>(microseconds.get<double>() * 1000.0);
}

Import import_json_trace(const nlohmann::json& trace) {
  const nlohmann::json& events = trace.is_array() ? trace : trace.at("traceEvents");
  return Importer(events).run();
}

}  // namespace pipevm::testing::perfetto
