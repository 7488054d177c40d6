// A program's `cut` through the in-process VM: the machine cuts the model
// where the program says, and an uneven cut trains the sequential weights,
// for the MLP and the ViT, one chunk per stage and two (interleaved).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "layer_costs.hpp"
#include "vm_test_support.hpp"

namespace pipevm {
namespace {

using vm_test::relative_difference;
using vm_test::sequential_reference;
using vm_test::train_in_process;
using vm_test::training_options;

// The shipped schedule's text with `cut TEXT` after its `schedule` line.
std::string with_cut(const std::string& schedule, const std::string& cut) {
  std::ostringstream text;
  text << std::ifstream(vm_test::schedule_path(schedule)).rdbuf();
  std::string source = text.str();
  const std::size_t line = source.find("\nschedule ");
  const std::size_t after = source.find('\n', line + 1) + 1;
  return source.insert(after, "cut " + cut + "\n");
}

void trains_the_sequential_weights_with_its_cut(const std::string& schedule, const Config& config,
                                                const runtime::ModelConfig& model,
                                                const runtime::DataSplit& data,
                                                const std::vector<LayerRange>& cut) {
  const Program program = vm_test::compile_text(with_cut(schedule, cut_text(cut)), config, model.sizes);
  ASSERT_EQ(program.cut, cut);
  TrainingOptions options = training_options(config.dp * config.micro_batches * 2, 3);
  options.machine.model = model;
  EXPECT_EQ(model_split(program, options.machine), cut);
  EXPECT_NE(runtime::split_layers(model.sizes, static_cast<int>(cut.size())), cut)
      << "the test's cut must differ from the default one";
  TrainingOptions untrained = options;
  untrained.max_steps_per_epoch = 0;
  const std::vector<float> expected = sequential_reference(options, data);
  ASSERT_GT(relative_difference(sequential_reference(untrained, data), expected), 1e-3);
  EXPECT_LE(relative_difference(train_in_process(program, options, data), expected), 1e-5);
}

TEST(machine, an_uneven_cut_of_the_mlp_trains_the_sequential_weights) {
  // small_model has 5 layers: stage 0 takes one, stage 1 four.
  trains_the_sequential_weights_with_its_cut("1f1b", Config{2, 4, 1, 1}, vm_test::small_model(),
                                             vm_test::small_data(), {{0, 1}, {1, 5}});
}

TEST(machine, an_uneven_interleaved_cut_trains_the_sequential_weights) {
  // deep_model has 8 layers, cut into 2 stages x 2 chunks in model order.
  trains_the_sequential_weights_with_its_cut("interleaved-1f1b", Config{2, 4, 2, 1},
                                             vm_test::deep_model(), vm_test::small_data(),
                                             {{0, 3}, {3, 4}, {4, 5}, {5, 8}});
}

TEST(machine, an_uneven_cut_of_the_vit_trains_the_sequential_weights) {
  const runtime::ModelConfig vit = vm_test::tiny_vit();
  const int layers = layer_count(vit.sizes);
  trains_the_sequential_weights_with_its_cut("gpipe", Config{2, 2, 1, 1}, vit, vm_test::vit_data(),
                                             {{0, layers - 2}, {layers - 2, layers}});
}

}  // namespace
}  // namespace pipevm
