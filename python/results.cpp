// Converting pipevm::api's and pipevm::synthesize's values for Python, and
// the classes that carry them (results.hpp).
#include "results.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>
#include <vector>

#include <pybind11/stl.h>
#include <nlohmann/json.hpp>

#include "layer_costs.hpp"
#include "simulate.hpp"
#include "torch_csv.hpp"

namespace py = pybind11;

namespace pipevm::python {

namespace {

struct Position {
  std::optional<std::string> file;
  std::optional<int> line, column, rank;
};

Position position_of(const Location& location) {
  Position p;
  if (location.rank >= 0) p.rank = location.rank;
  if (!location.file) return p;
  p.file = location.file->name();
  const LineColumn at = location.file->position(location.range.begin);
  p.line = static_cast<int>(at.line);
  p.column = static_cast<int>(at.column);
  return p;
}

// Whether the report stopped before any configuration because its input is
// not a schedule: a parse error that no configuration raised.
const Diagnostic* unreadable(const api::FileReport& report) {
  for (const api::Finding& f : report.findings) {
    if (!f.config && f.diagnostic.severity == Severity::error &&
        class_of(f.diagnostic.kind) == DiagnosticClass::parse) {
      return &f.diagnostic;
    }
  }
  return nullptr;
}

std::string gcc_line(const Diagnostic& diagnostic) {
  std::ostringstream out;
  print_gcc(out, diagnostic);
  std::string text = out.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

PyFinding finding_of(const api::Finding& f, const api::FileReport& report, bool table) {
  const Diagnostic& d = f.diagnostic;
  PyFinding out;
  out.code = code(d.kind);
  out.class_name = std::string(name(class_of(d.kind)));
  out.name = std::string(name(d.kind));
  out.severity = std::string(name(d.severity));
  out.message = d.message;
  out.text = gcc_line(api::annotated(f, report));
  const Position p = position_of(d.location);
  out.file = p.file;
  out.line = p.line;
  out.column = p.column;
  out.rank = p.rank;
  out.ranks = f.ranks;
  for (const Note& note : d.notes) {
    const Position at = position_of(note.location);
    out.notes.push_back(PyNote{note.message, at.file, at.line, at.column, at.rank});
  }
  out.configuration = f.config;
  out.configurations = f.configurations;
  out.folded = f.folded;
  if (table && d.location.file) {
    const api::TableCell cell = api::cell_at(*d.location.file, d.location.range.begin);
    out.step = cell.step;
    out.action = cell.action;
    if (!out.rank) out.rank = cell.rank;
  }
  return out;
}

std::string repr_of(const PyFinding& f) {
  return "<Finding " + f.text + ">";
}

std::string repr_of(const PyCheckResult& r) {
  return "<CheckResult " + r.file + ": " + (r.ok ? "ok" : "failing") + ", " +
         std::to_string(r.findings.size()) + " findings, " + std::to_string(r.checked) +
         " configurations checked>";
}

std::string repr_of(const Config& c) {
  return "<Configuration " + api::configuration_text(c) + ">";
}

py::object json_to_python(const nlohmann::json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

}  // namespace

ScheduleFailure failure_of(const Diagnostic& diagnostic, bool table) {
  const std::string text = gcc_line(diagnostic);
  ScheduleFailure failure(text.substr(0, text.find('\n')));
  failure.details = text;
  const Position p = position_of(diagnostic.location);
  failure.file = p.file;
  failure.line = p.line;
  failure.column = p.column;
  failure.rank = p.rank;
  failure.code = code(diagnostic.kind);
  if (table && diagnostic.location.file) {
    const api::TableCell cell =
        api::cell_at(*diagnostic.location.file, diagnostic.location.range.begin);
    failure.rank = cell.rank;
    failure.step = cell.step;
    failure.action = cell.action;
  }
  return failure;
}

void raise_os_error(const std::string& message) {
  PyErr_SetString(PyExc_OSError, message.c_str());
  throw py::error_already_set();
}

PyCheckResult result_of(const api::FileReport& report, bool table) {
  if (!report.usage_error.empty()) {
    ScheduleFailure failure(report.name + ": " + report.usage_error);
    failure.file = report.name;
    throw failure;
  }
  if (const Diagnostic* d = unreadable(report)) throw failure_of(*d, table);
  PyCheckResult result;
  result.file = report.name;
  result.ok = report.failing == 0 && report.errors() == 0;
  for (const api::Finding& f : report.findings) {
    result.findings.push_back(finding_of(f, report, table));
  }
  result.checked = report.checked;
  result.failing = report.failing;
  result.skipped = report.skipped;
  result.suppressed = report.suppressed;
  result.instructions = report.instructions;
  result.memory = report.memory;
  result.per_rank = report.bytes;
  return result;
}

void bind_results(py::module_& m) {
  static py::exception<ScheduleFailure> schedule_error(m, "ScheduleError", PyExc_ValueError);
  schedule_error.doc() =
      "The input is not a schedule pipevm can read: a syntax error, a malformed action, an "
      "unreadable file, no configuration to check. str(error) is the one-line message "
      "(file:line:col: error: ... [PV1001]); the attributes file, line, column, code, and for "
      "a PyTorch table rank, step and action, say where (None when unknown); details holds "
      "the whole text (notes, a deadlock's cycle edge by edge).";
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const ScheduleFailure& failure) {
      const auto type = py::reinterpret_borrow<py::object>(schedule_error.ptr());
      py::object error = type(failure.what());
      error.attr("file") = failure.file;
      error.attr("line") = failure.line;
      error.attr("column") = failure.column;
      error.attr("code") = failure.code;
      error.attr("rank") = failure.rank;
      error.attr("step") = failure.step;
      error.attr("action") = failure.action;
      error.attr("details") =
          failure.details.empty() ? std::string(failure.what()) : failure.details;
      PyErr_SetObject(schedule_error.ptr(), error.ptr());
    }
  });

  py::class_<Config>(m, "Configuration", "A configuration a schedule is expanded for.")
      .def_readonly("stages", &Config::stages, "Pipeline stages P (ranks per pipeline)")
      .def_readonly("micro_batches", &Config::micro_batches, "Micro-batches M per step")
      .def_readonly("dp", &Config::dp, "Data-parallel replicas D")
      .def_readonly("chunks", &Config::chunks, "Model chunks per rank V")
      .def("__repr__", [](const Config& c) { return repr_of(c); });

  py::class_<PyNote>(m, "Note", "A place a finding points to besides its own.")
      .def_readonly("message", &PyNote::message)
      .def_readonly("file", &PyNote::file)
      .def_readonly("line", &PyNote::line, "1-based; None without a position")
      .def_readonly("column", &PyNote::column, "1-based, in bytes")
      .def_readonly("rank", &PyNote::rank, "The world rank it concerns, or None")
      .def("__repr__", [](const PyNote& n) {
        std::string where = n.file.value_or("");
        if (n.line)
          where += ":" + std::to_string(*n.line) + ":" + std::to_string(n.column.value_or(0));
        return "<Note " + (where.empty() ? "" : where + ": ") + n.message + ">";
      });

  auto finding = py::class_<PyFinding>(
      m, "Finding",
      "One finding of a check: a diagnostic that may stand for the same one on several ranks "
      "or in several configurations (ranks, configurations, folded).");
  finding.def_readonly("code", &PyFinding::code, "Stable code, e.g. 'PV2001'")
      .def_readonly("class_", &PyFinding::class_name,
                    "The diagnostic's class, e.g. 'deadlock', 'unmatched', 'parse'")
      .def_readonly("name", &PyFinding::name, "The diagnostic's kind, e.g. 'Deadlock'")
      .def_readonly("severity", &PyFinding::severity, "'error', 'warning' or 'note'")
      .def_readonly("message", &PyFinding::message)
      .def_readonly("file", &PyFinding::file)
      .def_readonly("line", &PyFinding::line, "1-based; None without a position")
      .def_readonly("column", &PyFinding::column, "1-based, in bytes")
      .def_readonly("rank", &PyFinding::rank, "The world rank it was raised on, or None")
      .def_readonly("ranks", &PyFinding::ranks, "Every rank it was raised on, ascending")
      .def_readonly("notes", &PyFinding::notes)
      .def_readonly("configuration", &PyFinding::configuration,
                    "The smallest configuration that raised it; None before expansion")
      .def_readonly("configurations", &PyFinding::configurations,
                    "How many configurations raised it")
      .def_readonly("folded", &PyFinding::folded, "Diagnostics folded into this one")
      .def_readonly("step", &PyFinding::step,
                    "For a PyTorch table: the index of the action in its rank's list")
      .def_readonly("action", &PyFinding::action, "For a PyTorch table: the action, e.g. '1B0'")
      .def("__str__", [](const PyFinding& f) { return f.text; })
      .def("__repr__", [](const PyFinding& f) { return repr_of(f); });
  finding.def_readonly("text", &PyFinding::text,
                       "The gcc-style line `pipevm check --format gcc` prints");

  py::class_<StageMemory>(m, "StageMemory", "What one stage holds at its worst moment.")
      .def_readonly("stage", &StageMemory::stage)
      .def_readonly("peak_activations", &StageMemory::peak_activations,
                    "Micro-batches whose activations are on the device for a backward")
      .def_readonly("peak_in_flight", &StageMemory::peak_in_flight,
                    "Requests posted and not yet completed")
      .def("__repr__", [](const StageMemory& s) {
        return "<StageMemory stage " + std::to_string(s.stage) + ": peak_activations " +
               std::to_string(s.peak_activations) + ", peak_in_flight " +
               std::to_string(s.peak_in_flight) + ">";
      });

  py::class_<RankBytes>(m, "RankBytes", "One rank's bytes at its peak, by category.")
      .def_readonly("rank", &RankBytes::rank)
      .def_readonly("stage", &RankBytes::stage)
      .def_readonly("weights", &RankBytes::weights)
      .def_readonly("gradients", &RankBytes::gradients)
      .def_readonly("optimizer", &RankBytes::optimizer)
      .def_readonly("activations", &RankBytes::activations)
      .def_readonly("activation_gradients", &RankBytes::activation_gradients)
      .def_readonly("messages", &RankBytes::messages)
      .def_readonly("host", &RankBytes::host,
                    "Offloaded stashes in host memory at that moment (not in peak_bytes)")
      .def_readonly("peak_host_bytes", &RankBytes::host_peak, "The most host memory of any moment")
      .def_property_readonly("peak_bytes", &RankBytes::total,
                             "The sum of the categories: the device's bytes")
      .def("__repr__", [](const RankBytes& r) {
        return "<RankBytes rank " + std::to_string(r.rank) + " (stage " + std::to_string(r.stage) +
               "): peak_bytes " + std::to_string(r.total()) + " (" + api::bytes_text(r.total()) +
               "), activations " + std::to_string(r.activations) + ">";
      });

  py::class_<PyCheckResult>(m, "CheckResult", "What pipevm.check found for one schedule.")
      .def_readonly("ok", &PyCheckResult::ok,
                    "True when every configuration checked is free of errors")
      .def_readonly("file", &PyCheckResult::file)
      .def_readonly("findings", &PyCheckResult::findings, "In source order")
      .def_readonly("checked", &PyCheckResult::checked, "Configurations checked")
      .def_readonly("failing", &PyCheckResult::failing, "Configurations with errors")
      .def_readonly("skipped", &PyCheckResult::skipped, "Configurations a `require` rules out")
      .def_readonly("suppressed", &PyCheckResult::suppressed,
                    "Diagnostics past the checker's limit per kind, counted only")
      .def_readonly("instructions", &PyCheckResult::instructions, "Instructions checked")
      .def_readonly("memory", &PyCheckResult::memory,
                    "Per stage, when exactly one configuration was checked; else empty")
      .def_readonly("per_rank", &PyCheckResult::per_rank,
                    "Per rank, bytes at the peak (one configuration only; else empty)")
      .def("__bool__", [](const PyCheckResult& r) { return r.ok; })
      .def("__repr__", [](const PyCheckResult& r) { return repr_of(r); });

  py::class_<RankFigures>(m, "RankFigures", "One rank's time in a simulation.")
      .def_readonly("busy", &RankFigures::busy, "Compute, data and optimizer time")
      .def_readonly("communication", &RankFigures::communication)
      .def_readonly("idle", &RankFigures::idle, "makespan - busy")
      .def_readonly("peak_activations", &RankFigures::peak_activations)
      .def("__repr__", [](const RankFigures& r) {
        return "<RankFigures busy " + format_time(r.busy) + ", communication " +
               format_time(r.communication) + ", idle " + format_time(r.idle) +
               ", peak_activations " + std::to_string(r.peak_activations) + ">";
      });

  py::class_<StageFigures>(m, "StageFigures", "One stage's time (mean over its replicas).")
      .def_readonly("stage", &StageFigures::stage)
      .def_readonly("busy", &StageFigures::busy)
      .def_readonly("idle", &StageFigures::idle)
      .def_readonly("peak_activations", &StageFigures::peak_activations)
      .def("__repr__", [](const StageFigures& s) {
        return "<StageFigures stage " + std::to_string(s.stage) + ": busy " + format_time(s.busy) +
               ", idle " + format_time(s.idle) + ", peak_activations " +
               std::to_string(s.peak_activations) + ">";
      });

  py::class_<PySimulation>(m, "Simulation", "A schedule's timeline under a cost model.")
      .def_property_readonly(
          "makespan", [](const PySimulation& s) { return s.run->simulation.timeline.makespan; })
      .def_property_readonly(
          "bubble_fraction",
          [](const PySimulation& s) { return s.run->simulation.bubble_fraction; },
          "Idle time over ranks x makespan")
      .def_property_readonly(
          "bubble_rate_zb", [](const PySimulation& s) { return s.run->simulation.bubble_rate_zb; },
          "The Zero Bubble paper's rate: (longest stage span - its work) / longest stage span")
      .def_property_readonly("ranks", [](const PySimulation& s) { return s.run->simulation.ranks; })
      .def_property_readonly("stages",
                             [](const PySimulation& s) { return s.run->simulation.stages; })
      .def_property_readonly(
          "per_rank", [](const PySimulation& s) { return s.run->bytes; },
          "Per rank, bytes at the peak")
      .def_property_readonly("configuration",
                             [](const PySimulation& s) { return s.run->program.config; })
      .def(
          "timeline",
          [](const PySimulation& s) {
            const Program& program = s.run->program;
            py::list events;
            for (int r = 0; r < program.ranks(); ++r) {
              for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
                   i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
                const InstructionTime& t = s.run->simulation.timeline.times[i];
                py::dict event;
                event["rank"] = r;
                event["instruction"] = disassemble(program.code[i]);
                event["issued"] = t.issued;
                event["started"] = t.started;
                event["ended"] = t.ended;
                event["busy"] = t.busy;
                events.append(event);
              }
            }
            return events;
          },
          "Every instruction's times, rank by rank: dicts of rank, instruction, issued, started, "
          "ended, busy")
      .def(
          "to_json",
          [](const PySimulation& s) {
            nlohmann::json j = to_json(s.run->simulation);
            j["per_rank"] = bytes_to_json(s.run->bytes);
            return json_to_python(j);
          },
          "The figures as `pipevm simulate --format json` prints them, as a dict")
      .def(
          "text",
          [](const PySimulation& s, int width) {
            return render_text(s.run->program, s.run->simulation, s.costs, width);
          },
          py::arg("width") = 100, "The terminal grid and figures `pipevm simulate` prints")
      .def(
          "write_svg",
          [](const PySimulation& s, const std::string& path) {
            std::string error;
            if (!api::write_timeline_svg(path, *s.run, error)) raise_os_error(error);
          },
          py::arg("path"), "Writes the timeline as an SVG picture")
      .def(
          "write_trace",
          [](const PySimulation& s, const std::string& path) {
            std::string error;
            if (!api::write_timeline_trace(path, *s.run, error)) raise_os_error(error);
          },
          py::arg("path"), "Writes a Chrome/Perfetto trace (JSON; costs read as microseconds)")
      .def("__repr__", [](const PySimulation& s) {
        std::uint64_t peak = 0;
        for (const RankBytes& r : s.run->bytes) peak = std::max(peak, r.total());
        return "<Simulation " + s.run->program.name + " " +
               api::configuration_text(s.run->program.config) + ": makespan " +
               format_time(s.run->simulation.timeline.makespan) + ", bubble " +
               format_time(s.run->simulation.bubble_fraction * 100) + "%, peak " +
               api::bytes_text(peak) + ">";
      });

  py::class_<PySynthesis>(m, "Synthesis",
                         "A schedule pipevm.synthesize chose (or pipevm.lower placed), checked "
                         "under both progress models, with its predicted figures.")
      .def_property_readonly(
          "text", [](const PySynthesis& s) { return s.header + s.result->text; },
          "The flat program with the header `pipevm synthesize` writes: itself a schedule")
      .def_property_readonly(
          "configuration", [](const PySynthesis& s) { return s.result->program.config; })
      .def_property_readonly(
          "placement",
          [](const PySynthesis& s) { return std::string(name(s.result->program.placement)); },
          "'looped' or 'v'")
      .def_property_readonly(
          "makespan", [](const PySynthesis& s) { return s.result->simulation.timeline.makespan; },
          "The simulated makespan of the placed program")
      .def_property_readonly(
          "order_makespan", [](const PySynthesis& s) { return s.result->order_makespan; },
          "The compute order's makespan (communication free)")
      .def_property_readonly(
          "bubble_fraction", [](const PySynthesis& s) { return s.result->simulation.bubble_fraction; },
          "Idle time over ranks x makespan, as Simulation.bubble_fraction")
      .def_property_readonly(
          "bubble_rate_zb", [](const PySynthesis& s) { return s.result->bubble_rate_zb; },
          "The Zero Bubble paper's bubble rate: (longest stage span - busiest stage's work) / "
          "longest stage span")
      .def_property_readonly(
          "peak_memory", [](const PySynthesis& s) { return s.result->peak_memory; },
          "Per stage, activations held at the peak in micro-batch activations M_B")
      .def_property_readonly(
          "peak_bytes", [](const PySynthesis& s) { return s.result->peak_bytes; },
          "Per stage, bytes at the peak as `check` counts them, when memory_limit was given "
          "in bytes (else empty)")
      .def_property_readonly(
          "cut", [](const PySynthesis& s) { return s.cut; },
          "With per-layer costs, the layers of each model piece ('0-2,3-4,5'), as the "
          "program's `cut` line records them; else ''")
      .def_property_readonly(
          "longest_span", [](const PySynthesis& s) { return s.result->longest_span; },
          "The longest stage span (first forward's start to last pass's end): what the search "
          "minimises")
      .def_property_readonly(
          "lower_bound", [](const PySynthesis& s) { return s.result->lower_bound; },
          "No order of these passes has a shorter longest span")
      .def_property_readonly(
          "lower_bound_term", [](const PySynthesis& s) { return s.result->bound_reason; },
          "The bound's term that gives lower_bound, e.g. 'stage work' or 'head and tail idle'")
      .def_property_readonly(
          "optimal", [](const PySynthesis& s) { return synthesis::is_optimal(*s.result); },
          "True when longest_span meets lower_bound: optimal under the model")
      .def_property_readonly(
          "memory_limit", [](const PySynthesis& s) { return s.result->memory_limit; },
          "The M_B limit searched at (0: none)")
      .def_property_readonly(
          "origin", [](const PySynthesis& s) { return s.result->origin; },
          "The seed the result grew from, e.g. 'ZB-H1' or 'schedules/zb-v.pipe': the best of "
          "every known schedule that fits the memory limit")
      .def_property_readonly(
          "seed_span", [](const PySynthesis& s) { return s.result->seed_span; },
          "That seed's longest span: longest_span is never above it")
      .def_property_readonly(
          "memory_policies",
          [](const PySynthesis& s) {
            std::vector<std::tuple<int, int, int>> counts;
            for (const auto& c : s.result->policy_counts) counts.emplace_back(c.kept, c.recomputed, c.offloaded);
            return counts;
          },
          "Per stage, (kept, recomputed, offloaded) units, when a memory policy other than "
          "'keep' was searched (a memory_limit given), else empty")
      .def_property_readonly(
          "device_peak_bytes", [](const PySynthesis& s) { return s.result->device_peak_bytes; },
          "Per stage, device bytes at the peak (check's peak_bytes) when a memory policy was "
          "searched, else empty")
      .def_property_readonly(
          "host_peak_bytes", [](const PySynthesis& s) { return s.result->host_peak_bytes; },
          "Per stage, the most bytes offloaded to host memory at once, when a memory policy "
          "was searched, else empty")
      .def_property_readonly(
          "evaluations", [](const PySynthesis& s) { return s.result->evaluations; },
          "Simulations run")
      .def_property_readonly(
          "improvements", [](const PySynthesis& s) { return s.result->improvements; },
          "Local-search moves kept")
      .def(
          "to_torch_csv",
          [](const PySynthesis& s) {
            std::string error;
            const auto table = pytorch::to_table(s.result->program, true, error);
            if (!table) throw ScheduleFailure(error);
            return pytorch::write_table(*table);
          },
          "The PyTorch table with comms (`pipevm synthesize --format torch-csv`), for _load_csv")
      .def("__repr__", [](const PySynthesis& s) {
        return "<Synthesis " + api::configuration_text(s.result->program.config) + ", makespan " +
               format_time(s.result->simulation.timeline.makespan) + ", from " +
               s.result->origin + ">";
      });

  py::class_<PyExpansion>(m, "Expansion", "A schedule expanded into each rank's stream.")
      .def_property_readonly("configuration",
                             [](const PyExpansion& e) { return e.program->config; })
      .def_property_readonly(
          "placement", [](const PyExpansion& e) { return std::string(name(e.program->placement)); },
          "'looped', 'v' or 'mirror'")
      .def_property_readonly(
          "cut", [](const PyExpansion& e) { return cut_text(e.program->cut); },
          "the program's `cut` declaration (\"0-2,3-4,5-6\"), or '' when it declares none")
      .def_property_readonly(
          "ranks",
          [](const PyExpansion& e) {
            std::vector<std::vector<std::string>> ranks;
            for (int r = 0; r < e.program->ranks(); ++r) {
              auto& stream = ranks.emplace_back();
              for (const Instruction& in : e.program->rank(r)) stream.push_back(disassemble(in));
            }
            return ranks;
          },
          "Each rank's instructions as text, e.g. 'Fwd mb 0'")
      .def_property_readonly(
          "text",
          [](const PyExpansion& e) { return api::expanded_text(*e.program, -1, e.from_table); },
          "The flat schedule `pipevm expand` prints: itself a schedule")
      .def(
          "torch_csv",
          [](const PyExpansion& e, bool with_comms) {
            std::string error;
            const auto table = pytorch::to_table(*e.program, with_comms, error);
            if (!table) throw ScheduleFailure(error);
            return pytorch::write_table(*table);
          },
          py::arg("with_comms") = false,
          "The PyTorch table (`pipevm expand --format torch-csv`), for _load_csv")
      .def("__repr__", [](const PyExpansion& e) {
        return "<Expansion " + e.program->name + " " + api::configuration_text(e.program->config) +
               ", placement " + std::string(name(e.program->placement)) + ", " +
               std::to_string(e.program->code.size()) + " instructions>";
      });
}

}  // namespace pipevm::python
