// Random programs, well-formed or not (peers outside the pipeline,
// micro-batches and chunks out of range, waits without requests, mismatched
// collectives): the checker must neither crash nor hang, must say something
// located about every failure, and must say the same thing twice.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "check.hpp"

namespace pipevm {
namespace {

Program random_program(std::mt19937& rng) {
  const auto pick = [&rng](int low, int high) {
    return std::uniform_int_distribution<int>(low, high)(rng);
  };
  Program program;
  program.config.stages = pick(1, 4);
  program.config.micro_batches = pick(1, 3);
  program.config.dp = pick(1, 2);
  program.placement = static_cast<Placement>(pick(0, 2));
  program.config.chunks = program.placement == Placement::looped ? pick(1, 2) : 2;
  program.file = std::make_shared<SourceFile>("random.pipe", "stage 0 {\n    Fwd 0\n}\n");
  program.sources.push_back({14, 19});
  program.rank_begin.push_back(0);
  for (int r = 0; r < program.config.ranks(); ++r) {
    const int length = pick(0, 24);
    for (int i = 0; i < length; ++i) {
      Instruction in;
      in.op = static_cast<Opcode>(pick(0, static_cast<int>(kOpcodeCount) - 1));
      in.kind = static_cast<MessageKind>(pick(1, 2));
      in.direction = static_cast<WaitDirection>(pick(1, 2));
      in.micro_batch = static_cast<std::uint32_t>(pick(0, program.config.micro_batches));
      in.chunk = static_cast<std::uint16_t>(pick(0, 2));
      in.peer = static_cast<std::int16_t>(pick(-1, program.config.stages));
      in.set_source(0, true);
      program.code.push_back(in);
    }
    program.rank_begin.push_back(program.code.size());
  }
  return program;
}

std::string as_json(const CheckResult& result) {
  nlohmann::json j = nlohmann::json::array();
  for (const Diagnostic& d : result.diagnostics) j.push_back(to_json(d));
  return j.dump() + memory_to_json(result.memory).dump() + std::to_string(result.suppressed);
}

TEST(random, arbitrary_programs_are_checked_deterministically) {
  std::mt19937 rng(20261122);
  int failing = 0;
  for (int i = 0; i < 2000; ++i) {
    const Program program = random_program(rng);
    const CheckResult first = check(program);
    EXPECT_EQ(as_json(first), as_json(check(program))) << "program " << i;
    EXPECT_EQ(first.memory.size(), static_cast<std::size_t>(program.config.stages));
    for (const Diagnostic& d : first.diagnostics) {
      EXPECT_TRUE(d.location.file != nullptr) << d.message;
      EXPECT_FALSE(d.message.empty());
    }
    if (!first.ok()) ++failing;
  }
  // Random instructions are almost never a correct schedule.
  EXPECT_GT(failing, 1900);
}

}  // namespace
}  // namespace pipevm
