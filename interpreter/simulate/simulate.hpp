// The simulator: a Program's timeline under a cost model.
//
// Semantics are the checker's, with clocks, on the same link (link.hpp).
// Each rank runs its stream in order; a compute, data or optimizer
// instruction starts when its rank is free and lasts Costs::duration of its
// cost kind (isa.def). A message takes LinkCosts::message_time (links.hpp:
// the link class between the two ranks' hosts, the message's bytes). An
// eager one (Costs::transfer, LinkCosts::eager) leaves when its send is
// posted, and the send completes then; a rendezvous one starts when both
// sides have posted (a blocking Send returns only when its receive is
// there). Blocking operations return when their part is done, non-blocking
// ones post a request that its wait completes. An Offload or Reload posts
// a copy on its rank's host link, which moves one copy at a time in posted
// order beside compute (LinkCosts::host_copy_time); the wait that completes
// it lasts until the copy ends, so a late Reload stalls what follows. In posted order
// (SimulateOptions) each rank's point-to-point operations start one at a
// time in the order posted, as NCCL runs them. A collective slot begins when the last member of its
// group arrives and lasts LinkCosts::reduction (a ring over the group's links).
//
// A program that does not link, or that deadlocks, is not timed: the reasons
// go to the diagnostics, pointing at `pipevm check`, which explains them.
// Rendering (grid, JSON, SVG, trace) lives in the sibling files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "costs.hpp"
#include "diagnostics.hpp"
#include "link.hpp"
#include "links.hpp"
#include "program.hpp"

namespace pipevm {

// When one instruction ran. [issued, started) is a wait for partners (a
// blocking receive waiting for its sender); [started, started + busy) is
// compute; the rest, up to `ended`, is communication (a transfer, a
// reduction). A compute instruction has issued == started and ends at
// started + busy; a message has busy 0; a BwdAllReduce computes first and then
// waits for its reduction.
struct InstructionTime {
  double issued = 0;   // the rank reached the instruction
  double started = 0;  // its work (compute, transfer, reduction) began
  double ended = 0;    // the rank moved on
  double busy = 0;     // how much of [started, ended) is compute, data or optimizer work
};

// A message from the instruction that sent it to the one that received it
// (indexes into Program::code).
struct MessageFlow {
  std::size_t send = 0;
  std::size_t recv = 0;
};

// Posted order: a point-to-point operation (`held`) posted at `begin` that
// could start only at `end`, when the one ahead of it in its rank's stream
// (`blocker`, usually a receive posted early) was done.
struct Hold {
  std::size_t blocker = 0;
  std::size_t held = 0;
  double begin = 0;
  double end = 0;
};

// A copy between the device and host memory (an Offload or Reload) on its
// rank's host link, which moves one copy at a time beside compute.
struct HostCopy {
  std::size_t instruction = 0;  // index into Program::code
  double begin = 0;
  double end = 0;
};

// Times of every instruction and the messages between them: what a trace or
// a picture shows, from a simulation or from a real run.
struct Timeline {
  std::vector<InstructionTime> times;  // one per Program::code entry
  std::vector<MessageFlow> flows;
  std::vector<Hold> holds;  // posted order only, in the order found
  std::vector<HostCopy> copies;  // simulated only, in posting order
  double makespan = 0;
};

// What kind of work a rank does in an instruction, for pictures and figures.
enum class Activity : std::uint8_t {
  idle,             // waiting for a partner, or an instruction that costs nothing
  forward,          // Fwd
  backward,         // Bwd, BwdAllReduce's compute
  backward_input,   // BwdInput
  backward_weight,  // BwdWeight
  overlapped,       // FwdBwd: a forward and a backward as one step
  recompute,        // Recompute: a forward run again from its checkpoint
  data,             // LoadInput, LoadTarget
  optimizer,        // ZeroGrad, OptimizerStep
  communication,    // a message in flight or a reduction
  host_copy,        // waiting for a copy to or from host memory (a late Reload stalls here)
  held,             // posted order: the rank's stream waits behind an early operation (Hold)
};
Activity activity_of(Opcode op);
// One letter per activity, as the terminal grid draws it: . F B I W X R L O - H #
char letter_of(Activity activity);
std::string_view name(Activity activity);
// Whether the activity counts as busy (compute, data, optimizer).
constexpr bool is_busy(Activity a) {
  return a != Activity::idle && a != Activity::communication && a != Activity::host_copy &&
         a != Activity::held;
}
// Waiting for something that moves data (a message, a reduction, a host copy).
constexpr bool is_waiting(Activity a) {
  return a == Activity::communication || a == Activity::host_copy;
}

// A pass: a forward or backward (or half, or overlapped pair) of a model
// chunk, what the papers' figures count.
constexpr bool is_pass(Activity a) {
  return a == Activity::forward || a == Activity::backward || a == Activity::backward_input ||
         a == Activity::backward_weight || a == Activity::overlapped || a == Activity::recompute;
}

struct RankFigures {
  double busy = 0;           // compute, data and optimizer time
  double communication = 0;  // time in transfers and reductions
  double idle = 0;           // makespan - busy
  int peak_activations = 0;  // activations stashed at once for a later backward
  double pass_busy = 0;      // the compute time of its passes
  double first_start = 0;    // its first pass's start (0 without passes)
  double last_end = 0;       // its last pass's compute end
};

struct StageFigures {
  int stage = 0;
  double busy = 0;  // mean over the stage's data-parallel replicas
  double idle = 0;
  int peak_activations = 0;  // maximum over the replicas
  double first_start = 0;    // earliest over the replicas
  double last_end = 0;       // latest over the replicas
};

struct Simulation {
  Timeline timeline;
  std::vector<RankFigures> ranks;
  std::vector<StageFigures> stages;
  double bubble_fraction = 0;  // sum of idle / (ranks * makespan); 0 for an empty program
  // The Zero Bubble paper's bubble rate (Qi et al., ICLR 2024, Table 5):
  // (cost - m(T_F + T_B + T_W)) / cost, cost the longest rank's time from
  // its first pass's start to its last pass's end; m(T_F + T_B + T_W) is
  // that rank's pass compute time, which is the paper's figure when every
  // stage costs the same. 0 without passes.
  double bubble_rate_zb = 0;
};

// How the simulator orders each rank's point-to-point operations.
struct SimulateOptions {
  // false: each send and receive progresses on its own (MPI). true: a
  // rank's operations (but messages to itself) start one at a time in the
  // order posted, each when the one before is done (NCCL's stream), as
  // `pipevm check --p2p-order posted` assumes (CheckOptions).
  bool p2p_posted_order = false;
};

// Null when the program cannot run to its end (a deadlock under its
// transfers and order, an unmatched message, a peer outside the pipeline,
// collectives that do not pair up): the reasons go to `diagnostics`.
// `network` places the ranks on hosts and gives the model's sizes; by
// default all ranks share one host and messages weigh act-bytes and
// grad-bytes.
std::optional<Simulation> simulate(const Program& program, const Costs& costs,
                                   Diagnostics& diagnostics, const Network& network = {},
                                   const SimulateOptions& options = {});
// The same, for a program already linked.
std::optional<Simulation> simulate(const Program& program, const Link& link, const Costs& costs,
                                   Diagnostics& diagnostics, const Network& network = {},
                                   const SimulateOptions& options = {});

// Peak activations of each rank, from the order of its stream alone: a Fwd
// (or Recompute) stashes an activation until the Bwd, BwdWeight or
// BwdAllReduce of the same chunk and micro-batch, or to the end of the step
// when none comes, less the time from the wait that completes an Offload of
// it to its Reload (as the checker counts them: a forward-only program's
// peak is its forwards; a FwdCheckpoint stashes nothing).
std::vector<int> peak_activations(const Program& program);

// For each non-blocking request (ISend, IRecv), the Wait or WaitAll that
// completes it, by the link's rule; SIZE_MAX where none does and for every
// other instruction.
std::vector<std::size_t> completing_instructions(const Program& program);

// Figures (busy, idle, per stage, bubble) of a timeline, simulated or measured.
void summarize(const Program& program, Simulation& simulation);

// Every send with its receive, as the link pairs them. Sends or receives
// without a partner are left out (`unmatched` lists them).
std::vector<MessageFlow> pair_messages(const Program& program,
                                       std::vector<std::size_t>* unmatched = nullptr);

// One instruction a rank really executed: the VM's observer reports these.
struct MeasuredInstruction {
  int rank = 0;
  std::size_t index = 0;  // position in the rank's stream (Program::rank(rank))
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t split_ns = -1;  // a fused Bwd: when its input half ended; -1: not timed apart
};

// The timeline of a real run: instruction `index` of `rank` ran from start_ns
// to end_ns (nanoseconds from any common origin; the earliest becomes 0).
// Times become microseconds; flows pair as in pair_messages.
Timeline timeline_from_measurements(const Program& program,
                                    const std::vector<MeasuredInstruction>& measured);

// --- Reports (simulate_report.cpp) ------------------------------------------

// A stretch of time a rank spends on one activity of one instruction.
struct Segment {
  double begin = 0;
  double end = 0;
  Activity activity = Activity::idle;
  std::size_t instruction = 0;  // index into Program::code
};
// Per rank, the holds (indexes into Timeline::holds) its row marks: those
// whose blocker is on the rank (its stream waits) and those that hold a
// send to it (it waits for that message).
std::vector<std::vector<std::size_t>> holds_by_rank(const Program& program,
                                                    const Timeline& timeline);
// Rank r's compute and communication stretches in time order; idle is the gaps.
std::vector<Segment> segments_of(const Program& program, const Timeline& timeline, int rank);
// The smallest of 1, 2, 5 x 10^k that is at least `value` (> 0).
double nice_step(double value);
// A time for people: up to 4 significant digits, no trailing zeros; whole
// numbers from 10,000 to 10^15.
std::string format_time(double value);

// The rank x time grid: one character per time slot, a letter per activity
// (letter_of; lowercase for odd chunks), the micro-batch's digits after the
// letter where the block is wide enough, '.' idle. A slot is the smallest of
// 1, 2, 5 x 10^k time units that fits the makespan in `width` columns.
std::string render_grid(const Program& program, const Timeline& timeline, int width = 100);
// The grid with a header, a time axis, a legend, the makespan, the bubble and
// a table of figures per stage: what `pipevm simulate` prints by default.
std::string render_text(const Program& program, const Simulation& simulation, const Costs& costs,
                        int width = 100);
// {"makespan", "bubble_fraction", "per_stage": [{"stage", "busy", "idle",
// "peak_activations"}]}: `pipevm simulate --format json`.
nlohmann::json to_json(const Simulation& simulation);

}  // namespace pipevm
