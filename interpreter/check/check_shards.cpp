// The checker's rules for sharded weights, one rank's stream at a time, per
// layer of the model: a layer the rank gathers (AllGather of it, or of its
// chunk) is sharded, and then
//  - every compute on it (a forward or a backward of its chunk, or of the
//    layer alone) runs while a gathered copy is held, so a use after its
//    Release is an error;
//  - a Release frees a gathered copy, and every gathered copy is released
//    before the stream ends (a step would leave it stale);
//  - the step is a ShardStep (the rank updates its own shard only), never an
//    OptimizerStep, and a ShardStep needs sharded chunks (else the other
//    shards never come back) and no gathered copy held;
//  - an OptimizerStep never applies gradients that were only reduce-scattered.
// That a step comes after a reduction at all is check_ranks.cpp's rule (a
// ReduceScatter produces reduced gradients); that the group's members issue
// the same collectives in the same order is the link's (check_replicas.cpp).
#include <algorithm>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

bool is_sharding(Opcode op) {
  return op == Opcode::AllGather || op == Opcode::Release || op == Opcode::ReduceScatter ||
         op == Opcode::BwdReduceScatter || op == Opcode::ShardStep;
}

// Computes with the chunk's weights: a forward (a Recompute too) or a backward.
bool computes(Opcode op) {
  return info(op).cls != OpClass::p2p &&
         (is_backward(op) || info(op).produces.contains(Value::activation) ||
          info(op).produces.contains(Value::stash));
}

bool scatters(Opcode op) {
  return info(op).cost == CostKind::reduce_scatter || info(op).cost == CostKind::bwd_reduce_scatter;
}

// What a piece or compute instruction works on: layers of the model, or,
// when the program has no split, one unit per chunk.
struct Units {
  int begin = 0;
  int end = 0;
};

class ShardWalker {
 public:
  ShardWalker(const Program& program, Reporter& reporter)
      : program_(program),
        reporter_(reporter),
        chunks_(chunks_per_rank(program)),
        units_(program.layer_split.empty() ? chunks_ : layer_count(program.layer_widths)) {}
  void walk(int rank);

 private:
  Diagnostic* report(DiagnosticKind kind, const std::string& message, std::size_t local) {
    return reporter_.report(kind, message, reporter_.at(begin_ + local));
  }
  std::string what(std::size_t local) const {
    return "`" + disassemble(program_.code[begin_ + local]) + "`";
  }
  bool known(std::uint16_t chunk) const { return chunk < static_cast<std::size_t>(chunks_); }
  Units units_of(const Instruction& in) const;
  std::string unit_name(int unit) const {
    return (program_.layer_split.empty() ? "chunk " : "layer ") + std::to_string(unit);
  }
  // What a message calls the units of `in`: its chunk when it names no layer.
  std::string name_for(const Instruction& in, int unit) const {
    return layer_of(in) == kNoLayer ? "chunk " + std::to_string(in.chunk) : unit_name(unit);
  }
  void step(std::size_t local, const Instruction& in);

  const Program& program_;
  Reporter& reporter_;
  const int chunks_;
  const int units_;
  int stage_ = 0;
  std::size_t begin_ = 0;
  std::vector<bool> sharded_;
  std::vector<std::uint32_t> gathered_at_;  // the holding AllGather, or kNone
  std::vector<std::uint32_t> released_at_;  // the last Release, or kNone
  bool only_scattered_ = false;             // the gradients' last reduction kept shards only
};

Units ShardWalker::units_of(const Instruction& in) const {
  if (program_.layer_split.empty()) {
    return known(in.chunk) ? Units{in.chunk, in.chunk + 1} : Units{};
  }
  const int layer = layer_of(in);
  if (layer != kNoLayer) return layer < units_ ? Units{layer, layer + 1} : Units{};
  if (!known(in.chunk)) return {};
  const LayerRange held = chunk_layers(program_, stage_, in.chunk);
  return {held.begin, held.end};
}

void ShardWalker::walk(int rank) {
  begin_ = program_.rank_begin[static_cast<std::size_t>(rank)];
  stage_ = stage_of(program_.config, rank);
  const std::span<const Instruction> stream = program_.rank(rank);
  sharded_.assign(static_cast<std::size_t>(units_), false);
  gathered_at_.assign(static_cast<std::size_t>(units_), kNone);
  released_at_.assign(static_cast<std::size_t>(units_), kNone);
  only_scattered_ = false;
  for (const Instruction& in : stream) {
    if (in.op != Opcode::AllGather) continue;
    const Units u = units_of(in);
    for (int i = u.begin; i < u.end; ++i) sharded_[static_cast<std::size_t>(i)] = true;
  }
  for (std::size_t local = 0; local < stream.size(); ++local) step(local, stream[local]);
  for (int c = 0; c < units_; ++c) {
    const std::uint32_t at = gathered_at_[static_cast<std::size_t>(c)];
    // A copy gathered by one instruction is reported once.
    if (at == kNone || (c > 0 && gathered_at_[static_cast<std::size_t>(c) - 1] == at)) continue;
    report(DiagnosticKind::ShardGatherMisuse,
           what(at) +
               " gathers weights that no Release frees before the step ends (the next "
               "step would compute with a stale copy)",
           at);
  }
}

void ShardWalker::step(std::size_t local, const Instruction& in) {
  const auto l = static_cast<std::uint32_t>(local);
  const Units units = units_of(in);
  if (in.op == Opcode::AllGather) {
    for (int u = units.begin; u < units.end; ++u) {
      const std::uint32_t held = gathered_at_[static_cast<std::size_t>(u)];
      if (held != kNone) {
        Diagnostic* d =
            report(DiagnosticKind::ShardGatherMisuse,
                   what(local) + " gathers " + name_for(in, u) + " while its gathered copy is held",
                   local);
        reporter_.note(d, "gathered here: " + reporter_.describe(begin_ + held),
                       reporter_.at(begin_ + held));
        break;
      }
    }
    for (int u = units.begin; u < units.end; ++u) gathered_at_[static_cast<std::size_t>(u)] = l;
  } else if (in.op == Opcode::Release) {
    for (int u = units.begin; u < units.end; ++u) {
      if (gathered_at_[static_cast<std::size_t>(u)] != kNone) continue;
      report(
          DiagnosticKind::ShardGatherMisuse,
          what(local) + " releases the weights of " + name_for(in, u) + ", which are not gathered",
          local);
      break;
    }
    for (int u = units.begin; u < units.end; ++u) {
      gathered_at_[static_cast<std::size_t>(u)] = kNone;
      released_at_[static_cast<std::size_t>(u)] = l;
    }
  } else if (computes(in.op)) {
    // A chunk's compute names its chunk when none of its layers is gathered.
    const bool none_held =
        std::all_of(gathered_at_.begin() + units.begin, gathered_at_.begin() + units.end,
                    [](std::uint32_t at) { return at == kNone; });
    for (int u = units.begin; u < units.end; ++u) {
      const auto i = static_cast<std::size_t>(u);
      if (!sharded_[i] || gathered_at_[i] != kNone) continue;
      const std::string unit = none_held ? name_for(in, u) : unit_name(u);
      Diagnostic* d = report(DiagnosticKind::ShardNotGathered,
                             what(local) + " computes with the weights of " + unit +
                                 ", which are not gathered (AllGather " + unit + " first)",
                             local);
      if (released_at_[i] != kNone) {
        reporter_.note(d, "released here: " + reporter_.describe(begin_ + released_at_[i]),
                       reporter_.at(begin_ + released_at_[i]));
      }
      break;
    }
  }

  if (info(in.op).produces.contains(Value::weight_gradient)) only_scattered_ = false;
  if (info(in.op).produces.contains(Value::reduced_gradient)) only_scattered_ = scatters(in.op);

  const bool any_sharded = std::find(sharded_.begin(), sharded_.end(), true) != sharded_.end();
  if (in.op == Opcode::OptimizerStep) {
    if (any_sharded) {
      report(DiagnosticKind::ShardStepMismatch,
             "OptimizerStep updates every parameter, but this rank holds its chunks as shards "
             "(AllGather): use ShardStep",
             local);
    } else if (only_scattered_) {
      report(DiagnosticKind::ShardStepMismatch,
             "OptimizerStep applies gradients that were only reduce-scattered (each rank holds "
             "the sum of its own shard): use ShardStep, or AllReduce",
             local);
    }
  } else if (in.op == Opcode::ShardStep) {
    if (!any_sharded) {
      report(DiagnosticKind::ShardStepMismatch,
             "ShardStep updates only this rank's shard, but no AllGather brings the other shards "
             "back: gather each chunk before computing with it",
             local);
    }
    for (std::size_t c = 0; c < gathered_at_.size(); ++c) {
      if (gathered_at_[c] == kNone) continue;
      const Instruction& gathering = program_.code[begin_ + gathered_at_[c]];
      report(DiagnosticKind::ShardStepMismatch,
             "ShardStep runs while the gathered copy of " +
                 name_for(gathering, static_cast<int>(c)) +
                 " is held: Release it first (the copy would be stale)",
             local);
      break;
    }
  }
}

}  // namespace

void check_shards(const Program& program, Reporter& reporter, const std::vector<bool>& quiet) {
  if (std::none_of(program.code.begin(), program.code.end(),
                   [](const Instruction& in) { return is_sharding(in.op); })) {
    return;
  }
  ShardWalker walker(program, reporter);
  for (int r = 0; r < program.ranks(); ++r) {
    if (!quiet[static_cast<std::size_t>(r)]) walker.walk(r);
  }
}

}  // namespace pipevm::check_detail
