// The arrow check: Perfetto's import of the trace against the program's messages.
#include "trace_arrows.hpp"

#include <limits>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "perfetto_model.hpp"
#include "simulate.hpp"

namespace pipevm::testing {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

struct Where {
  int rank = 0;
  std::size_t index = 0;  // in the rank's stream
};

Where where_of(const Program& program, std::size_t instruction) {
  int rank = 0;
  while (program.rank_begin[static_cast<std::size_t>(rank) + 1] <= instruction) ++rank;
  return {rank, instruction - program.rank_begin[static_cast<std::size_t>(rank)]};
}

std::string describe(const Program& program, std::size_t instruction) {
  const Where at = where_of(program, instruction);
  return "rank " + std::to_string(at.rank) + " #" + std::to_string(at.index) + " " +
         disassemble(program.code[instruction]);
}

}  // namespace

std::string ArrowReport::summary() const {
  return std::to_string(messages) + " messages, " + std::to_string(drawn) + " arrows drawn (" +
         std::to_string(dropped) + " dropped: end read before start); " + std::to_string(landed) +
         " land from send to receive; " + std::to_string(missing) + " messages without an arrow " +
         "from their send, " + std::to_string(backwards) + " backwards, " +
         std::to_string(misplaced) + " ending elsewhere; " + std::to_string(stray) +
         " arrows from other slices";
}

ArrowReport check_trace_arrows(const Program& program, const nlohmann::json& trace) {
  const nlohmann::json& events = trace.at("traceEvents");
  const perfetto::Import imported = perfetto::import_json_trace(trace);

  // The slice of each instruction: its event carries the stream index in args.
  std::map<std::pair<int, std::size_t>, std::size_t> slice_of;
  for (std::size_t s = 0; s < imported.slices.size(); ++s) {
    const nlohmann::json& args = events[imported.slices[s].event].value("args", nlohmann::json());
    if (args.contains("index")) {
      slice_of[{imported.slices[s].tid, args.at("index").get<std::size_t>()}] = s;
    }
  }
  const auto find_slice = [&](std::size_t instruction) {
    const Where at = where_of(program, instruction);
    const auto it = slice_of.find({at.rank, at.index});
    return it == slice_of.end() ? kNone : it->second;
  };

  ArrowReport report;
  report.drawn = imported.flows.size();
  report.dropped = static_cast<std::size_t>(imported.stats.flow_end_without_start);
  std::vector<bool> used(imported.flows.size(), false);
  const std::vector<std::size_t> completer = completing_instructions(program);
  for (const MessageFlow& message : pair_messages(program)) {
    ++report.messages;
    const std::size_t arrival =
        completer[message.recv] != kNone ? completer[message.recv] : message.recv;
    const std::string what = describe(program, message.send) + " -> " + describe(program, arrival);
    const std::size_t send_slice = find_slice(message.send);
    const std::size_t arrival_slice = find_slice(arrival);
    if (send_slice == kNone || arrival_slice == kNone) {
      ++report.missing;
      report.problems.push_back(what + ": an instruction has no slice");
      continue;
    }
    const Where from = where_of(program, message.send);
    const perfetto::Slice& target = imported.slices[arrival_slice];
    // The receive's slice, or a slice of this message's own within its time.
    const auto lands_on = [&](std::size_t s) {
      if (s == arrival_slice) return true;
      const perfetto::Slice& slice = imported.slices[s];
      const nlohmann::json& args = events[slice.event].value("args", nlohmann::json());
      return slice.pid == target.pid && slice.tid == target.tid && slice.ts >= target.ts &&
             slice.ts <= target.ts + target.dur && args.value("from_rank", -1) == from.rank &&
             args.value("send_index", kNone) == from.index;
    };
    std::size_t found = kNone;
    bool lands = false;
    bool backwards = false;
    for (std::size_t f = 0; f < imported.flows.size() && !lands; ++f) {
      const perfetto::Flow& flow = imported.flows[f];
      if (used[f]) continue;
      if (flow.out == send_slice && (found == kNone || lands_on(flow.in))) {
        found = f;
        lands = lands_on(flow.in);
      } else if (found == kNone && flow.in == send_slice && lands_on(flow.out)) {
        found = f;
        backwards = true;
      }
    }
    if (found == kNone) {
      ++report.missing;
      report.problems.push_back(what + ": no arrow leaves the send");
      continue;
    }
    used[found] = true;
    if (lands) {
      ++report.landed;
    } else if (backwards) {
      ++report.backwards;
      report.problems.push_back(what + ": drawn backwards (the receive's slice starts first)");
    } else {
      ++report.misplaced;
      report.problems.push_back(what + ": the arrow ends on another slice");
    }
  }
  for (const bool u : used) report.stray += u ? 0 : 1;
  return report;
}

}  // namespace pipevm::testing
