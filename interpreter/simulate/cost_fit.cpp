// Costs fitted to measurements (cost_fit.hpp): the medians of a real run's
// instructions, and the latency and bandwidth of its links.
#include "cost_fit.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

#include "median.hpp"

namespace pipevm {

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
  if (links.host_memory) {
    costs.host_latency = links.host_memory->latency;
    costs.host_bandwidth = links.host_memory->bandwidth;
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

// The medians of `durations` over `base`: a kind that never ran keeps the
// base's value (a chunk's, its stage's).
Costs medians_over(Costs base, Durations& durations) {
  const auto median_of = [&](CostKind kind, auto set) {
    if (!durations[kind].empty()) set(median(durations[kind]));
  };
  median_of(CostKind::fwd, [&](double v) { base.fwd = v; });
  median_of(CostKind::bwd_input, [&](double v) { base.bwd_input = v; });
  median_of(CostKind::bwd_weight, [&](double v) { base.bwd_weight = v; });
  median_of(CostKind::bwd, [&](double v) { base.bwd = v; });
  median_of(CostKind::fwd_bwd, [&](double v) { base.fwd_bwd = v; });
  median_of(CostKind::recompute, [&](double v) { base.recompute = v; });
  median_of(CostKind::load, [&](double v) { base.load = v; });
  median_of(CostKind::zero_grad, [&](double v) { base.zero_grad = v; });
  median_of(CostKind::optimizer, [&](double v) { base.optimizer = v; });
  median_of(CostKind::allreduce, [&](double v) { base.allreduce = v; });
  median_of(CostKind::allgather, [&](double v) { base.allgather = v; });
  median_of(CostKind::reduce_scatter, [&](double v) { base.reduce_scatter = v; });
  return base;
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
  const auto stages = static_cast<std::size_t>(std::max(program.config.stages, 1));
  const auto chunks =
      static_cast<std::size_t>(std::max(chunks_per_rank(program.placement, program.config), 1));
  Durations all_stages;
  std::vector<Durations> per_stage(stages);
  std::vector<std::vector<Durations>> per_chunk(stages, std::vector<Durations>(chunks));
  for (const MeasuredInstruction& m : measured) {
    const double microseconds = static_cast<double>(m.end_ns - m.start_ns) / 1000.0;
    const Instruction& in = program.rank(m.rank)[m.index];
    const CostKind kind = info(in.op).cost;
    if (is_collective(kind)) continue;
    // A fused Bwd timed apart also measures its two halves.
    std::vector<std::pair<CostKind, double>> samples = {{kind, microseconds}};
    if (kind == CostKind::bwd && m.split_ns >= m.start_ns && m.split_ns <= m.end_ns) {
      samples.emplace_back(CostKind::bwd_input,
                           static_cast<double>(m.split_ns - m.start_ns) / 1000.0);
      samples.emplace_back(CostKind::bwd_weight,
                           static_cast<double>(m.end_ns - m.split_ns) / 1000.0);
    }
    const auto stage = static_cast<std::size_t>(stage_of(program.config, m.rank));
    for (const auto& [sample_kind, value] : samples) {
      all_stages[sample_kind].push_back(value);
      if (stage >= stages) continue;
      per_stage[stage][sample_kind].push_back(value);
      if (in.chunk < chunks) per_chunk[stage][in.chunk][sample_kind].push_back(value);
    }
  }
  add_collectives(program, measured, all_stages, per_stage);
  Costs costs = medians_over(Costs{}, all_stages);
  // Stages hold different pieces of the model: one median over all of them
  // would make the slowest stage, which paces the pipeline, look faster;
  // so do a rank's chunks when it holds several (the default MLP's first
  // layer does 56% of its multiply-adds).
  if (stages == 1 && chunks == 1) return costs;
  const Costs overall = costs;
  for (std::size_t s = 0; s < stages; ++s) {
    Costs stage = medians_over(overall, per_stage[s]);
    std::vector<Costs> of_chunks;
    for (std::size_t k = 0; chunks > 1 && k < chunks; ++k) {
      of_chunks.push_back(medians_over(stage, per_chunk[s][k]));
    }
    stage.chunks = std::move(of_chunks);
    costs.stages.push_back(std::move(stage));
  }
  return costs;
}

}  // namespace pipevm
