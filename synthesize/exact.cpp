// Branch and bound over compute orders (exact.hpp).
#include "exact.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "order_clock.hpp"

namespace pipevm::synthesis {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kEpsilon = 1e-9;
using Clock = std::chrono::steady_clock;

// How far a (chunk, micro-batch) has come on its stage.
enum class Progress : std::uint8_t { none, forward, input, done };

class BranchAndBound {
 public:
  BranchAndBound(const Problem& problem, double incumbent, std::uint64_t node_limit,
                 Clock::time_point deadline)
      : problem_(problem),
        config_(problem.config),
        chunks_(chunks_per_rank(problem.placement, problem.config)),
        lane_(lane_length(problem.placement, problem.config)),
        best_(incumbent),
        node_limit_(node_limit),
        deadline_(deadline) {
    const auto stages = static_cast<std::size_t>(config_.stages);
    const auto m = static_cast<std::size_t>(config_.micro_batches);
    stages_.resize(stages);
    order_.stages.resize(stages);
    order_.placement = problem.placement;
    order_.config = config_;
    order_.config.dp = 1;
    activation_.assign(static_cast<std::size_t>(lane_), std::vector<double>(m, kInfinity));
    gradient_.assign(static_cast<std::size_t>(lane_), std::vector<double>(m, kInfinity));
    for (std::size_t s = 0; s < stages; ++s) {
      Stage& st = stages_[s];
      st.free = problem.costs.duration(CostKind::zero_grad, static_cast<int>(s));
      st.progress.assign(static_cast<std::size_t>(chunks_), std::vector<Progress>(m, Progress::none));
      for (int c = 0; c < chunks_; ++c) {
        st.position.push_back(position_of(problem.placement, config_, static_cast<int>(s), c).position);
        for (const PassKind kind : kinds()) {
          st.remaining += config_.micro_batches * cost(static_cast<int>(s), c, kind);
        }
        total_ += static_cast<std::size_t>(config_.micro_batches) * kinds().size();
      }
    }
  }

  ExactSearch run() {
    search();
    ExactSearch result;
    result.order = std::move(found_);
    result.longest_span = best_;
    result.proved = !stopped_;
    result.nodes = nodes_;
    return result;
  }

 private:
  struct Stage {
    double free = 0;
    double first = kInfinity;
    double last_end = 0;
    double held = 0;
    double remaining = 0;  // compute not yet placed
    int next_input = 0;    // micro-batches forwarded at lane position 0 (in order)
    std::vector<int> position;                   // per chunk
    std::vector<std::vector<Progress>> progress;  // [chunk][micro-batch]
  };
  struct Candidate {
    double start;
    int rank;  // backward first, then forward, then weight, among equal starts
    int stage;
    Pass pass;
  };

  std::vector<PassKind> kinds() const {
    if (problem_.split_backward) {
      return {PassKind::forward, PassKind::backward_input, PassKind::backward_weight};
    }
    return {PassKind::forward, PassKind::backward};
  }
  double cost(int s, int chunk, PassKind kind) const { return pass_cost(problem_.costs, kind, s, chunk); }
  double load(int s, int chunk) const { return problem_.costs.duration(CostKind::load, s, chunk); }

  bool out_of_budget() {
    if (stopped_) return true;
    if (nodes_ >= node_limit_ || ((nodes_ & 1023) == 0 && Clock::now() > deadline_)) stopped_ = true;
    return stopped_;
  }

  // No completion of this partial order spans less than this.
  double bound() const {
    double longest = 0;
    for (const Stage& st : stages_) {
      if (st.first == kInfinity) {
        longest = std::max(longest, st.remaining);
      } else if (st.remaining > 0) {
        longest = std::max(longest, std::max(st.free, last_start_) + st.remaining - st.first);
      } else {
        longest = std::max(longest, st.last_end - st.first);
      }
    }
    return longest;
  }

  void candidates_of(int s, std::vector<Candidate>& out) const {
    const Stage& st = stages_[static_cast<std::size_t>(s)];
    const int m = config_.micro_batches;
    for (int c = 0; c < chunks_; ++c) {
      const int at = st.position[static_cast<std::size_t>(c)];
      const auto where = static_cast<std::size_t>(at);
      for (int mb = 0; mb < m; ++mb) {
        const auto k = static_cast<std::size_t>(mb);
        const Progress progress = st.progress[static_cast<std::size_t>(c)][k];
        double start = kInfinity;
        Pass pass{PassKind::forward, mb, c};
        int rank = 1;
        if (progress == Progress::none) {
          if (st.held + 1 > problem_.memory_limit + kEpsilon) continue;
          if (at == 0) {
            if (mb != st.next_input) continue;
            start = st.free + load(s, c);
          } else {
            if (activation_[where][k] == kInfinity) continue;
            start = std::max(st.free, activation_[where][k]);
          }
        } else if (progress == Progress::forward) {
          pass.kind = problem_.split_backward ? PassKind::backward_input : PassKind::backward;
          rank = 0;
          start = st.free;
          if (at < lane_ - 1) {
            if (gradient_[where][k] == kInfinity) continue;
            start = std::max(start, gradient_[where][k]);
          }
        } else if (progress == Progress::input) {
          pass.kind = PassKind::backward_weight;
          rank = 2;
          start = st.free;
        } else {
          continue;
        }
        // Canonical: passes are placed in the order they start, ties by stage.
        if (start < last_start_ - kEpsilon ||
            (start <= last_start_ + kEpsilon && s < last_stage_)) {
          continue;
        }
        out.push_back({start, rank, s, pass});
      }
    }
  }

  void search() {
    ++nodes_;
    if (out_of_budget()) return;
    if (placed_ == total_) {
      double longest = 0;
      for (const Stage& st : stages_) longest = std::max(longest, st.last_end - st.first);
      if (longest < best_ - kEpsilon) {
        best_ = longest;
        found_ = order_;
      }
      return;
    }
    if (bound() >= best_ - kEpsilon) return;
    // One buffer per depth, kept between visits: no allocation per node.
    if (candidates_.size() <= placed_) candidates_.resize(placed_ + 1);
    std::vector<Candidate>& candidates = candidates_[placed_];
    candidates.clear();
    for (int s = 0; s < config_.stages; ++s) candidates_of(s, candidates);
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.start, a.rank, a.stage) < std::tie(b.start, b.rank, b.stage);
    });
    for (std::size_t i = 0; i < candidates_[placed_].size(); ++i) {
      const Candidate candidate = candidates_[placed_][i];
      place(candidate);
      search();
      undo(candidate);
      if (stopped_) return;
    }
  }

  // What placing a pass changed, to undo it.
  struct Saved {
    double free, first, last_end, held, remaining, last_start;
    int last_stage;
    double message;
  };

  // The stage a candidate runs on, its cell and its lane position.
  struct Target {
    Stage& stage;
    std::size_t chunk;
    std::size_t micro_batch;
    int at;
  };
  Target target(const Candidate& candidate) {
    Stage& st = stages_[static_cast<std::size_t>(candidate.stage)];
    const auto c = static_cast<std::size_t>(candidate.pass.chunk);
    return {st, c, static_cast<std::size_t>(candidate.pass.micro_batch), st.position[c]};
  }

  void place(const Candidate& candidate) {
    const int s = candidate.stage;
    const Pass& pass = candidate.pass;
    auto [st, c, k, at] = target(candidate);
    saved_.push_back({st.free, st.first, st.last_end, st.held, st.remaining, last_start_, last_stage_, 0});
    const double end = candidate.start + cost(s, pass.chunk, pass.kind);
    st.free = end;
    st.first = std::min(st.first, candidate.start);
    st.last_end = end;
    st.remaining -= cost(s, pass.chunk, pass.kind);
    last_start_ = candidate.start;
    last_stage_ = s;
    switch (pass.kind) {
      case PassKind::forward:
        st.held += 1;
        st.progress[c][k] = Progress::forward;
        if (at == 0) ++st.next_input;
        if (at + 1 < lane_) {
          saved_.back().message = activation_[static_cast<std::size_t>(at) + 1][k];
          activation_[static_cast<std::size_t>(at) + 1][k] = end + problem_.costs.message_time(MessageKind::act);
        } else {
          st.free += load(s, pass.chunk);
        }
        break;
      case PassKind::backward:
      case PassKind::backward_input:
        st.held -= pass.kind == PassKind::backward ? 1 : 1 - problem_.weight_memory;
        st.progress[c][k] = pass.kind == PassKind::backward ? Progress::done : Progress::input;
        if (at > 0) {
          saved_.back().message = gradient_[static_cast<std::size_t>(at) - 1][k];
          gradient_[static_cast<std::size_t>(at) - 1][k] = end + problem_.costs.message_time(MessageKind::grad);
        }
        break;
      case PassKind::backward_weight:
        st.held -= problem_.weight_memory;
        st.progress[c][k] = Progress::done;
        break;
    }
    order_.stages[static_cast<std::size_t>(s)].push_back(pass);
    ++placed_;
  }

  void undo(const Candidate& candidate) {
    const Pass& pass = candidate.pass;
    auto [st, c, k, at] = target(candidate);
    const Saved saved = saved_.back();
    saved_.pop_back();
    st.free = saved.free;
    st.first = saved.first;
    st.last_end = saved.last_end;
    st.held = saved.held;
    st.remaining = saved.remaining;
    last_start_ = saved.last_start;
    last_stage_ = saved.last_stage;
    switch (pass.kind) {
      case PassKind::forward:
        st.progress[c][k] = Progress::none;
        if (at == 0) --st.next_input;
        if (at + 1 < lane_) activation_[static_cast<std::size_t>(at) + 1][k] = saved.message;
        break;
      case PassKind::backward:
      case PassKind::backward_input:
        st.progress[c][k] = Progress::forward;
        if (at > 0) gradient_[static_cast<std::size_t>(at) - 1][k] = saved.message;
        break;
      case PassKind::backward_weight:
        st.progress[c][k] = Progress::input;
        break;
    }
    order_.stages[static_cast<std::size_t>(candidate.stage)].pop_back();
    --placed_;
  }

  const Problem& problem_;
  const Config& config_;
  int chunks_ = 1;
  int lane_ = 1;
  std::vector<Stage> stages_;
  std::vector<std::vector<double>> activation_;  // [position][micro-batch]: arrival
  std::vector<std::vector<double>> gradient_;
  std::vector<Saved> saved_;
  std::vector<std::vector<Candidate>> candidates_;  // per depth (passes placed)
  ComputeOrder order_;
  std::optional<ComputeOrder> found_;
  double best_;
  double last_start_ = -kInfinity;
  int last_stage_ = 0;
  std::size_t placed_ = 0;
  std::size_t total_ = 0;
  std::uint64_t nodes_ = 0;
  std::uint64_t node_limit_;
  Clock::time_point deadline_;
  bool stopped_ = false;
};

bool positive_costs(const Problem& problem) {
  const Config& c = problem.config;
  std::vector<PassKind> kinds{PassKind::forward};
  if (problem.split_backward) {
    kinds.push_back(PassKind::backward_input);
    kinds.push_back(PassKind::backward_weight);
  } else {
    kinds.push_back(PassKind::backward);
  }
  for (int s = 0; s < c.stages; ++s) {
    for (int chunk = 0; chunk < chunks_per_rank(problem.placement, c); ++chunk) {
      for (const PassKind kind : kinds) {
        if (!(pass_cost(problem.costs, kind, s, chunk) > 0)) return false;
      }
    }
  }
  return true;
}

}  // namespace

bool exact_search_applies(const Problem& problem) {
  const Costs& costs = problem.costs;
  const bool shapeless_messages =
      costs.bandwidth == 0 || (costs.act_bytes > 0 && costs.grad_bytes > 0);
  return shapeless_messages && costs.compute_rows == 0 && positive_costs(problem);
}

ExactSearch exact_search(const Problem& problem, double incumbent, std::uint64_t node_limit,
                         Clock::time_point deadline) {
  return BranchAndBound(problem, incumbent, node_limit, deadline).run();
}

}  // namespace pipevm::synthesis
