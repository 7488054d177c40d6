// Writing what the recorder saw (trace_recorder.hpp).
#include "trace_recorder.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <span>

#include "cost_files.hpp"
#include "trace.hpp"

namespace pipevm {

namespace {

std::vector<MeasuredInstruction> gather(runtime::Comm& comm,
                                        const std::vector<MeasuredInstruction>& mine) {
  std::vector<std::size_t> counts;
  const std::vector<std::byte> bytes =
      comm.gather_to_root(std::as_bytes(std::span<const MeasuredInstruction>(mine)), counts);
  std::vector<MeasuredInstruction> all(bytes.size() / sizeof(MeasuredInstruction));
  if (!all.empty()) std::memcpy(all.data(), bytes.data(), all.size() * sizeof(MeasuredInstruction));
  return all;
}

}  // namespace

bool TraceRecorder::write(runtime::Comm& comm, const Program& program,
                          const std::string& trace_path, const std::string& profile_path,
                          std::string& error) {
  std::vector<MeasuredInstruction> first = gather(comm, first_);
  std::vector<MeasuredInstruction> all = gather(comm, later_);
  if (comm.world_rank() != 0) return true;
  all.insert(all.end(), first.begin(), first.end());
  if (!trace_path.empty() &&
      !write_chrome_trace(trace_path, program, timeline_from_measurements(program, first), error)) {
    return false;
  }
  if (!profile_path.empty()) {
    std::ofstream out(profile_path);
    Costs costs = costs_from_measurements(program, all);
    set_link_costs(costs, links_);
    costs.layers = layers_;
    config::write_costs_yaml(out, costs,
                             "measured by pipevm run: medians over " +
                                 std::to_string(recorded_steps()) + " step(s) of " + program.name);
    if (!out) {
      error = "cannot write cost profile '" + profile_path + "'";
      return false;
    }
  }
  return true;
}

int TraceRecorder::recorded_steps() const {
  return std::max(0, std::min(step_ + 1, last_step_) - first_step_);
}

}  // namespace pipevm
