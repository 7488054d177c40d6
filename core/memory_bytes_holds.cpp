// The byte walk's Hold and Drop (memory_bytes_walk.hpp): a held activation
// or activation gradient stays past its last use until its Drop; a weight
// gradient held apart is one more whole layer of gradients until its Drop
// adds it into the layer's. Their misplacements are findings for the
// checker (PV2044, PV2045). Leaves out: when a value is made and used (the
// walk's compute and messages).
#include <string>

#include "memory_bytes_walk.hpp"

namespace pipevm::bytes_walk {

namespace {

// How findings name a weight gradient held apart.
std::string weight_gradient_name(std::size_t mb, int layer) {
  return "the weight gradient of micro-batch " + std::to_string(mb) + " of layer " +
         std::to_string(layer);
}

}  // namespace

// Hold and Drop of an activation or activation gradient at a boundary of
// the cell's chunk, or of weight gradients held apart.
void RankBytesWalk::hold(const Instruction& in) {
  if (in.chunk >= chunks_.size() ||
      in.micro_batch >= static_cast<std::uint32_t>(program_.config.micro_batches)) {
    return;
  }
  const Chunk& c = chunks_[in.chunk];
  const int layer = layer_of(in);
  if (in.kind == MessageKind::wgrad) {
    const LayerRange layers = layer == kNoLayer ? c.layers : LayerRange{layer, layer + 1};
    if (layers.begin < c.layers.begin || layers.end > c.layers.end) return;
    hold_weight_gradient(in, layers);
    return;
  }
  const bool act = in.kind == MessageKind::act;
  const int boundary = layer != kNoLayer ? layer : act ? c.layers.end : c.layers.begin;
  if (boundary < c.layers.begin || boundary > c.layers.end) return;
  const std::size_t s = slot(c, in.micro_batch, boundary);
  std::vector<std::uint8_t>& values = act ? a_ : g_;
  std::uint8_t& held = (act ? a_held_ : g_held_)[s];
  const bool past = (act ? a_past_ : g_past_)[s] != 0;
  const auto value = [&in] { return "`" + disassemble(in).substr(name(in.op).size() + 1) + "`"; };
  if (in.op == Opcode::Hold) {
    if (held) {
      finding(DiagnosticKind::HoldMisuse, value() + " is held already");
    } else if (past) {
      finding(DiagnosticKind::HoldMisuse,
              value() + " is held after its last use: it is gone (hold it before it is used up)");
    } else {
      held = 1;
    }
    return;
  }
  if (!held) {
    finding(DiagnosticKind::HoldMisuse, value() + " is dropped but not held");
    return;
  }
  held = 0;
  if (past && values[s] == live) {
    free_value(values, act ? activations_ : activation_gradients_, s, boundary);
  }
}

void RankBytesWalk::hold_weight_gradient(const Instruction& in, LayerRange layers) {
  const std::uint32_t mb = in.micro_batch;
  for (int l = layers.begin; l < layers.end; ++l) {
    const std::size_t w = apart_index(l, mb);
    const auto value = [mb, l] { return weight_gradient_name(mb, l); };
    if (in.op == Opcode::Hold) {
      if (apart_[w] != not_apart) {
        finding(DiagnosticKind::HoldMisuse, value() + " is held already");
      } else if (weight_done_[w]) {
        finding(DiagnosticKind::HoldMisuse,
                value() + " is held after its backward: it is in the layer's sum already");
      } else {
        apart_[w] = apart_held;
      }
      continue;
    }
    if (apart_[w] == not_apart) {
      finding(DiagnosticKind::HoldMisuse, value() + " is dropped but not held");
      continue;
    }
    // A gradient already reported missing from a sum counts as summed: its
    // Drop only ends the hold.
    if (apart_[w] == apart_made) {
      // Added into the layer's accumulated gradient.
      --apart_made_[static_cast<std::size_t>(l)];
      Grad& grad = grad_[static_cast<std::size_t>(l)];
      if (grad == Grad::none) grad = Grad::whole;
    }
    apart_[w] = not_apart;
  }
}

void RankBytesWalk::unsummed(LayerRange layers, const char* what) {
  for (int l = std::max(0, layers.begin);
       l < layers.end && static_cast<std::size_t>(l) < parameters_.size(); ++l) {
    if (apart_made_[static_cast<std::size_t>(l)] == 0) continue;
    for (std::size_t mb = 0; mb < micro_batches_; ++mb) {
      if (apart_[apart_index(l, static_cast<std::uint32_t>(mb))] != apart_made) continue;
      finding(DiagnosticKind::HeldGradientUnsummed,
              weight_gradient_name(mb, l) + " is held apart when " + what +
                  ": it is not in the layer's sum (`Drop wgrad " + std::to_string(mb) + " layer " +
                  std::to_string(l) + "` adds it)");
      // Counted in the sum from here, so that it is reported once.
      apart_[apart_index(l, static_cast<std::uint32_t>(mb))] = apart_reported;
      --apart_made_[static_cast<std::size_t>(l)];
    }
  }
}
}  // namespace pipevm::bytes_walk
