// MPI ping-pong between ranks 0 and 1: the median round trip of a small
// message, halved (one-way latency), over several batches. It measures the
// path two ranks' messages take (loopback TCP, shared memory, or a link
// between two hosts) and how the ranks wait (MPI's spin or
// mpi_yield_when_idle). Results: bench/RESULTS.md, "## multihost".
// Leaves out bandwidth and collectives; only ranks 0 and 1 take part.
//
//   mpirun -n 2 pipevm_pingpong [BYTES] [ROUND_TRIPS_PER_BATCH] [BATCHES]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kTag = 7;

// One batch of round trips from rank 0's side; seconds per round trip.
double batch(std::vector<char>& buffer, int round_trips, int rank) {
  const int size = static_cast<int>(buffer.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < round_trips; ++i) {
    if (rank == 0) {
      MPI_Send(buffer.data(), size, MPI_CHAR, 1, kTag, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), size, MPI_CHAR, 1, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), size, MPI_CHAR, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), size, MPI_CHAR, 0, kTag, MPI_COMM_WORLD);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         round_trips;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "pipevm_pingpong: needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  const int bytes = argc > 1 ? std::atoi(argv[1]) : 8;
  const int round_trips = argc > 2 ? std::atoi(argv[2]) : 200;
  const int batches = argc > 3 ? std::atoi(argv[3]) : 9;
  std::vector<char> buffer(static_cast<std::size_t>(std::max(bytes, 1)));
  batch(buffer, std::max(round_trips / 10, 1), rank);  // connections, caches
  std::vector<double> seconds;
  for (int b = 0; b < batches; ++b) seconds.push_back(batch(buffer, round_trips, rank));
  if (rank == 0) {
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(host, &length);
    std::printf(
        "pingpong %d bytes: one-way latency %.1f us (median of %d batches of %d round trips; "
        "min %.1f, max %.1f) from %s\n",
        bytes, median / 2 * 1e6, batches, round_trips, seconds.front() / 2 * 1e6,
        seconds.back() / 2 * 1e6, host);
  }
  MPI_Finalize();
  return 0;
}
