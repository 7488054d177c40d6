// The question, measured: does an ILP through CBC beat the local
// search of `pipevm synthesize`? For one instance, the library's result at
// each --search-seconds (its longest stage span and lower bound), then the
// time-indexed program of time_indexed_ilp.hpp under --ilp-seconds (its
// incumbent, its best bound, whether it is proven), and the ILP's order
// timed by the library (`synthesis::lower`, the simulator's clock) with its
// peak memory. One markdown row; --header prints the table's head. Results
// in docs/synthesize.md ("Local search or ILP"); bench/synthesize/ilp_table.sh
// runs the instances there.
//
//   pipevm_ilp_vs_search -p 4 -m 8 --cost fwd=2,bwd-input=1,bwd-weight=1
//       --weight-memory 0.4 --memory-limit 4 [--ilp-seconds 60] [--warm-start]
#include <Cbc_C_Interface.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cost_files.hpp"
#include "place_comms.hpp"
#include "synthesize.hpp"
#include "time_indexed_ilp.hpp"

namespace {

using pipevm::Config;
using pipevm::Costs;
namespace synthesis = pipevm::synthesis;

struct Options {
  int stages = 4;
  int micro_batches = 8;
  std::string cost = "fwd=1,bwd-input=1,bwd-weight=1";
  double weight_memory = 1;
  double memory_limit = 0;
  std::vector<double> search_seconds{1, 10};
  double ilp_seconds = 60;
  bool warm_start = false;
  bool strictly_shorter = false;
  bool header = false;
  bool log = false;
};

// The library's rule (synthesize.cpp): split unless the costs give a fused
// backward only.
bool splits_backward(const Costs& costs) {
  return !costs.bwd.has_value() || costs.bwd_input > 0 || costs.bwd_weight > 0;
}

struct TimedOrder {
  double span = 0;
  std::vector<std::vector<double>> starts;  // per stage, per position of the order
};

// The compute order as the search times it (the timing form, simulated):
// each pass's start and the longest stage span.
TimedOrder timed_order(const synthesis::ComputeOrder& order, const Costs& costs) {
  const auto file = std::make_shared<const pipevm::SourceFile>("ilp_vs_search.pipe", "");
  const synthesis::BuiltProgram built = synthesis::program_for_timing(order, file);
  pipevm::Diagnostics diagnostics;
  const auto simulation = pipevm::simulate(built.program, costs, diagnostics);
  TimedOrder timed;
  if (!simulation) return timed;
  for (std::size_t s = 0; s < built.pass_instruction.size(); ++s) {
    double first = 1e300;
    double last = 0;
    auto& starts = timed.starts.emplace_back();
    for (std::size_t j = 0; j < built.pass_instruction[s].size(); ++j) {
      const auto& t = simulation->timeline.times[built.pass_instruction[s][j]];
      starts.push_back(t.started);
      first = std::min(first, t.started);
      last = std::max(last, t.started + t.busy);
    }
    timed.span = std::max(timed.span, last - first);
  }
  return timed;
}

std::string number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

void print_header() {
  std::cout
      << "| p | m | costs | R | limit | search: span / bound (s) | ILP incumbent | ILP bound | "
         "ILP status | ILP s | ILP order simulated | steps x unit | columns / rows |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
}

int run(const Options& options) {
  Costs costs;
  std::string error;
  if (!pipevm::config::parse_cost_flags(options.cost, costs, error)) {
    std::cerr << "pipevm_ilp_vs_search: " << error << '\n';
    return 2;
  }
  const bool split = splits_backward(costs);
  const double weight_memory = split ? options.weight_memory : 1;
  synthesis::Request request;
  request.config = Config{options.stages, options.micro_batches, 1, 1};
  request.costs = costs;
  request.memory_limit = options.memory_limit;
  request.weight_memory = options.weight_memory;
  std::string searched;
  std::optional<synthesis::Result> best;
  for (const double seconds : options.search_seconds) {
    request.time_limit_seconds = seconds;
    auto result = synthesis::synthesize(request, error);
    if (!result) {
      std::cerr << "pipevm_ilp_vs_search: synthesize: " << error << '\n';
      return 2;
    }
    searched += (searched.empty() ? "" : "; ") + number(result->longest_span) + " / " +
                number(result->lower_bound) + " (" + number(seconds) + ")";
    if (!best || result->longest_span < best->longest_span) best = std::move(result);
  }
  const TimedOrder library = timed_order(best->order, costs);

  pipevm::bench::IlpRequest ilp;
  ilp.config = request.config;
  ilp.costs = costs;
  ilp.split_backward = split;
  ilp.weight_memory = weight_memory;
  ilp.memory_limit = options.memory_limit;
  ilp.span_upper_bound = library.span;
  ilp.strictly_shorter = options.strictly_shorter;
  ilp.seconds = options.ilp_seconds;
  ilp.log = options.log;
  if (options.warm_start) {
    ilp.start_order = best->order;
    ilp.start_times = library.starts;
  }
  const auto outcome = pipevm::bench::solve_time_indexed(ilp, error);
  if (!outcome) {
    std::cerr << "pipevm_ilp_vs_search: ILP: " << error << '\n';
    return 2;
  }
  std::string status = outcome->proven_optimal ? "optimal" : "time limit";
  if (outcome->proven_infeasible) status = "infeasible: the search's span is optimal";
  if (options.strictly_shorter) status += ", span < search's";
  if (options.warm_start) status += outcome->start_accepted ? ", warm" : ", start refused";
  std::string simulated = "none";
  if (outcome->has_incumbent) {
    const auto lowered = synthesis::lower(outcome->order, costs, weight_memory, error);
    if (!lowered) {
      simulated = "fails: " + error;
    } else {
      const auto peaks = synthesis::peak_memory(outcome->order, weight_memory);
      simulated = number(lowered->longest_span) + ", peak " +
                  number(*std::max_element(peaks.begin(), peaks.end()));
    }
  }
  const std::string limit = options.memory_limit > 0 ? number(options.memory_limit) : "none";
  std::cout << "| " << options.stages << " | " << options.micro_batches << " | " << options.cost
            << " | " << number(weight_memory) << " | " << limit << " | " << searched << " | "
            << (outcome->has_incumbent ? number(outcome->incumbent) : "none") << " | "
            << number(outcome->best_bound) << " | " << status << " | " << number(outcome->seconds)
            << " | " << simulated << " | " << outcome->horizon << " x "
            << number(outcome->time_unit) << " | " << outcome->columns << " / " << outcome->rows
            << " |\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"An ILP through CBC " + std::string(Cbc_getVersion()) +
               " against pipevm synthesize's local search, on one instance"};
  Options options;
  app.add_option("-p,--stages", options.stages, "pipeline stages")->check(CLI::PositiveNumber);
  app.add_option("-m,--micro-batches", options.micro_batches, "micro-batches")
      ->check(CLI::PositiveNumber);
  app.add_option("--cost", options.cost, "costs as `simulate --cost` takes them");
  app.add_option("--weight-memory", options.weight_memory, "R = M_W / M_B");
  app.add_option("--memory-limit", options.memory_limit, "activations per stage in M_B; 0: none");
  app.add_option("--search-seconds", options.search_seconds,
                 "the library's time limits, one run each")
      ->delimiter(',');
  app.add_option("--ilp-seconds", options.ilp_seconds, "CBC's time limit");
  app.add_flag("--warm-start", options.warm_start, "start CBC from the library's best schedule");
  app.add_flag("--strictly-shorter", options.strictly_shorter,
               "look only for a span one time step below the search's (infeasible: it is optimal)");
  app.add_flag("--header", options.header, "print the table's head first");
  app.add_flag("--log", options.log, "CBC's log on stdout");
  CLI11_PARSE(app, argc, argv);
  if (options.header) print_header();
  return run(options);
}
