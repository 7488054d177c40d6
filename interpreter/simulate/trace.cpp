// The Chrome trace writer. Flow arrows end where a message's data arrives:
// at the receive, or for a non-blocking receive at the Wait or WaitAll that
// completes it (completing_instructions). The arrows are written for
// Perfetto's JSON importer (tests/simulate/perfetto_model.hpp has its
// rules): "bind_id" on the slices themselves, so that no other slice at the
// same instant can take an arrow, and an end slice per message that starts
// no earlier than its send, since Perfetto drops an arrow whose end it reads
// before its start and turns around one whose end slice starts first.
#include "trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>

#include <nlohmann/json.hpp>

namespace pipevm {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// Times go out in whole nanoseconds, written as microseconds that Perfetto
// reads back exactly. It reads "ts" by shifting the decimal point in the
// number's text (so 2.3000000000000003 would not be 2.3) and "dur" as the
// double times 1000, truncated (so 1.001 would be 1000 ns): whole
// microseconds are written as integers, the rest as the smallest double that
// both readings take for the intended nanosecond.
std::int64_t nanoseconds(double us) {
  return std::llround(us * 1000.0);
}
nlohmann::json microseconds(std::int64_t ns) {
  if (ns % 1000 == 0) return ns / 1000;
  double value = static_cast<double>(ns) / 1000.0;
  while (static_cast<std::int64_t>(value * 1000.0) < ns) {
    value = std::nextafter(value, std::numeric_limits<double>::infinity());
  }
  return value;
}

std::string rank_name(const Config& config, int rank) {
  std::string text =
      "rank " + std::to_string(rank) + " (stage " + std::to_string(stage_of(config, rank));
  if (config.dp > 1) text += ", dp " + std::to_string(dp_rank_of(config, rank));
  return text + ")";
}

}  // namespace

nlohmann::json chrome_trace(const Program& program, const Timeline& timeline) {
  const Config& config = program.config;
  // Each message's arrow: its flow id, on the send's slice.
  std::vector<std::size_t> flow_of(program.code.size(), kNone);
  for (std::size_t id = 0; id < timeline.flows.size(); ++id) flow_of[timeline.flows[id].send] = id;
  // Posted order: the hold of each held operation, and how many each
  // blocker holds back.
  std::vector<std::size_t> hold_of(program.code.size(), kNone);
  std::vector<int> holding(program.code.size(), 0);
  for (std::size_t h = 0; h < timeline.holds.size(); ++h) {
    hold_of[timeline.holds[h].held] = h;
    ++holding[timeline.holds[h].blocker];
  }

  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", program.name}}}});
  std::vector<int> owner(program.code.size(), 0);
  for (int r = 0; r < program.ranks(); ++r) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", rank_name(config, r)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_sort_index"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"sort_index", r}}}});
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
         i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      owner[i] = r;
      const Instruction& in = program.code[i];
      const InstructionTime& t = timeline.times[i];
      nlohmann::json args = {{"index", i - program.rank_begin[static_cast<std::size_t>(r)]}};
      if (operand_parts(in.op).micro_batch) args["micro_batch"] = in.micro_batch;
      if (in.chunk != 0) args["chunk"] = in.chunk;
      if (operand_parts(in.op).second_cell) {
        args["second_micro_batch"] = second_cell(in).micro_batch;
        if (second_cell(in).chunk != 0) args["second_chunk"] = second_cell(in).chunk;
      }
      if (program.file) {
        const LineColumn at = program.file->position(program.source_of(in).begin);
        args["source"] =
            program.file->name() + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
      }
      if (t.started > t.issued) args["waited"] = t.started - t.issued;
      if (hold_of[i] != kNone) {
        const Hold& hold = timeline.holds[hold_of[i]];
        args["held_by"] =
            disassemble(program.code[hold.blocker]) + " (index " +
            std::to_string(hold.blocker - program.rank_begin[static_cast<std::size_t>(r)]) + ")";
        args["held"] = hold.end - hold.begin;
      }
      if (holding[i] > 0) args["holds_back"] = holding[i];
      nlohmann::json slice = {{"ph", "X"},
                              {"name", disassemble(in)},
                              {"cat", std::string(name(activity_of(in.op)))},
                              {"pid", 0},
                              {"tid", r},
                              {"ts", microseconds(nanoseconds(t.issued))},
                              {"dur", microseconds(nanoseconds(t.ended) - nanoseconds(t.issued))},
                              {"args", std::move(args)}};
      if (flow_of[i] != kNone) {
        slice["bind_id"] = flow_of[i];
        slice["flow_out"] = true;
      }
      events.push_back(std::move(slice));
    }
  }
  // Each rank's host link (Offload, Reload), a track below the ranks'.
  std::vector<bool> named(static_cast<std::size_t>(program.ranks()), false);
  for (const HostCopy& copy : timeline.copies) {
    const int r = owner[copy.instruction];
    const int tid = program.ranks() + r;
    if (!named[static_cast<std::size_t>(r)]) {
      named[static_cast<std::size_t>(r)] = true;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", 0},
                        {"tid", tid},
                        {"args", {{"name", rank_name(config, r) + " host link"}}}});
      events.push_back({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", 0},
                        {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
    }
    events.push_back(
        {{"ph", "X"},
         {"name", disassemble(program.code[copy.instruction])},
         {"cat", std::string(name(Activity::host_copy))},
         {"pid", 0},
         {"tid", tid},
         {"ts", microseconds(nanoseconds(copy.begin))},
         {"dur", microseconds(nanoseconds(copy.end) - nanoseconds(copy.begin))},
         {"args",
          {{"index", copy.instruction - program.rank_begin[static_cast<std::size_t>(r)]}}}});
  }
  // The arrows' ends: a zero-length slice per message, on the rank where its
  // data arrives, at the later of the send and the start of the arriving
  // instruction. After every instruction's slice in the file, so that
  // Perfetto has begun the arrow on the send's slice when it reads the end.
  const std::vector<std::size_t> completer = completing_instructions(program);
  for (std::size_t id = 0; id < timeline.flows.size(); ++id) {
    const MessageFlow& flow = timeline.flows[id];
    const Instruction& message = program.code[flow.send];
    const std::size_t arrival = completer[flow.recv] != kNone ? completer[flow.recv] : flow.recv;
    const std::int64_t at = std::max(nanoseconds(timeline.times[flow.send].issued),
                                     nanoseconds(timeline.times[arrival].issued));
    const int from = owner[flow.send];
    std::string label = std::string(name(message.kind)) + " " + std::to_string(message.micro_batch);
    if (message.chunk != 0) label += " chunk " + std::to_string(message.chunk);
    events.push_back(
        {{"ph", "X"},
         {"name", label + " from rank " + std::to_string(from)},
         {"cat", std::string(name(Activity::communication))},
         {"pid", 0},
         {"tid", owner[arrival]},
         {"ts", microseconds(at)},
         {"dur", 0},
         {"bind_id", id},
         {"flow_in", true},
         {"args",
          {{"from_rank", from},
           {"send_index", flow.send - program.rank_begin[static_cast<std::size_t>(from)]}}}});
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ns"},
          {"otherData",
           {{"schedule", program.name},
            {"stages", config.stages},
            {"micro_batches", config.micro_batches},
            {"chunks", config.chunks},
            {"dp", config.dp}}}};
}

void write_chrome_trace(std::ostream& out, const Program& program, const Timeline& timeline) {
  out << chrome_trace(program, timeline).dump() << '\n';
}

bool write_chrome_trace(const std::string& path, const Program& program, const Timeline& timeline,
                        std::string& error) {
  errno = 0;
  std::ofstream out(path);
  if (out) write_chrome_trace(out, program, timeline);
  if (!out) {
    error = "cannot write trace file '" + path + "'" +
            (errno != 0 ? ": " + std::string(std::strerror(errno)) : "");
    return false;
  }
  return true;
}

}  // namespace pipevm
