// A small model of how Perfetto's legacy JSON importer (trace_processor)
// turns slices and flow events into its slice and flow tables, so that tests
// can see which arrows ui.perfetto.dev would draw, between which slices.
//
// The rules, from Perfetto's sources (src/trace_processor/: sorter,
// importers/json/json_trace_parser_impl.cc, importers/common/slice_tracker.cc
// and flow_tracker.cc):
// - Times: "ts" is read from its text by shifting the decimal point
//   (microseconds to whole nanoseconds, extra digits dropped); a complete
//   event's "dur" is read as a double times 1000, truncated.
// - Order: events are processed by timestamp; at equal timestamps 'E' first,
//   then complete events ('X') longest first, then everything else
//   (zero-length slices, instants, flow events) in file order.
// - Slices: each thread has a stack of open slices. A new slice first pops
//   the slices that ended before it starts, or exactly when it starts unless
//   both are zero-length (zero-length slices stack on each other); a slice
//   that would overhang the slice it starts in is dropped. Slices are popped
//   only when a later slice starts, so a flow event binds to the top of the
//   stack: the innermost slice begun last, even if it has already ended.
// - Flows v1 ('s', 't', 'f'): one flow per (id, cat, name). 's' and 't' bind
//   to the top slice; 'f' with "bp": "e" too, without it to the next slice
//   that begins on its thread. An end with no start yet is dropped.
// - Flows v2 ("bind_id" with "flow_out" / "flow_in" on a slice event): bind
//   to the top slice right after that event (the event's own slice unless it
//   was dropped).
// - An arrow goes from the earlier-starting of its two slices to the later.
// Left out: 'B'/'E' slices, async events, counters (pipevm writes none), and
// Perfetto's handling of malformed input beyond the drops above.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pipevm::testing::perfetto {

struct Slice {
  std::size_t event = 0;  // index into traceEvents
  int pid = 0;
  int tid = 0;
  std::int64_t ts = 0;   // nanoseconds
  std::int64_t dur = 0;  // nanoseconds
  std::string name;
  int depth = 0;
  std::optional<std::size_t> parent;  // index into Import::slices
};

// An arrow from slice `out` to slice `in` (indexes into Import::slices).
struct Flow {
  std::size_t out = 0;
  std::size_t in = 0;
};

// What the importer counted instead of drawing (Perfetto's stats table).
struct Stats {
  int flow_no_enclosing_slice = 0;
  int flow_end_without_start = 0;
  int flow_step_without_start = 0;
  int flow_duplicate_id = 0;
  int slice_dropped_overlapping = 0;
};

struct Import {
  std::vector<Slice> slices;
  std::vector<Flow> flows;
  Stats stats;
};

Import import_json_trace(const nlohmann::json& trace);

// A JSON number of microseconds as the sorter reads "ts": whole nanoseconds,
// the decimal point shifted in the number's text.
std::int64_t timestamp_ns(const nlohmann::json& microseconds);
// A JSON number of microseconds as the parser reads "dur": the double times
// 1000, truncated.
std::int64_t duration_ns(const nlohmann::json& microseconds);

}  // namespace pipevm::testing::perfetto
