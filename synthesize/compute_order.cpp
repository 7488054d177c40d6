// Compute orders: memory, validity, and reading one out of a program
// (compute_order.hpp).
#include "compute_order.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace pipevm::synthesis {

Opcode opcode_of(PassKind kind) {
  switch (kind) {
    case PassKind::forward:
      return Opcode::Fwd;
    case PassKind::backward:
      return Opcode::Bwd;
    case PassKind::backward_input:
      return Opcode::BwdInput;
    case PassKind::backward_weight:
      return Opcode::BwdWeight;
  }
  return Opcode::Fwd;
}

std::vector<double> peak_memory(const ComputeOrder& order, double weight_memory) {
  std::vector<double> peaks;
  for (const auto& passes : order.stages) {
    double held = 0;
    double peak = 0;
    for (const Pass& pass : passes) {
      switch (pass.kind) {
        case PassKind::forward:
          held += 1;
          break;
        case PassKind::backward:
          held -= 1;
          break;
        case PassKind::backward_input:
          held -= 1 - weight_memory;
          break;
        case PassKind::backward_weight:
          held -= weight_memory;
          break;
      }
      peak = std::max(peak, held);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

std::string order_error(const ComputeOrder& order) {
  const Config& c = order.config;
  if (static_cast<int>(order.stages.size()) != c.stages) return "the order has no stage list for every stage";
  const int chunks = chunks_per_rank(order.placement, c);
  for (int s = 0; s < c.stages; ++s) {
    // Per (chunk, micro-batch): 1 after its forward, 2 after its backward-input, 3 when done.
    std::map<std::pair<int, int>, int> state;
    const std::string where = "stage " + std::to_string(s) + ": ";
    for (const Pass& pass : order.stages[static_cast<std::size_t>(s)]) {
      if (pass.chunk < 0 || pass.chunk >= chunks || pass.micro_batch < 0 ||
          pass.micro_batch >= c.micro_batches) {
        return where + "a pass outside the configuration";
      }
      int& done = state[{pass.chunk, pass.micro_batch}];
      const std::string cell =
          "micro-batch " + std::to_string(pass.micro_batch) + " chunk " + std::to_string(pass.chunk);
      switch (pass.kind) {
        case PassKind::forward:
          if (done != 0) return where + "a second forward of " + cell;
          done = 1;
          break;
        case PassKind::backward:
          if (done != 1) return where + "a backward of " + cell + " not right after its forward";
          done = 3;
          break;
        case PassKind::backward_input:
          if (done != 1) return where + "a backward-input of " + cell + " not after its forward";
          done = 2;
          break;
        case PassKind::backward_weight:
          if (done != 2) return where + "a weight pass of " + cell + " not after its backward-input";
          done = 3;
          break;
      }
    }
    const auto expected = static_cast<std::size_t>(chunks) * static_cast<std::size_t>(c.micro_batches);
    const bool complete = state.size() == expected &&
                          std::all_of(state.begin(), state.end(), [](const auto& e) { return e.second == 3; });
    if (!complete) return where + "not every micro-batch of every chunk is forwarded and backwarded";
  }
  return {};
}

ComputeOrder with_backwards(ComputeOrder order, bool split) {
  for (auto& passes : order.stages) {
    std::vector<Pass> out;
    out.reserve(passes.size() * 3 / 2);
    for (const Pass& pass : passes) {
      if (split && pass.kind == PassKind::backward) {
        out.push_back({PassKind::backward_input, pass.micro_batch, pass.chunk});
        out.push_back({PassKind::backward_weight, pass.micro_batch, pass.chunk});
      } else if (!split && pass.kind == PassKind::backward_input) {
        out.push_back({PassKind::backward, pass.micro_batch, pass.chunk});
      } else if (split || pass.kind != PassKind::backward_weight) {
        out.push_back(pass);
      }
    }
    passes = std::move(out);
  }
  return order;
}

std::optional<ComputeOrder> compute_order_of(const Program& program, std::string& error) {
  if (program.config.dp != 1) {
    error = "a program with data-parallel replicas (dp > 1) cannot be re-lowered: use dp 1";
    return std::nullopt;
  }
  if (program.placement == Placement::mirror) {
    error = "placement mirror (DualPipe) cannot be re-lowered: two pipelines share the ranks";
    return std::nullopt;
  }
  ComputeOrder order;
  order.placement = program.placement;
  order.config = program.config;
  order.stages.resize(static_cast<std::size_t>(program.config.stages));
  for (int r = 0; r < program.ranks(); ++r) {
    for (const Instruction& in : program.rank(r)) {
      if (in.op == Opcode::FwdBwd) {
        // Its forward, then its backward, as the VM runs it: the placed
        // program issues them apart (their cost is fwd + bwd, not fwd-bwd).
        const Cell forward = first_cell(in);
        const Cell backward = second_cell(in);
        auto& passes = order.stages[static_cast<std::size_t>(r)];
        passes.push_back({PassKind::forward, static_cast<int>(forward.micro_batch), forward.chunk});
        passes.push_back({PassKind::backward, static_cast<int>(backward.micro_batch), backward.chunk});
        continue;
      }
      PassKind kind = PassKind::forward;
      if (in.op == Opcode::Fwd) {
        kind = PassKind::forward;
      } else if (in.op == Opcode::Bwd || in.op == Opcode::BwdAllReduce) {
        kind = PassKind::backward;
      } else if (in.op == Opcode::BwdInput) {
        kind = PassKind::backward_input;
      } else if (in.op == Opcode::BwdWeight) {
        kind = PassKind::backward_weight;
      } else if (in.op == Opcode::FwdCheckpoint || in.op == Opcode::Recompute || in.op == Opcode::Offload ||
                 in.op == Opcode::Reload) {
        error = "a program with memory-policy instructions (FwdCheckpoint, Recompute, Offload, Reload) "
                "cannot be re-lowered: synthesis places whole forwards that keep their activations";
        return std::nullopt;
      } else {
        continue;
      }
      if (layer_of(in) != kNoLayer) {
        error = "a pass of one layer (`layer L`) cannot be re-lowered: synthesis places whole chunks";
        return std::nullopt;
      }
      order.stages[static_cast<std::size_t>(r)].push_back(
          {kind, static_cast<int>(in.micro_batch), static_cast<int>(in.chunk)});
    }
  }
  error = order_error(order);
  if (!error.empty()) return std::nullopt;
  return order;
}

}  // namespace pipevm::synthesis
