// The costs a program is timed with, and what the user should know about
// them: the textbook default spread over a stage's chunks, how given costs
// apply to chunks, and the compute costs given costs leave unset. Shared by
// `pipevm simulate` and pipevm.simulate; composing the costs from files and
// flags is config/cost_inputs.hpp's.
#pragma once

#include <string>
#include <vector>

#include "costs.hpp"
#include "program.hpp"

namespace pipevm::api {

// The costs a program is timed with, from those composed from what the
// user gave (`given`: config::given_cost_keys). When nothing is given, the
// textbook default is a stage's work, F = 1 and B = 2 per micro-batch,
// whatever its chunks: each of `chunks` chunks costs 1/chunks of it, so
// that schedules with and without chunks compare fairly. Given costs are
// per chunk, as given.
Costs fitted_costs(const Program& program, const Costs& composed,
                   const std::vector<std::string>& given);
// How given costs apply to a program with chunks (empty for one chunk, or
// for the default): "the costs are per chunk: ...".
std::string chunk_cost_note(const Program& program, const std::vector<std::string>& given);

// A warning for each compute cost `program` runs that the costs the user
// gave leave unset (`given`: the keys named, config::given_cost_keys; empty:
// the textbook default, which sets them all), so that it takes no time:
// "the costs leave 'bwd-input' unset: BwdInput takes no time".
std::vector<std::string> unset_cost_warnings(const Program& program,
                                             const std::vector<std::string>& given);

}  // namespace pipevm::api
