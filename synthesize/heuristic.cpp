// The greedy scheduler (heuristic.hpp).
#include "heuristic.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

namespace pipevm::synthesis {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kEpsilon = 1e-9;

ComputeOrder empty_order(const Problem& problem) {
  ComputeOrder order;
  order.placement = problem.placement;
  order.config = problem.config;
  order.stages.resize(static_cast<std::size_t>(problem.config.stages));
  return order;
}

// The greedy list scheduler: at each step the stage that can act earliest
// acts (so every input that arrives by then is known), by the rules of
// heuristic.hpp.
class Greedy {
 public:
  Greedy(const Problem& problem, const GreedyChoices& choices)
      : problem_(problem),
        choices_(choices),
        config_(problem.config),
        chunks_(chunks_per_rank(problem.placement, problem.config)),
        lane_(lane_length(problem.placement, problem.config)),
        order_(empty_order(problem)) {
    const auto m = static_cast<std::size_t>(config_.micro_batches);
    activation_ready_.assign(static_cast<std::size_t>(lane_), std::vector<double>(m, kInfinity));
    gradient_ready_.assign(static_cast<std::size_t>(lane_), std::vector<double>(m, kInfinity));
    std::fill(activation_ready_[0].begin(), activation_ready_[0].end(), 0.0);
    owner_.assign(static_cast<std::size_t>(lane_), 0);
    stages_.resize(static_cast<std::size_t>(config_.stages));
    for (int s = 0; s < config_.stages; ++s) {
      StageState& st = stages_[static_cast<std::size_t>(s)];
      st.free = problem.costs.duration(CostKind::zero_grad, s);
      st.next_forward.assign(static_cast<std::size_t>(chunks_), 0);
      st.next_backward.assign(static_cast<std::size_t>(chunks_), 0);
      st.in_flight.assign(static_cast<std::size_t>(chunks_), 0);
      const double round_trip = problem.costs.duration(CostKind::fwd, s) + backward_time(s) +
                                problem.costs.message_time(MessageKind::act) +
                                problem.costs.message_time(MessageKind::grad);
      if (problem.split_backward && weight_time(s) > 0) {
        st.weight_reserve = static_cast<std::size_t>(
            std::ceil(choices.weight_reserve * s * round_trip / weight_time(s) - kEpsilon));
      }
      for (int c = 0; c < chunks_; ++c) {
        const int at = position(s, c);
        owner_[static_cast<std::size_t>(at)] = s;
        st.remaining += 2 * config_.micro_batches;
        if (problem.split_backward) st.remaining += config_.micro_batches;
      }
    }
  }

  std::optional<ComputeOrder> run() {
    for (;;) {
      int best = -1;
      Action action;
      bool work_left = false;
      for (int s = 0; s < config_.stages; ++s) {
        if (stages_[static_cast<std::size_t>(s)].remaining == 0) continue;
        work_left = true;
        const Action a = decide(s, false);
        if (a.valid && (best < 0 || a.time < action.time)) {
          best = s;
          action = a;
        }
      }
      if (!work_left) return std::move(order_);
      if (best < 0) {
        // Every stage waits for news no other stage will bring: the one
        // free first acts with the rules relaxed, or nothing can.
        for (int s = 0; s < config_.stages; ++s) {
          const StageState& st = stages_[static_cast<std::size_t>(s)];
          if (st.remaining == 0) continue;
          const Action a = decide(s, true);
          if (a.valid && (best < 0 || a.time < action.time)) {
            best = s;
            action = a;
          }
        }
        if (best < 0) return std::nullopt;
      }
      commit(best, action);
    }
  }

 private:
  struct StageState {
    double free = 0;
    double held = 0;  // chunk activations
    double idle = 0;
    int remaining = 0;
    int backwards = 0;
    std::vector<int> next_forward;   // per chunk
    std::vector<int> next_backward;  // per chunk
    std::vector<int> in_flight;      // per chunk: forwards whose backward has not run
    std::deque<Pass> weights;        // pending weight passes, first in first out
    std::size_t weight_reserve = 0;  // weight passes kept for the tail
  };
  struct Action {
    bool valid = false;
    double time = kInfinity;
    Pass pass;
  };

  int position(int stage, int chunk) const {
    return position_of(problem_.placement, config_, stage, chunk).position;
  }
  double forward_time(int s, int at) const {
    double t = problem_.costs.duration(CostKind::fwd, s);
    if (at == 0) t += problem_.costs.duration(CostKind::load, s);
    if (at == lane_ - 1) t += problem_.costs.duration(CostKind::load, s);
    return t;
  }
  double backward_time(int s) const {
    return problem_.costs.duration(problem_.split_backward ? CostKind::bwd_input : CostKind::bwd, s);
  }
  double weight_time(int s) const { return problem_.costs.duration(CostKind::bwd_weight, s); }
  // A message between lane positions `from` and `to`: none where one stage
  // holds both (the turn of a V).
  double hop(int from, int to, MessageKind kind) const {
    return owner_[static_cast<std::size_t>(from)] == owner_[static_cast<std::size_t>(to)]
               ? 0.0
               : problem_.costs.message_time(kind);
  }

  // When the activation of `mb` can reach lane position `at` at the
  // earliest: from the nearest position that knows it, every hop run as
  // soon as its stage is free (other passes competing for it ignored).
  double activation_estimate(int at, int mb) const {
    const auto i = static_cast<std::size_t>(mb);
    int known = at;
    while (activation_ready_[static_cast<std::size_t>(known)][i] == kInfinity) --known;
    double t = activation_ready_[static_cast<std::size_t>(known)][i];
    for (int q = known; q < at; ++q) {
      const int from = owner_[static_cast<std::size_t>(q)];
      t = std::max(t, std::max(stages_[static_cast<std::size_t>(from)].free, now_)) +
          forward_time(from, q) + hop(q, q + 1, MessageKind::act);
    }
    return t;
  }

  // Likewise for the gradient of `mb` at position `at`: the forwards to the
  // lane's end, then the backward-inputs back.
  double gradient_estimate(int at, int mb) const {
    const double known = gradient_ready_[static_cast<std::size_t>(at)][static_cast<std::size_t>(mb)];
    if (known < kInfinity) return known;
    const auto free_of = [&](int q) {
      return std::max(stages_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(q)])].free, now_);
    };
    if (at == lane_ - 1) {
      const int s = owner_[static_cast<std::size_t>(at)];
      return std::max(free_of(at), activation_estimate(at, mb)) + forward_time(s, at);
    }
    const int from = owner_[static_cast<std::size_t>(at + 1)];
    return std::max(free_of(at + 1), gradient_estimate(at + 1, mb)) + backward_time(from) +
           hop(at + 1, at, MessageKind::grad);
  }

  Action decide(int s, bool forced) const {
    const StageState& st = stages_[static_cast<std::size_t>(s)];
    const double t0 = std::max(st.free, now_);
    const auto m = config_.micro_batches;
    // Backwards: the earliest known, and a lower bound over unknown ones.
    double backward_ready = kInfinity;
    double backward_bound = kInfinity;
    int backward_at = -1;
    Pass backward_pass;
    // Forwards likewise, and whether memory alone holds one back.
    double backward_estimate = kInfinity;  // the earliest any backward can start
    double forward_ready = kInfinity;
    double forward_bound = kInfinity;
    int forward_at = -1;
    Pass forward_pass;
    bool memory_blocked = false;
    for (int c = 0; c < chunks_; ++c) {
      const int at = position(s, c);
      const int b = st.next_backward[static_cast<std::size_t>(c)];
      const int f = st.next_forward[static_cast<std::size_t>(c)];
      if (b < m && b < f) {
        if (st.backwards == 0) backward_estimate = std::min(backward_estimate, gradient_estimate(at, b));
        const double r = gradient_ready_[static_cast<std::size_t>(at)][static_cast<std::size_t>(b)];
        if (r < kInfinity) {
          if (r < backward_ready || (r == backward_ready && at > backward_at)) {
            backward_ready = r;
            backward_at = at;
            backward_pass = {problem_.split_backward ? PassKind::backward_input : PassKind::backward, b, c};
          }
          backward_bound = std::min(backward_bound, r);
        } else if (at + 1 < lane_) {
          const int from = owner_[static_cast<std::size_t>(at + 1)];
          backward_bound = std::min(backward_bound,
                                    std::max(stages_[static_cast<std::size_t>(from)].free, now_) +
                                        backward_time(from) + hop(at + 1, at, MessageKind::grad));
        }
      }
      if (f < m) {
        const double r = activation_ready_[static_cast<std::size_t>(at)][static_cast<std::size_t>(f)];
        if (r == kInfinity) {
          const int from = owner_[static_cast<std::size_t>(at - 1)];
          forward_bound = std::min(forward_bound,
                                   std::max(stages_[static_cast<std::size_t>(from)].free, now_) +
                                       forward_time(from, at - 1) +
                                       hop(at - 1, at, MessageKind::act));
          continue;
        }
        int reserve = 0;
        for (int other = 0; other < chunks_; ++other) {
          if (position(s, other) > at && st.next_forward[static_cast<std::size_t>(other)] < m &&
              st.in_flight[static_cast<std::size_t>(other)] == 0) {
            ++reserve;
          }
        }
        if (st.held + 1 + reserve > problem_.memory_limit + kEpsilon) {
          if (r <= t0) memory_blocked = true;
          continue;
        }
        forward_bound = std::min(forward_bound, r);
        const bool better = r < forward_ready ||
                            (r == forward_ready && (choices_.deeper_forward_first ? at > forward_at
                                                                                  : at < forward_at));
        if (better) {
          forward_ready = r;
          forward_at = at;
          forward_pass = {PassKind::forward, f, c};
        }
      }
    }
    const double backward_start = std::max(t0, backward_ready);
    const double forward_start = std::max(t0, forward_ready);
    if (!st.weights.empty() && backward_start > t0) {
      const double next = std::min({backward_start, forward_start, backward_bound, forward_bound});
      const double gap = next - t0;
      const bool fits = gap + kEpsilon >= weight_time(s);
      const bool largest = choices_.weight_lowers_largest_bubble && gap > kEpsilon &&
                           st.idle + gap > largest_idle_;
      const bool before_forward = choices_.weight_before_forward && st.backwards > 0 &&
                                  forward_start <= t0;
      const bool over_reserve = st.weights.size() > st.weight_reserve && gap > kEpsilon;
      if (fits || largest || before_forward || memory_blocked || over_reserve || forced) {
        return {true, t0, st.weights.front()};
      }
    }
    if (backward_ready < kInfinity && backward_start <= forward_start) {
      return {true, backward_start, backward_pass};
    }
    if (forward_ready < kInfinity) {
      const double overrun = choices_.warmup_overrun * problem_.costs.duration(CostKind::fwd, s);
      const bool delays = st.backwards == 0 && !choices_.forward_may_delay_backward &&
                          backward_estimate + overrun < forward_start + forward_time(s, forward_at);
      if (!delays || forced) return {true, forward_start, forward_pass};
      if (backward_ready < kInfinity) return {true, backward_start, backward_pass};
      return {};
    }
    if (backward_ready < kInfinity) return {true, backward_start, backward_pass};
    return {};
  }

  void commit(int s, const Action& action) {
    StageState& st = stages_[static_cast<std::size_t>(s)];
    const Pass& pass = action.pass;
    const double start = std::max(action.time, now_);
    const int at = position(s, pass.chunk);
    const auto mb = static_cast<std::size_t>(pass.micro_batch);
    const auto c = static_cast<std::size_t>(pass.chunk);
    double end = start;
    switch (pass.kind) {
      case PassKind::forward:
        end += forward_time(s, at);
        if (at + 1 < lane_) {
          activation_ready_[static_cast<std::size_t>(at + 1)][mb] =
              end + hop(at, at + 1, MessageKind::act);
        } else {
          gradient_ready_[static_cast<std::size_t>(at)][mb] = end;
        }
        st.held += 1;
        ++st.in_flight[c];
        ++st.next_forward[c];
        break;
      case PassKind::backward:
      case PassKind::backward_input:
        end += backward_time(s);
        if (at > 0) {
          gradient_ready_[static_cast<std::size_t>(at - 1)][mb] =
              end + hop(at, at - 1, MessageKind::grad);
        }
        if (pass.kind == PassKind::backward_input) {
          st.held -= 1 - problem_.weight_memory;
          st.weights.push_back({PassKind::backward_weight, pass.micro_batch, pass.chunk});
        } else {
          st.held -= 1;
        }
        --st.in_flight[c];
        ++st.next_backward[c];
        ++st.backwards;
        break;
      case PassKind::backward_weight:
        end += weight_time(s);
        st.held -= problem_.weight_memory;
        st.weights.pop_front();
        break;
    }
    st.idle += start - st.free;
    largest_idle_ = std::max(largest_idle_, st.idle);
    st.free = end;
    --st.remaining;
    now_ = start;
    order_.stages[static_cast<std::size_t>(s)].push_back(pass);
  }

  const Problem& problem_;
  const GreedyChoices& choices_;
  const Config& config_;
  int chunks_ = 1;
  int lane_ = 1;
  ComputeOrder order_;
  std::vector<StageState> stages_;
  std::vector<int> owner_;  // the stage at each lane position
  std::vector<std::vector<double>> activation_ready_;  // [position][micro-batch]
  std::vector<std::vector<double>> gradient_ready_;
  double now_ = 0;
  double largest_idle_ = 0;
};

}  // namespace

std::vector<GreedyChoices> greedy_grid() {
  std::vector<GreedyChoices> grid;
  for (int bits = 0; bits < 16; ++bits) {
    grid.push_back({(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) == 0, 0, 0});
  }
  for (const double overrun : {0.0, 0.5}) {
    for (const double reserve : {0.0, 0.8}) {
      if (overrun > 0 || reserve > 0) grid.push_back({false, false, false, true, overrun, reserve});
    }
  }
  return grid;
}

std::optional<ComputeOrder> greedy_order(const Problem& problem, const GreedyChoices& choices) {
  return Greedy(problem, choices).run();
}

}  // namespace pipevm::synthesis
