// The header of a synthesized program (header.hpp).
#include "header.hpp"

#include <algorithm>
#include <sstream>

#include "simulate.hpp"

namespace pipevm::synthesis {

namespace {

std::string percent(double fraction) { return format_time(fraction * 100) + "%"; }

std::string memory_limit_text(const HeaderInputs& inputs, const Result& result) {
  if (inputs.memory_bytes > 0) {
    return std::to_string(inputs.memory_bytes) + " bytes per stage for the model of " +
           inputs.memory_model + " (searched at " + format_time(result.memory_limit) + " M_B)";
  }
  if (inputs.memory_limit > 0) return format_time(inputs.memory_limit) + " M_B per stage";
  return "none";
}

// The memory policy's lines: the choices per stage and the device and host
// peaks (result.policy_searched only).
void policy_lines(std::ostream& out, const HeaderInputs& inputs, const Result& result) {
  out << "\n# memory policy " << name(inputs.memory_policy)
      << ": units kept/recomputed/offloaded per stage:";
  for (const PolicyCounts& c : result.policy_counts) {
    out << ' ' << c.kept << '/' << c.recomputed << '/' << c.offloaded;
  }
  if (!result.device_peak_bytes.empty()) {
    out << "\n# device peak bytes per stage:";
    for (const std::uint64_t bytes : result.device_peak_bytes) out << ' ' << bytes;
    out << "; host peak bytes per stage:";
    for (const std::uint64_t bytes : result.host_peak_bytes) out << ' ' << bytes;
  }
}

}  // namespace

std::string header(const HeaderInputs& inputs, const Result& result) {
  const Config& c = result.program.config;
  std::ostringstream out;
  out << kSynthesizedHeaderLine << "\n"
      << "# command: " << inputs.command << '\n'
      << "# inputs: stages " << c.stages << ", micro-batches " << c.micro_batches << ", chunks "
      << c.chunks << ", placement " << name(result.program.placement) << "; costs "
      << describe(inputs.costs) << "; memory limit " << memory_limit_text(inputs, result)
      << "; weight memory R " << format_time(inputs.weight_memory) << "; transfer "
      << name(inputs.costs.transfer) << "; p2p order " << inputs.p2p_order << '\n';
  if (const std::string flags = flag_text(inputs.costs); !flags.empty()) {
    out << kCostsHeaderPrefix << flags << '\n';
  }
  if (!inputs.cut.empty()) out << "# cut: " << inputs.cut << '\n';
  out << "# search: from " << result.origin << "; " << result.seeds_within_limit << " of "
      << result.seeds << " seeds within the memory limit, the best spanning "
      << format_time(result.seed_span) << "; " << result.evaluations << " simulations, "
      << result.improvements
      << " local-search moves kept: " << format_time(result.seed_span - result.longest_span)
      << " shorter than the seed\n"
      << "# predicted makespan " << format_time(result.simulation.timeline.makespan)
      << " (compute order " << format_time(result.order_makespan) << "); bubble "
      << percent(result.simulation.bubble_fraction)
      << " (the ranks' idle share of the makespan, as `pipevm simulate` prints it)\n"
      << "# peak memory per stage (M_B):";
  for (const double peak : result.peak_memory) out << ' ' << format_time(peak);
  if (!result.peak_bytes.empty()) {
    out << "\n# peak bytes per stage (" << inputs.bytes_counted << "):";
    for (const std::uint64_t bytes : result.peak_bytes) out << ' ' << bytes;
  }
  if (result.policy_searched) policy_lines(out, inputs, result);
  const double span = result.longest_span;
  out << "\n# longest stage span " << format_time(span) << "; lower bound "
      << format_time(result.lower_bound) << " (" << result.bound_reason << "): ";
  if (is_optimal(result)) {
    out << "optimal under the model\n";
  } else {
    out << "gap " << percent((span - result.lower_bound) / span) << " of the span\n";
  }
  out << "# checked: `pipevm check` and `pipevm check --p2p-order posted` pass\n"
      << "schedule synthesized\n";
  return out.str();
}

std::string summary(const std::string& path, const Result& result) {
  const Config& c = result.program.config;
  double peak = 0;
  for (const double stage : result.peak_memory) peak = std::max(peak, stage);
  std::ostringstream out;
  out << "wrote " << path << ": " << c.stages << " stages x " << c.micro_batches << " micro-batches"
      << (c.chunks > 1 ? " x " + std::to_string(c.chunks) + " chunks" : "")
      << ", predicted makespan " << format_time(result.simulation.timeline.makespan) << ", bubble "
      << percent(result.simulation.bubble_fraction) << ", peak memory " << format_time(peak)
      << " M_B per stage" << (is_optimal(result) ? ", optimal under the model" : "");
  return out.str();
}

}  // namespace pipevm::synthesis
