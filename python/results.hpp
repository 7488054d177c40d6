// What the Python module hands back, as C++ values pybind11 converts: a
// check's result and findings, a simulation, an expansion, a synthesized
// schedule; and the one
// exception type, ScheduleError, with the position of what is wrong. The
// conversion from pipevm::api's values is here; the functions are
// module.cpp's. Not here: any checking or simulating of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "pipevm_api.hpp"
#include "synthesize.hpp"

namespace pipevm::python {

// Bad input: becomes pipevm.ScheduleError with these as attributes.
struct ScheduleFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
  std::optional<std::string> file, code, action;
  std::string details;  // the whole text (notes, a cycle edge by edge); what() is its first line
  std::optional<int> line, column, rank, step;
};

struct PyNote {
  std::string message;
  std::optional<std::string> file;
  std::optional<int> line, column, rank;
};

struct PyFinding {
  std::string code, class_name, name, severity, message;
  std::string text;  // file:line:col: error: message [PV2001], with what it stands for
  std::optional<std::string> file;
  std::optional<int> line, column, rank;
  std::vector<int> ranks;
  std::vector<PyNote> notes;
  std::optional<Config> configuration;
  std::size_t configurations = 0, folded = 0;
  std::optional<int> step;            // a table's cell: its index in the rank's row
  std::optional<std::string> action;  // and its text
};

struct PyCheckResult {
  bool ok = false;
  std::string file;
  std::vector<PyFinding> findings;
  std::size_t checked = 0, failing = 0, skipped = 0, suppressed = 0;
  std::uint64_t instructions = 0;
  std::vector<StageMemory> memory;  // when exactly one configuration was checked
  std::vector<RankBytes> per_rank;  // the same
};

// A simulation and what it needs to draw itself.
struct PySimulation {
  std::shared_ptr<const api::SimulateRun> run;
  Costs costs;
};

struct PyExpansion {
  std::shared_ptr<const Program> program;
  bool from_table = false;
};

// A synthesized (or lowered) schedule and the header it is written with.
struct PySynthesis {
  std::shared_ptr<const synthesis::Result> result;
  std::string header;
  std::string cut;  // with per-layer costs: the cut recorded ("0-2,3-4"); else empty
};

// The failure for a diagnostic; `table`: positions name a rank and step.
ScheduleFailure failure_of(const Diagnostic& diagnostic, bool table);
// Raises ScheduleError for a report that checked nothing because its input
// is not a schedule (unreadable, unparseable, no configuration); else the
// result. `table`: findings name the rank and step of their cell.
PyCheckResult result_of(const api::FileReport& report, bool table);

// Raises OSError with `message` (a file that cannot be written).
[[noreturn]] void raise_os_error(const std::string& message);

// Declares the classes and ScheduleError on `module`.
void bind_results(pybind11::module_& module);

}  // namespace pipevm::python
