// The time-indexed program and its solve (time_indexed_ilp.hpp).
//
// Variables: z(j,t) for pass j and time step t, 1 once j has started (its
// start is the number of steps with z = 0); per stage and step, g(s,t) and
// h(s,t): the stage has started, has not yet finished; Z, the longest span.
// Outside a pass's window [earliest, latest) z is the constant 0 or 1 and
// has no column.
// Rows: z non-decreasing in t; a precedence a -> b with lag L as
// z(b,t) <= z(a,t-L) for every t (the strong, disaggregated form); at most
// one pass running per stage and step, and only within the stage's span
// (j runs at t when it started in (t - d_j, t]); the activations held at
// every step within the limit; g(s,t) >= z of each forward; h(s,t) >= 1 -
// z of each last pass d steps earlier; Z >= the sum over t of g + h - 1.
#include "time_indexed_ilp.hpp"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

namespace pipevm::bench {

namespace {

using synthesis::ComputeOrder;
using synthesis::Pass;
using synthesis::PassKind;

// The coarsest step 1/D (D <= 1000) of which every value is a whole
// multiple; 0 when there is none.
int steps_per_unit(const std::vector<double>& values) {
  for (int d = 1; d <= 1000; ++d) {
    const bool whole = std::all_of(values.begin(), values.end(), [&](double v) {
      const double scaled = v * d;
      return std::abs(scaled - std::round(scaled)) <= 1e-6 * std::max(1.0, scaled);
    });
    if (whole) return d;
  }
  return 0;
}

struct Job {
  Pass pass;
  int stage = 0;
  int duration = 0;  // steps
  int earliest = 0;  // first step it may start at
  int latest = 0;    // last step it may start at: z = 1 from here on
  int first_column = 0;
};

struct Precedence {
  int before = 0;
  int after = 0;
  int lag = 0;  // steps from the start of `before` to the start of `after`
};

struct Row {
  std::vector<std::pair<int, double>> terms;
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
};

class Model {
 public:
  Model(const IlpRequest& request, int scale, int horizon, std::string& error)
      : request_(request), horizon_(horizon) {
    const Costs& c = request.costs;
    const auto steps = [&](double value) { return static_cast<int>(std::lround(value * scale)); };
    forward_ = steps(c.fwd);
    backward_ = steps(request.split_backward ? c.bwd_input : c.backward());
    weight_ = request.split_backward ? steps(c.bwd_weight) : 0;
    latency_ = steps(c.send);
    if (forward_ < 1 || backward_ < 1 || (request.split_backward && weight_ < 1)) {
      error = "every pass must take at least one time step (a zero cost is not modelled)";
      return;
    }
    add_jobs();
    add_precedences();
    if (!bound_windows()) {
      error = "the horizon of " + std::to_string(horizon_) + " steps holds no schedule";
      return;
    }
    add_columns();
    add_rows();
  }

  int columns() const { return static_cast<int>(lower_.size()); }
  int rows() const { return static_cast<int>(rows_.size()); }
  const std::vector<Job>& jobs() const { return jobs_; }
  int job_of(int stage, PassKind kind, int micro_batch) const {
    return index_.at({stage, static_cast<int>(kind), micro_batch});
  }

  long load_into(Cbc_Model* cbc) const {
    std::vector<std::vector<std::pair<int, double>>> by_column(static_cast<std::size_t>(columns()));
    long nonzeros = 0;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      for (const auto& [column, coefficient] : rows_[r].terms) {
        by_column[static_cast<std::size_t>(column)].emplace_back(static_cast<int>(r), coefficient);
        ++nonzeros;
      }
    }
    std::vector<CoinBigIndex> start{0};
    std::vector<int> index;
    std::vector<double> value;
    for (const auto& column : by_column) {
      for (const auto& [row, coefficient] : column) {
        index.push_back(row);
        value.push_back(coefficient);
      }
      start.push_back(static_cast<CoinBigIndex>(index.size()));
    }
    std::vector<double> row_lower;
    std::vector<double> row_upper;
    for (const Row& row : rows_) {
      row_lower.push_back(row.lower);
      row_upper.push_back(row.upper);
    }
    Cbc_loadProblem(cbc, columns(), rows(), start.data(), index.data(), value.data(), lower_.data(),
                    upper_.data(), objective_.data(), row_lower.data(), row_upper.data());
    for (int column = 0; column < columns(); ++column) {
      if (integer_[static_cast<std::size_t>(column)]) Cbc_setInteger(cbc, column);
    }
    Cbc_setObjSense(cbc, 1);
    return nonzeros;
  }

  // The start step of every job in a solution.
  int start_of(const Job& job, const double* solution) const {
    double started = 0;
    for (int t = job.earliest; t < job.latest; ++t)
      started += solution[job.first_column + t - job.earliest];
    return job.latest - static_cast<int>(std::lround(started));
  }

  // The z columns that are 1 when each job starts at `starts[j]`; false
  // when a start lies outside its job's window.
  bool columns_set_by(const std::vector<int>& starts, std::vector<int>& ones) const {
    for (std::size_t j = 0; j < jobs_.size(); ++j) {
      const Job& job = jobs_[j];
      if (starts[j] < job.earliest || starts[j] > job.latest) return false;
      for (int t = starts[j]; t < job.latest; ++t)
        ones.push_back(job.first_column + t - job.earliest);
    }
    return true;
  }

  int span_column() const { return span_column_; }

 private:
  void add_jobs() {
    const Config& c = request_.config;
    for (int s = 0; s < c.stages; ++s) {
      for (int k = 0; k < c.micro_batches; ++k) {
        add_job(s, {PassKind::forward, k, 0}, forward_);
        add_job(s, {request_.split_backward ? PassKind::backward_input : PassKind::backward, k, 0},
                backward_);
        if (request_.split_backward) add_job(s, {PassKind::backward_weight, k, 0}, weight_);
      }
    }
  }

  void add_job(int stage, Pass pass, int duration) {
    index_[{stage, static_cast<int>(pass.kind), pass.micro_batch}] = static_cast<int>(jobs_.size());
    jobs_.push_back({pass, stage, duration, 0, horizon_ - duration, 0});
  }

  PassKind backward_kind() const {
    return request_.split_backward ? PassKind::backward_input : PassKind::backward;
  }

  void add_precedences() {
    const Config& c = request_.config;
    const int last = c.stages - 1;
    for (int k = 0; k < c.micro_batches; ++k) {
      for (int s = 0; s < last; ++s) {
        precedences_.push_back({job_of(s, PassKind::forward, k),
                                job_of(s + 1, PassKind::forward, k), forward_ + latency_});
        precedences_.push_back({job_of(s + 1, backward_kind(), k), job_of(s, backward_kind(), k),
                                backward_ + latency_});
      }
      precedences_.push_back(
          {job_of(last, PassKind::forward, k), job_of(last, backward_kind(), k), forward_});
      for (int s = 0; s <= last && request_.split_backward; ++s) {
        precedences_.push_back({job_of(s, PassKind::backward_input, k),
                                job_of(s, PassKind::backward_weight, k), backward_});
      }
      // Micro-batches are interchangeable, so every stage may run its
      // forwards in micro-batch order: where stage s runs k + 1 first,
      // swapping the labels k and k + 1 of the forwards on stages >= s and
      // of every backward and weight pass keeps each pass's time and every
      // dependency and memory count, and leaves the earlier stages as they
      // were. This removes m! symmetric copies of each schedule.
      for (int s = 0; s <= last && k + 1 < c.micro_batches; ++s) {
        precedences_.push_back(
            {job_of(s, PassKind::forward, k), job_of(s, PassKind::forward, k + 1), forward_});
      }
    }
  }

  // Windows from the precedences, forwards and backwards to a fixed point;
  // false when one is empty.
  bool bound_windows() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const Precedence& p : precedences_) {
        Job& before = jobs_[static_cast<std::size_t>(p.before)];
        Job& after = jobs_[static_cast<std::size_t>(p.after)];
        if (after.earliest < before.earliest + p.lag) {
          after.earliest = before.earliest + p.lag;
          changed = true;
        }
        if (before.latest > after.latest - p.lag) {
          before.latest = after.latest - p.lag;
          changed = true;
        }
      }
    }
    return std::all_of(jobs_.begin(), jobs_.end(),
                       [](const Job& j) { return j.earliest <= j.latest; });
  }

  int add_column(double lower, double upper, double objective, bool integer) {
    lower_.push_back(lower);
    upper_.push_back(upper);
    objective_.push_back(objective);
    integer_.push_back(integer);
    return columns() - 1;
  }

  void add_columns() {
    for (Job& job : jobs_) {
      job.first_column = columns();
      for (int t = job.earliest; t < job.latest; ++t) add_column(0, 1, 0, true);
    }
    for (int s = 0; s < request_.config.stages; ++s) {
      started_columns_.push_back(columns());
      for (int t = 0; t < horizon_; ++t) add_column(0, 1, 0, false);
      unfinished_columns_.push_back(columns());
      for (int t = 0; t < horizon_; ++t) add_column(0, 1, 0, false);
    }
    span_column_ = add_column(0, horizon_, 1, false);
  }

  // Adds coefficient x z(job, t) to `row`, folding a constant into its bounds.
  void add_started(Row& row, const Job& job, int t, double coefficient) const {
    if (t < job.earliest) return;
    if (t >= job.latest) {
      row.lower -= coefficient;
      row.upper -= coefficient;
      return;
    }
    row.terms.emplace_back(job.first_column + t - job.earliest, coefficient);
  }

  void keep(Row row) {
    if (!row.terms.empty()) rows_.push_back(std::move(row));
  }

  void add_rows() {
    for (const Job& job : jobs_) {
      for (int t = job.earliest; t + 1 < job.latest; ++t) {
        Row row;
        row.upper = 0;
        add_started(row, job, t, 1);
        add_started(row, job, t + 1, -1);
        keep(std::move(row));
      }
    }
    for (const Precedence& p : precedences_) {
      const Job& before = jobs_[static_cast<std::size_t>(p.before)];
      const Job& after = jobs_[static_cast<std::size_t>(p.after)];
      for (int t = after.earliest; t < after.latest; ++t) {
        if (t - p.lag >= before.latest) continue;  // z(before) is 1 there
        Row row;
        row.upper = 0;
        add_started(row, after, t, 1);
        add_started(row, before, t - p.lag, -1);
        keep(std::move(row));
      }
    }
    add_stage_rows();
  }

  // Per stage and step: g, started (some forward has); h, not finished
  // (some last pass has not ended); the step lies in the span when both are
  // 1, so the span is the sum of g + h - 1, and a pass runs only there.
  // A span written as the difference of two start times (each an average
  // over its z in the relaxation) let fractional starts shrink it below the
  // stage's own work: p 4 m 8, F = I = W = 1 at limit 4 bounded 16; this
  // form bounds at least the work (24 there).
  void add_stage_rows() {
    const Config& c = request_.config;
    const double r = request_.weight_memory;
    const bool limited = request_.memory_limit > 0 && request_.memory_limit < c.micro_batches;
    const PassKind last_kind =
        request_.split_backward ? PassKind::backward_weight : PassKind::backward;
    for (int s = 0; s < c.stages; ++s) {
      const int started = started_columns_[static_cast<std::size_t>(s)];
      const int unfinished = unfinished_columns_[static_cast<std::size_t>(s)];
      Row span;
      span.terms.emplace_back(span_column_, 1);
      span.lower = -horizon_;
      for (int t = 0; t < horizon_; ++t) {
        span.terms.emplace_back(started + t, -1);
        span.terms.emplace_back(unfinished + t, -1);
        if (t + 1 < horizon_) {
          rows_.push_back({{{started + t, 1}, {started + t + 1, -1}},
                           -std::numeric_limits<double>::infinity(),
                           0});
          rows_.push_back({{{unfinished + t + 1, 1}, {unfinished + t, -1}},
                           -std::numeric_limits<double>::infinity(),
                           0});
        }
        Row running;
        running.terms = {{started + t, -1}, {unfinished + t, -1}};
        running.upper = -1;
        Row held;
        held.upper = request_.memory_limit;
        for (const Job& job : jobs_) {
          if (job.stage != s) continue;
          add_started(running, job, t, 1);
          add_started(running, job, t - job.duration, -1);
          switch (job.pass.kind) {
            case PassKind::forward:
              add_started(held, job, t, 1);
              break;
            case PassKind::backward:
              add_started(held, job, t, -1);
              break;
            case PassKind::backward_input:
              add_started(held, job, t, -(1 - r));
              break;
            case PassKind::backward_weight:
              add_started(held, job, t, -r);
              break;
          }
          if (job.pass.kind == PassKind::forward && t >= job.earliest) {
            Row after_start{{{started + t, 1}}, 0, std::numeric_limits<double>::infinity()};
            add_started(after_start, job, t, -1);
            rows_.push_back(std::move(after_start));
          }
          if (job.pass.kind == last_kind && t - job.duration < job.latest) {
            Row before_end{{{unfinished + t, 1}}, 1, std::numeric_limits<double>::infinity()};
            add_started(before_end, job, t - job.duration, 1);
            rows_.push_back(std::move(before_end));
          }
        }
        rows_.push_back(std::move(running));
        if (limited) keep(std::move(held));
      }
      rows_.push_back(std::move(span));
    }
  }

  const IlpRequest& request_;
  int horizon_ = 0;
  int forward_ = 0;
  int backward_ = 0;
  int weight_ = 0;
  int latency_ = 0;
  std::vector<Job> jobs_;
  std::map<std::tuple<int, int, int>, int> index_;
  std::vector<Precedence> precedences_;
  std::vector<double> lower_;
  std::vector<double> upper_;
  std::vector<double> objective_;
  std::vector<bool> integer_;
  std::vector<int> started_columns_;     // per stage: g(s,0) .. g(s,H-1)
  std::vector<int> unfinished_columns_;  // per stage: h(s,0) .. h(s,H-1)
  int span_column_ = 0;
  std::vector<Row> rows_;
};

// Steps every schedule of span <= `span` fits in once its first pass
// starts at step 0 (as the simulator's does): stage 0 ends by `span`; its
// first backward starts by span - m (B + W), and every other stage s
// starts before that micro-batch's forward reached it, at most B + F
// earlier, so it ends by 2 span - m (B + W) - B - F.
int horizon_for(int span, int micro_batches, int forward, int backward, int weight) {
  return std::max(span, 2 * span - micro_batches * (backward + weight) - backward - forward);
}

// Each job's start step under the start schedule, micro-batches renumbered
// in the order stage 0 starts them (the program's numbering); empty when a
// start is not on the step grid.
std::vector<int> start_steps(const IlpRequest& request, const Model& model, int scale) {
  const ComputeOrder& order = *request.start_order;
  std::vector<std::pair<double, int>> first_stage_forwards;
  for (std::size_t i = 0; i < order.stages[0].size(); ++i) {
    const Pass& pass = order.stages[0][i];
    if (pass.kind == PassKind::forward)
      first_stage_forwards.emplace_back(request.start_times[0][i], pass.micro_batch);
  }
  std::sort(first_stage_forwards.begin(), first_stage_forwards.end());
  std::map<int, int> renumbered;
  for (std::size_t i = 0; i < first_stage_forwards.size(); ++i) {
    renumbered[first_stage_forwards[i].second] = static_cast<int>(i);
  }
  std::vector<int> starts(model.jobs().size(), -1);
  for (std::size_t s = 0; s < order.stages.size(); ++s) {
    for (std::size_t i = 0; i < order.stages[s].size(); ++i) {
      const Pass& pass = order.stages[s][i];
      const double scaled = request.start_times[s][i] * scale;
      if (std::abs(scaled - std::round(scaled)) > 1e-6 * std::max(1.0, scaled)) return {};
      const int j = model.job_of(static_cast<int>(s), pass.kind, renumbered.at(pass.micro_batch));
      starts[static_cast<std::size_t>(j)] = static_cast<int>(std::lround(scaled));
    }
  }
  return starts;
}

ComputeOrder order_of(const IlpRequest& request, const Model& model, const double* solution) {
  ComputeOrder order;
  order.config = request.config;
  order.stages.resize(static_cast<std::size_t>(request.config.stages));
  std::vector<std::vector<std::pair<int, Pass>>> timed(order.stages.size());
  for (const Job& job : model.jobs()) {
    timed[static_cast<std::size_t>(job.stage)].emplace_back(model.start_of(job, solution),
                                                            job.pass);
  }
  for (std::size_t s = 0; s < timed.size(); ++s) {
    std::stable_sort(timed[s].begin(), timed[s].end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& entry : timed[s]) order.stages[s].push_back(entry.second);
  }
  return order;
}

}  // namespace

std::optional<IlpOutcome> solve_time_indexed(const IlpRequest& request, std::string& error) {
  const Costs& c = request.costs;
  if (request.config.chunks != 1 || request.config.dp != 1 || !c.stages.empty()) {
    error =
        "the program models one chunk per stage, one pipeline and the same costs on every stage";
    return std::nullopt;
  }
  const double backward = request.split_backward ? c.bwd_input : c.backward();
  const double weight = request.split_backward ? c.bwd_weight : 0;
  const int scale = steps_per_unit({c.fwd, backward, weight, c.send, request.span_upper_bound});
  if (scale == 0) {
    error = "the costs have no common time step of at least 1/1000";
    return std::nullopt;
  }
  IlpOutcome outcome;
  outcome.time_unit = 1.0 / scale;
  const auto steps = [&](double value) { return static_cast<int>(std::lround(value * scale)); };
  outcome.horizon = horizon_for(steps(request.span_upper_bound), request.config.micro_batches,
                                steps(c.fwd), steps(backward), steps(weight));
  Model model(request, scale, outcome.horizon, error);
  if (!error.empty()) return std::nullopt;

  Cbc_Model* cbc = Cbc_newModel();
  outcome.columns = model.columns();
  outcome.rows = model.rows();
  outcome.nonzeros = model.load_into(cbc);
  Cbc_setColUpper(cbc, model.span_column(),
                  steps(request.span_upper_bound) - (request.strictly_shorter ? 1 : 0));
  Cbc_setLogLevel(cbc, request.log ? 1 : 0);
  Cbc_setParameter(cbc, "timeMode", "elapsed");
  Cbc_setMaximumSeconds(cbc, request.seconds);
  if (request.start_order) {
    const std::vector<int> starts = start_steps(request, model, scale);
    std::vector<int> ones;
    outcome.start_accepted = !starts.empty() && model.columns_set_by(starts, ones);
    if (outcome.start_accepted) {
      const std::vector<double> values(ones.size(), 1.0);
      Cbc_setMIPStartI(cbc, static_cast<int>(ones.size()), ones.data(), values.data());
    }
  }
  const auto started = std::chrono::steady_clock::now();
  Cbc_solve(cbc);
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double* solution = Cbc_bestSolution(cbc);
  outcome.has_incumbent = solution != nullptr;
  outcome.best_bound = Cbc_getBestPossibleObjValue(cbc) / scale;
  outcome.proven_optimal = Cbc_isProvenOptimal(cbc) != 0;
  outcome.proven_infeasible = Cbc_isProvenInfeasible(cbc) != 0;
  if (outcome.has_incumbent) {
    outcome.incumbent = Cbc_getObjValue(cbc) / scale;
    outcome.order = order_of(request, model, solution);
  }
  Cbc_deleteModel(cbc);
  return outcome;
}

}  // namespace pipevm::bench
