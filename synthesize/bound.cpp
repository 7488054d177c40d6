// Lower bounds on the longest stage span (bound.hpp).
#include "bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipevm::synthesis {

namespace {

constexpr double kSlack = 1e-9;

// The lane as the bound sees it: who holds each position, and what a
// micro-batch's passes cost there.
class Lane {
 public:
  explicit Lane(const Problem& problem) : problem_(problem) {
    const Config& c = problem.config;
    const int chunks = chunks_per_rank(problem.placement, c);
    const auto length = static_cast<std::size_t>(lane_length(problem.placement, c));
    owner_.assign(length, 0);
    chunk_.assign(length, 0);
    positions_.resize(static_cast<std::size_t>(c.stages));
    for (int s = 0; s < c.stages; ++s) {
      for (int k = 0; k < chunks; ++k) {
        const int at = position_of(problem.placement, c, s, k).position;
        owner_[static_cast<std::size_t>(at)] = s;
        chunk_[static_cast<std::size_t>(at)] = k;
        positions_[static_cast<std::size_t>(s)].push_back(at);
      }
      std::sort(positions_[static_cast<std::size_t>(s)].begin(), positions_[static_cast<std::size_t>(s)].end());
    }
  }

  int length() const { return static_cast<int>(owner_.size()); }
  int micro_batches() const { return problem_.config.micro_batches; }
  // The positions stage s holds, shallowest first.
  const std::vector<int>& positions(int s) const { return positions_[static_cast<std::size_t>(s)]; }

  double forward(int at) const { return cost(CostKind::fwd, at); }
  double backward(int at) const {
    return cost(problem_.split_backward ? CostKind::bwd_input : CostKind::bwd, at);
  }
  double weight(int at) const { return problem_.split_backward ? cost(CostKind::bwd_weight, at) : 0.0; }
  // The message from position q - 1 to q (act_into) and back (grad_from):
  // none where both sit on one stage (the turn of a V).
  double act_into(int q) const {
    return turn(q) ? 0.0 : problem_.costs.message_time(MessageKind::act);
  }
  double grad_from(int q) const {
    return turn(q) ? 0.0 : problem_.costs.message_time(MessageKind::grad);
  }

  // From the end of the forward at `at` to the start of the backward
  // there: the forwards after it to the lane's end, the backwards back.
  double return_trip(int at) const {
    double t = 0;
    for (int q = at + 1; q < length(); ++q) t += act_into(q) + forward(q) + backward(q) + grad_from(q);
    return t;
  }

 private:
  bool turn(int q) const {
    return q > 0 && owner_[static_cast<std::size_t>(q) - 1] == owner_[static_cast<std::size_t>(q)];
  }
  double cost(CostKind kind, int at) const {
    const auto where = static_cast<std::size_t>(at);
    return problem_.costs.duration(kind, owner_[where], chunk_[where]);
  }

  const Problem& problem_;
  std::vector<int> owner_;  // the stage at each position
  std::vector<int> chunk_;  // and its chunk there
  std::vector<std::vector<int>> positions_;
};

// Activations a stage may hold at once (chunk activations, whole ones).
int held_at_most(const Problem& problem, int activations) {
  if (!std::isfinite(problem.memory_limit)) return activations;
  return std::min(activations, static_cast<int>(std::floor(problem.memory_limit + kSlack)));
}

double stage_work(const Lane& lane, int s) {
  double work = 0;
  for (const int at : lane.positions(s)) {
    work += lane.micro_batches() * (lane.forward(at) + lane.backward(at) + lane.weight(at));
  }
  return work;
}

BoundTerm work_term(const Lane& lane, int stages) {
  BoundTerm term{"stage work", 0};
  for (int s = 0; s < stages; ++s) term.value = std::max(term.value, stage_work(lane, s));
  return term;
}

// The stage holding position 0 runs its m forwards there, and the last
// one's trip to the lane's end and back follows.
BoundTerm first_stage_term(const Lane& lane) {
  double trip = lane.micro_batches() * lane.forward(0);
  for (int at = 1; at < lane.length(); ++at) {
    trip += lane.act_into(at) + lane.forward(at) + lane.backward(at) + lane.grad_from(at);
  }
  return {"the first stage's forwards and a round trip", trip + lane.backward(0) + lane.weight(0)};
}

// A stage's work and the idle no order avoids (bound.hpp: head and tail).
// A stage's first pass is a forward at its shallowest position, its first
// backward one at its deepest, its last forward one at its deepest (a
// micro-batch reaches a stage's positions shallowest first and leaves them
// deepest first).
BoundTerm head_tail_term(const Problem& problem, const Lane& lane) {
  BoundTerm term{"head and tail idle", 0};
  const int m = lane.micro_batches();
  const double weight_memory = problem.split_backward ? problem.weight_memory : 1;
  for (int s = 0; s < problem.config.stages; ++s) {
    const std::vector<int>& own = lane.positions(s);
    const int shallowest = own.front();
    const int deepest = own.back();
    const int count = static_cast<int>(own.size());
    double most_forward = 0;
    double most_backward_and_weight = 0;
    double most_weight = 0;
    double z_work = 0;  // one micro-batch's backward and weight passes on the stage
    for (const int at : own) {
      most_forward = std::max(most_forward, lane.forward(at));
      most_backward_and_weight = std::max(most_backward_and_weight, lane.backward(at) + lane.weight(at));
      most_weight = std::max(most_weight, lane.weight(at));
      z_work += lane.backward(at) + lane.weight(at);
    }
    const int forwards = m * count;
    const int held = held_at_most(problem, forwards);
    // Head: from the first forward's start to the first backward's.
    double head_window = 0;
    for (int q = shallowest; q < lane.length(); ++q) head_window += lane.forward(q);
    for (int q = shallowest + 1; q < lane.length(); ++q) head_window += lane.act_into(q);
    for (int q = deepest + 1; q < lane.length(); ++q) head_window += lane.backward(q) + lane.grad_from(q);
    const double head = std::max(0.0, head_window - held * most_forward);
    // Tail: from the last forward's end (micro-batch z) to the stage's
    // end: z's trip back, its backwards at the stage's positions and the
    // hops between them, its last weight pass. Besides z's own, only the
    // backward and weight passes of what the stage holds can run: k
    // activations whole and w left by their backward-input, within what z
    // leaves of the limit.
    double tail_window = lane.return_trip(deepest) + lane.backward(deepest);
    for (int q = shallowest; q < deepest; ++q) tail_window += lane.grad_from(q + 1) + lane.backward(q);
    tail_window += lane.weight(shallowest);
    const int others = forwards - count;
    const double room = std::isfinite(problem.memory_limit) ? problem.memory_limit - count
                                                            : static_cast<double>(others);
    double others_work = 0;
    for (int whole = 0; whole <= others && whole <= room + kSlack; ++whole) {
      int partial = others - whole;
      if (problem.split_backward && weight_memory > 0 && std::isfinite(problem.memory_limit)) {
        partial = std::min(partial, static_cast<int>(std::floor((room - whole) / weight_memory + kSlack)));
      }
      if (!problem.split_backward) partial = 0;
      others_work = std::max(others_work, whole * most_backward_and_weight + partial * most_weight);
    }
    const double tail = std::max(0.0, tail_window - z_work - others_work);
    const double idle = held < forwards ? head + tail : std::max(head, tail);
    term.value = std::max(term.value, stage_work(lane, s) + idle);
  }
  return term;
}

// Each activation is held (counted 1) from its forward's start to its
// backward's end, then R until its weight pass ends: at least a round trip.
// At any moment a stage holds at most the limit, so the limit times its
// span covers the lifespans of all its activations.
BoundTerm lifespan_term(const Problem& problem, const Lane& lane) {
  BoundTerm term{"activation lifespans", 0};
  if (!std::isfinite(problem.memory_limit) || problem.memory_limit <= 0) return term;
  const double weight_memory = problem.split_backward ? problem.weight_memory : 0;
  // With R 0 or 1 a stage holds a whole number of activations.
  const bool integral = weight_memory == 0 || weight_memory == 1;
  const double limit = integral ? std::floor(problem.memory_limit + kSlack) : problem.memory_limit;
  if (limit <= 0) return term;
  for (int s = 0; s < problem.config.stages; ++s) {
    double area = 0;
    for (const int at : lane.positions(s)) {
      const double whole = lane.forward(at) + lane.return_trip(at) + lane.backward(at);
      area += lane.micro_batches() * (whole + weight_memory * lane.weight(at));
    }
    term.value = std::max(term.value, area / limit);
  }
  return term;
}

// One chunk per stage: a stage's last backward-input follows every later
// stage q's, and stage q, which started after stage s's first forward
// reached it, computes all its passes but the weight passes it may still
// hold (memory bounds how many) before its last backward-input ends.
BoundTerm last_backward_chain_term(const Problem& problem, const Lane& lane) {
  BoundTerm term{"the last backward's chain", 0};
  if (chunks_per_rank(problem.placement, problem.config) != 1) return term;
  const int m = lane.micro_batches();
  for (int s = 0; s < problem.config.stages; ++s) {
    double chain = 0;
    for (int q = s + 1; q < problem.config.stages; ++q) {
      chain += lane.forward(q - 1) + lane.act_into(q) + lane.backward(q - 1) + lane.grad_from(q);
      double held_weights = 0;
      if (problem.split_backward) {
        held_weights = m;
        if (problem.weight_memory > 0) {
          held_weights = std::min<double>(m, std::floor(problem.memory_limit / problem.weight_memory + kSlack));
        }
      }
      const double before_last_backward =
          m * (lane.forward(q) + lane.backward(q) + lane.weight(q)) - held_weights * lane.weight(q);
      term.value = std::max(term.value, chain + before_last_backward + lane.weight(s));
    }
  }
  return term;
}

}  // namespace

LowerBound lower_bound(const Problem& problem) {
  const Lane lane(problem);
  LowerBound bound;
  bound.terms = {work_term(lane, problem.config.stages), first_stage_term(lane),
                 head_tail_term(problem, lane), lifespan_term(problem, lane),
                 last_backward_chain_term(problem, lane)};
  for (const BoundTerm& term : bound.terms) {
    if (term.value > bound.value) {
      bound.value = term.value;
      bound.binding = term.name;
    }
  }
  return bound;
}

LowerBound lower_bound_with_policies(const Problem& problem) {
  LowerBound limited = lower_bound(problem);
  Problem relaxed = problem;
  relaxed.memory_limit = std::numeric_limits<double>::infinity();
  LowerBound bound = lower_bound(relaxed);
  if (limited.value <= bound.value) return limited;
  bound.binding += " (memory limit relaxed: recompute or offload)";
  return bound;
}

}  // namespace pipevm::synthesis
