// The start-up ping-pong of link_probe.hpp.
#include "link_probe.hpp"

#include <algorithm>
#include <chrono>

#include "median.hpp"

namespace pipevm::runtime {

namespace {

// Any tag will do: the probe ends before the first step sends anything.
constexpr int kProbeTag = 0;
constexpr int kUntimedRoundTrips = 2;

// The lower stage's side: sends, waits for the echo; one-way = half a round trip.
double time_round_trips(Comm& comm, int peer_stage, std::span<float> buffer, int round_trips) {
  std::vector<double> one_way;
  for (int trip = 0; trip < kUntimedRoundTrips + round_trips; ++trip) {
    const auto start = std::chrono::steady_clock::now();
    comm.send(peer_stage, kProbeTag, buffer);
    comm.recv(peer_stage, kProbeTag, buffer);
    const std::chrono::duration<double, std::micro> trip_time =
        std::chrono::steady_clock::now() - start;
    if (trip >= kUntimedRoundTrips) one_way.push_back(trip_time.count() / 2);
  }
  return median(std::move(one_way));
}

void echo_round_trips(Comm& comm, int peer_stage, std::span<float> buffer, int round_trips) {
  for (int trip = 0; trip < kUntimedRoundTrips + round_trips; ++trip) {
    comm.recv(peer_stage, kProbeTag, buffer);
    comm.send(peer_stage, kProbeTag, buffer);
  }
}

}  // namespace

std::vector<ProbeTiming> probe_pipeline_links(Comm& comm, std::span<const std::size_t> message_floats,
                                              int round_trips) {
  std::vector<ProbeTiming> timings;
  const int stage = comm.stage();
  const std::size_t largest =
      message_floats.empty() ? 0 : *std::max_element(message_floats.begin(), message_floats.end());
  std::vector<float> buffer(largest, 1.0F);
  for (const int parity : {0, 1}) {
    const bool lower = stage % 2 == parity && stage + 1 < comm.stages();
    const bool upper = stage >= 1 && (stage - 1) % 2 == parity;
    for (const std::size_t floats : message_floats) {
      const std::span<float> message(buffer.data(), floats);
      if (lower) {
        timings.push_back({comm.world_rank(), comm.world_rank() + 1,
                           static_cast<double>(floats * sizeof(float)),
                           time_round_trips(comm, stage + 1, message, round_trips)});
      } else if (upper) {
        echo_round_trips(comm, stage - 1, message, round_trips);
      }
    }
  }
  return timings;
}

}  // namespace pipevm::runtime
