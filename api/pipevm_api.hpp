// pipevm as a library: what `check`, `simulate` and `expand` compute, as
// functions that return values and never print or exit. The command line
// (cli/) parses arguments and prints what these return; the Python module
// (python/) converts it to Python objects. Neither holds logic the other
// lacks. Not here: running a schedule on MPI ranks (interpreter/vm/vm.hpp,
// train/run.hpp), which needs mpiexec.
//
//   check       check_run.hpp       a schedule for its configurations -> FileReport
//   findings    check_findings.hpp  diagnostics folded into findings
//   load        schedule_input.hpp  a schedule or table -> Program
//   simulate    simulate_run.hpp    a Program under costs -> figures, timeline, SVG, trace
//   expand      expand_text.hpp     a Program -> flat schedule text, host crossings
//   tables      pipeline_order.hpp  PyTorch's pipeline_order -> table; lowering
//   costs       trace_costs.hpp     a torch.profiler trace -> per-stage cost medians
#pragma once

#include "check_findings.hpp"
#include "check_run.hpp"
#include "expand_text.hpp"
#include "pipeline_order.hpp"
#include "schedule_input.hpp"
#include "simulate_compare.hpp"
#include "simulate_costs.hpp"
#include "simulate_run.hpp"
#include "trace_costs.hpp"
