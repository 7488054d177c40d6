// Keep, recompute or offload per unit (memory_policy.hpp).
#include "memory_policy.hpp"

#include <algorithm>

namespace pipevm::synthesis {

namespace {

bool is_backward_pass(PassKind kind) {
  return kind == PassKind::backward || kind == PassKind::backward_input;
}

std::size_t unit_of(const ComputeOrder& order, const Pass& pass) {
  return static_cast<std::size_t>(pass.chunk) * static_cast<std::size_t>(order.config.micro_batches) +
         static_cast<std::size_t>(pass.micro_batch);
}

UnitPolicy policy_of(const UnitPolicies& policies, std::size_t stage, std::size_t unit) {
  return policies.units[stage][unit];
}

// Whether pass j of a stage brings a stash back (its unit's Recompute or
// Reload sits before it).
bool brings_back(const ComputeOrder& order, const UnitPolicies& policies, std::size_t s,
                 const Pass& pass) {
  return is_backward_pass(pass.kind) && policy_of(policies, s, unit_of(order, pass)) != UnitPolicy::keep;
}

// Stage s's held activations at each of its passes (the moment the pass
// runs, with what it brings or makes counted and what it frees not yet).
std::vector<double> moments(const ComputeOrder& order, const UnitPolicies& policies, std::size_t s,
                            double weight_memory) {
  const auto& passes = order.stages[s];
  std::vector<double> at;
  at.reserve(passes.size());
  double held = 0;
  int offloading = 0;  // offloaded stashes still on the device
  for (const Pass& pass : passes) {
    const UnitPolicy policy = policy_of(policies, s, unit_of(order, pass));
    const bool back = brings_back(order, policies, s, pass);
    if (pass.kind == PassKind::forward || back) {
      held -= offloading;
      offloading = 0;
    }
    if (back) held += 1;
    if (pass.kind == PassKind::forward && policy != UnitPolicy::recompute) {
      held += 1;
      if (policy == UnitPolicy::offload) ++offloading;
    }
    at.push_back(held);
    switch (pass.kind) {
      case PassKind::forward: break;
      case PassKind::backward: held -= 1; break;
      case PassKind::backward_input: held -= 1 - weight_memory; break;
      case PassKind::backward_weight: held -= weight_memory; break;
    }
  }
  return at;
}

}  // namespace

std::string_view name(MemoryPolicy policy) {
  switch (policy) {
    case MemoryPolicy::keep: return "keep";
    case MemoryPolicy::recompute: return "recompute";
    case MemoryPolicy::offload: return "offload";
    case MemoryPolicy::any: return "any";
  }
  return "any";
}

std::optional<MemoryPolicy> memory_policy_named(std::string_view text) {
  for (const MemoryPolicy policy :
       {MemoryPolicy::keep, MemoryPolicy::recompute, MemoryPolicy::offload, MemoryPolicy::any}) {
    if (name(policy) == text) return policy;
  }
  return std::nullopt;
}

UnitPolicies keep_all(const ComputeOrder& order) {
  const std::size_t units = static_cast<std::size_t>(chunks_per_rank(order.placement, order.config)) *
                            static_cast<std::size_t>(order.config.micro_batches);
  UnitPolicies policies;
  policies.units.assign(order.stages.size(), std::vector<UnitPolicy>(units, UnitPolicy::keep));
  return policies;
}

std::vector<PolicyCounts> policy_counts(const Program& program) {
  std::vector<PolicyCounts> counts;
  for (int r = 0; r < program.ranks(); ++r) {
    PolicyCounts& c = counts.emplace_back();
    for (const Instruction& in : program.rank(r)) {
      if (in.op == Opcode::Fwd) ++c.kept;
      if (in.op == Opcode::FwdCheckpoint) ++c.recomputed;
      if (in.op == Opcode::Offload) ++c.offloaded;
    }
    c.kept -= c.offloaded;
  }
  return counts;
}

bool uses_policies(const UnitPolicies& policies) {
  return std::any_of(policies.units.begin(), policies.units.end(), [](const auto& stage) {
    return std::any_of(stage.begin(), stage.end(), [](UnitPolicy p) { return p != UnitPolicy::keep; });
  });
}

std::vector<double> peak_memory(const ComputeOrder& order, const UnitPolicies& policies,
                                double weight_memory) {
  std::vector<double> peaks;
  for (std::size_t s = 0; s < order.stages.size(); ++s) {
    const auto at = moments(order, policies, s, weight_memory);
    peaks.push_back(at.empty() ? 0 : *std::max_element(at.begin(), at.end()));
  }
  return peaks;
}

std::optional<UnitPolicies> assign_policies(const ComputeOrder& order, UnitPolicies start,
                                            double limit, double weight_memory,
                                            const PolicyRule& rule) {
  UnitPolicies policies = std::move(start);
  for (;;) {
    std::size_t stage = order.stages.size();
    std::size_t moment = 0;
    for (std::size_t s = 0; s < order.stages.size() && stage == order.stages.size(); ++s) {
      const auto at = moments(order, policies, s, weight_memory);
      for (std::size_t j = 0; j < at.size(); ++j) {
        if (at[j] > limit + 1e-9) {
          stage = s;
          moment = j;
          break;
        }
      }
    }
    if (stage == order.stages.size()) return policies;
    // The kept units held at that moment, longest-lived first.
    const auto& passes = order.stages[stage];
    struct Held {
      std::size_t life = 0;
      std::size_t forward = 0;
      Pass pass;
    };
    std::vector<Held> held;
    for (std::size_t f = 0; f <= moment; ++f) {
      if (passes[f].kind != PassKind::forward) continue;
      if (policy_of(policies, stage, unit_of(order, passes[f])) != UnitPolicy::keep) continue;
      for (std::size_t b = moment + 1; b < passes.size(); ++b) {
        if (is_backward_pass(passes[b].kind) && passes[b].chunk == passes[f].chunk &&
            passes[b].micro_batch == passes[f].micro_batch) {
          held.push_back({b - f, f, passes[f]});
        }
      }
    }
    std::stable_sort(held.begin(), held.end(),
                     [](const Held& a, const Held& b) { return a.life > b.life; });
    bool changed = false;
    for (const Held& h : held) {
      const auto choice = rule(static_cast<int>(stage), h.pass.chunk, h.pass.micro_batch, h.forward < moment);
      if (!choice || *choice == UnitPolicy::keep) continue;
      if (*choice == UnitPolicy::offload && h.forward == moment) continue;
      policies.units[stage][unit_of(order, h.pass)] = *choice;
      changed = true;
      break;
    }
    if (!changed) return std::nullopt;
  }
}

namespace {

// Where the instructions of a policy go around one pass of the placed
// program, as offsets in its rank's stream.
struct PassPlaces {
  std::size_t before_input = 0;    // before the pass takes its input
  std::size_t before_compute = 0;  // the pass's own instruction
  std::size_t after_output = 0;    // after the instruction that hands its output on
  bool sent_output = false;        // a forward whose output went by ISend
};

bool takes_input(const Instruction& in) {
  return in.op == Opcode::LoadInput || in.op == Opcode::Recv ||
         (in.op == Opcode::Wait && in.direction == WaitDirection::recv);
}

}  // namespace

Program with_policies(const BuiltProgram& placed, const ComputeOrder& order,
                      const UnitPolicies& policies) {
  const Program& from = placed.program;
  Program program = from;
  program.code.clear();
  program.rank_begin.assign(1, 0);
  for (std::size_t s = 0; s < order.stages.size(); ++s) {
    const std::size_t begin = from.rank_begin[s];
    const std::size_t end = from.rank_begin[s + 1];
    const auto& passes = order.stages[s];
    std::vector<PassPlaces> places(passes.size());
    for (std::size_t j = 0; j < passes.size(); ++j) {
      const std::size_t at = placed.pass_instruction[s][j];
      PassPlaces& p = places[j];
      p.before_compute = at;
      p.before_input = at > begin && takes_input(from.code[at - 1]) ? at - 1 : at;
      const bool hands_on = at + 1 < end && passes[j].kind == PassKind::forward &&
                            (from.code[at + 1].op == Opcode::ISend || from.code[at + 1].op == Opcode::LoadTarget);
      p.after_output = hands_on ? at + 2 : at + 1;
      p.sent_output = hands_on && from.code[at + 1].op == Opcode::ISend;
    }
    // Instructions to insert before each index of the stream, in order.
    std::vector<std::vector<Instruction>> inserted(end - begin);
    const auto add = [&](std::size_t index, Opcode op, const Pass& pass,
                         MessageKind kind = MessageKind::none,
                         WaitDirection direction = WaitDirection::none) {
      Instruction in = cell_instruction(order.placement, order.config, static_cast<int>(s), op,
                                        pass.micro_batch, pass.chunk, kind, direction);
      in.set_source(0, false);
      inserted[index - begin].push_back(in);
    };
    std::vector<bool> sent(policies.units[s].size(), false);
    std::vector<std::size_t> offloading;  // passes whose offload is not waited for yet
    for (std::size_t j = 0; j < passes.size(); ++j) {
      const Pass& pass = passes[j];
      const std::size_t unit = unit_of(order, pass);
      const UnitPolicy policy = policy_of(policies, s, unit);
      const bool back = brings_back(order, policies, s, pass);
      if (pass.kind == PassKind::forward || back) {
        const std::size_t where = back ? places[j].before_input : places[j].before_compute;
        for (const std::size_t f : offloading) add(where, Opcode::WaitOffload, passes[f]);
        offloading.clear();
      }
      if (back) {
        if (sent[unit]) add(places[j].before_input, Opcode::Wait, pass, MessageKind::act, WaitDirection::send);
        if (policy == UnitPolicy::recompute) {
          add(places[j].before_input, Opcode::Recompute, pass);
        } else {
          add(places[j].before_input, Opcode::Reload, pass);
          add(places[j].before_compute, Opcode::WaitReload, pass);
        }
      }
      if (pass.kind == PassKind::forward) {
        sent[unit] = places[j].sent_output;
        if (policy == UnitPolicy::offload) {
          add(places[j].after_output, Opcode::Offload, pass);
          offloading.push_back(j);
        }
      }
    }
    std::vector<bool> checkpointed(end - begin, false);
    for (std::size_t j = 0; j < passes.size(); ++j) {
      checkpointed[places[j].before_compute - begin] =
          passes[j].kind == PassKind::forward &&
          policy_of(policies, s, unit_of(order, passes[j])) == UnitPolicy::recompute;
    }
    for (std::size_t i = begin; i < end; ++i) {
      for (const Instruction& in : inserted[i - begin]) program.code.push_back(in);
      Instruction in = from.code[i];
      if (checkpointed[i - begin]) in.op = Opcode::FwdCheckpoint;
      program.code.push_back(in);
    }
    program.rank_begin.push_back(program.code.size());
  }
  return program;
}

}  // namespace pipevm::synthesis
