// Synthesis under a memory limit when a stage may also recompute or offload
// a stash (`--memory-policy recompute|offload|any`). The candidates, each a
// checked program simulated by the request's costs (Offload and Reload
// timed by the model's bytes), within the limit in M_B (check's
// peak_activations):
//  - keep-only synthesis at the limit (synthesize.hpp's search);
//  - the shipped schedules/1f1b-recompute.pipe and 1f1b-offload.pipe, so
//    the result is never worse than them by construction;
//  - policy-aware orders: the keep-only search's order at a relaxed limit
//    (twice the limit, and none), and 1F1B's, each made to fit by
//    assign_policies (memory_policy.hpp: longest-lived stashes first)
//    under three rules where the policy allows them: recompute only,
//    offload only, and offload where the host link hides the copy (one
//    copy of the unit's stash within its stage's forward: PipeOffload's
//    k <= 1), recompute elsewhere. A Recompute and a Reload sit before the
//    backward's receive, so they run while the gradient travels (Mario).
// The best by the search's objective (longest stage span, then makespan)
// wins. Not here: the keep-only search itself, the header.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "synthesize.hpp"

namespace pipevm::synthesis {

using KeepSearch = std::function<std::optional<Result>(const Request&, std::string&)>;

// `keep_search` runs the keep-only search for a request (the caller's, so
// that time limits and progress stay its own). Requires a memory limit in
// M_B and a policy other than keep.
std::optional<Result> synthesize_with_policies(const Request& request, const KeepSearch& keep_search,
                                               std::string& error);

}  // namespace pipevm::synthesis
