// Hand-built Programs for the simulator's tests: a tiny builder, and GPipe and
// 1F1B written instruction by instruction as schedules/gpipe.pipe and
// schedules/1f1b.pipe would expand them, so the simulator can be tested
// without the front end. Every instruction points at one empty source range.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "costs.hpp"
#include "program.hpp"

namespace pipevm::testing {

inline Instruction op(Opcode code, std::uint32_t micro_batch = 0, std::uint16_t chunk = 0) {
  Instruction in;
  in.op = code;
  in.micro_batch = micro_batch;
  in.chunk = chunk;
  return in;
}

inline Instruction message(Opcode code, MessageKind kind, std::uint32_t micro_batch, int peer,
                           std::uint16_t chunk = 0) {
  Instruction in = op(code, micro_batch, chunk);
  in.kind = kind;
  in.peer = static_cast<std::int16_t>(peer);
  return in;
}

inline Instruction wait(WaitDirection direction, MessageKind kind, std::uint32_t micro_batch) {
  Instruction in = op(Opcode::Wait, micro_batch);
  in.direction = direction;
  in.kind = kind;
  return in;
}

// streams[r] is world rank r's stream.
inline Program make_program(Config config, const std::vector<std::vector<Instruction>>& streams,
                            std::string name = "test") {
  Program program;
  program.name = std::move(name);
  program.config = config;
  program.sources.push_back({});
  program.rank_begin.push_back(0);
  for (const auto& stream : streams) {
    program.code.insert(program.code.end(), stream.begin(), stream.end());
    program.rank_begin.push_back(program.code.size());
  }
  return program;
}

// One pipeline's forward of micro-batch mb on `stage`.
inline void forward(std::vector<Instruction>& s, int stage, int stages, std::uint32_t mb) {
  s.push_back(stage == 0 ? op(Opcode::LoadInput, mb)
                         : message(Opcode::Recv, MessageKind::act, mb, stage - 1));
  s.push_back(op(Opcode::Fwd, mb));
  s.push_back(stage == stages - 1 ? op(Opcode::LoadTarget, mb)
                                  : message(Opcode::ISend, MessageKind::act, mb, stage + 1));
}

inline void backward(std::vector<Instruction>& s, int stage, int stages, std::uint32_t mb) {
  if (stage < stages - 1) s.push_back(message(Opcode::Recv, MessageKind::grad, mb, stage + 1));
  s.push_back(op(Opcode::Bwd, mb));
  if (stage > 0) s.push_back(message(Opcode::ISend, MessageKind::grad, mb, stage - 1));
}

inline Program gpipe(int stages, int micro_batches) {
  std::vector<std::vector<Instruction>> streams(static_cast<std::size_t>(stages));
  for (int stage = 0; stage < stages; ++stage) {
    auto& s = streams[static_cast<std::size_t>(stage)];
    s.push_back(op(Opcode::ZeroGrad));
    for (int i = 0; i < micro_batches; ++i)
      forward(s, stage, stages, static_cast<std::uint32_t>(i));
    for (int i = 0; i < micro_batches; ++i)
      backward(s, stage, stages, static_cast<std::uint32_t>(i));
    s.push_back(op(Opcode::WaitAll));
    s.push_back(op(Opcode::OptimizerStep));
  }
  return make_program({stages, micro_batches, 1, 1}, streams, "gpipe");
}

inline Program one_f_one_b(int stages, int micro_batches) {
  std::vector<std::vector<Instruction>> streams(static_cast<std::size_t>(stages));
  for (int stage = 0; stage < stages; ++stage) {
    auto& s = streams[static_cast<std::size_t>(stage)];
    const int warmup = std::min(stages - stage - 1, micro_batches);
    const auto mb = [](int i) { return static_cast<std::uint32_t>(i); };
    s.push_back(op(Opcode::ZeroGrad));
    for (int i = 0; i < warmup; ++i) forward(s, stage, stages, mb(i));
    for (int i = 0; i < micro_batches - warmup; ++i) {
      forward(s, stage, stages, mb(i + warmup));
      backward(s, stage, stages, mb(i));
    }
    for (int i = micro_batches - warmup; i < micro_batches; ++i) backward(s, stage, stages, mb(i));
    s.push_back(op(Opcode::WaitAll));
    s.push_back(op(Opcode::OptimizerStep));
  }
  return make_program({stages, micro_batches, 1, 1}, streams, "1f1b");
}

// The textbook cost model of the bubble formulas: F = 1, B = 2, free messages.
inline Costs textbook() {
  Costs costs;
  costs.fwd = 1;
  costs.bwd = 2;
  return costs;
}

}  // namespace pipevm::testing
