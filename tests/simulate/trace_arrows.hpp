// Whether the arrows of a pipevm trace land where they should once Perfetto
// has imported it (perfetto_model.hpp): for every message of the program, an
// arrow that starts on the slice of its send and ends on the slice of its
// receive (the receive itself, or the Wait/WaitAll that completes a
// non-blocking one, or a slice of its own inside that one's time on that
// rank), never earlier than it starts. Used on simulated traces by
// trace_arrows_test.cpp and on real runs by trace_arrows_main.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "program.hpp"

namespace pipevm::testing {

struct ArrowReport {
  std::size_t messages = 0;   // sends paired with a receive in the program
  std::size_t landed = 0;     // drawn from the send's slice to the receive's
  std::size_t missing = 0;    // no arrow leaves the send's slice (Perfetto dropped it)
  std::size_t backwards = 0;  // drawn, but into the send's slice from a slice that starts earlier
  std::size_t misplaced = 0;  // drawn from the send's slice to some other slice
  std::size_t stray = 0;      // arrows that belong to no message
  std::size_t drawn = 0;      // arrows Perfetto draws at all
  std::size_t dropped = 0;    // flow ends Perfetto read before their start, and dropped
  std::vector<std::string> problems;  // one line per message that did not land

  bool all_landed() const { return landed == messages && stray == 0; }
  std::string summary() const;
};

ArrowReport check_trace_arrows(const Program& program, const nlohmann::json& trace);

}  // namespace pipevm::testing
