// What a rank does after it sends decides when its message arrives: rank 0
// posts MPI_Isend of BYTES to rank 1, which waits in MPI_Recv, then either
// computes (a busy loop) or sleeps for PAUSE microseconds before MPI_Wait;
// rank 1 prints the median time from the send to its receive's completion.
// On the test cluster (bench/RESULTS.md, "multihost: simulated vs
// measured") a small message from a computing sender waited for the
// sender's core, and one over Open MPI's 64 KiB eager limit for the
// sender's next MPI call. Also: compute between all-reduces
// (ALLREDUCE_FLOATS > 0), the time of each all-reduce of that many floats
// after PAUSE microseconds of computing on both ranks. Both ranks run on
// one machine, so rank 0's clock is rank 1's. Open MPI is set up as
// pipevm sets it up (runtime/mpi_comm.cpp): TCP without its put protocol,
// the non-blocking all-reduce as reduce-scatter + allgather.
//
//   mpirun -n 2 pipevm_busy_sender BYTES PAUSE compute|sleep [REPEATS]
//   mpirun -n 2 pipevm_busy_sender ALLREDUCE_FLOATS PAUSE allreduce [REPEATS]
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kDataTag = 1;
constexpr int kClockTag = 2;

double now_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

void compute_for(double microseconds) {
  const double start = now_us();
  volatile double sink = 0;
  while (now_us() - start < microseconds) sink = sink + 1;
}

void sleep_for(double microseconds) {
  const auto nanoseconds = static_cast<long>(microseconds * 1e3);
  const timespec pause{nanoseconds / 1'000'000'000, nanoseconds % 1'000'000'000};
  nanosleep(&pause, nullptr);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Microseconds from rank 0's MPI_Isend to rank 1's completed receive, on rank 1.
std::vector<double> arrivals(int rank, int bytes, double pause, bool sleep, int repeats) {
  std::vector<char> buffer(static_cast<std::size_t>(std::max(bytes, 1)));
  std::vector<double> delays;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      double sent = now_us();
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Isend(buffer.data(), bytes, MPI_CHAR, 1, kDataTag, MPI_COMM_WORLD, &request);
      if (sleep) {
        sleep_for(pause);
      } else {
        compute_for(pause);
      }
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      MPI_Send(&sent, 1, MPI_DOUBLE, 1, kClockTag, MPI_COMM_WORLD);
    } else if (rank == 1) {
      MPI_Recv(buffer.data(), bytes, MPI_CHAR, 0, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double received = now_us();
      double sent = 0;
      MPI_Recv(&sent, 1, MPI_DOUBLE, 0, kClockTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      delays.push_back(received - sent);
    }
  }
  return delays;
}

// Microseconds of each all-reduce (non-blocking, tested in a loop, as
// pipevm's watchdog waits) that follows `pause` of computing, on rank 0.
std::vector<double> all_reduces(int floats, double pause, int repeats) {
  std::vector<float> data(static_cast<std::size_t>(std::max(floats, 1)), 1.0F);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    compute_for(pause);
    const double start = now_us();
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, data.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    int done = 0;
    while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    times.push_back(now_us() - start);
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum,hetero-rdma", 0);
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 3 ? argv[3] : "";
  const bool known = std::strcmp(mode, "compute") == 0 || std::strcmp(mode, "sleep") == 0 ||
                     std::strcmp(mode, "allreduce") == 0;
  if (size != 2 || !known) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: mpirun -n 2 pipevm_busy_sender BYTES|FLOATS PAUSE_US "
                   "compute|sleep|allreduce [REPEATS]\n");
    }
    MPI_Finalize();
    return 2;
  }
  const int count = std::atoi(argv[1]);
  const double pause = std::atof(argv[2]);
  const int repeats = argc > 4 ? std::max(std::atoi(argv[4]), 1) : 21;
  if (std::strcmp(mode, "allreduce") == 0) {
    all_reduces(count, pause, 3);  // connections, caches
    const std::vector<double> times = all_reduces(count, pause, repeats);
    if (rank == 0) {
      std::printf("all-reduce of %d floats after %.0f us of computing: median %.0f us (%d)\n",
                  count, pause, median(times), repeats);
    }
  } else {
    const bool sleep = std::strcmp(mode, "sleep") == 0;
    arrivals(rank, count, pause, sleep, 3);
    const std::vector<double> delays = arrivals(rank, count, pause, sleep, repeats);
    if (rank == 1) {
      std::printf(
          "%d bytes, sender %s %.0f us after MPI_Isend: arrived after median %.0f us "
          "(min %.0f, max %.0f; %d)\n",
          count, sleep ? "sleeps" : "computes", pause, median(delays),
          *std::min_element(delays.begin(), delays.end()),
          *std::max_element(delays.begin(), delays.end()), repeats);
    }
  }
  MPI_Finalize();
  return 0;
}
