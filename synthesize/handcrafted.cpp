// The handcrafted orders (handcrafted.hpp).
#include "handcrafted.hpp"

#include <algorithm>
#include <cmath>

#include "v_schedules.hpp"

namespace pipevm::synthesis {

namespace {

// One stage's passes, appended as a paper writes them.
class StageWriter {
 public:
  StageWriter(std::vector<Pass>& out, bool split) : out_(out), split_(split) {}
  void forward(int mb, int chunk = 0) { out_.push_back({PassKind::forward, mb, chunk}); }
  // The backward-input, or the fused backward.
  void backward(int mb, int chunk = 0) {
    out_.push_back({split_ ? PassKind::backward_input : PassKind::backward, mb, chunk});
  }
  // The weight pass, when backwards are split.
  void weight(int mb, int chunk = 0) {
    if (split_) out_.push_back({PassKind::backward_weight, mb, chunk});
  }

 private:
  std::vector<Pass>& out_;
  bool split_;
};

// An order built stage by stage by `stage_order(s, writer)`.
template <typename StageOrder>
ComputeOrder each_stage(const Problem& problem, StageOrder stage_order) {
  ComputeOrder order;
  order.placement = problem.placement;
  order.config = problem.config;
  order.config.dp = 1;
  order.stages.resize(static_cast<std::size_t>(problem.config.stages));
  for (int s = 0; s < problem.config.stages; ++s) {
    StageWriter writer(order.stages[static_cast<std::size_t>(s)], problem.split_backward);
    stage_order(s, writer);
  }
  return order;
}

// The most forward units a stage may hold before its first backward: the
// memory limit in chunk activations, less the one the steady state's
// forward adds; unbounded without a limit.
int warmup_cap(const Problem& problem) {
  if (!std::isfinite(problem.memory_limit)) return problem.config.micro_batches * 4;
  return std::max(0, static_cast<int>(std::floor(problem.memory_limit + 1e-9)) - 1);
}

// 1F1B (warm-up p - s - 1, at most `cap`), the weight pass of a split
// backward after its input pass, `deferred` of them s micro-batches late
// as ZB-H1 does (its last ones at the end).
ComputeOrder one_f_one_b(const Problem& problem, int cap, bool zb_h1) {
  const int p = problem.config.stages;
  const int m = problem.config.micro_batches;
  return each_stage(problem, [&](int s, StageWriter& out) {
    const int warmup = std::min({p - s - 1, m, cap});
    const int deferred = zb_h1 ? std::min(s, std::max(0, cap - warmup)) : 0;
    int weights = 0;
    const auto backward = [&](int i) {
      out.backward(i);
      if (i >= deferred) out.weight(weights++);
    };
    for (int i = 0; i < warmup; ++i) out.forward(i);
    for (int i = 0; i < m - warmup; ++i) {
      out.forward(i + warmup);
      backward(i);
    }
    for (int i = m - warmup; i < m; ++i) backward(i);
    while (weights < m) out.weight(weights++);
  });
}

// ZB-H2 (the paper's Fig. 3; references/zero-bubble.md): min(m, 2(p - s) - 1)
// forwards, then "backward-input i, weight i - 2s, next forward", the
// remaining weight passes at the end.
ComputeOrder zb_h2(const Problem& problem) {
  const int p = problem.config.stages;
  const int m = problem.config.micro_batches;
  return each_stage(problem, [&](int s, StageWriter& out) {
    int forwards = std::min(m, 2 * (p - s) - 1);
    for (int i = 0; i < forwards; ++i) out.forward(i);
    int weights = 0;
    for (int i = 0; i < m; ++i) {
      out.backward(i);
      if (i - 2 * s >= 0) out.weight(weights++);
      if (forwards < m) out.forward(forwards++);
    }
    while (weights < m) out.weight(weights++);
  });
}

// Interleaved 1F1B (Megatron-LM, schedules/interleaved-1f1b.pipe) over
// units of one (chunk, micro-batch): forward unit k runs chunk
// (k mod pv) / p of micro-batch (k / pv) p + k mod p, backward units walk
// the chunks back; stage s warms up with `warmup(s)` forward units, then
// one forward and one backward unit in turn. A split backward's weight
// pass follows its input pass `deferred(s)` units late (interleaved zero
// bubble, schedules/interleaved-zb.pipe, defers s), the last ones at the
// end, where they fill the cool-down.
template <typename Warmup, typename Deferred>
ComputeOrder interleaved(const Problem& problem, Warmup warmup_of, Deferred deferred_of) {
  const int p = problem.config.stages;
  const int v = problem.config.chunks;
  const int units = problem.config.micro_batches * v;
  const int group = p * v;
  const auto micro_batch = [&](int k) { return (k / group) * p + k % p; };
  return each_stage(problem, [&](int s, StageWriter& out) {
    const int warmup = std::clamp(warmup_of(s), 0, units);
    const int deferred = std::clamp(deferred_of(s), 0, units - warmup);
    const auto forward = [&](int k) { out.forward(micro_batch(k), (k % group) / p); };
    const auto backward_chunk = [&](int k) { return v - 1 - (k % group) / p; };
    const auto backward = [&](int k) {
      out.backward(micro_batch(k), backward_chunk(k));
      if (k >= deferred) out.weight(micro_batch(k - deferred), backward_chunk(k - deferred));
    };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < units - warmup; ++k) {
      forward(k + warmup);
      backward(k);
    }
    for (int k = units - warmup; k < units; ++k) backward(k);
    for (int k = units - deferred; k < units; ++k) out.weight(micro_batch(k), backward_chunk(k));
  });
}

// Megatron's warm-up, 2(p - s - 1) + (v - 1)p units, at most `cap`.
ComputeOrder megatron_interleaved(const Problem& problem, int cap, bool zero_bubble) {
  const int p = problem.config.stages;
  const int v = problem.config.chunks;
  const auto warmup = [&](int s) { return std::min(2 * (p - s - 1) + (v - 1) * p, cap); };
  return interleaved(problem, warmup, [&](int s) {
    return zero_bubble ? std::min(s, std::max(0, cap - warmup(s))) : 0;
  });
}

// PyTorch's ZB-V (ScheduleZBVZeroBubble, eight steps; the shipped zb-v.pipe
// before V-ZB replaced it): placement v, two chunks, m >= 2p, 2p + 1 chunk
// activations. Chunk 0 runs down the V, chunk 1 back.
ComputeOrder pytorch_zb_v(const Problem& problem) {
  const int p = problem.config.stages;
  const int m = problem.config.micro_batches;
  return each_stage(problem, [&](int s, StageWriter& out) {
    const int n1 = (p - s - 1) * 2;
    const int n2 = s + 1;
    const int n3 = p - s - 1;
    const int n4 = m - 2 * p + s + 1;
    const int n5 = p - s - 1;
    const int n6 = s + 1;
    const int n7 = p - s - 1;
    const int n8 = s + 1;
    // Weight passes are deferred from the flattened backward j0 of step 6 on.
    const int j0 = 2 * (n6 / 2) + (s % 2 == 0 ? 1 : 0);
    const auto both = [&](int c, int mb) {
      out.backward(mb, c);
      out.weight(mb, c);
    };
    const auto deferred_weight = [&](int k) {
      if (k < n6) {
        const int j = j0 + k;
        if (j % 2 == 0) {
          out.weight(n3 + n4 + n5 + j / 2, 1);
        } else {
          out.weight(n4 + n5 + j / 2, 0);
        }
      } else {
        out.weight(n4 + n5 + n6 + k - n6, 0);
      }
    };
    for (int i = 0; i < n1; ++i) out.forward(i, 0);
    for (int i = 0; i < n2; ++i) {
      out.forward(n1 + i, 0);
      out.forward(i, 1);
    }
    for (int i = 0; i < n3; ++i) {
      both(1, i);
      out.forward(n2 + i, 1);
    }
    for (int i = 0; i < n4; ++i) {
      out.forward(n1 + n2 + i, 0);
      both(1, n3 + i);
      out.forward(n2 + n3 + i, 1);
      both(0, i);
    }
    for (int i = 0; i < n5; ++i) {
      both(1, n3 + n4 + i);
      out.forward(n2 + n3 + n4 + i, 1);
      both(0, n4 + i);
    }
    for (int i = 0; i < n6; ++i) {
      out.backward(n3 + n4 + n5 + i, 1);
      if (2 * i < j0) out.weight(n3 + n4 + n5 + i, 1);
      out.backward(n4 + n5 + i, 0);
      if (2 * i + 1 < j0) out.weight(n4 + n5 + i, 0);
    }
    for (int i = 0; i < n7; ++i) {
      deferred_weight(i);
      out.backward(n4 + n5 + n6 + i, 0);
    }
    for (int i = 0; i < n8; ++i) deferred_weight(n7 + i);
  });
}

// " at memory N": the name of a variant whose warm-up the limit shortened.
std::string at_memory(int cap) { return " (warm-up at most " + std::to_string(cap) + ")"; }

}  // namespace

std::vector<NamedOrder> handcrafted_orders(const Problem& problem) {
  const Config& c = problem.config;
  const int p = c.stages;
  const int m = c.micro_batches;
  const bool split = problem.split_backward;
  std::vector<NamedOrder> orders;
  if (problem.placement == Placement::v) {
    if (c.chunks != 2 || m < 2 * p) return orders;
    if (auto order = v_zb_order(problem)) orders.push_back({"V-ZB", std::move(*order)});
    if (split) orders.push_back({"ZB-V (PyTorch)", pytorch_zb_v(problem)});
    return orders;
  }
  if (problem.placement != Placement::looped) return orders;
  const int cap = warmup_cap(problem);
  const int unbounded = 4 * m;
  if (c.chunks == 1) {
    orders.push_back({"1F1B", one_f_one_b(problem, unbounded, false)});
    if (split) {
      orders.push_back({"ZB-H1", one_f_one_b(problem, unbounded, true)});
      orders.push_back({"ZB-H2", zb_h2(problem)});
    }
    if (cap < p - 1) {
      orders.push_back({"1F1B" + at_memory(cap), one_f_one_b(problem, cap, false)});
      if (split) orders.push_back({"ZB-H1" + at_memory(cap), one_f_one_b(problem, cap, true)});
    }
    return orders;
  }
  if (m % p != 0) return orders;
  orders.push_back({"interleaved 1F1B", megatron_interleaved(problem, unbounded, false)});
  if (split) orders.push_back({"interleaved ZB", megatron_interleaved(problem, unbounded, true)});
  if (cap < 2 * (p - 1) + (c.chunks - 1) * p) {
    orders.push_back({"interleaved 1F1B" + at_memory(cap), megatron_interleaved(problem, cap, false)});
    if (split) orders.push_back({"interleaved ZB" + at_memory(cap), megatron_interleaved(problem, cap, true)});
  }
  return orders;
}

std::vector<NamedOrder> interleaved_family(const Problem& problem) {
  const Config& c = problem.config;
  const int p = c.stages;
  const int v = c.chunks;
  std::vector<NamedOrder> orders;
  if (problem.placement != Placement::looped || (v > 1 && c.micro_batches % p != 0)) return orders;
  // A stage's first backward unit needs forward unit (v - 1)p done.
  const int least_warmup = (v - 1) * p;
  const int cap = warmup_cap(problem);
  const double weight_memory = std::max(problem.weight_memory, 1e-9);
  for (const int slope : {1, 2}) {
    for (int extra = 0; extra <= (v - 1) * p + 2; ++extra) {
      for (const int lateness : {0, 1, 2, 3}) {
        if (lateness > 0 && !problem.split_backward) continue;
        const auto warmup = [&](int s) {
          return std::max(least_warmup, std::min(slope * (p - s - 1) + extra, cap));
        };
        // Deferred weight passes each hold R of an activation: as many as
        // the limit leaves beside the warm-up and the steady state's forward.
        const auto deferred = [&](int s) {
          const double room = std::floor((cap - warmup(s)) / weight_memory + 1e-9);
          return std::min(lateness * s, static_cast<int>(std::max(0.0, std::min(room, 1e6))));
        };
        orders.push_back({"interleaved, warm-up " + std::to_string(slope) + "(p-s-1)+" +
                              std::to_string(extra) + ", weight passes " + std::to_string(lateness) +
                              "s units late",
                          interleaved(problem, warmup, deferred)});
      }
    }
  }
  return orders;
}

}  // namespace pipevm::synthesis
