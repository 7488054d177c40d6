// Placement, positions along the pipeline, message keys and peers: what a
// Program means independently of any interpreter. Also the flat listing of
// one rank's stream.
#include "program.hpp"

#include <algorithm>

namespace pipevm {

std::string_view name(Placement placement) {
  switch (placement) {
    case Placement::looped: return "looped";
    case Placement::v: return "v";
    case Placement::mirror: return "mirror";
  }
  return "?";
}

PipelinePosition position_of(Placement placement, const Config& config, int stage, int chunk) {
  const int p = config.stages;
  switch (placement) {
    case Placement::looped: return {0, chunk * p + stage};
    case Placement::v: return {0, chunk == 0 ? stage : 2 * p - 1 - stage};
    case Placement::mirror: return {chunk, chunk == 0 ? stage : p - 1 - stage};
  }
  return {};
}

int lane_length(Placement placement, const Config& config) {
  switch (placement) {
    case Placement::looped: return config.stages * config.chunks;
    case Placement::v: return 2 * config.stages;
    case Placement::mirror: return config.stages;
  }
  return 0;
}

int lane_count(Placement placement) { return placement == Placement::mirror ? 2 : 1; }

int model_pieces(Placement placement, const Config& config) {
  return lane_length(placement, config);
}

int stage_at(Placement placement, const Config& config, PipelinePosition where) {
  const int p = config.stages;
  if (where.position < 0 || where.position >= lane_length(placement, config)) return -1;
  switch (placement) {
    case Placement::looped: return where.position % p;
    case Placement::v: return where.position < p ? where.position : 2 * p - 1 - where.position;
    case Placement::mirror: return where.lane == 0 ? where.position : p - 1 - where.position;
  }
  return -1;
}

MessageKey message_key(Placement placement, const Config& config, int stage,
                       const Instruction& in) {
  const PipelinePosition here = position_of(placement, config, stage, in.chunk);
  MessageKey key{in.kind, here.lane, here.position, in.micro_batch};
  if (is_recv(in.op)) key.producer += in.kind == MessageKind::act ? -1 : 1;
  return key;
}

int default_peer(Placement placement, const Config& config, int stage, MessageKind kind,
                 int chunk, bool sending) {
  PipelinePosition where = position_of(placement, config, stage, chunk);
  // Activations flow to higher positions, gradients to lower ones.
  const int downstream = kind == MessageKind::act ? 1 : -1;
  where.position += sending ? downstream : -downstream;
  return stage_at(placement, config, where);
}

Instruction cell_instruction(Placement placement, const Config& config, int stage, Opcode op,
                             int micro_batch, int chunk, MessageKind kind,
                             WaitDirection direction) {
  Instruction in;
  in.op = op;
  in.kind = kind;
  in.direction = direction;
  in.micro_batch = static_cast<std::uint32_t>(micro_batch);
  in.chunk = static_cast<std::uint16_t>(chunk);
  if (operand_parts(op).peer) {
    in.peer = static_cast<std::int16_t>(
        default_peer(placement, config, stage, kind, chunk, is_send(op)));
  }
  return in;
}

int local_source_chunk(Placement placement, const Config& config, int stage, int chunk,
                       MessageKind kind) {
  if (default_peer(placement, config, stage, kind, chunk, false) != stage) return -1;
  PipelinePosition from = position_of(placement, config, stage, chunk);
  from.position += kind == MessageKind::act ? -1 : 1;
  for (int c = 0; c < chunks_per_rank(placement, config); ++c) {
    const PipelinePosition at = position_of(placement, config, stage, c);
    if (at.lane == from.lane && at.position == from.position) return c;
  }
  return -1;
}

bool peer_in_pipeline(Placement placement, const Config& config, int stage,
                      const Instruction& in) {
  if (in.peer == stage) {
    return default_peer(placement, config, stage, in.kind, in.chunk, is_send(in.op)) == stage;
  }
  return in.peer >= 0 && in.peer < config.stages;
}

namespace {
// The lower of the two stages that hold stage s's pieces under mirror placement.
int mirror_pair(const Config& config, int stage) { return std::min(stage, config.stages - 1 - stage); }
}  // namespace

int group_instance(Group group, Placement placement, const Config& config, int rank) {
  switch (group) {
    case Group::none:
    case Group::gossip: return -1;  // depends on the step's round: gossip_instance
    case Group::pipeline: return dp_rank_of(config, rank);
    case Group::dp: return stage_of(config, rank);
    case Group::mirror:
      if (placement != Placement::mirror) return rank;
      return dp_rank_of(config, rank) * ((config.stages + 1) / 2) +
             mirror_pair(config, stage_of(config, rank));
    case Group::world: return 0;
  }
  return -1;
}

int group_instance_count(Group group, Placement placement, const Config& config) {
  switch (group) {
    case Group::none:
    case Group::gossip: return 0;  // depends on the topology: gossip_instance_count
    case Group::pipeline: return config.dp;
    case Group::dp: return config.stages;
    case Group::mirror:
      return placement == Placement::mirror ? config.dp * ((config.stages + 1) / 2)
                                            : config.ranks();
    case Group::world: return 1;
  }
  return 0;
}

void group_members(Group group, Placement placement, const Config& config, int instance,
                   std::vector<int>& members) {
  members.clear();
  switch (group) {
    case Group::none:
    case Group::gossip: return;  // depends on the topology: gossip_members
    case Group::pipeline:
      for (int s = 0; s < config.stages; ++s) members.push_back(rank_of(config, instance, s));
      return;
    case Group::dp:
      for (int d = 0; d < config.dp; ++d) members.push_back(rank_of(config, d, instance));
      return;
    case Group::mirror: {
      if (placement != Placement::mirror) {
        members.push_back(instance);
        return;
      }
      const int pairs = (config.stages + 1) / 2;
      const int dp_rank = instance / pairs;
      const int low = instance % pairs;
      members.push_back(rank_of(config, dp_rank, low));
      if (config.stages - 1 - low != low) {
        members.push_back(rank_of(config, dp_rank, config.stages - 1 - low));
      }
      return;
    }
    case Group::world:
      for (int r = 0; r < config.ranks(); ++r) members.push_back(r);
      return;
  }
}

GroupSet groups_holding_copies(Placement placement, const Config& config) {
  GroupSet copies;
  if (config.dp > 1) copies = copies.with(Group::dp);
  if (placement == Placement::mirror) copies = copies.with(Group::mirror);
  return copies;
}

RankBlock rank_block(const Config& config, int rank) {
  const std::string stage = "stage " + std::to_string(stage_of(config, rank)) + " {\n";
  if (config.dp == 1) return {stage, "    ", "}\n"};
  const std::string dp_rank = std::to_string(dp_rank_of(config, rank));
  return {stage + "    if dp_rank == " + dp_rank + " {\n", "        ", "    }\n}\n"};
}

int chunks_per_rank(Placement placement, const Config& config) {
  return placement == Placement::looped ? config.chunks : 2;
}

LayerRange chunk_layers(const Program& program, int stage, int chunk) {
  const int piece = piece_at(position_of(program.placement, program.config, stage, chunk));
  if (piece < 0 || static_cast<std::size_t>(piece) >= program.layer_split.size()) return {};
  return program.layer_split[static_cast<std::size_t>(piece)];
}

std::vector<LayerRange> cut_for_model(const Program& program, const std::vector<int>& layer_widths) {
  if (program.cut.empty() || program.cut.back().end != layer_count(layer_widths)) return {};
  return program.cut;
}

LayerRange instruction_layers(const Program& program, int stage, const Instruction& in) {
  const int layer = layer_of(in);
  if (layer != kNoLayer) return {layer, layer + 1};
  return chunk_layers(program, stage, in.chunk);
}

std::string disassemble_rank(const Program& program, int rank) {
  const Config& c = program.config;
  const RankBlock block = rank_block(c, rank);
  std::string out;
  if (c.dp > 1) {
    out += "# rank " + std::to_string(rank) + " (dp_rank " + std::to_string(dp_rank_of(c, rank)) +
           ")\n";
  }
  out += block.open;
  for (const Instruction& in : program.rank(rank)) {
    out += block.indent;
    out += disassemble(in);
    out += '\n';
  }
  out += block.close;
  return out;
}

}  // namespace pipevm
