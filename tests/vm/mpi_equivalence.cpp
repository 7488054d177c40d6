// Run under mpiexec with 4 ranks: the VM over MpiComm trains the weights of
// sequential training for shipped schedules split every way 4 ranks allow
// (4 stages; 2 stages x 2 replicas; 1 stage x 4 replicas). World rank 0
// computes the sequential reference and compares; every rank exits with the
// verdict. Plain main (no gtest): every rank must run the same collectives.
#include <cstdio>
#include <exception>

#include "mpi_comm.hpp"
#include "vm_test_support.hpp"

namespace {

struct Case {
  const char* schedule;
  int stages;
  int micro_batches;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace pipevm;
  runtime::MpiSession session(&argc, &argv);
  const bool root = session.world_rank() == 0;
  const int world = session.world_size();
  const Case cases[] = {
      {"gpipe", 4, 4}, {"1f1b", 4, 4}, {"naive", 2, 4}, {"1f1b", 2, 4}, {"gpipe", 1, 2}};
  bool all_passed = true;
  for (const Case& c : cases) {
    if (world % c.stages != 0) continue;
    const Config config{c.stages, c.micro_batches, 1, world / c.stages};
    bool passed = false;
    std::string detail;
    try {
      const Program program = vm_test::compile_file(vm_test::schedule_path(c.schedule), config);
      const TrainingOptions options = vm_test::training_options(16, 3);
      runtime::MpiComm comm(session, config.stages,
                            MessageTags(program.placement, config).max_tag());
      Trainer trainer(program, comm, options, &vm_test::small_data());
      trainer.train_epoch(0);
      const std::vector<float> trained = trainer.gather_parameters();
      passed = trainer.replicas_agree();
      if (root) {
        const double difference =
            vm_test::relative_difference(trained, vm_test::sequential_reference(options));
        passed = passed && difference <= 1e-5;
        detail = "relative difference " + std::to_string(difference);
      }
    } catch (const std::exception& error) {
      detail = error.what();
    }
    passed = session.all_ok(passed);
    if (root) {
      std::printf("%s %s: %d stages x %d dp, %d micro-batches: %s\n", passed ? "PASS" : "FAIL",
                  c.schedule, config.stages, config.dp, config.micro_batches, detail.c_str());
    }
    all_passed = all_passed && passed;
  }
  return all_passed ? 0 : 1;
}
