// What the watchdog costs a single wait: MpiComm's all-reduce of the default
// model's gradients (181,105 floats, 724 KB) and an 8-byte ping-pong between
// two pipeline stages, each timed with the watchdog off (--timeout 0: the
// blocking MPI calls) and on (a timeout: MPI_Iallreduce and a test loop that
// reads the clock), in alternating batches within one run so that the
// machine's load hits both alike. Prints the median of the batches' mean
// times for each. Results: bench/RESULTS.md, "## multihost". Leaves out
// everything but the waits (see watchdog.sh for the steady state of
// training).
//
//   mpirun -n 2 pipevm_comm_waits [BATCHES] [OPERATIONS_PER_BATCH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mpi_comm.hpp"

namespace {

using pipevm::runtime::MpiComm;
using pipevm::runtime::MpiCommOptions;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <typename Operation>
double seconds_per_operation(MpiComm& comm, int operations, const Operation& operation) {
  comm.all_ok(true);  // start together
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < operations; ++i) operation();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         operations;
}

}  // namespace

int main(int argc, char** argv) {
  pipevm::runtime::MpiSession session(&argc, &argv);
  if (session.world_size() != 2) {
    if (session.world_rank() == 0) std::fprintf(stderr, "pipevm_comm_waits: needs 2 ranks\n");
    return 2;
  }
  const int batches = argc > 1 ? std::atoi(argv[1]) : 15;
  const int operations = argc > 2 ? std::atoi(argv[2]) : 100;
  MpiCommOptions off;
  MpiCommOptions on;
  on.timeout_seconds = 300.0;
  // One stage of two replicas (the all-reduce), two stages of one (the messages).
  MpiComm replicas_off(session, 1, 100, off);
  MpiComm replicas_on(session, 1, 100, on);
  MpiComm stages_off(session, 2, 100, off);
  MpiComm stages_on(session, 2, 100, on);
  std::vector<float> gradients(181105, 1.0F);
  std::vector<float> message(2, 0.0F);
  const int peer = 1 - session.world_rank();
  const auto ping_pong = [&](MpiComm& comm) {
    if (comm.world_rank() == 0) {
      comm.send(peer, 7, message);
      comm.recv(peer, 7, message);
    } else {
      comm.recv(peer, 7, message);
      comm.send(peer, 7, message);
    }
  };
  std::vector<double> reduce[2];
  std::vector<double> round_trip[2];
  for (int batch = 0; batch < batches; ++batch) {
    MpiComm* replicas[2] = {&replicas_off, &replicas_on};
    MpiComm* stages[2] = {&stages_off, &stages_on};
    for (int watchdog = 0; watchdog < 2; ++watchdog) {
      reduce[watchdog].push_back(seconds_per_operation(
          *replicas[watchdog], operations, [&] { replicas[watchdog]->allreduce_sum(gradients); }));
      round_trip[watchdog].push_back(seconds_per_operation(*stages[watchdog], operations * 10,
                                                           [&] { ping_pong(*stages[watchdog]); }));
    }
  }
  if (session.world_rank() == 0) {
    std::printf("all-reduce of 724 KB: %.1f us without the watchdog, %.1f us with it (%.2fx)\n",
                median(reduce[0]) * 1e6, median(reduce[1]) * 1e6,
                median(reduce[1]) / median(reduce[0]));
    std::printf("8-byte ping-pong, one way: %.2f us without, %.2f us with (%.2fx)\n",
                median(round_trip[0]) / 2 * 1e6, median(round_trip[1]) / 2 * 1e6,
                median(round_trip[1]) / median(round_trip[0]));
    std::printf("(medians of %d batches of %d all-reduces and %d round trips)\n", batches,
                operations, operations * 10);
  }
  return 0;
}
