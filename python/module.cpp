// The compiled part of the Python package pipevm (pipevm._pipevm): check,
// simulate and expand a schedule given as a path or as text, check
// PyTorch's in-memory pipeline_order, synthesize a schedule for costs and a
// memory limit, and place the communication of a given compute order. Each
// function turns its arguments into a pipevm::api request (its model and
// costs read by pipevm::config, as the command line's are: config= is
// `--config`, a run YAML file or a dict of its sections), calls the library
// with the GIL released, and converts what it returns (results.hpp). Bad
// input raises ScheduleError, a bad argument ValueError. Not here: running
// on MPI ranks (pipevm run).
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cost_inputs.hpp"
#include "cut_search.hpp"
#include "header.hpp"
#include "model_bytes.hpp"
#include "pipevm_api.hpp"
#include "read_file.hpp"
#include "results.hpp"
#include "torch_csv.hpp"

#ifndef PIPEVM_VERSION
#define PIPEVM_VERSION "unknown"
#endif

namespace py = pybind11;

namespace pipevm::python {

namespace {

// A path given as a str or an os.PathLike.
std::string fspath(const py::object& path) {
  return py::str(py::module_::import("os").attr("fspath")(path));
}

// Python's name of a value's type, for TypeError messages.
std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

// A schedule as read, and whether it is a PyTorch table.
struct Input {
  std::shared_ptr<const SourceFile> file;
  bool table = false;
};

// A str with a line break, or given a `name`, is the schedule's text; any
// other str or os.PathLike names its file.
Input input_of(const py::object& schedule, const std::optional<std::string>& name) {
  if (!py::isinstance<py::str>(schedule) &&
      !py::isinstance(schedule, py::module_::import("os").attr("PathLike"))) {
    throw py::type_error(
        "schedule must be a path (str or os.PathLike) or the schedule's text "
        "(str), not " +
        type_name(schedule) + (py::isinstance<py::bytes>(schedule) ? ": decode it first" : ""));
  }
  Input input;
  const bool is_text = py::isinstance<py::str>(schedule) &&
                       (name || schedule.cast<std::string>().find('\n') != std::string::npos);
  if (is_text) {
    const std::string text = schedule.cast<std::string>();
    if (text.size() > kMaxScheduleBytes)
      throw ScheduleFailure("the schedule's text is over 256 MiB");
    input.file = std::make_shared<const SourceFile>(name.value_or("<string>"), text);
  } else {
    const std::string path = fspath(schedule);
    std::string error;
    input.file = api::read_schedule_file(path, error);
    if (!input.file) {
      ScheduleFailure failure(error);
      failure.file = path;
      throw failure;
    }
  }
  input.table = pytorch::is_csv_path(input.file->name());
  return input;
}

// An int argument within [1, high]: TypeError for another type (bool
// included), OverflowError beyond C's int, naming the argument.
int int_argument(const py::handle& value, const char* what, int high) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
    throw py::type_error(std::string(what) +
                         " must be an int or a (first, last) pair of ints, not " +
                         type_name(value));
  }
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0 || number < std::numeric_limits<int>::min() ||
      number > std::numeric_limits<int>::max()) {
    PyErr_SetString(PyExc_OverflowError,
                    (std::string(what) + "=" + py::str(value).cast<std::string>() +
                     " is out of range: it must be from 1 to " + std::to_string(high))
                        .c_str());
    throw py::error_already_set();
  }
  return static_cast<int>(number);
}

// An int or an inclusive (first, last) pair, within [1, high].
std::optional<ValueRange> range_of(const py::object& value, const char* what, int high) {
  if (value.is_none()) return std::nullopt;
  ValueRange range;
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    const auto items = py::reinterpret_borrow<py::sequence>(value);
    if (items.size() != 2) {
      throw py::type_error(std::string(what) +
                           " must be an int or a (first, last) pair of ints, not a " +
                           std::to_string(items.size()) + "-item " + type_name(value));
    }
    range = {int_argument(items[0], what, high), int_argument(items[1], what, high)};
  } else {
    range.first = range.last = int_argument(value, what, high);
  }
  if (range.first < 1 || range.last > high || range.first > range.last) {
    throw py::value_error(std::string(what) +
                          " must be an int or a (first, last) pair with 1 <= "
                          "first <= last <= " +
                          std::to_string(high));
  }
  return range;
}

std::optional<int> single(const std::optional<ValueRange>& range, const char* what) {
  if (!range) return std::nullopt;
  if (range->first != range->last) {
    throw py::value_error(std::string(what) + " must be one value here, not a range");
  }
  return range->first;
}

bool posted_order(const std::string& p2p_order) {
  const std::optional<bool> posted = config::posted_order(p2p_order);
  if (!posted) {
    throw py::value_error("p2p_order must be 'independent' or 'any' (MPI) or 'posted' (NCCL), "
                          "not '" + p2p_order + "'");
  }
  return *posted;
}

// config=: None (`pipevm run`'s defaults), the path of a `pipevm run` YAML
// file, or a dict of its sections (model, training, costs, ...), read as
// `--config` reads the file.
config::RunConfig run_config_of(const py::object& given) {
  try {
    if (given.is_none()) return config::read_run_config("", config::ConfigUse::figures);
    if (py::isinstance<py::dict>(given)) {
      // JSON is YAML: the dict goes through the file's reader and its checks.
      const std::string text = py::module_::import("json").attr("dumps")(given).cast<std::string>();
      return config::read_run_config_text(text, "<config>", config::ConfigUse::figures);
    }
    return config::read_run_config(fspath(given), config::ConfigUse::figures);
  } catch (const config::ConfigError& error) {
    throw py::value_error(std::string("config: ") + error.what());
  }
}

// What the header records as the model whose bytes a limit counts.
std::string memory_model_of(const py::object& given) {
  if (given.is_none()) return "pipevm run's defaults";
  if (py::isinstance<py::dict>(given)) return "the config dict";
  return fspath(given);
}

// The first error among the diagnostics as the failure, else `fallback`.
[[noreturn]] void fail(const Diagnostics& diagnostics, bool table, const std::string& fallback) {
  for (const Diagnostic& d : diagnostics.all()) {
    if (d.severity == Severity::error) throw failure_of(d, table);
  }
  throw ScheduleFailure(fallback);
}

struct ConfigArguments {
  py::object stages, micro_batches, dp, chunks;
};

api::ConfigRequest config_request(const ConfigArguments& a) {
  api::ConfigRequest request;
  request.stages = single(range_of(a.stages, "stages", api::kMaxStages), "stages");
  request.micro_batches =
      single(range_of(a.micro_batches, "micro_batches", api::kMaxMicroBatches), "micro_batches");
  request.dp = single(range_of(a.dp, "dp", api::kMaxDp), "dp");
  request.chunks = single(range_of(a.chunks, "chunks", api::kMaxChunks), "chunks");
  return request;
}

// The Program of a schedule for one configuration, or ScheduleError.
Program load(const Input& input, const ConfigArguments& arguments, const ExpandOptions& options) {
  const api::ConfigRequest request = config_request(arguments);
  Diagnostics diagnostics;
  api::ProgramInput loaded;
  {
    py::gil_scoped_release unlocked;
    loaded = api::load_program(input.file, request, diagnostics, options, input.table);
  }
  if (!loaded.program)
    fail(diagnostics, input.table, input.file->name() + ": " + loaded.usage_error);
  return std::move(*loaded.program);
}

PyCheckResult check(const py::object& schedule, const py::object& stages,
                    const py::object& micro_batches, const py::object& dp, const py::object& chunks,
                    const std::string& p2p_order, const std::optional<std::string>& name,
                    bool skip_unsupported, std::uint64_t max_configurations,
                    const py::object& config) {
  const config::RunConfig run = run_config_of(config);
  const Input input = input_of(schedule, name);
  api::SweepRequest request;
  request.model = config::model_bytes(run);
  config::expand_for_model(run, request.expand);
  request.stages = range_of(stages, "stages", api::kMaxStages);
  request.micro_batches = range_of(micro_batches, "micro_batches", api::kMaxMicroBatches);
  request.dp = range_of(dp, "dp", api::kMaxDp);
  request.chunks = range_of(chunks, "chunks", api::kMaxChunks);
  request.p2p_posted_order = posted_order(p2p_order);
  request.skip_unsupported = skip_unsupported;
  request.max_configurations = max_configurations;
  request.table = input.table;
  api::FileReport report;
  {
    py::gil_scoped_release unlocked;
    report = api::check_file(input.file, request);
  }
  return result_of(report, input.table);
}

// costs=: None (the textbook default, or the configuration's costs), a dict
// of cost keys, 'fwd=1,bwd=2', or the path of a YAML cost file (os.PathLike,
// or a str without '='); transfer= over them; composed as the command line
// composes --costs and --cost over --config's costs.
config::CostInputs cost_inputs_of(const py::object& given,
                                  const std::optional<std::string>& transfer) {
  config::CostInputs inputs;
  inputs.transfer = transfer.value_or("");
  const bool is_str = py::isinstance<py::str>(given);
  if (is_str && given.cast<std::string>().find('=') != std::string::npos) {
    inputs.flags = given.cast<std::string>();
  } else if (is_str || py::isinstance(given, py::module_::import("os").attr("PathLike"))) {
    inputs.file = fspath(given);
  } else if (py::hasattr(given, "to_yaml")) {  // a TorchProfile
    inputs.text = given.attr("to_yaml")().cast<std::string>();
  } else if (!given.is_none()) {
    std::vector<std::pair<std::string, double>> values;
    for (const auto& [key, value] : given.cast<std::map<std::string, double>>()) {
      values.emplace_back(key, value);
    }
    inputs.values = std::move(values);
  }
  return inputs;
}

Costs compose(const config::CostInputs& inputs, const config::RunConfig& run) {
  Costs costs;
  std::string error;
  if (!config::compose_costs(inputs, run.costs, costs, error)) throw py::value_error(error);
  return costs;
}

Costs costs_of(const py::object& given, const std::optional<std::string>& transfer,
               const config::RunConfig& run) {
  return compose(cost_inputs_of(given, transfer), run);
}

// A UserWarning for each compute cost the program runs that the given
// costs leave unset (it would take no time).
void warn_unset_costs(const Program& program, const std::vector<std::string>& given) {
  for (const std::string& warning : api::unset_cost_warnings(program, given)) {
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0) throw py::error_already_set();
  }
}

PySimulation simulate(const py::object& schedule, const py::object& stages,
                      const py::object& micro_batches, const py::object& dp,
                      const py::object& chunks, const py::object& costs,
                      const std::optional<std::vector<int>>& hosts,
                      const std::optional<std::string>& svg,
                      const std::optional<std::string>& trace,
                      const std::optional<std::string>& name, const py::object& config,
                      const std::optional<std::string>& transfer, const std::string& p2p_order) {
  const config::RunConfig run = run_config_of(config);
  const Input input = input_of(schedule, name);
  config::CostInputs inputs = cost_inputs_of(costs, transfer);
  // A synthesized program's header records its costs: they time it unless
  // costs are given, as `pipevm simulate` does.
  if (costs.is_none() && run.costs.empty() && !input.table) {
    inputs.flags = api::recorded_cost_flags(*input.file);
    if (inputs.flags.empty() && api::synthesized_header(*input.file) &&
        PyErr_WarnEx(PyExc_UserWarning,
                     (input.file->name() +
                      " was synthesized with per-stage or per-layer costs, which its header does "
                      "not record: timing with the defaults; pass the same costs for its figures")
                         .c_str(),
                     1) != 0) {
      throw py::error_already_set();
    }
  }
  api::SimulateRequest request;
  request.model = config::model_bytes(run);
  request.options.p2p_posted_order = posted_order(p2p_order);
  ExpandOptions options;
  config::expand_for_model(run, options);
  const Program program = load(input, {stages, micro_batches, dp, chunks}, options);
  const std::vector<std::string> given = config::given_cost_keys(inputs, run.costs);
  request.costs = api::fitted_costs(program, compose(inputs, run), given);
  if (std::string wrong = stage_entries_error(request.costs, program.config); !wrong.empty()) {
    throw py::value_error(wrong);
  }
  warn_unset_costs(program, given);
  if (hosts) {
    if (static_cast<int>(hosts->size()) != program.ranks()) {
      throw py::value_error("hosts must give a host for each of the " +
                            std::to_string(program.ranks()) + " ranks");
    }
    request.host_of_rank = *hosts;
  }
  Diagnostics diagnostics;
  api::SimulateOutcome outcome;
  {
    py::gil_scoped_release unlocked;
    outcome = api::simulate_program(program, request, diagnostics);
  }
  if (!outcome.run) fail(diagnostics, input.table, outcome.usage_error);
  PySimulation simulation{std::make_shared<const api::SimulateRun>(std::move(*outcome.run)),
                          request.costs};
  std::string error;
  if ((svg && !api::write_timeline_svg(*svg, *simulation.run, error)) ||
      (trace && !api::write_timeline_trace(*trace, *simulation.run, error))) {
    raise_os_error(error);
  }
  return simulation;
}

PyExpansion expand(const py::object& schedule, const py::object& stages,
                   const py::object& micro_batches, const py::object& dp, const py::object& chunks,
                   const std::optional<std::string>& name) {
  const Input input = input_of(schedule, name);
  Program program = load(input, {stages, micro_batches, dp, chunks}, {});
  return PyExpansion{std::make_shared<const Program>(std::move(program)), input.table};
}

// A call as the header records it: `pipevm.NAME(key=repr, ...)`.
std::string call_text(const char* function,
                      const std::vector<std::pair<const char*, py::object>>& arguments) {
  std::string text = std::string("pipevm.") + function + "(";
  const char* separator = "";
  for (const auto& [key, value] : arguments) {
    text += separator;
    text += key;
    text += '=';
    text += py::repr(value).cast<std::string>();
    separator = ", ";
  }
  return text + ")";
}

PySynthesis synthesis_of(synthesis::Result result, synthesis::HeaderInputs inputs,
                         std::string cut = {}) {
  auto shared = std::make_shared<const synthesis::Result>(std::move(result));
  std::string header = synthesis::header(inputs, *shared);
  return PySynthesis{std::move(shared), std::move(header), std::move(cut)};
}

// synthesize's memory_limit: None, a number of M_B, or a string as
// `--memory-limit` takes it ("2.5", "64MiB").
void set_memory_limit(const py::object& limit, synthesis::Request& request) {
  const char* const wanted =
      "memory_limit must be a number of micro-batch activations M_B >= 0, or bytes with a "
      "unit ('64MiB', '2GB')";
  if (limit.is_none()) return;
  if (py::isinstance<py::str>(limit)) {
    const std::string text = limit.cast<std::string>();
    if (!config::parse_memory_limit(text, request.memory_limit, request.memory_bytes)) {
      throw py::value_error(std::string(wanted) + ", not '" + text + "'");
    }
    return;
  }
  if (py::isinstance<py::bool_>(limit) ||
      !(py::isinstance<py::int_>(limit) || py::isinstance<py::float_>(limit))) {
    throw py::value_error(wanted);
  }
  request.memory_limit = limit.cast<double>();
  if (!(request.memory_limit >= 0) || !std::isfinite(request.memory_limit)) {
    throw py::value_error(wanted);
  }
}

// synthesize with per-layer costs: the cut chosen with the order (or fixed
// by `cut`), as `pipevm synthesize --costs` with `layers:`.
PySynthesis synthesize_cut(const synthesis::Request& request, const std::string& cut,
                           synthesis::HeaderInputs inputs) {
  std::string error;
  const auto cut_request = synthesis::cut_request_of(request, cut, error);
  if (!cut_request) throw py::value_error(error);
  std::optional<synthesis::CutResult> result;
  {
    py::gil_scoped_release unlocked;
    result = synthesis::synthesize_cut(*cut_request, error);
  }
  if (!result) throw ScheduleFailure(error);
  synthesis::record_cut(*result, inputs);
  return synthesis_of(std::move(result->result), std::move(inputs), cut_text(result->cut));
}

PySynthesis synthesize(int stages, int micro_batches, int chunks, const std::string& placement,
                       const py::object& costs, const py::object& memory_limit,
                       double weight_memory, double time_limit,
                       const std::optional<std::string>& transfer, const std::string& p2p_order,
                       int max_moves, const py::object& config, const std::string& memory_policy,
                       const std::optional<std::string>& cut) {
  if (placement != "looped" && placement != "v") {
    throw py::value_error("placement must be 'looped' or 'v', not '" + placement + "'");
  }
  posted_order(p2p_order);
  if (!(time_limit >= 0)) throw py::value_error("time_limit must be seconds >= 0");
  if (max_moves < 0) throw py::value_error("max_moves must be >= 0 (0: until time_limit)");
  synthesis::Request request;
  request.placement = placement == "v" ? Placement::v : Placement::looped;
  request.config.stages = *single(range_of(py::int_(stages), "stages", api::kMaxStages), "stages");
  request.config.micro_batches = *single(
      range_of(py::int_(micro_batches), "micro_batches", api::kMaxMicroBatches), "micro_batches");
  request.config.chunks = *single(range_of(py::int_(chunks), "chunks", api::kMaxChunks), "chunks");
  const config::RunConfig run = run_config_of(config);
  const config::CostInputs cost_inputs = cost_inputs_of(costs, transfer);
  request.costs = compose(cost_inputs, run);
  const std::vector<std::string> given = config::given_cost_keys(cost_inputs, run.costs);
  if (std::string wrong = stage_entries_error(request.costs, request.config); !wrong.empty()) {
    throw py::value_error(wrong);
  }
  set_memory_limit(memory_limit, request);
  request.memory_shape = config::memory_shape(config::model_bytes(run), request.config);
  request.weight_memory = weight_memory;
  request.time_limit_seconds = time_limit;
  request.move_limit = max_moves;
  const auto policy = synthesis::memory_policy_named(memory_policy);
  if (!policy) {
    throw py::value_error("memory_policy must be 'keep', 'recompute', 'offload' or 'any', not '" +
                          memory_policy + "'");
  }
  request.memory_policy = *policy;
  synthesis::HeaderInputs inputs;
  std::vector<std::pair<const char*, py::object>> arguments = {
      {"stages", py::int_(stages)},
      {"micro_batches", py::int_(micro_batches)},
      {"chunks", py::int_(chunks)},
      {"placement", py::str(placement)},
      {"costs", costs},
      {"memory_limit", memory_limit},
      {"weight_memory", py::float_(weight_memory)},
      {"time_limit", py::float_(time_limit)},
      {"transfer", py::cast(transfer)},
      {"p2p_order", py::str(p2p_order)},
      {"max_moves", py::int_(max_moves)}};
  if (!config.is_none()) arguments.emplace_back("config", config);
  if (memory_policy != "any") arguments.emplace_back("memory_policy", py::str(memory_policy));
  if (cut) arguments.emplace_back("cut", py::str(*cut));
  inputs.command = call_text("synthesize", arguments);
  inputs.memory_policy = *policy;
  inputs.costs = request.costs;
  inputs.memory_limit = request.memory_limit;
  inputs.memory_bytes = request.memory_bytes;
  inputs.memory_model = memory_model_of(config);
  inputs.weight_memory = weight_memory;
  inputs.p2p_order = p2p_order;
  std::string error;
  if (!request.costs.layers.empty()) return synthesize_cut(request, cut.value_or(""), std::move(inputs));
  if (cut) throw py::value_error("cut needs per-layer costs: a TorchProfile or a cost file with `layers:`");
  std::optional<synthesis::Result> result;
  {
    py::gil_scoped_release unlocked;
    result = synthesis::synthesize(request, error);
  }
  if (!result) throw ScheduleFailure(error);
  warn_unset_costs(result->program, given);
  return synthesis_of(std::move(*result), std::move(inputs));
}

PySynthesis lower(const py::object& schedule, const py::object& stages,
                  const py::object& micro_batches, const py::object& chunks,
                  const py::object& costs, double weight_memory,
                  const std::optional<std::string>& name) {
  const Input input = input_of(schedule, name);
  const Program program = load(input, {stages, micro_batches, py::none(), chunks}, {});
  std::string error;
  const auto order = synthesis::compute_order_of(program, error);
  if (!order) throw ScheduleFailure(input.file->name() + ": " + error);
  synthesis::HeaderInputs inputs;
  inputs.command = call_text("lower", {{"schedule", py::str(input.file->name())},
                                      {"stages", stages},
                                      {"micro_batches", micro_batches},
                                      {"chunks", chunks},
                                      {"costs", costs},
                                      {"weight_memory", py::float_(weight_memory)}});
  inputs.costs = costs_of(costs, std::nullopt, config::RunConfig{});
  inputs.weight_memory = weight_memory;
  std::optional<synthesis::Result> result;
  {
    py::gil_scoped_release unlocked;
    result = synthesis::lower(*order, inputs.costs, weight_memory, error, &program);
  }
  if (!result) throw ScheduleFailure(error);
  return synthesis_of(std::move(*result), std::move(inputs));
}

// PyTorch's pipeline_order: a dict {rank: [action or None, ...]} with ranks
// 0..P-1, or a list of such lists; an action is anything whose str() is
// PyTorch's spelling (a str, or torch's _Action).
api::PipelineOrder order_of(const py::object& order) {
  std::vector<py::object> rows;
  if (py::isinstance<py::dict>(order)) {
    const auto by_rank = order.cast<py::dict>();
    rows.assign(by_rank.size(), py::none());
    for (const auto& [key, row] : by_rank) {
      const int rank = py::isinstance<py::int_>(key) ? key.cast<int>() : -1;
      if (rank < 0 || rank >= static_cast<int>(rows.size()) ||
          !rows[static_cast<std::size_t>(rank)].is_none()) {
        throw py::value_error("pipeline_order's keys must be the ranks 0.." +
                              std::to_string(rows.size() - 1) + ", each once");
      }
      rows[static_cast<std::size_t>(rank)] = py::reinterpret_borrow<py::object>(row);
    }
  } else {
    for (const py::handle row : order) rows.push_back(py::reinterpret_borrow<py::object>(row));
  }
  api::PipelineOrder out;
  for (const py::object& row : rows) {
    auto& cells = out.emplace_back();
    for (const py::handle cell : row) {
      if (cell.is_none()) {
        cells.emplace_back();
      } else {
        cells.emplace_back(py::str(cell).cast<std::string>());
      }
    }
  }
  return out;
}

std::shared_ptr<const SourceFile> order_file(const py::object& order) {
  std::string error;
  auto file = api::pipeline_order_file(order_of(order), "<pipeline_order>", error);
  if (!file) throw ScheduleFailure(error);
  return file;
}

// The stages' ranks as given: "looped", "v", or {stage: rank} (PyTorch's
// stage_index_to_group_rank).
void check_placement(const py::object& placement, const pytorch::Layout& layout) {
  if (placement.is_none()) return;
  if (py::isinstance<py::str>(placement)) {
    const std::string given = placement.cast<std::string>();
    if (given != "looped" && given != "v") {
      throw py::value_error("placement must be 'looped', 'v' or {stage: rank}, not '" + given +
                            "'");
    }
    const std::string inferred(name(layout.placement));
    if (given != inferred) {
      throw ScheduleFailure("placement='" + given + "', but the order puts its stages " + inferred);
    }
    return;
  }
  for (const auto& [stage, rank] : placement.cast<std::map<int, int>>()) {
    if (stage < 0 || stage >= layout.stages || layout.rank_of(stage) != rank) {
      throw ScheduleFailure("placement puts stage " + std::to_string(stage) + " on rank " +
                            std::to_string(rank) + ", but the order runs it on " +
                            (stage < 0 || stage >= layout.stages
                                 ? std::string("no rank")
                                 : "rank " + std::to_string(layout.rank_of(stage))));
    }
  }
}

// The first action of `order` whose stage (its leading number) or, with
// `micro_batch`, whose micro-batch (its trailing number) is at least
// `limit`: "rank 0's action at step 3, '0F2'"; empty when none is.
std::string first_action_beyond(const api::PipelineOrder& order, bool micro_batch, int limit) {
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    for (std::size_t step = 0; step < order[rank].size(); ++step) {
      if (!order[rank][step]) continue;
      const std::string& action = *order[rank][step];
      std::size_t begin = 0;
      std::size_t end = 0;
      if (micro_batch) {
        end = action.size();
        begin = action.find_last_not_of("0123456789") + 1;
      } else {
        end = action.find_first_not_of("0123456789");
        if (end == std::string::npos) end = action.size();
      }
      if (begin >= end || end - begin > 9) continue;
      if (std::stoi(action.substr(begin, end - begin)) >= limit) {
        return "rank " + std::to_string(rank) + "'s action at step " + std::to_string(step) +
               ", '" + action + "'";
      }
    }
  }
  return "";
}

PyCheckResult check_pipeline_order(const py::object& order, const std::optional<int>& num_stages,
                                   const std::optional<int>& n_microbatches,
                                   const py::object& placement, const std::string& p2p_order) {
  const auto file = order_file(order);
  Diagnostics diagnostics;
  const auto layout = api::table_layout(file, diagnostics);
  if (!layout) fail(diagnostics, true, "the pipeline_order is not a schedule");
  // Which action names a stage or micro-batch beyond the one given, when one does.
  const auto naming = [&](bool micro_batch, int given) {
    const std::string action = first_action_beyond(order_of(order), micro_batch, given);
    return action.empty() ? std::string() : " (" + action + ", is the first beyond it)";
  };
  if (num_stages && *num_stages != layout->stages) {
    throw ScheduleFailure("num_stages=" + std::to_string(*num_stages) +
                          ", but the order's actions name " + std::to_string(layout->stages) +
                          " stages" + naming(false, *num_stages));
  }
  if (n_microbatches && *n_microbatches != layout->micro_batches) {
    throw ScheduleFailure(
        "n_microbatches=" + std::to_string(*n_microbatches) + ", but the order's actions name " +
        std::to_string(layout->micro_batches) + " micro-batches" + naming(true, *n_microbatches));
  }
  check_placement(placement, *layout);
  api::SweepRequest request;
  request.table = true;
  request.p2p_posted_order = posted_order(p2p_order);
  api::FileReport report;
  {
    py::gil_scoped_release unlocked;
    report = api::check_file(file, request);
  }
  return result_of(report, true);
}

std::map<int, std::vector<std::string>> lower_pipeline_order(const py::object& order) {
  const auto file = order_file(order);
  Diagnostics diagnostics;
  const auto text = api::lower_table(file, diagnostics);
  if (!text) fail(diagnostics, true, "the pipeline_order cannot be lowered");
  std::map<int, std::vector<std::string>> lowered;
  int rank = 0;
  std::string cell;
  for (const char c : *text) {
    if (c == ',' || c == '\n') {
      if (!cell.empty()) lowered[rank].push_back(cell);
      cell.clear();
      if (c == '\n') lowered.try_emplace(rank++);
      continue;
    }
    cell += c;
  }
  return lowered;
}

}  // namespace

}  // namespace pipevm::python

PYBIND11_MODULE(_pipevm, m) {
  using namespace pipevm::python;
  m.doc() = "pipevm's checker, simulator, expander and synthesizer (see the package pipevm)";
  m.attr("__version__") = PIPEVM_VERSION;
  bind_results(m);
  // The functions' docstrings open with their signatures, keyword-only marks included.
  py::options options;
  options.disable_function_signatures();
  m.def("check", &check, py::arg("schedule"), py::kw_only(), py::arg("stages") = py::none(),
        py::arg("micro_batches") = py::none(), py::arg("dp") = py::none(),
        py::arg("chunks") = py::none(), py::arg("p2p_order") = "independent",
        py::arg("name") = py::none(), py::arg("skip_unsupported") = false,
        py::arg("max_configurations") = 100'000, py::arg("config") = py::none(),
        "check(schedule, *, stages=None, micro_batches=None, dp=None, chunks=None,\n"
        "      p2p_order='independent', name=None, skip_unsupported=False,\n"
        "      max_configurations=100000, config=None) -> CheckResult\n\n"
        "Proves a schedule free of deadlock and mismatched communication, as `pipevm check`.\n"
        "schedule: a path, or text (a str with a line break, or given a name). stages,\n"
        "micro_batches, dp, chunks: an int or an inclusive (first, last) range; absent ones\n"
        "come from the schedule's `check` lines. p2p_order: 'independent' (or 'any': MPI) or\n"
        "'posted' (NCCL). config: a `pipevm run` YAML file or a dict of its sections, as\n"
        "`--config` (the model whose bytes per_rank counts; None: run's defaults). Raises\n"
        "ScheduleError when the input is not a schedule, ValueError for a bad config.");
  m.def("simulate", &simulate, py::arg("schedule"), py::kw_only(), py::arg("stages") = py::none(),
        py::arg("micro_batches") = py::none(), py::arg("dp") = py::none(),
        py::arg("chunks") = py::none(), py::arg("costs") = py::none(),
        py::arg("hosts") = py::none(), py::arg("svg") = py::none(), py::arg("trace") = py::none(),
        py::arg("name") = py::none(), py::arg("config") = py::none(),
        py::arg("transfer") = py::none(), py::arg("p2p_order") = "independent",
        "simulate(schedule, *, stages=None, micro_batches=None, dp=None, chunks=None,\n"
        "         costs=None, hosts=None, svg=None, trace=None, name=None, config=None,\n"
        "         transfer=None, p2p_order='independent') -> Simulation\n\n"
        "Simulates one configuration under a cost model, as `pipevm simulate`. costs: a dict\n"
        "of cost keys, 'fwd=1,bwd=2' or a YAML cost file's path (unset keys cost 0; None: the\n"
        "config's costs, else the textbook default); hosts: the host of each rank; svg, trace:\n"
        "files to write. config: a `pipevm run` YAML file or a dict of its sections, as\n"
        "`--config` (the model whose bytes per_rank counts, its costs under costs=). transfer:\n"
        "'auto', 'eager' or 'rendezvous' (None: the costs'); p2p_order: 'independent' (or\n"
        "'any') or 'posted'. Raises ScheduleError when the schedule cannot be read or cannot\n"
        "run to its end, ValueError for bad costs or config.");
  m.def("expand", &expand, py::arg("schedule"), py::kw_only(), py::arg("stages") = py::none(),
        py::arg("micro_batches") = py::none(), py::arg("dp") = py::none(),
        py::arg("chunks") = py::none(), py::arg("name") = py::none(),
        "expand(schedule, *, stages=None, micro_batches=None, dp=None, chunks=None,\n"
        "       name=None) -> Expansion\n\n"
        "Expands one configuration into each rank's instruction stream, as `pipevm expand`.");
  m.def("synthesize", &synthesize, py::kw_only(), py::arg("stages"), py::arg("micro_batches"),
        py::arg("chunks") = 1, py::arg("placement") = "looped", py::arg("costs") = py::none(),
        py::arg("memory_limit") = py::none(), py::arg("weight_memory") = 1.0,
        py::arg("time_limit") = 5.0, py::arg("transfer") = py::none(),
        py::arg("p2p_order") = "any", py::arg("max_moves") = 0, py::arg("config") = py::none(),
        py::arg("memory_policy") = "any", py::arg("cut") = py::none(),
        "synthesize(*, stages, micro_batches, chunks=1, placement='looped', costs=None,\n"
        "           memory_limit=None, weight_memory=1.0, time_limit=5.0, transfer=None,\n"
        "           p2p_order='any', max_moves=0, config=None, memory_policy='any',\n"
        "           cut=None) -> Synthesis\n\n"
        "Searches the least-bubble schedule for costs and a memory limit, as `pipevm\n"
        "synthesize`, from every known schedule that fits (the shipped ones included), so it\n"
        "is never worse than any of them; the result is checked under both progress models\n"
        "and simulated. costs:\n"
        "as simulate's, or the path of a YAML cost file (`pipevm run --profile` writes one).\n"
        "memory_limit: what a stage may hold, in micro-batch activations M_B (a number), or\n"
        "in bytes with a unit ('64MiB', '2GB': counted as `check` counts peak bytes, for\n"
        "config's model, else `pipevm run`'s default); None: no limit. weight_memory: R =\n"
        "M_W / M_B. config: a `pipevm run` YAML file or a dict of its sections (its model,\n"
        "its costs under costs=).\n"
        "time_limit: seconds for the improvement step; max_moves: its moves at most (0: no\n"
        "limit; the same result on any machine when time_limit does not end it first).\n"
        "transfer: 'eager', 'rendezvous' or 'auto' (None: the costs'). p2p_order: 'any' (or\n"
        "'independent') or 'posted', recorded in the header (the result always passes both).\n"
        "memory_policy: under a memory_limit, what a stage may do with a stash besides keeping\n"
        "it: 'keep', 'recompute', 'offload' or 'any' (as --memory-policy; Synthesis.\n"
        "memory_policies, device_peak_bytes and host_peak_bytes report the choice).\n"
        "Per-layer costs (a TorchProfile from profile_torch, or a cost file with `layers:`):\n"
        "the cut of the layers into pieces is chosen with the order, under memory_limit in\n"
        "bytes per stage (a number or '64MiB': parameter-bytes plus held activation-bytes);\n"
        "cut='even' or cut='0-2,3-4,5' fixes it; the result's cut says which.\n"
        "A request no schedule meets raises ScheduleError with the message the CLI prints.");
  m.def("lower", &lower, py::arg("schedule"), py::kw_only(), py::arg("stages") = py::none(),
        py::arg("micro_batches") = py::none(), py::arg("chunks") = py::none(),
        py::arg("costs") = py::none(), py::arg("weight_memory") = 1.0,
        py::arg("name") = py::none(),
        "lower(schedule, *, stages=None, micro_batches=None, chunks=None, costs=None,\n"
        "      weight_memory=1.0, name=None) -> Synthesis\n\n"
        "Keeps a schedule's compute order (a .pipe, or a PyTorch compute-only table) and places\n"
        "its communication, as `pipevm synthesize --lower`. Raises ScheduleError when the\n"
        "schedule cannot be read or its order cannot be placed.");
  m.def("check_pipeline_order", &check_pipeline_order, py::arg("order"), py::kw_only(),
        py::arg("num_stages") = py::none(), py::arg("n_microbatches") = py::none(),
        py::arg("placement") = py::none(), py::arg("p2p_order") = "independent",
        "check_pipeline_order(order, *, num_stages=None, n_microbatches=None, placement=None,\n"
        "                     p2p_order='independent') -> CheckResult\n\n"
        "Checks PyTorch's in-memory pipeline_order ({rank: [action or None, ...]}, actions as\n"
        "str() spells them) as `pipevm check` checks the same table as CSV. num_stages,\n"
        "n_microbatches and placement ('looped', 'v' or {stage: rank}), when given, must match\n"
        "what the actions say. Findings name the rank, step and action; a malformed action\n"
        "raises ScheduleError.");
  m.def("lower_pipeline_order", &lower_pipeline_order, py::arg("order"),
        "lower_pipeline_order(order) -> dict[int, list[str]]\n\n"
        "The order with its sends and receives, as torch.distributed.pipelining adds them\n"
        "(_merge_bw, then _add_send_recv).");
}
