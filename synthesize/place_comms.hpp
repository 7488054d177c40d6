// Communication placed around a compute order: the Program every stage
// runs. Each pass takes its input where it comes from (LoadInput at the
// lane's first position; nothing at the turn of a V, where the stage made
// it itself; else a Wait for an early IRecv just before the pass) and
// hands its output on (LoadTarget at the lane's end; nothing at the turn;
// else an ISend right after the pass, completed by the step's final WaitAll).
//
// Two forms differ only in where the IRecvs are posted:
//  - for timing, every receive at the start of the step, so that a
//    transfer starts the moment its sender sends (the simulator then times
//    the compute order as the Zero Bubble paper does: a message arrives its
//    transfer time after its producer ends);
//  - placed, each rank's sends and receives in one global order, the time
//    their producers end in a simulation of the timing form (ties by stage
//    and pass): a receive is posted right after the last send of its rank
//    that comes before it. Every rank's point-to-point operations then
//    follow one total order, so running them one at a time in posted order
//    (NCCL) cannot deadlock, and each receive is posted before its message
//    leaves, so no transfer waits for it.
// Not here: choosing the order (heuristic.hpp), checking and timing the
// result (synthesize.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "compute_order.hpp"
#include "simulate.hpp"
#include "source.hpp"

namespace pipevm::synthesis {

struct BuiltProgram {
  Program program;
  // pass_instruction[s][j]: the index in program.code of stage s's pass j.
  std::vector<std::vector<std::size_t>> pass_instruction;
};

// The timing form.
BuiltProgram program_for_timing(const ComputeOrder& order,
                                const std::shared_ptr<const SourceFile>& file);

// The placed form; pass_end[s][j]: when stage s's pass j ends in a
// simulation of the timing form.
BuiltProgram program_with_placed_comms(const ComputeOrder& order,
                                       const std::vector<std::vector<double>>& pass_end,
                                       const std::shared_ptr<const SourceFile>& file);

// The end time of each pass of a built program's simulated timeline.
std::vector<std::vector<double>> pass_end_times(const BuiltProgram& built,
                                                const Timeline& timeline);

}  // namespace pipevm::synthesis
