// The checker's rule for computing one layer at a time (`Fwd mb layer L`,
// `Bwd mb layer L`, ...), one rank's stream at a time: a micro-batch goes
// up its chunk's layers in order, each once, and comes back down in order,
// the input half of each layer's backward before its weight half, and a
// chunk-wide step of a kind does not mix with per-layer ones on the same
// micro-batch. What the chunk's bottom and top layers read and make (the
// input, the output gradient, ...) is the dataflow rule of check_ranks.cpp
// (dataflow.hpp's layer_plan); a forward or backward of a layer whose
// weights are sharded and not gathered is check_shards.cpp's.
// Also the rule of Hold and Drop (check_holds), found by the byte walk.
#include <algorithm>

#include "check_internal.hpp"
#include "memory_bytes.hpp"

namespace pipevm::check_detail {

namespace {

bool per_layer_compute(const Instruction& in) {
  return info(in.op).cls == OpClass::compute && layer_of(in) != kNoLayer;
}

// How far a micro-batch of a chunk has got: the next layer of each kind of
// step (forwards go up from the chunk's first layer, backwards come down
// from its last).
struct Progress {
  int forward = 0;
  int input = 0;   // the next input half of a backward
  int weight = 0;  // the next weight half
};

class LayerWalker {
 public:
  LayerWalker(const Program& program, Reporter& reporter)
      : program_(program), reporter_(reporter), chunks_(chunks_per_rank(program)) {}
  void walk(int rank);

 private:
  void step(std::size_t local, const Instruction& in);
  void report(std::size_t local, const std::string& message) {
    reporter_.report(DiagnosticKind::LayerOrder, message, reporter_.at(begin_ + local));
  }
  std::string what(std::size_t local) const {
    return "`" + disassemble(program_.code[begin_ + local]) + "`";
  }

  const Program& program_;
  Reporter& reporter_;
  const int chunks_;
  std::size_t begin_ = 0;
  std::vector<LayerRange> layers_;  // per chunk
  std::vector<Progress> cells_;     // per (chunk, micro-batch)
};

void LayerWalker::walk(int rank) {
  begin_ = program_.rank_begin[static_cast<std::size_t>(rank)];
  const int stage = stage_of(program_.config, rank);
  const auto micro_batches = static_cast<std::size_t>(program_.config.micro_batches);
  layers_.clear();
  cells_.clear();
  for (int c = 0; c < chunks_; ++c) {
    const LayerRange held = chunk_layers(program_, stage, c);
    layers_.push_back(held);
    cells_.insert(cells_.end(), micro_batches, Progress{held.begin, held.end - 1, held.end - 1});
  }
  const std::span<const Instruction> stream = program_.rank(rank);
  for (std::size_t local = 0; local < stream.size(); ++local) {
    for (int h = 0; h < half_count(stream[local]); ++h) step(local, half(stream[local], h));
  }
}

void LayerWalker::step(std::size_t local, const Instruction& in) {
  const OpcodeInfo& row = info(in.op);
  const bool forward = row.produces.contains(Value::activation);
  const bool input = row.produces.contains(Value::input_gradient);
  const bool weight = row.produces.contains(Value::weight_gradient);
  if (!operand_parts(in.op).micro_batch || (!forward && !input && !weight) ||
      in.chunk >= layers_.size() ||
      in.micro_batch >= static_cast<std::uint32_t>(program_.config.micro_batches)) {
    return;
  }
  const LayerRange held = layers_[in.chunk];
  Progress& p =
      cells_[in.chunk * static_cast<std::size_t>(program_.config.micro_batches) + in.micro_batch];
  const std::string mb = "micro-batch " + std::to_string(in.micro_batch);
  const int layer = layer_of(in);
  if (layer == kNoLayer) {
    // The whole chunk: fine unless some of its layers ran one at a time.
    const bool mixed = forward
                           ? p.forward != held.begin && p.forward != held.end
                           : (input && p.input != held.end - 1 && p.input != held.begin - 1) ||
                                 (weight && p.weight != held.end - 1 && p.weight != held.begin - 1);
    if (mixed) {
      report(local, what(local) +
                        " runs the whole chunk after some of its layers ran one at a "
                        "time for " +
                        mb + ": run the remaining layers one by one");
    }
    if (forward) p.forward = held.end;
    if (input) p.input = held.begin - 1;
    if (weight) p.weight = held.begin - 1;
    return;
  }
  const auto order = [&](int next, const char* kind, const char* direction) {
    if (layer == next) return true;
    const bool again = forward ? layer < next : layer > next;
    if (again) {
      report(local, what(local) + " runs the " + kind + " of layer " + std::to_string(layer) +
                        " for " + mb + " a second time");
    } else if (next < held.begin || next >= held.end) {
      report(local, what(local) + " runs the " + kind + " of layer " + std::to_string(layer) +
                        " for " + mb + " after the chunk's whole " + kind);
    } else {
      report(local, what(local) + " runs before the " + kind + " of layer " + std::to_string(next) +
                        " for " + mb + " (layers run " + direction + ", one at a time)");
    }
    return false;
  };
  if (forward) {
    if (order(p.forward, "forward", "up the chunk")) p.forward = layer + 1;
    return;
  }
  if (input && !order(p.input, "backward", "down the chunk")) return;
  if (weight && !input && p.input >= layer) {
    report(local, what(local) + " runs before the BwdInput of layer " + std::to_string(layer) +
                      " for " + mb);
    return;
  }
  if (weight && !order(p.weight, "weight gradient", "down the chunk")) return;
  if (input) p.input = layer - 1;
  if (weight) p.weight = layer - 1;
}

}  // namespace

void check_layers(const Program& program, Reporter& reporter, const std::vector<bool>& quiet) {
  if (program.layer_split.empty() ||
      std::none_of(program.code.begin(), program.code.end(), per_layer_compute)) {
    return;
  }
  LayerWalker walker(program, reporter);
  for (int r = 0; r < program.ranks(); ++r) {
    if (!quiet[static_cast<std::size_t>(r)]) walker.walk(r);
  }
}

void check_holds(const Program& program, Reporter& reporter, const std::vector<bool>& quiet) {
  for (HoldFinding& f : hold_findings(program)) {
    if (quiet[static_cast<std::size_t>(f.rank)]) continue;
    reporter.report(f.kind, std::move(f.message),
                    reporter.at(program.rank_begin[static_cast<std::size_t>(f.rank)] + f.index));
  }
}

}  // namespace pipevm::check_detail
