// The VM's memory policies through the in-process Comm: 1f1b-recompute and
// 1f1b-offload, and their selective forms, train the bits of 1f1b on 2 and
// 4 stages, for the MLP and the ViT (a recomputed forward is the same
// computation on the same input, a reload brings back the same floats); the
// bytes the ledger measures, the device's and the host's, are those the
// byte walk counts, and the device's peak is below 1f1b's where a stage
// holds more than one micro-batch; a misplaced policy is refused at its
// instruction with a message that says what to do.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "vm.hpp"
#include "vm_test_bytes.hpp"
#include "vm_test_support.hpp"

namespace pipevm {
namespace {

using vm_test::compile_file;
using vm_test::compile_text;
using vm_test::schedule_path;
using vm_test::train_in_process;
using vm_test::training_options;

struct Model {
  const char* name;
  runtime::ModelConfig config;
  const runtime::DataSplit* data;
};

std::vector<Model> models() {
  return {{"mlp", vm_test::deep_model(), &vm_test::small_data()},
          {"vit", vm_test::tiny_vit(), &vm_test::vit_data()}};
}

TrainingOptions options_for(const Model& model, const Config& config) {
  return training_options(2 * config.dp * config.micro_batches, 3, vm_test::sgd(), model.config);
}

// The shipped file with one `let` set, as its header says a selective form is made.
std::string with_let(const std::string& schedule, const std::string& let, int value) {
  std::ifstream in(schedule_path(schedule));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const std::size_t at = text.find("let " + let + " = ");
  if (at == std::string::npos) throw std::runtime_error(schedule + " has no `let " + let + "`");
  text.replace(at, text.find('\n', at) - at, "let " + let + " = " + std::to_string(value));
  return text;
}

TEST(memory_policy, recomputation_and_offload_train_the_bits_of_1f1b) {
  for (const Model& model : models()) {
    for (const Config config : {Config{2, 4, 1, 1}, Config{4, 5, 1, 1}, Config{2, 4, 1, 2}}) {
      const std::string what = std::string(model.name) + " " + std::to_string(config.stages) +
                               " stages, dp " + std::to_string(config.dp);
      const TrainingOptions options = options_for(model, config);
      const std::vector<float> plain = train_in_process(
          compile_file(schedule_path("1f1b"), config, model.config.sizes), options, *model.data);
      ASSERT_FALSE(plain.empty());
      for (const char* schedule : {"1f1b-recompute", "1f1b-offload"}) {
        const Program program = compile_file(schedule_path(schedule), config, model.config.sizes);
        EXPECT_EQ(train_in_process(program, options, *model.data), plain)
            << schedule << ", " << what;
        vm_test::expect_measured_equals_counted(program, options, *model.data);
      }
    }
  }
}

TEST(memory_policy, selective_forms_train_the_bits_of_1f1b) {
  const Model model = models().front();
  const Config config{4, 6, 1, 1};
  const TrainingOptions options = options_for(model, config);
  const std::vector<float> plain = train_in_process(
      compile_file(schedule_path("1f1b"), config, model.config.sizes), options, *model.data);
  for (const auto& [schedule, let] :
       {std::pair{"1f1b-recompute", "recompute_stages"},
        std::pair{"1f1b-recompute", "recompute_every"}, std::pair{"1f1b-offload", "offload_stages"},
        std::pair{"1f1b-offload", "offload_every"}}) {
    const Program program = compile_text(with_let(schedule, let, 2), config, model.config.sizes);
    EXPECT_EQ(train_in_process(program, options, *model.data), plain) << schedule << " " << let;
    vm_test::expect_measured_equals_counted(program, options, *model.data);
  }
}

// With the backward split (the weight half reads the stash too): the same bits.
TEST(memory_policy, split_backwards_find_their_stash) {
  const Model model = models().back();
  const Config config{2, 4, 1, 1};
  const TrainingOptions options = options_for(model, config);
  const std::vector<float> plain = train_in_process(
      compile_file(schedule_path("1f1b"), config, model.config.sizes), options, *model.data);
  for (const char* schedule : {"1f1b-recompute", "1f1b-offload"}) {
    // The file as shipped (its let set to what it is).
    const bool recomputes = std::string(schedule) == "1f1b-recompute";
    std::string text = with_let(schedule, recomputes ? "recompute_every" : "offload_every", 1);
    const std::string fused = "} else { Bwd mb }";
    const std::size_t at = text.find(fused);
    ASSERT_NE(at, std::string::npos) << schedule;
    text.replace(at, fused.size(), "} else { BwdInput mb; BwdWeight mb }");
    const Program program = compile_text(text, config, model.config.sizes);
    EXPECT_EQ(train_in_process(program, options, *model.data), plain) << schedule;
    vm_test::expect_measured_equals_counted(program, options, *model.data);
  }
}

// Where a stage holds more than one micro-batch at once (all but the last),
// keeping less keeps fewer bytes on the device; the offloaded ones are in
// host memory.
TEST(memory_policy, device_peak_is_below_1f1b_where_a_stage_holds_more_than_one) {
  for (const Model& model : models()) {
    for (const int stages : {2, 4}) {
      const Config config{stages, 8, 1, 1};
      const TrainingOptions options = options_for(model, config);
      const auto peaks = [&](const char* schedule) {
        return vm_test::measured_peaks(
            compile_file(schedule_path(schedule), config, model.config.sizes), options,
            *model.data);
      };
      const auto plain = peaks("1f1b");
      for (const char* schedule : {"1f1b-recompute", "1f1b-offload"}) {
        const auto kept = peaks(schedule);
        for (int s = 0; s < stages; ++s) {
          const auto r = static_cast<std::size_t>(s);
          const std::string what = std::string(model.name) + " " + schedule + ", stage " +
                                   std::to_string(s) + " of " + std::to_string(stages);
          if (s + 1 < stages) {
            EXPECT_LT(kept[r].device.total(), plain[r].device.total()) << what;
          } else {
            EXPECT_LE(kept[r].device.total(), plain[r].device.total()) << what;
          }
          const bool offloads = std::string(schedule) == "1f1b-offload";
          EXPECT_EQ(kept[r].host > 0, offloads) << what;
        }
      }
    }
  }
}

// GPipe with blocking sends, checkpointed on every stage: a blocking Send
// of a checkpointed output is its last use (the VM sends it at once and
// gives it back); the weights are plain GPipe's, the bytes as counted.
constexpr const char* kCheckpointedGpipe = R"(ZeroGrad
for mb in 0 .. micro_batches {
    if stage == 0 { LoadInput mb } else { Recv act mb }
    CHECKPOINT
    if stage < stages - 1 { Send act mb }
}
for mb in 0 .. micro_batches {
    if stage == stages - 1 { LoadTarget mb } else { Recv grad mb }
    RECOMPUTE
    Bwd mb
    if stage > 0 { Send grad mb }
}
AllReduce
OptimizerStep
)";

TEST(memory_policy, a_blocking_send_is_a_checkpointed_outputs_last_use) {
  const auto program = [](bool checkpointed, const Config& config) {
    std::string text = kCheckpointedGpipe;
    text.replace(text.find("CHECKPOINT"), 10, checkpointed ? "FwdCheckpoint mb" : "Fwd mb");
    text.replace(text.find("RECOMPUTE"), 9, checkpointed ? "Recompute mb" : "");
    return compile_text(text, config, vm_test::deep_model().sizes);
  };
  const Model model = models().front();
  for (const Config config : {Config{2, 3, 1, 1}, Config{4, 4, 1, 1}}) {
    const TrainingOptions options = options_for(model, config);
    const Program checkpointed = program(true, config);
    EXPECT_EQ(train_in_process(checkpointed, options, *model.data),
              train_in_process(program(false, config), options, *model.data));
    vm_test::expect_measured_equals_counted(checkpointed, options, *model.data);
  }
}

std::optional<VmError> first_error(const std::string& text, const Config& config) {
  const Program program = compile_text(text, config);
  std::optional<VmError> found;
  runtime::run_in_process(config.stages, config.dp, [&](runtime::Comm& comm) {
    try {
      vm_test::train_steps(program, comm, training_options(4, 1));
    } catch (const VmError& error) {
      found = error;
    }
  });
  return found;
}

TEST(memory_policy, a_backward_without_its_recomputation_is_refused) {
  const auto error = first_error(
      "ZeroGrad\nLoadInput 0\nFwdCheckpoint 0\nLoadTarget 0\nBwd 0\nOptimizerStep\n", Config{1, 1});
  ASSERT_TRUE(error);
  EXPECT_EQ(error->instruction(), 4U);
  EXPECT_NE(std::string(error->what()).find("Recompute first"), std::string::npos) << error->what();
}

TEST(memory_policy, a_backward_of_an_offloaded_stash_is_refused) {
  const auto error = first_error(
      "ZeroGrad\nLoadInput 0\nFwd 0\nOffload 0\nWaitOffload 0\nLoadTarget 0\nBwd 0\n"
      "OptimizerStep\n",
      Config{1, 1});
  ASSERT_TRUE(error);
  EXPECT_EQ(error->instruction(), 6U);
  EXPECT_NE(std::string(error->what()).find("Reload and WaitReload first"), std::string::npos)
      << error->what();
}

TEST(memory_policy, a_reload_never_waited_is_refused_at_the_step_end) {
  const auto error = first_error(
      "ZeroGrad\nLoadInput 0\nFwd 0\nOffload 0\nWaitOffload 0\nReload 0\nOptimizerStep\n",
      Config{1, 1});
  ASSERT_TRUE(error);
  EXPECT_EQ(error->instruction(), 5U);
  EXPECT_EQ(error->kind(), DiagnosticKind::RuntimeComm);
}

}  // namespace
}  // namespace pipevm
