// Orders timed by the simulator (timed_order.hpp).
#include "timed_order.hpp"

#include <algorithm>

namespace pipevm::synthesis {

std::shared_ptr<const SourceFile> builder_file() {
  static const auto file = std::make_shared<const SourceFile>("synthesized.pipe", "");
  return file;
}

std::vector<StageSpan> stage_spans(const Program& program, const Timeline& timeline) {
  std::vector<StageSpan> spans(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) {
    StageSpan& span = spans[static_cast<std::size_t>(r)];
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
    for (std::size_t i = begin; i < end; ++i) {
      // A BwdAllReduce (a collective) is a backward too: the shipped
      // 1F1B family ends each stage with one.
      const Opcode op = program.code[i].op;
      if (info(op).cls != OpClass::compute && op != Opcode::BwdAllReduce) continue;
      const InstructionTime& t = timeline.times[i];
      span.first = std::min(span.first, t.started);
      span.last = std::max(span.last, t.started + t.busy);
      span.work += t.busy;
    }
  }
  return spans;
}

double longest_span(const Program& program, const Timeline& timeline) {
  double longest = 0;
  for (const StageSpan& s : stage_spans(program, timeline)) {
    if (s.last > s.first) longest = std::max(longest, s.last - s.first);
  }
  return longest;
}

std::optional<Timed> time_order(const ComputeOrder& order, const Costs& costs) {
  Timed timed{{}, {}, program_for_timing(order, builder_file())};
  Diagnostics diagnostics;
  auto simulation = simulate(timed.built.program, costs, diagnostics);
  if (!simulation) return std::nullopt;
  timed.simulation = std::move(*simulation);
  timed.score = {longest_span(timed.built.program, timed.simulation.timeline),
                 timed.simulation.timeline.makespan};
  return timed;
}

}  // namespace pipevm::synthesis
