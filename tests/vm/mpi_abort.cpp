// Run under mpiexec: rank 1 fails while every other rank blocks in a receive
// that will never complete. MpiComm::abort must print rank 1's message and
// bring the whole job down (the test expects a non-zero exit within its
// timeout, not a hang). Also: a configuration whose tags exceed MPI_TAG_UB
// is refused before any message is sent.
#include <cstdio>
#include <vector>

#include "mpi_comm.hpp"

int main(int argc, char** argv) {
  using namespace pipevm::runtime;
  MpiSession session(&argc, &argv);
  try {
    MpiComm too_many_tags(session, session.world_size(), session.tag_upper_bound() + 1);
    std::printf("FAIL: tags beyond MPI_TAG_UB were accepted\n");
    return 0;  // the test expects a failure: success here fails it
  } catch (const CommError& error) {
    if (session.world_rank() == 0) std::printf("refused as expected: %s\n", error.what());
  }
  MpiComm comm(session, session.world_size(), 100);
  if (comm.world_rank() == 1) comm.abort("rank 1: failing on purpose");
  std::vector<float> never(4);
  comm.recv(1, 7, never);
  std::printf("FAIL: rank %d received a message nobody sent\n", comm.world_rank());
  return 0;
}
