// Timelines as Chrome trace event files (ui.perfetto.dev, chrome://tracing):
// one thread per rank, a complete event ("ph": "X") per instruction, and a
// flow arrow from each send to the instruction where its data arrives (the
// receive, or the Wait/WaitAll that completes a non-blocking receive): the
// arrow leaves the send's slice ("bind_id", "flow_out") and enters a
// zero-length slice of its own ("act 3 from rank 0", "flow_in") on the
// arriving rank, at the later of the send and the start of the arriving
// instruction. Times are microseconds, rounded to whole nanoseconds:
// simulated costs are read as microseconds, and measured runs
// (timeline_from_measurements) are converted to them.
#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "program.hpp"
#include "simulate.hpp"

namespace pipevm {

// {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
nlohmann::json chrome_trace(const Program& program, const Timeline& timeline);
void write_chrome_trace(std::ostream& out, const Program& program, const Timeline& timeline);
// False (with `error` set) when the file cannot be written.
bool write_chrome_trace(const std::string& path, const Program& program, const Timeline& timeline,
                        std::string& error);

}  // namespace pipevm
