// Checkpoint and resume through the Trainer, in process: a checkpoint taken
// mid-epoch, written to disk and read back into fresh Trainers (a new world,
// as after a crash) continues to the bits of an uninterrupted run, and the
// resumed epoch reports the loss the uninterrupted one did. Pipelines,
// data parallelism, two chunks per rank, the V placement, SGD with momentum
// and Adam. (Killing a real `pipevm run` rank is tests/vm/kill_and_resume.sh.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "checkpoint.hpp"
#include "checkpoints.hpp"
#include "inprocess_comm.hpp"
#include "vm_test_support.hpp"

namespace pipevm {
namespace {

using vm_test::compile_file;
using vm_test::schedule_path;
using vm_test::small_data;
using vm_test::training_options;

constexpr int kGlobalBatch = 16;
constexpr int kStepsPerEpoch = 6;
constexpr int kEpochs = 3;
constexpr std::int64_t kCheckpointStep = 8;  // epoch 1, step 2

struct Case {
  const char* schedule;
  int stages;
  int dp;
  int chunks;
  const char* optimizer;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = std::string(c.schedule) + "_stages" + std::to_string(c.stages) + "_dp" +
                     std::to_string(c.dp) + "_chunks" + std::to_string(c.chunks) + "_" +
                     c.optimizer;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// What rank 0 saw at the end of a run.
struct Outcome {
  std::vector<float> model;
  double last_epoch_loss = 0.0;
};

class checkpoint : public testing::TestWithParam<Case> {
 protected:
  checkpoint()
      : program_(compile_file(schedule_path(GetParam().schedule),
                              Config{GetParam().stages, 4, GetParam().chunks, GetParam().dp},
                              vm_test::deep_model().sizes)),
        options_(training_options(kGlobalBatch, kStepsPerEpoch)),
        directory_((std::filesystem::temp_directory_path() /
                    ("pipevm-" + std::to_string(getpid()) + "-" + case_name({GetParam(), 0})))
                       .string()) {
    options_.machine.optimizer.kind = GetParam().optimizer;
    if (options_.machine.optimizer.kind == "adam") options_.machine.optimizer.lr = 1e-2F;
    options_.machine.model = vm_test::deep_model();
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  ~checkpoint() override { std::filesystem::remove_all(directory_); }

  // Trains to the end of epoch kEpochs - 1: from scratch, or from the
  // checkpoint in directory_; writes one at kCheckpointStep when `write`.
  Outcome train(bool resume, bool write) {
    Outcome outcome;
    std::mutex mutex;
    runtime::run_in_process(program_.config.stages, program_.config.dp, [&](runtime::Comm& comm) {
      Trainer trainer(program_, comm, options_, &small_data());
      if (resume) {
        const runtime::Manifest manifest = runtime::read_manifest(directory_);
        const train::Resumed mine = train::read_rank_state(directory_, manifest, trainer,
                                                           comm.world_rank(), comm.world_size());
        trainer.resume(mine.slices, manifest.position, mine.sums);
      }
      const auto on_step = [&](int, int) {
        if (!write || trainer.position().step != kCheckpointStep) return;
        const runtime::CheckpointResult result = runtime::write_checkpoint(
            comm, directory_, trainer.position(), {{{"test", "1"}}, {}}, trainer.checkpoint());
        if (!result.committed) throw std::runtime_error("no checkpoint: " + result.error);
      };
      EpochReport report;
      for (int epoch = trainer.position().epoch; epoch < kEpochs; ++epoch) {
        report = trainer.train_epoch(epoch, on_step);
      }
      std::vector<float> model = trainer.gather_parameters();
      if (comm.world_rank() == 0) {
        std::lock_guard lock(mutex);
        outcome = {std::move(model), report.train_loss};
      }
    });
    return outcome;
  }

  Program program_;
  TrainingOptions options_;
  std::string directory_;
};

TEST_P(checkpoint, resumed_run_ends_with_the_uninterrupted_bits) {
  const Outcome uninterrupted = train(false, false);
  const Outcome checkpointed = train(false, true);
  EXPECT_EQ(checkpointed.model, uninterrupted.model) << "writing a checkpoint changed the run";
  ASSERT_EQ(runtime::read_manifest(directory_).position.step, kCheckpointStep);

  const Outcome resumed = train(true, false);
  ASSERT_FALSE(resumed.model.empty());
  EXPECT_EQ(resumed.model, uninterrupted.model);
  EXPECT_EQ(resumed.last_epoch_loss, uninterrupted.last_epoch_loss);
}

INSTANTIATE_TEST_SUITE_P(cases, checkpoint,
                         testing::Values(Case{"1f1b", 2, 1, 1, "sgd"},
                                         Case{"gpipe", 1, 2, 1, "adam"},
                                         Case{"1f1b", 2, 2, 1, "adam"},
                                         Case{"interleaved-1f1b", 2, 1, 2, "adam"},
                                         Case{"dualpipev", 2, 1, 2, "sgd"}),
                         case_name);

TEST(checkpoint, resume_refuses_slices_of_another_shape) {
  const Program program = compile_file(schedule_path("gpipe"), Config{1, 4, 1, 1});
  runtime::run_in_process(1, 1, [&](runtime::Comm& comm) {
    Trainer trainer(program, comm, training_options(kGlobalBatch, kStepsPerEpoch), &small_data());
    runtime::RankCheckpoint mine = trainer.checkpoint();
    EXPECT_THROW(trainer.resume(mine.slices, {0, 0, 0, kStepsPerEpoch + 1}, {}),
                 std::invalid_argument);
    mine.slices.front().parameters.pop_back();
    EXPECT_THROW(trainer.resume(mine.slices, trainer.position(), {}), std::invalid_argument);
    mine.slices.pop_back();
    EXPECT_THROW(trainer.resume(mine.slices, trainer.position(), {}), std::invalid_argument);
  });
}

}  // namespace
}  // namespace pipevm
