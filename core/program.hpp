// A Program: the result of expanding a schedule for one configuration. One
// flat instruction stream per rank, all in one array; every instruction
// points at the source range of the statement that produced it. The checker,
// the simulator and the VM all walk this and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "isa.hpp"
#include "model_shape.hpp"
#include "source.hpp"

namespace pipevm {

// How a rank's model chunks are placed along the pipeline (DESIGN.md).
enum class Placement : std::uint8_t { looped, v, mirror };
std::string_view name(Placement placement);

// The parameters a schedule is expanded for.
struct Config {
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;
  int dp = 1;
  int ranks() const { return stages * dp; }
};

// World rank numbering: the ranks of one pipeline are consecutive.
constexpr int rank_of(const Config& c, int dp_rank, int stage) { return dp_rank * c.stages + stage; }
constexpr int stage_of(const Config& c, int rank) { return rank % c.stages; }
constexpr int dp_rank_of(const Config& c, int rank) { return rank / c.stages; }

// Where a model chunk sits in the pipeline. Micro-batches travel along a lane
// through positions 0, 1, …, lane_length - 1 (forward) and back (backward).
// looped: one lane, position chunk * stages + stage (Megatron interleaved).
// v:      one lane of 2 * stages positions; chunk 0 at position stage, chunk 1
//         at 2 * stages - 1 - stage (ZB-V, DualPipeV).
// mirror: two lanes of `stages` positions (DualPipe): chunk 0 is lane 0 at
//         position stage; chunk 1 is lane 1 at position stages - 1 - stage.
//         Position p of either lane runs model piece p.
struct PipelinePosition {
  int lane = 0;
  int position = 0;
};
PipelinePosition position_of(Placement placement, const Config& config, int stage, int chunk);
// The stage holding (lane, position); -1 when the position is outside the lane.
int stage_at(Placement placement, const Config& config, PipelinePosition where);
int lane_length(Placement placement, const Config& config);
int lane_count(Placement placement);
// How many pieces the model is cut into: looped stages*chunks, v 2*stages, mirror stages.
int model_pieces(Placement placement, const Config& config);
// The model piece (contiguous run of layers) that position p runs.
inline int piece_at(PipelinePosition where) { return where.position; }

// What a point-to-point message is, independent of who names it: its kind,
// micro-batch, lane and the position that produced it. A send and a receive
// pair exactly when their keys and their ranks agree; MPI tags encode it.
struct MessageKey {
  MessageKind kind = MessageKind::none;
  int lane = 0;
  int producer = 0;  // position of the piece that computed the value
  std::uint32_t micro_batch = 0;
  friend bool operator==(const MessageKey&, const MessageKey&) = default;
};
// The key of a Send/ISend/Recv/IRecv executed by `stage`. For a receive the
// producer is the neighbouring position in the direction the data comes from.
MessageKey message_key(Placement placement, const Config& config, int stage,
                       const Instruction& instruction);
// The stage a message goes to (send) or comes from (receive) when the source
// names no peer: the neighbour along the lane; -1 when there is none.
int default_peer(Placement placement, const Config& config, int stage, MessageKind kind,
                 int chunk, bool sending);
// An instruction of `stage` on one micro-batch and chunk, its peer (for a
// point-to-point row) the default one; source index 0, to be set by the
// builder that records where it came from.
Instruction cell_instruction(Placement placement, const Config& config, int stage, Opcode op,
                             int micro_batch, int chunk, MessageKind kind = MessageKind::none,
                             WaitDirection direction = WaitDirection::none);

// The chunk of `stage` that makes what `chunk` takes from its lane
// neighbour, when that neighbour sits on `stage` itself (the turn of a V
// placement: chunk 0's output is chunk 1's input there, chunk 1's input
// gradient chunk 0's output gradient): for kind act the chunk before it
// along the lane, for grad the chunk after it. Such a value needs no
// message: the consumer takes it on the rank (docs/language.md, "The
// turn"). -1 when the neighbour is on another stage, or there is none.
int local_source_chunk(Placement placement, const Config& config, int stage, int chunk,
                       MessageKind kind);

// Whether a Send/Recv's peer is a stage the message can travel to: another
// stage of the pipeline, or this very stage where the lane turns back on
// itself (the turn of a V placement).
bool peer_in_pipeline(Placement placement, const Config& config, int stage,
                      const Instruction& instruction);

// Who talks together. A group instance is one set of ranks of `group`
// (the dp group of stage 3, the pipeline of dp rank 1); every rank belongs
// to at most one instance of each group. The gossip group is not covered:
// its instances depend on the topology and the step (topology.hpp).
// The instance world rank `rank` belongs to; -1 for Group::none.
int group_instance(Group group, Placement placement, const Config& config, int rank);
// How many instances the configuration has.
int group_instance_count(Group group, Placement placement, const Config& config);
// The world ranks of instance `instance`, first member first (the one a
// group's other members are compared with).
void group_members(Group group, Placement placement, const Config& config, int instance,
                   std::vector<int>& members);

// The groups whose members hold copies of a rank's parameters, over which
// the gradients must be summed before an optimizer step: dp when there are
// replicas; mirror under placement mirror (every piece is held twice).
GroupSet groups_holding_copies(Placement placement, const Config& config);

struct Topology;  // topology.hpp

struct Program {
  std::shared_ptr<const SourceFile> file;  // the schedule's text
  std::string name;                        // from `schedule NAME`, else the file stem
  Placement placement = Placement::looped;
  Config config;
  std::vector<SourceRange> sources;       // Instruction::source indexes this
  std::vector<Instruction> code;          // every rank's stream, rank after rank
  std::vector<std::size_t> rank_begin;    // rank r's stream is code[rank_begin[r], rank_begin[r+1])
  // Gossip: the topology its exchanges follow (null when the program names
  // none), and the request-posting opcodes whose requests the step carries
  // over its boundary (`carry OP`): one is pending when the step begins and
  // one when it ends. `steps` > 1 when the checker laid several steps out
  // one after the other (unroll_steps in interpreter/check/check.hpp).
  std::shared_ptr<const Topology> topology;
  std::vector<Opcode> carried;
  int steps = 1;
  // The model the program was expanded for: its layer widths and the layers
  // of each model piece (what `layer_begin`, `layer_end` and `layer L`
  // operands refer to). The split is empty when the model has fewer layers
  // than the program has pieces.
  std::vector<int> layer_widths;
  std::vector<LayerRange> layer_split;
  // The program's `cut` declaration: the layers of each model piece, in
  // model order, one per piece (empty when it declares none). It is the
  // split above when it covers the model's layers and no explicit split
  // overrides it; per-layer costs time its pieces (simulate) and `run`
  // trains it, refusing one that does not fit its model.
  std::vector<LayerRange> cut;

  int ranks() const { return static_cast<int>(rank_begin.empty() ? 0 : rank_begin.size() - 1); }
  std::span<const Instruction> rank(int r) const {
    const auto b = rank_begin[static_cast<std::size_t>(r)];
    const auto e = rank_begin[static_cast<std::size_t>(r) + 1];
    return {code.data() + b, e - b};
  }
  const SourceRange& source_of(const Instruction& i) const { return sources[i.source()]; }
};

// How a rank's stream is written as a flat program: `stage S {`, and where
// the stage has replicas, `if dp_rank == D {` inside it, so that each
// replica reads back as its own stream (replicas may differ: gossip).
struct RankBlock {
  std::string open;    // the opening lines, each ending in a newline
  std::string indent;  // before each instruction
  std::string close;   // the closing lines
};
RankBlock rank_block(const Config& config, int rank);

// The model's layers that chunk `chunk` of `stage` holds; empty ({0, 0})
// when the program has no split.
LayerRange chunk_layers(const Program& program, int stage, int chunk);
// The program's `cut` when it covers exactly the layers of the model of
// `layer_widths` (input first); else empty.
std::vector<LayerRange> cut_for_model(const Program& program, const std::vector<int>& layer_widths);
// The layers a compute or piece instruction of `stage` works on: its
// `layer L` alone, else its chunk's.
LayerRange instruction_layers(const Program& program, int stage, const Instruction& in);
// How many chunks each rank holds under a placement (v and mirror: two).
int chunks_per_rank(Placement placement, const Config& config);

// A rank's stream as a flat program: "stage S {\n  ...\n}\n" (rank_block).
std::string disassemble_rank(const Program& program, int rank);

}  // namespace pipevm
