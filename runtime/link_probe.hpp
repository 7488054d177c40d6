// What a message costs between neighbouring pipeline stages, measured at
// start-up by `pipevm run --profile`: a short ping-pong between each pair of
// adjacent stages of every pipeline, at a few message sizes (the smallest
// possible and the run's own activations), through the Comm like every other
// message. The caller turns the timings into latency and bandwidth
// (interpreter/simulate/cost_fit.hpp, fit_link) and sorts them by link class.
//
// Not here: collectives (the profile times AllReduce itself), pairs that are
// not pipeline neighbours (they exchange no message in any shipped
// schedule), and anything that runs while training: every probe message is
// received before the first step, so the probe's tag meets no program message.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "comm.hpp"

namespace pipevm::runtime {

// One size between one pair: the median one-way time of its round trips.
struct ProbeTiming {
  int rank = 0;  // the pair's lower stage (world rank), which timed it
  int peer = 0;  // the higher stage's world rank
  double bytes = 0;
  double one_way_us = 0;
};

// World-wide (every rank calls it, with the same arguments): ping-pongs of
// each size in `message_floats` between stages s and s+1 of every pipeline,
// `round_trips` timed after two untimed ones. Pairs (0,1), (2,3), ... run
// first, then (1,2), (3,4), ..., so no rank is in two pairs at once.
// Returns this rank's timings (those of pairs where it is the lower stage).
std::vector<ProbeTiming> probe_pipeline_links(Comm& comm, std::span<const std::size_t> message_floats,
                                              int round_trips);

}  // namespace pipevm::runtime
