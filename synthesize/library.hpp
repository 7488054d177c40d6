// The shipped schedule library (schedules/*.pipe) as synthesis seeds. The
// texts are built into the library (embed_schedules.cmake writes them at
// build time), so `pipevm synthesize`, an installed pipevm and the Python
// module all start from the same files wherever they run, and a result
// does not depend on which directory a user stands in.
// Each file is compiled for the problem's configuration and kept when it
// expands (its `require`s hold), has the problem's placement and yields a
// compute order (compute_order.hpp); a fused backward is split into its
// two halves, or the halves fused, to match the problem. Not here: memory
// checks and timing (the caller's).
#pragma once

#include <string_view>
#include <vector>

#include "handcrafted.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

struct ShippedSchedule {
  std::string_view name;  // the file's stem: "zb-h1"
  std::string_view text;
};

// Every shipped schedule, by name.
const std::vector<ShippedSchedule>& shipped_schedules();

// The shipped schedules that fit the problem, named "schedules/NAME.pipe".
std::vector<NamedOrder> shipped_orders(const Problem& problem);

}  // namespace pipevm::synthesis
