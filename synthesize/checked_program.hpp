// A placed program as synthesis hands it out: written as flat text,
// compiled back from that text (so the result is what a user's file
// gives), checked under MPI's progress rule and under posted order, and
// simulated. Shared by the keep-only search's last step and the memory
// policies' candidates. Not here: building the program (place_comms.hpp,
// memory_policy.hpp).
#pragma once

#include <optional>
#include <string>

#include "costs.hpp"
#include "memory_bytes.hpp"
#include "program.hpp"
#include "simulate.hpp"

namespace pipevm::synthesis {

struct CheckedProgram {
  Program program;  // compiled from `text`
  std::string text;  // its flat form: placement, check line, stage blocks
  Simulation simulation;
};

// The flat form of a program.
std::string flat_text(const Program& program);

// Nullopt with `error` (one line) when the text does not compile, a check
// finds something or the simulation cannot run. With `shape`, Offload and
// Reload are timed for that model's bytes (else by host-latency alone).
std::optional<CheckedProgram> check_and_time(const Program& placed, const Costs& costs,
                                             const MemoryShape* shape, std::string& error);

}  // namespace pipevm::synthesis
