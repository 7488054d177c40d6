// Costs fitted to what a real run measured: the median duration of each
// kind of instruction (per stage and per chunk where they differ), and the
// latency and bandwidth of a link class from timed messages. `pipevm run
// --profile` writes what these return (train/trace_recorder.hpp). They
// live beside the cost model because they invert the simulator's rules: a
// collective is counted from its last member's arrival, as the simulator
// starts it. Not here: reading and writing cost files (config/cost_files.hpp).
#pragma once

#include <optional>
#include <vector>

#include "costs.hpp"
#include "program.hpp"
#include "simulate.hpp"

namespace pipevm {

// One message size timed between two ranks (run --profile's start-up
// ping-pong, runtime/link_probe.hpp): bytes and one-way microseconds.
struct MessageTiming {
  double bytes = 0;
  double microseconds = 0;
};
// Latency (microseconds) and bandwidth (bytes per microsecond) of one link
// class, as the cost keys send and bandwidth (or cross-host-send and
// cross-host-bandwidth) take them.
struct LinkFit {
  double latency = 0;
  double bandwidth = 0;  // 0: no measurable time per byte (the keys' "infinite")
};
// The least-squares line time = latency + bytes / bandwidth through the
// timings: its slope gives the bandwidth, its intercept the latency (never
// below 0). Timings of one size only, or a slope <= 0 (noise larger than
// the bytes' time), give bandwidth 0 and the median time as latency.
LinkFit fit_link(const std::vector<MessageTiming>& timings);

// The fits of both link classes, each where a pair of its class was timed.
struct MeasuredLinks {
  std::optional<LinkFit> same_host;
  std::optional<LinkFit> across_hosts;
  std::optional<LinkFit> host_memory;  // copies to host memory and back (Offload, Reload)
};
// send and bandwidth from `same_host`, cross-host-send and
// cross-host-bandwidth from `across_hosts`, host-latency and host-bandwidth
// from `host_memory`; an unset class changes nothing.
void set_link_costs(Costs& costs, const MeasuredLinks& links);

// The median duration of each cost kind of compute, data and optimizer
// instruction and of AllReduce in a real run, in microseconds (a
// BwdAllReduce counts for neither: its reduction overlaps its compute; a
// collective counts once per occurrence, its shortest over a stage's
// replicas: the others' durations are mostly waiting for that one);
// with more than one stage, also per stage (`stages`); with more than one
// chunk per rank, also per chunk of each stage (`chunks` of every stage's
// entry, a chunk's kinds that never ran keeping the stage's medians; an
// overlapped pair counts for its first half's chunk). A fused Bwd timed
// apart (split_ns) also counts its halves for bwd-input and bwd-weight, so
// that a profile of a fused schedule gives all three compute costs.
// Message costs are left 0: a blocking receive's duration is mostly waiting
// for its sender, not transfer (run --profile measures them apart, fit_link).
Costs costs_from_measurements(const Program& program,
                              const std::vector<MeasuredInstruction>& measured);

}  // namespace pipevm
