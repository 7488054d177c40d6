// The Chrome trace writer. Flow arrows end where a message's data arrives:
// at the receive, or for a non-blocking receive at the Wait or WaitAll that
// completes it (completing_instructions).
#include "trace.hpp"

#include <fstream>
#include <limits>
#include <ostream>

#include <nlohmann/json.hpp>

namespace pipevm {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

std::string rank_name(const Config& config, int rank) {
  std::string text =
      "rank " + std::to_string(rank) + " (stage " + std::to_string(stage_of(config, rank));
  if (config.dp > 1) text += ", dp " + std::to_string(dp_rank_of(config, rank));
  return text + ")";
}

}  // namespace

nlohmann::json chrome_trace(const Program& program, const Timeline& timeline) {
  const Config& config = program.config;
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
      if (program.file) {
        const LineColumn at = program.file->position(program.source_of(in).begin);
        args["source"] =
            program.file->name() + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
      }
      if (t.started > t.issued) args["waited"] = t.started - t.issued;
      events.push_back({{"ph", "X"},
                        {"name", disassemble(in)},
                        {"cat", std::string(name(activity_of(in.op)))},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", t.issued},
                        {"dur", t.ended - t.issued},
                        {"args", std::move(args)}});
    }
  }
  const std::vector<std::size_t> completer = completing_instructions(program);
  std::size_t id = 0;
  for (const MessageFlow& flow : timeline.flows) {
    const Instruction& message = program.code[flow.send];
    const std::size_t arrival = completer[flow.recv] != kNone ? completer[flow.recv] : flow.recv;
    const std::string label =
        std::string(name(message.kind)) + " " + std::to_string(message.micro_batch);
    // Viewers bind a flow event to the slice of its thread with the same
    // category that starts (Chrome) or is open (Perfetto) at its timestamp.
    const std::string category(name(activity_of(message.op)));
    events.push_back({{"ph", "s"},
                      {"id", id},
                      {"name", label},
                      {"cat", category},
                      {"pid", 0},
                      {"tid", owner[flow.send]},
                      {"ts", timeline.times[flow.send].issued}});
    events.push_back({{"ph", "f"},
                      {"bp", "e"},
                      {"id", id},
                      {"name", label},
                      {"cat", std::string(name(activity_of(program.code[arrival].op)))},
                      {"pid", 0},
                      {"tid", owner[arrival]},
                      {"ts", timeline.times[arrival].issued}});
    ++id;
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
  std::ofstream out(path);
  if (out) write_chrome_trace(out, program, timeline);
  if (!out) {
    error = "cannot write trace file '" + path + "'";
    return false;
  }
  return true;
}

}  // namespace pipevm
