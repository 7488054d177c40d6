// Run under mpiexec (4 ranks): shipped schedules, through the VM over
// MpiComm, train the weights of sequential training, split every way the
// world allows (stages x replicas x chunks). One driver, two case lists:
//   mpi_equivalence vm         GPipe, 1F1B and naive over 4, 2 and 1 stages
//   mpi_equivalence schedules  every shipped schedule at least twice
//   mpi_equivalence shards     the sharded schedules with dp = 2
//   mpi_equivalence holds      tests/vm/holds.pipe (Hold and Drop) over 4 and 2 stages
//   mpi_equivalence synthesized  flat programs `pipevm synthesize` wrote (tests/vm/
//                              synthesized-*.pipe: looped and V), each on as many ranks as stages
//   mpi_equivalence vit        the vm and schedules lists on a tiny ViT
// World rank 0 computes the sequential reference and compares; every rank
// exits with the verdict, which fails when no case ran (a world size no
// case fits, or an unknown list). A forward-only schedule must leave the
// weights bit for bit as they were. Plain main (no gtest): every rank must
// run the same collectives. The helpers (small data, reference, difference)
// are the VM tests' (vm_test_support.hpp); the model is deep enough that V
// and interleaved placements over 4 ranks (8 pieces) have a layer each (the
// ViT: a block each).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.hpp"
#include "mpi_comm.hpp"
#include "vm_test_support.hpp"

namespace {

using namespace pipevm;

struct Case {
  const char* schedule;
  int stages;
  int micro_batches;
  int chunks;
  const char* directory = "schedules";
  bool flat = false;  // one block per stage: runs only at dp 1 (world = stages)
};

// dp = world / stages.
constexpr Case kVmCases[] = {
    {"gpipe", 4, 4, 1}, {"1f1b", 4, 4, 1},  {"naive", 2, 4, 1},
    {"1f1b", 2, 4, 1},  {"gpipe", 1, 2, 1},
};

// Every schedule at least twice.
constexpr Case kScheduleCases[] = {
    {"naive", 4, 3, 1},
    {"1f1b-nonblocking", 4, 4, 1},
    {"1f1b-nonblocking", 2, 5, 1},
    {"1f1b-recompute", 4, 4, 1},
    {"1f1b-recompute", 2, 5, 1},
    {"1f1b-offload", 4, 5, 1},
    {"1f1b-offload", 2, 4, 1},
    {"interleaved-1f1b", 4, 4, 2},
    {"interleaved-1f1b", 2, 4, 2},
    {"interleaved-1f1b", 2, 4, 3},
    {"zb-h1", 4, 6, 1},
    {"zb-h1", 2, 4, 1},
    {"zb-h2", 4, 7, 1},
    {"zb-h2", 2, 4, 1},
    {"dualpipev", 4, 8, 2},
    {"dualpipev", 2, 4, 2},
    {"dualpipe", 4, 8, 2},
    {"dualpipe", 2, 4, 2},
    {"inference", 4, 4, 1},
    {"inference", 2, 3, 1},
    {"dp", 1, 2, 1},
    {"dp", 1, 3, 1},
    {"gpipe-allreduce", 2, 4, 1},
    {"gpipe-allreduce", 4, 3, 1},
    {"zb-v", 2, 4, 2},
    {"zb-v", 2, 5, 2},
    {"zb-v", 4, 8, 2},
    {"v-half", 2, 4, 2},
    {"v-half", 4, 8, 2},
    {"v-min", 2, 3, 2},
    {"v-min", 4, 6, 2},
    {"interleaved-zb", 2, 4, 2},
    {"interleaved-zb", 2, 2, 2},
    {"looped-bfs", 2, 4, 2},
    {"looped-bfs", 2, 3, 2},
    {"fsdp", 1, 3, 1},
    {"fsdp", 1, 2, 1},
    {"wsdp", 1, 2, 1},
    {"wsdp", 1, 3, 1},
    {"pp-fsdp", 2, 4, 1},
    {"pp-fsdp", 1, 2, 1},
};

// The sharded schedules on a small world (2 ranks: dp = 2).
constexpr Case kShardCases[] = {
    {"fsdp", 1, 3, 1},
    {"wsdp", 1, 2, 1},
    {"pp-fsdp", 1, 2, 1},
};

// Values held past their last use (4 ranks: dp = 1 and 2).
constexpr Case kHoldCases[] = {
    {"holds", 4, 4, 1, "tests/vm"},
    {"holds", 2, 3, 1, "tests/vm"},
    {"holds", 2, 2, 1, "tests/vm"},
};

// Synthesized programs (tests/vm/synthesized-*.pipe; their headers hold the
// commands that wrote them): 2 ranks and 4 ranks, with memory policies too.
constexpr Case kSynthesizedCases[] = {
    {"synthesized-p2-m4", 2, 4, 1, "tests/vm", true},
    {"synthesized-v-p2-m4", 2, 4, 2, "tests/vm", true},
    // The turn of the V with no message (an older synthesize sent one, above).
    {"synthesized-v-turn-p2-m4", 2, 4, 2, "tests/vm", true},
    {"synthesized-p4-m6", 4, 6, 1, "tests/vm", true},
    {"synthesized-v-p4-m8", 4, 8, 2, "tests/vm", true},
    // --memory-policy any under a limit: offloads, and recomputes selectively
    {"synthesized-offload-p2-m4", 2, 4, 1, "tests/vm", true},
    {"synthesized-recompute-p4-m6", 4, 6, 1, "tests/vm", true},
    // Per-layer costs (tests/vm/deep-layers.yaml): the cut chosen with the
    // order, recorded on the program's `cut` line and trained as recorded.
    {"synthesized-cut-p2-m4", 2, 4, 1, "tests/vm", true},
    {"synthesized-cut-p4-m6", 4, 6, 1, "tests/vm", true},
};

constexpr double kTolerance = 1e-5;

bool trains(const Program& program) {
  return std::any_of(program.code.begin(), program.code.end(),
                     [](const Instruction& in) { return is_step(in.op); });
}

}  // namespace

int main(int argc, char** argv) {
  runtime::MpiSession session(&argc, &argv);
  const bool root = session.world_rank() == 0;
  const int world = session.world_size();
  const std::string list = argc == 2 ? argv[1] : "";
  const bool vit = list == "vit";
  std::vector<Case> cases;
  if (list == "vm" || vit) cases.insert(cases.end(), std::begin(kVmCases), std::end(kVmCases));
  if (list == "schedules" || vit) {
    cases.insert(cases.end(), std::begin(kScheduleCases), std::end(kScheduleCases));
  }
  if (list == "shards") cases.assign(std::begin(kShardCases), std::end(kShardCases));
  if (list == "holds") cases.assign(std::begin(kHoldCases), std::end(kHoldCases));
  if (list == "synthesized") {
    cases.assign(std::begin(kSynthesizedCases), std::end(kSynthesizedCases));
  }
  const runtime::ModelConfig model = vit ? vm_test::tiny_vit() : vm_test::deep_model();
  const runtime::DataSplit& data = vit ? vm_test::vit_data() : vm_test::small_data();
  bool all_passed = true;
  int ran = 0;
  for (const Case& c : cases) {
    if (world % c.stages != 0 || (c.flat && world != c.stages)) continue;
    ++ran;
    const Config config{c.stages, c.micro_batches, c.chunks, world / c.stages};
    bool passed = false;
    std::string detail;
    try {
      const std::vector<int> widths = model.sizes;
      const Program program = vm_test::compile_file(
          std::string(PIPEVM_SOURCE_DIR) + "/" + c.directory + "/" + c.schedule + ".pipe", config,
          widths);
      CheckOptions check_options;
      check_options.layer_widths = widths;
      if (!check(program, check_options).ok()) throw std::runtime_error("the checker rejects it");
      // dp x micro-batches x 2 rows per micro-batch, 3 steps.
      TrainingOptions options = vm_test::training_options(config.dp * c.micro_batches * 2, 3);
      options.machine.model = model;
      runtime::MpiComm comm(session, config.stages,
                            MessageTags(program.placement, config).max_tag());
      Trainer trainer(program, comm, options, &data);
      trainer.train_epoch(0);
      const std::vector<float> trained = trainer.gather_parameters();
      passed = trainer.replicas_agree();
      if (root) {
        const bool training = trains(program);
        TrainingOptions untrained = options;
        untrained.max_steps_per_epoch = 0;
        const std::vector<float> initial = vm_test::sequential_reference(untrained, data);
        const std::vector<float> expected =
            training ? vm_test::sequential_reference(options, data) : initial;
        const double difference = vm_test::relative_difference(trained, expected);
        // The reference must have moved, or agreeing with it proves nothing.
        const double moved = vm_test::relative_difference(initial, expected);
        passed = passed && difference <= (training ? kTolerance : 0.0) &&
                 (!training || moved > 100 * kTolerance);
        char text[160];
        std::snprintf(text, sizeof text, "relative difference %.3g (%s %.3g)", difference,
                      training ? "training moved the weights by" : "forward only, tolerance",
                      training ? moved : 0.0);
        detail = text;
      }
    } catch (const std::exception& error) {
      detail = error.what();
    }
    passed = session.all_ok(passed);
    if (root) {
      std::printf("%s %s: %d stages x %d dp, %d micro-batches, %d chunks: %s\n",
                  passed ? "PASS" : "FAIL", c.schedule, config.stages, config.dp,
                  config.micro_batches, config.chunks, detail.c_str());
    }
    all_passed = all_passed && passed;
  }
  if (ran == 0 && root) {
    std::printf(
        "FAIL: no case of list '%s' ran on %d ranks (lists: vm, schedules, shards, holds, "
        "synthesized, vit)\n",
        list.c_str(), world);
  }
  return all_passed && ran > 0 ? 0 : 1;
}
