// Per-stage and per-chunk medians of a torch.profiler trace (trace_costs.hpp).
#include "trace_costs.hpp"

#include <array>
#include <vector>

#include "median.hpp"

namespace pipevm::api {

namespace {

using pytorch::kTracePasses;
using pytorch::TracePass;

using Samples = std::array<std::vector<double>, kTracePasses>;

// The medians of `samples` over `base`: a kind with no sample keeps base's value.
Costs medians_over(Costs base, const Samples& samples) {
  const auto of = [&](TracePass pass) -> std::optional<double> {
    const auto& values = samples[static_cast<std::size_t>(pass)];
    if (values.empty()) return std::nullopt;
    return median(values);
  };
  if (const auto v = of(TracePass::forward)) base.fwd = *v;
  if (const auto v = of(TracePass::backward)) base.bwd = *v;
  if (const auto v = of(TracePass::backward_input)) base.bwd_input = *v;
  if (const auto v = of(TracePass::backward_weight)) base.bwd_weight = *v;
  return base;
}

void add_samples(Samples& into, const Samples& from) {
  for (std::size_t k = 0; k < kTracePasses; ++k) {
    into[k].insert(into[k].end(), from[k].begin(), from[k].end());
  }
}

std::string kinds_seen(const Samples& all) {
  static constexpr std::array<const char*, kTracePasses> names = {"fwd", "bwd", "bwd-input",
                                                                  "bwd-weight"};
  std::string out;
  for (std::size_t k = 0; k < kTracePasses; ++k) {
    if (all[k].empty()) continue;
    if (!out.empty()) out += ", ";
    out += names[k];
  }
  return out;
}

}  // namespace

std::optional<TraceCosts> costs_from_torch_trace(std::string_view json_text, std::string_view name,
                                                 const TraceCostRequest& request, std::string& error) {
  const auto fail = [&](const std::string& why) {
    error = std::string(name) + ": " + why;
    return std::nullopt;
  };
  std::string why;
  const auto durations = pytorch::read_torch_trace(json_text, request.trace, why);
  if (!durations) return fail(why);
  const int global_stages = static_cast<int>(durations->samples.size());
  if (request.chunks < 1 || global_stages % request.chunks != 0) {
    return fail("the trace names stages 0 to " + std::to_string(global_stages - 1) + ", which " +
                std::to_string(request.chunks) + " chunks per rank do not divide into ranks");
  }
  const int stages = global_stages / request.chunks;
  // per_chunk[stage][chunk]
  std::vector<std::vector<Samples>> per_chunk(static_cast<std::size_t>(stages),
                                              std::vector<Samples>(static_cast<std::size_t>(request.chunks)));
  Samples all;
  for (int global = 0; global < global_stages; ++global) {
    int stage = global % stages;
    int chunk = global / stages;
    if (request.placement == Placement::v && global >= stages) stage = 2 * stages - 1 - global;
    const Samples& samples = durations->samples[static_cast<std::size_t>(global)];
    add_samples(per_chunk[static_cast<std::size_t>(stage)][static_cast<std::size_t>(chunk)], samples);
    add_samples(all, samples);
  }

  TraceCosts out;
  out.costs = medians_over(Costs{}, all);
  if (stages > 1 || request.chunks > 1) {
    for (const auto& chunks : per_chunk) {
      Samples stage_samples;
      for (const Samples& chunk : chunks) add_samples(stage_samples, chunk);
      Costs entry = medians_over(out.costs, stage_samples);
      if (request.chunks > 1) {
        for (const Samples& chunk : chunks) entry.chunks.push_back(medians_over(entry, chunk));
      }
      out.costs.stages.push_back(std::move(entry));
    }
  }
  const int used = durations->steps - request.trace.skip_steps;
  out.comment = "from torch.profiler trace " + std::string(name) + ": medians in microseconds of " +
                kinds_seen(all) + " over " + std::to_string(used) + " step" +
                (used == 1 ? "" : "s") + " (" + std::to_string(request.trace.skip_steps) +
                " skipped)";
  return out;
}

}  // namespace pipevm::api
