// The VM through the in-process Comm: every shipped schedule, split over 1, 2
// and 4 stages, 1 and 2 data-parallel replicas, 1 and 4 micro-batches,
// trains the same weights as sequential training on the same global batch;
// BwdInput + BwdWeight equals Bwd; mirror placement sums its gradients; and
// what the runtime cannot execute is reported at its source position.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <span>
#include <sstream>
#include <utility>

#include "inprocess_comm.hpp"
#include "memory_bytes.hpp"
#include "message_tags.hpp"
#include "register_test.hpp"
#include "vm.hpp"
#include "vm_test_bytes.hpp"
#include "vm_test_support.hpp"

namespace pipevm {
namespace {

using vm_test::compile_file;
using vm_test::compile_text;
using vm_test::expect_measured_equals_counted;
using vm_test::measured_peaks;
using vm_test::relative_difference;
using vm_test::schedule_path;
using vm_test::sequential_reference;
using vm_test::train_in_process;
using vm_test::training_options;

constexpr int kGlobalBatch = 16;
constexpr int kSteps = 3;

struct Shape {
  const char* schedule;
  int stages;
  int dp;
  int micro_batches;
};

std::string shape_name(const Shape& s) {
  return std::string(s.schedule) + "_stages" + std::to_string(s.stages) + "_dp" +
         std::to_string(s.dp) + "_mb" + std::to_string(s.micro_batches);
}

std::vector<Shape> all_shapes() {
  std::vector<Shape> shapes;
  for (const char* schedule : {"naive", "gpipe", "1f1b"}) {
    for (const int stages : {1, 2, 4}) {
      for (const int dp : {1, 2}) {
        for (const int micro_batches : {1, 4}) {
          // 1F1B requires a micro-batch per stage.
          if (std::string(schedule) == "1f1b" && micro_batches < stages) continue;
          shapes.push_back({schedule, stages, dp, micro_batches});
        }
      }
    }
  }
  return shapes;
}

void trains_the_sequential_weights(const Shape& s) {
  const Program program =
      compile_file(schedule_path(s.schedule), Config{s.stages, s.micro_batches, 1, s.dp});
  const TrainingOptions options = training_options(kGlobalBatch, kSteps);
  const std::vector<float> reference = sequential_reference(options);
  const std::vector<float> trained = train_in_process(program, options);
  ASSERT_EQ(trained.size(), reference.size());
  EXPECT_LE(relative_difference(trained, reference), 1e-5);
  // The steps did move the weights: the comparison is not of two initial states.
  const std::vector<float> untouched = [&] {
    TrainingOptions none = options;
    none.max_steps_per_epoch = 0;
    return sequential_reference(none);
  }();
  EXPECT_GT(relative_difference(untouched, reference), 1e-3);
}


// Every schedule in schedules/, in the first configurations its requires
// accept: they train the sequential weights (a forward-only schedule leaves
// the initial ones).
std::vector<std::string> shipped_schedules() {
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(PIPEVM_SOURCE_DIR) + "/schedules")) {
    if (entry.path().extension() == ".pipe") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string schedule_test_name(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

const std::vector<Config> kShippedCandidates = {{2, 8, 1, 1}, {4, 8, 1, 1}, {2, 8, 2, 1},
                                                {4, 8, 2, 1}, {2, 4, 1, 2}, {2, 4, 2, 2},
                                                {1, 4, 1, 2}, {1, 4, 1, 4}};

void shipped_schedule_trains_the_sequential_weights(
    const std::string& schedule, const std::vector<Config>& candidates = kShippedCandidates) {
  int trained_configs = 0;
  for (const Config& config : candidates) {
    Diagnostics diagnostics;
    const auto file = read_source(schedule_path(schedule), diagnostics);
    ASSERT_TRUE(file);
    const std::optional<Program> program =
        compile(file, config, diagnostics, vm_test::for_model(vm_test::deep_model().sizes));
    if (!program) continue;  // a require excludes this configuration
    // Gossip replicas average parameters, not gradients: only without
    // replicas is it sequential training (mpi_gossip.cpp is its oracle).
    if (program->topology && config.dp > 1) continue;
    const TrainingOptions options =
        training_options(kGlobalBatch, kSteps, vm_test::sgd(), vm_test::deep_model());
    const bool trains =
        std::any_of(program->code.begin(), program->code.end(),
                    [](const Instruction& in) { return is_step(in.op); });
    TrainingOptions expected_options = options;
    if (!trains) expected_options.max_steps_per_epoch = 0;
    const std::vector<float> trained = train_in_process(*program, options);
    EXPECT_LE(relative_difference(trained, sequential_reference(expected_options)), 1e-5)
        << config.stages << " stages x " << config.dp << " dp, " << config.chunks << " chunks, "
        << config.micro_batches << " micro-batches";
    expect_measured_equals_counted(*program, options);
    ++trained_configs;
  }
  EXPECT_GE(trained_configs, 1) << "no candidate configuration satisfies the schedule's requires";
}

// One test per case: vm.equivalence.gpipe_stages4_dp2_mb4, vm.shipped.zb_h1.
[[maybe_unused]] const bool registered = [] {
  const auto add = test_support::register_test;
  for (const Shape& s : all_shapes()) {
    add("equivalence", shape_name(s), [s] { trains_the_sequential_weights(s); });
  }
  for (const std::string& name : shipped_schedules()) {
    add("shipped", schedule_test_name(name),
        [name] { shipped_schedule_trains_the_sequential_weights(name); });
  }
  // The V family on 3 stages, which the candidates above leave out:
  // V-Min's block has its gap there (its warm-up forwards first, the last
  // input gradients early), V-Half's has none (p odd). With the limit
  // binding (m 8) and not (m 2), and with replicas.
  for (const char* name : {"v-min", "v-half"}) {
    add("shipped", schedule_test_name(name) + "_3_stages", [name] {
      shipped_schedule_trains_the_sequential_weights(name,
                                                     {{3, 8, 2, 1}, {3, 2, 2, 1}, {3, 4, 2, 2}});
    });
  }
  return true;
}();

constexpr const char* kGpipeSplitBackward = R"(schedule gpipe-split
ZeroGrad
for mb in 0 .. micro_batches {
    if stage == 0 { LoadInput mb } else { Recv act mb }
    Fwd mb
    if stage < stages - 1 { Send act mb }
}
for mb in 0 .. micro_batches {
    if stage == stages - 1 { LoadTarget mb } else { Recv grad mb }
    BwdInput mb
    if stage > 0 { Send grad mb }
    BwdWeight mb
}
AllReduce
OptimizerStep
)";

TEST(machine, split_backward_equals_bwd) {
  for (const int dp : {1, 2}) {
    const Config config{2, 4, 1, dp};
    const TrainingOptions options = training_options(kGlobalBatch, kSteps);
    const std::vector<float> whole =
        train_in_process(compile_file(schedule_path("gpipe"), config), options);
    const std::vector<float> split =
        train_in_process(compile_text(kGpipeSplitBackward, config), options);
    ASSERT_FALSE(whole.empty());
    // Same operations in the same order: the very same bits.
    EXPECT_EQ(whole, split) << "dp " << dp;
  }
}

// An overlapped pair runs its forward, then its backward: DualPipe with
// every FwdBwd written as Fwd then Bwd trains the very same bits.
TEST(machine, overlapped_pair_equals_forward_then_backward) {
  std::ifstream in(schedule_path("dualpipe"));
  std::stringstream text;
  text << in.rdbuf();
  std::string apart = text.str();
  const std::string pair = "FwdBwd mf chunk cf with mb chunk cb";
  const std::size_t at = apart.find(pair);
  ASSERT_NE(at, std::string::npos);
  apart.replace(at, pair.size(), "Fwd mf chunk cf; Bwd mb chunk cb");
  const Config config{2, 4, 2, 1};
  const TrainingOptions options = training_options(kGlobalBatch, kSteps);
  const Program overlapped = compile_file(schedule_path("dualpipe"), config);
  ASSERT_TRUE(std::any_of(overlapped.code.begin(), overlapped.code.end(),
                          [](const Instruction& i) { return i.op == Opcode::FwdBwd; }));
  const std::vector<float> together = train_in_process(overlapped, options);
  const std::vector<float> separate = train_in_process(compile_text(apart, config), options);
  ASSERT_FALSE(together.empty());
  EXPECT_EQ(together, separate);
}

// The turn of a V with no message trains the very same bits as the older
// form, a message the last stage sends itself: ZB-V and DualPipeV with
// their turn lines put back to ISend and Recv.
TEST(machine, v_turn_without_messages_equals_the_message_to_itself) {
  const std::pair<const char*, const char*> older[] = {
      {"else if not (c == 1 and stage == stages - 1) { Recv act mb chunk c }",
       "else { Recv act mb chunk c }"},
      {"else if not (c == 0 and stage == stages - 1) { ISend act mb chunk c }",
       "else { ISend act mb chunk c }"},
      {" and not (c == 0 and stage == stages - 1) { Recv grad mb chunk c }",
       " { Recv grad mb chunk c }"},
      {" and not (c == 1 and stage == stages - 1) { ISend grad mb chunk c }",
       " { ISend grad mb chunk c }"},
  };
  for (const char* name : {"zb-v", "dualpipev"}) {
    std::ifstream in(schedule_path(name));
    std::stringstream text;
    text << in.rdbuf();
    std::string sending = text.str();
    for (const auto& [now, before] : older) {
      const std::size_t at = sending.find(now);
      ASSERT_NE(at, std::string::npos) << name << ": " << now;
      sending.replace(at, std::string(now).size(), before);
    }
    const Config config{2, 4, 2, 1};
    const TrainingOptions options = training_options(kGlobalBatch, kSteps);
    const Program turn = compile_file(schedule_path(name), config);
    const Program message = compile_text(sending, config);
    const auto to_itself = [](const Program& program) {
      const std::span<const Instruction> last = program.rank(1);
      return std::count_if(last.begin(), last.end(), [](const Instruction& i) {
        return info(i.op).cls == OpClass::p2p && i.peer == 1;
      });
    };
    EXPECT_EQ(to_itself(turn), 0) << name;
    EXPECT_EQ(to_itself(message), 4 * config.micro_batches) << name;
    const std::vector<float> taken = train_in_process(turn, options);
    ASSERT_FALSE(taken.empty());
    EXPECT_EQ(taken, train_in_process(message, options)) << name;
  }
}

// The turn with checkpointed forwards on both sides of it, on one stage:
// chunk 1's FwdCheckpoint takes chunk 0's kept output, which then goes (as
// after a send of it), and chunk 0's Recompute makes it again. Sequential
// training's weights, and the bytes the walk counts.
constexpr const char* kCheckpointedTurn = R"(schedule checkpointed-turn
placement v
ZeroGrad
for mb in 0 .. micro_batches {
    LoadInput mb
    FwdCheckpoint mb
    FwdCheckpoint mb chunk 1
}
for mb in 0 .. micro_batches {
    LoadTarget mb chunk 1
    Recompute mb chunk 1
    Bwd mb chunk 1
    Recompute mb
    Bwd mb
}
OptimizerStep
)";

TEST(machine, v_turn_takes_a_checkpointed_output) {
  const Config config{1, 4, 2, 1};
  const TrainingOptions options =
      training_options(kGlobalBatch, kSteps, vm_test::sgd(), vm_test::deep_model());
  const Program program = compile_text(kCheckpointedTurn, config, vm_test::deep_model().sizes);
  const std::vector<float> trained = train_in_process(program, options);
  EXPECT_LE(relative_difference(trained, sequential_reference(options)), 1e-5);
  expect_measured_equals_counted(program, options);
}

// DualPipe's placement without its overlap: lane 0 carries the first half of
// the micro-batches from stage 0, lane 1 the second half from the last stage.
constexpr const char* kMirrorGpipe = R"(schedule mirror-gpipe
placement mirror
let half = micro_batches / 2
ZeroGrad
for mb in 0 .. half {
    if stage == 0 { LoadInput mb } else { Recv act mb }
    Fwd mb
    if stage < stages - 1 { Send act mb }
}
for mb in half .. micro_batches {
    if stage == stages - 1 { LoadInput mb chunk 1 } else { Recv act mb chunk 1 }
    Fwd mb chunk 1
    if stage > 0 { Send act mb chunk 1 }
}
for mb in 0 .. half {
    if stage == stages - 1 { LoadTarget mb } else { Recv grad mb }
    Bwd mb
    if stage > 0 { Send grad mb }
}
for mb in half .. micro_batches {
    if stage == 0 { LoadTarget mb chunk 1 } else { Recv grad mb chunk 1 }
    Bwd mb chunk 1
    if stage < stages - 1 { Send grad mb chunk 1 }
}
AllReduce
AllReduce over mirror
OptimizerStep
)";

TEST(machine, mirror_placement_sums_the_two_holders_gradients) {
  for (const int stages : {2, 3}) {
    const Config config{stages, 4, 2, 1};
    const TrainingOptions options = training_options(kGlobalBatch, kSteps);
    const std::vector<float> trained =
        train_in_process(compile_text(kMirrorGpipe, config), options);
    EXPECT_LE(relative_difference(trained, sequential_reference(options)), 1e-5)
        << stages << " stages";
  }
}

// The sum is the program's: without `AllReduce over mirror` each holder
// steps with its own lane's gradients only, and the weights differ.
TEST(machine, optimizer_step_alone_does_not_sum_the_holders_gradients) {
  std::string text = kMirrorGpipe;
  const std::string sum = "AllReduce over mirror\n";
  text.erase(text.find(sum), sum.size());
  const Config config{2, 4, 2, 1};
  const TrainingOptions options = training_options(kGlobalBatch, kSteps);
  const std::vector<float> trained = train_in_process(compile_text(text, config), options);
  EXPECT_GT(relative_difference(trained, sequential_reference(options)), 1e-3);
}

// Runs one step of a one-stage program and returns the VM's error.
std::optional<VmError> first_error(const std::string& text) {
  const Config config{1, 2, 1, 1};
  const Program program = compile_text(text, config);
  std::optional<VmError> error;
  runtime::run_in_process(1, 1, [&](runtime::Comm& comm) {
    MachineOptions options;
    options.model = vm_test::small_model();
    options.optimizer = vm_test::sgd();
    options.global_batch = 4;
    Machine machine(program, 0, comm, options);
    runtime::Batcher batcher(vm_test::small_data().train, 1, 4, 1, 2);
    batcher.start_epoch(0);
    machine.set_batch(&batcher, 0);
    try {
      Vm::run(program, machine);
    } catch (const VmError& e) {
      error = e;
    }
  });
  return error;
}

TEST(machine, forward_without_input_is_reported_at_its_position) {
  const auto error = first_error("ZeroGrad\nLoadInput 0\n  Fwd 1\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), DiagnosticKind::RuntimeUnsupported);
  EXPECT_EQ(error->instruction(), 2U);
  EXPECT_NE(std::string(error->what()).find("neither loaded nor received"), std::string::npos)
      << error->what();
  const Config config{1, 2, 1, 1};
  const Program program = compile_text("ZeroGrad\nLoadInput 0\n  Fwd 1\n", config);
  const Diagnostic diagnostic = to_diagnostic(*error, program, 0);
  ASSERT_TRUE(diagnostic.location.file);
  const LineColumn where = diagnostic.location.file->position(diagnostic.location.range.begin);
  EXPECT_EQ(where.line, 3U);
  EXPECT_EQ(where.column, 3U);
  EXPECT_EQ(diagnostic.location.rank, 0);
}

TEST(machine, backward_without_target_is_reported) {
  const auto error = first_error("ZeroGrad\nLoadInput 0\nFwd 0\nBwd 0\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 3U);
  EXPECT_NE(std::string(error->what()).find("LoadTarget"), std::string::npos) << error->what();
}

TEST(machine, compute_after_release_is_refused) {
  const auto error = first_error("ZeroGrad\nAllGather\nLoadInput 0\nRelease\nFwd 0\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 4U);
  EXPECT_NE(std::string(error->what()).find("not gathered"), std::string::npos) << error->what();
}

// Holds by hand (docs/memory.md): the small model on one stage, 2 rows per
// micro-batch. The peak is after the second forward: micro-batch 1's
// activations at every boundary, micro-batch 0's input of layer 2 held past
// its weight gradient, and the model's input gradient of micro-batch 0,
// which only the hold makes.
TEST(machine, held_values_are_measured_as_the_semantics_say) {
  const std::string text =
      "ZeroGrad\nHold act 0 layer 2\nHold grad 0\n"
      "for mb in 0 .. micro_batches { LoadInput mb\nFwd mb\nLoadTarget mb\nBwd mb }\n"
      "OptimizerStep\n";
  const Config config{1, 2, 1, 1};
  const Program program = compile_text(text, config);
  const TrainingOptions options = training_options(4, 2);
  const std::vector<vm_test::MeasuredPeak> peaks = measured_peaks(program, options);
  ASSERT_EQ(peaks.size(), 1U);
  const std::vector<int>& w = options.machine.model.sizes;  // 24, 20, 18, 16, 14, 6
  std::uint64_t parameters = 0;
  for (std::size_t l = 0; l + 1 < w.size(); ++l) {
    parameters += static_cast<std::uint64_t>((w[l] + 1) * w[l + 1]);
  }
  std::uint64_t boundaries = 0;
  for (const int width : w) boundaries += static_cast<std::uint64_t>(width);
  constexpr std::uint64_t kRows = 2;
  constexpr std::uint64_t kFloat = sizeof(float);
  using runtime::MemoryCategory;
  const runtime::MemoryBytes& peak = peaks[0].device;
  EXPECT_EQ(peak[MemoryCategory::weights], parameters * kFloat);
  EXPECT_EQ(peak[MemoryCategory::gradients], parameters * kFloat);
  EXPECT_EQ(peak[MemoryCategory::optimizer], parameters * kFloat) << "SGD with momentum";
  EXPECT_EQ(peak[MemoryCategory::activations], kRows * (boundaries + 18) * kFloat);
  EXPECT_EQ(peak[MemoryCategory::activation_gradients], kRows * 24 * kFloat);
  EXPECT_EQ(peak[MemoryCategory::messages], 0U);
}

// tests/vm/holds.pipe (every kind of hold, with sends and one hold left to
// the step's end) trains the sequential weights.
TEST(machine, holds_train_the_sequential_weights) {
  const std::string holds = std::string(PIPEVM_SOURCE_DIR) + "/tests/vm/holds.pipe";
  for (const Config config : {Config{2, 4, 1, 1}, Config{2, 3, 1, 2}}) {
    const Program program = compile_file(holds, config, vm_test::small_model().sizes);
    const TrainingOptions options = training_options(2 * config.dp * config.micro_batches, kSteps);
    EXPECT_LE(
        relative_difference(train_in_process(program, options), sequential_reference(options)),
        1e-5)
        << config.stages << " stages x " << config.dp << " dp";
  }
}

// The same program's measured bytes equal the walk's count (core/memory_bytes.cpp).
TEST(machine, holds_measured_equals_counted) {
  const std::string holds = std::string(PIPEVM_SOURCE_DIR) + "/tests/vm/holds.pipe";
  const Config config{2, 4, 1, 1};
  const Program program = compile_file(holds, config, vm_test::small_model().sizes);
  expect_measured_equals_counted(program, training_options(8, 1));
}

TEST(machine, a_step_with_a_weight_gradient_held_apart_is_refused) {
  const auto error = first_error(
      "ZeroGrad\nHold wgrad 1 layer 2\nLoadInput 1\nFwd 1\nLoadTarget 1\nBwd 1\n"
      "OptimizerStep\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 6U);
  EXPECT_NE(std::string(error->what()).find("weight gradient of layer 2 of slot 1 is kept apart"),
            std::string::npos)
      << error->what();
}

TEST(machine, a_weight_gradient_held_apart_to_the_step_end_is_refused) {
  const auto error =
      first_error("ZeroGrad\nHold wgrad 0\nLoadInput 0\nFwd 0\nLoadTarget 0\nBwd 0\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 5U) << "reported at the last instruction";
  EXPECT_NE(std::string(error->what()).find("no Drop added"), std::string::npos) << error->what();
}

TEST(machine, a_drop_of_a_value_not_held_is_refused) {
  const auto error = first_error("ZeroGrad\nHold act 0\nDrop act 0\nDrop act 0\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 3U);
  EXPECT_NE(std::string(error->what()).find("is not held"), std::string::npos) << error->what();
}

// A pipeline of 2 stages x 2 replicas that computes one layer at a time,
// the backward split in its two halves: the sequential weights, and the
// bytes the simulator counts.
TEST(machine, layer_by_layer_trains_the_sequential_weights) {
  const std::string text =
      "ZeroGrad\n"
      "if stage == 0 { LoadInput 0 } else { Recv act 0 }\n"
      "for l in layer_begin .. layer_end { Fwd 0 layer l }\n"
      "if stage < stages - 1 { Send act 0; Recv grad 0 } else { LoadTarget 0 }\n"
      "for l in reversed(layer_begin .. layer_end) { BwdInput 0 layer l }\n"
      "if stage > 0 { ISend grad 0 }\n"
      "for l in reversed(layer_begin .. layer_end) { BwdWeight 0 layer l }\n"
      "for l in layer_begin .. layer_end { AllReduce layer l }\n"
      "WaitAll\nOptimizerStep\n";
  const Config config{2, 1, 1, 2};
  const Program program = compile_text(text, config);
  const TrainingOptions options = training_options(kGlobalBatch, kSteps);
  EXPECT_LE(relative_difference(train_in_process(program, options), sequential_reference(options)),
            1e-5);
  expect_measured_equals_counted(program, options);
}

TEST(machine, a_layer_its_chunk_does_not_hold_is_refused) {
  // Compiled for the deep model (8 layers), run on the small one (5).
  const Program program = compile_text("ZeroGrad\nLoadInput 0\nFwd 0 layer 7\n", Config{1, 1},
                                       vm_test::deep_model().sizes);
  const TrainingOptions options = training_options(kGlobalBatch, 1);
  runtime::run_in_process(1, 1, [&](runtime::Comm& comm) {
    EXPECT_THROW(Trainer(program, comm, options, &vm_test::small_data()), std::invalid_argument);
  });
}

TEST(machine, shard_step_on_an_unsharded_chunk_is_refused) {
  const auto error = first_error(
      "ZeroGrad\nLoadInput 0\nFwd 0\nLoadTarget 0\nBwd 0\nReduceScatter\nShardStep\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 6U);
  EXPECT_NE(std::string(error->what()).find("not sharded"), std::string::npos) << error->what();
}

TEST(machine, send_to_itself_is_reported) {
  const auto error = first_error("ZeroGrad\nLoadInput 0\nFwd 0\nSend act 0 to 0\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 3U);
  EXPECT_NE(std::string(error->what()).find("peer stage 0"), std::string::npos) << error->what();
}

TEST(machine, wait_without_request_is_reported) {
  const auto error = first_error("ZeroGrad\nWait recv act 1\n");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->instruction(), 1U);
}

TEST(machine, a_request_never_waited_is_reported) {
  const Config config{2, 1, 1, 1};
  const Program program = compile_text(
      "stage 0 { ZeroGrad\n LoadInput 0\n Fwd 0\n ISend act 0 }\n"
      "stage 1 { ZeroGrad\n Recv act 0\n Fwd 0\n }\n",
      config);
  std::optional<VmError> error;
  std::mutex mutex;
  runtime::run_in_process(2, 1, [&](runtime::Comm& comm) {
    MachineOptions options;
    options.model = vm_test::small_model();
    options.optimizer = vm_test::sgd();
    options.global_batch = 4;
    Machine machine(program, comm.world_rank(), comm, options);
    runtime::Batcher batcher(vm_test::small_data().train, 1, 4, 1, 1);
    batcher.start_epoch(0);
    machine.set_batch(&batcher, 0);
    try {
      Vm::run(program, machine);
    } catch (const VmError& e) {
      std::lock_guard lock(mutex);
      error = e;
    }
  });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), DiagnosticKind::RuntimeComm);
  EXPECT_EQ(error->instruction(), 3U);  // the ISend
}

TEST(machine, more_pieces_than_layers_is_refused) {
  const Program program = compile_file(schedule_path("gpipe"), Config{8, 8, 1, 1});
  EXPECT_THROW(runtime::run_in_process(8, 1,
                                       [&](runtime::Comm& comm) {
                                         MachineOptions options;
                                         options.model = vm_test::small_model();
                                         Machine machine(program, comm.world_rank(), comm, options);
                                       }),
               std::invalid_argument);
}

TEST(machine, replicas_that_differ_are_detected_on_every_rank) {
  const Program program = compile_file(schedule_path("gpipe"), Config{2, 4, 1, 2});
  const TrainingOptions options = training_options(kGlobalBatch, 1);
  std::mutex mutex;
  std::vector<int> verdicts;
  runtime::run_in_process(2, 2, [&](runtime::Comm& comm) {
    Trainer trainer(program, comm, options, &vm_test::small_data());
    trainer.train_epoch(0);
    const bool before = trainer.replicas_agree();
    if (comm.world_rank() == 3) trainer.machine().piece(0).parameters()[0] += 1e-3F;
    const bool after = trainer.replicas_agree();
    std::lock_guard lock(mutex);
    verdicts.push_back(before && !after ? 1 : 0);
  });
  EXPECT_EQ(verdicts, std::vector<int>(4, 1));
}

// Records every instruction the observer sees.
class CountingObserver : public VmObserver {
 public:
  void on_instruction(int, std::size_t index, std::int64_t start, std::int64_t end) override {
    ++calls;
    last_index = index;
    ordered = ordered && end >= start;
  }
  int calls = 0;
  std::size_t last_index = 0;
  bool ordered = true;
};

TEST(machine, observer_sees_every_instruction) {
  const Config config{1, 4, 1, 1};
  const Program program = compile_file(schedule_path("gpipe"), config);
  CountingObserver observer;
  runtime::run_in_process(1, 1, [&](runtime::Comm& comm) {
    MachineOptions options;
    options.model = vm_test::small_model();
    options.global_batch = 16;
    Machine machine(program, 0, comm, options);
    runtime::Batcher batcher(vm_test::small_data().train, 1, 16, 1, 4);
    batcher.start_epoch(0);
    machine.set_batch(&batcher, 0);
    const StepResult result = Vm::run(program, machine, &observer);
    EXPECT_EQ(result.rows, 16);
    EXPECT_GT(result.loss, 0.0);
  });
  EXPECT_EQ(observer.calls, static_cast<int>(program.rank(0).size()));
  EXPECT_EQ(observer.last_index, program.rank(0).size() - 1);
  EXPECT_TRUE(observer.ordered);
}

TEST(machine, message_tags_are_distinct_for_distinct_keys) {
  const Config config{4, 8, 2, 1};
  const MessageTags tags(Placement::looped, config);
  std::vector<int> seen;
  for (std::uint32_t mb = 0; mb < 8; ++mb) {
    for (int producer = 0; producer < 8; ++producer) {
      for (const MessageKind kind : {MessageKind::act, MessageKind::grad}) {
        seen.push_back(tags.tag({kind, 0, producer, mb}));
      }
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.front(), 0);
  EXPECT_EQ(seen.back(), tags.max_tag());
}

}  // namespace
}  // namespace pipevm
