// The list-scheduling clock of a compute order (order_clock.hpp).
#include "order_clock.hpp"

#include <algorithm>
#include <limits>

namespace pipevm::synthesis {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

CostKind cost_kind_of(PassKind kind) {
  switch (kind) {
    case PassKind::forward:
      return CostKind::fwd;
    case PassKind::backward:
      return CostKind::bwd;
    case PassKind::backward_input:
      return CostKind::bwd_input;
    case PassKind::backward_weight:
      return CostKind::bwd_weight;
  }
  return CostKind::fwd;
}

}  // namespace

double pass_cost(const Costs& costs, PassKind kind, int stage, int chunk) {
  return costs.duration(cost_kind_of(kind), stage, chunk);
}

std::optional<OrderTimes> time_compute_order(const ComputeOrder& order, const Costs& costs) {
  const Config& c = order.config;
  const int lane = lane_length(order.placement, c);
  const auto m = static_cast<std::size_t>(c.micro_batches);
  // When the activation (gradient) of a micro-batch has arrived at a lane position.
  std::vector<std::vector<double>> activation(static_cast<std::size_t>(lane), std::vector<double>(m, kUnknown));
  std::vector<std::vector<double>> gradient(static_cast<std::size_t>(lane), std::vector<double>(m, kUnknown));
  const auto stages = static_cast<std::size_t>(c.stages);
  OrderTimes times;
  times.start.resize(stages);
  times.end.resize(stages);
  std::vector<double> free(stages, 0);
  for (std::size_t s = 0; s < stages; ++s) {
    free[s] = costs.duration(CostKind::zero_grad, static_cast<int>(s));
    times.start[s].reserve(order.stages[s].size());
    times.end[s].reserve(order.stages[s].size());
  }
  const double act_time = costs.message_time(MessageKind::act);
  const double grad_time = costs.message_time(MessageKind::grad);
  std::size_t placed = 0;
  std::size_t total = 0;
  for (const auto& passes : order.stages) total += passes.size();
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t s = 0; s < stages; ++s) {
      const auto& passes = order.stages[s];
      const int stage = static_cast<int>(s);
      for (std::size_t j = times.start[s].size(); j < passes.size(); ++j) {
        const Pass& pass = passes[j];
        const PipelinePosition here = position_of(order.placement, c, stage, pass.chunk);
        const int at = here.position;
        const auto where = static_cast<std::size_t>(at);
        const auto mb = static_cast<std::size_t>(pass.micro_batch);
        double ready = free[s];
        if (pass.kind == PassKind::forward) {
          if (at == 0) {
            ready += costs.duration(CostKind::load, stage, pass.chunk);
          } else if (activation[where][mb] == kUnknown) {
            break;
          } else {
            ready = std::max(ready, activation[where][mb]);
          }
        } else if (pass.kind != PassKind::backward_weight && at < lane - 1) {
          if (gradient[where][mb] == kUnknown) break;
          ready = std::max(ready, gradient[where][mb]);
        }
        const double end = ready + pass_cost(costs, pass.kind, stage, pass.chunk);
        times.start[s].push_back(ready);
        times.end[s].push_back(end);
        free[s] = end;
        // A value that stays on the stage (the turn of a V) is no message.
        const auto travel = [&](int to, double time) {
          return stage_at(order.placement, c, {here.lane, to}) == stage ? 0.0 : time;
        };
        if (pass.kind == PassKind::forward) {
          if (at + 1 < lane) {
            activation[where + 1][mb] = end + travel(at + 1, act_time);
          } else {
            free[s] += costs.duration(CostKind::load, stage, pass.chunk);
          }
        } else if (pass.kind != PassKind::backward_weight && at > 0) {
          gradient[where - 1][mb] = end + travel(at - 1, grad_time);
        }
        ++placed;
        moved = true;
      }
    }
  }
  if (placed != total) return std::nullopt;
  for (std::size_t s = 0; s < stages; ++s) {
    if (times.start[s].empty()) continue;
    times.longest_span = std::max(times.longest_span, times.end[s].back() - times.start[s].front());
    for (const double end : times.end[s]) times.makespan = std::max(times.makespan, end);
  }
  return times;
}

}  // namespace pipevm::synthesis
