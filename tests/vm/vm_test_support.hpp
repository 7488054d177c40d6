// Shared by the VM's tests: a small model and data set, compiling a shipped
// schedule (or a schedule given as text), training a few steps with the VM
// through any Comm, and the sequential reference the VM must reproduce.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm.hpp"
#include "compile.hpp"
#include "data.hpp"
#include "inprocess_comm.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "sequential.hpp"
#include "trainer.hpp"

namespace pipevm::vm_test {

// Five layers (so four stages get a piece each), few features: fast.
inline runtime::ModelConfig small_model() {
  runtime::ModelConfig model;
  model.sizes = {24, 20, 18, 16, 14, 6};
  model.seed = 7;
  return model;
}

// Eight layers: enough pieces for 4 stages x 2 chunks.
inline runtime::ModelConfig deep_model() {
  runtime::ModelConfig model;
  model.sizes = {24, 22, 20, 18, 16, 14, 12, 10, 6};
  model.seed = 5;
  return model;
}

// A tiny ViT of eight blocks (4 x 4 images, 2 x 2 patches: 4 tokens of
// width 8, 2 heads): as many pieces as deep_model, on vit_data.
inline runtime::ModelConfig tiny_vit() {
  runtime::VitShape shape;
  shape.image_side = 4;
  shape.patch = 2;
  shape.width = 8;
  shape.blocks = 8;
  shape.heads = 2;
  shape.hidden = 16;
  shape.classes = 6;
  runtime::ModelConfig model;
  runtime::use_vit(model, shape);
  model.seed = 5;
  return model;
}

inline runtime::OptimizerConfig sgd() {
  runtime::OptimizerConfig optimizer;
  optimizer.kind = "sgd";
  optimizer.lr = 0.05F;
  optimizer.momentum = 0.9F;
  return optimizer;
}

inline const runtime::DataSplit& small_data() {
  static const runtime::DataSplit data = runtime::synthetic(512, 64, 24, 6, 3);
  return data;
}

inline const runtime::DataSplit& vit_data() {
  static const runtime::DataSplit data = runtime::synthetic(512, 64, 16, 6, 3);
  return data;
}

inline std::string schedule_path(const std::string& name) {
  return std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + name + ".pipe";
}

// Expansion for a model of these widths (`layer L` operands and the
// built-in names layers, layer_begin, layer_end name its layers).
inline ExpandOptions for_model(const std::vector<int>& widths) {
  ExpandOptions options;
  options.layer_widths = widths;
  return options;
}

// Compiles a schedule file for `config` and the model of `widths`; throws
// with the diagnostics' text.
inline Program compile_file(const std::string& path, const Config& config,
                            const std::vector<int>& widths = small_model().sizes) {
  Diagnostics diagnostics;
  const auto file = read_source(path, diagnostics);
  std::optional<Program> program;
  if (file) program = compile(file, config, diagnostics, for_model(widths));
  if (!program || diagnostics.has_errors()) {
    std::string text = "cannot compile " + path + ":";
    for (const Diagnostic& d : diagnostics.all()) text += " " + d.message;
    throw std::runtime_error(text);
  }
  return std::move(*program);
}

inline Program compile_text(const std::string& text, const Config& config,
                            const std::vector<int>& widths = small_model().sizes) {
  Diagnostics diagnostics;
  auto file = std::make_shared<SourceFile>("test.pipe", text);
  std::optional<Program> program = compile(file, config, diagnostics, for_model(widths));
  if (!program || diagnostics.has_errors()) {
    std::string message = "cannot compile the test schedule:";
    for (const Diagnostic& d : diagnostics.all()) message += " " + d.message;
    throw std::runtime_error(message);
  }
  return std::move(*program);
}

inline TrainingOptions training_options(int global_batch, int steps,
                                        runtime::OptimizerConfig optimizer = sgd(),
                                        runtime::ModelConfig model = small_model()) {
  TrainingOptions options;
  options.machine.model = std::move(model);
  options.machine.optimizer = optimizer;
  options.machine.global_batch = global_batch;
  options.shuffle_seed = 11;
  options.max_steps_per_epoch = steps;
  options.evaluate = false;
  return options;
}

// `steps` steps of `program` through `comm`; the whole model on world rank 0.
inline std::vector<float> train_steps(const Program& program, runtime::Comm& comm,
                                      const TrainingOptions& options,
                                      const runtime::DataSplit& data = small_data()) {
  Trainer trainer(program, comm, options, &data);
  trainer.train_epoch(0);
  return trainer.gather_parameters();
}

// Trains `program` in-process on stages x dp threads; rank 0's model.
inline std::vector<float> train_in_process(const Program& program, const TrainingOptions& options,
                                           const runtime::DataSplit& data = small_data()) {
  std::vector<float> model;
  std::mutex mutex;
  runtime::run_in_process(program.config.stages, program.config.dp, [&](runtime::Comm& comm) {
    std::vector<float> mine = train_steps(program, comm, options, data);
    if (comm.world_rank() == 0) {
      std::lock_guard lock(mutex);
      model = std::move(mine);
    }
  });
  return model;
}

// Each rank's peak bytes as its Machine's ledger measured them over the
// steps, and its host peak, in rank order.
struct MeasuredPeak {
  runtime::MemoryBytes device;
  std::uint64_t host = 0;
};
inline std::vector<MeasuredPeak> measured_peaks(const Program& program,
                                                const TrainingOptions& options,
                                                const runtime::DataSplit& data = small_data()) {
  std::vector<MeasuredPeak> peaks(static_cast<std::size_t>(program.ranks()));
  runtime::run_in_process(program.config.stages, program.config.dp, [&](runtime::Comm& comm) {
    Trainer trainer(program, comm, options, &data);
    trainer.train_epoch(0);
    peaks[static_cast<std::size_t>(comm.world_rank())] = {trainer.machine().peak_bytes(),
                                                          trainer.machine().peak_host_bytes()};
  });
  return peaks;
}

// The same steps, trained sequentially on one whole-model piece.
inline std::vector<float> sequential_reference(const TrainingOptions& options,
                                               const runtime::DataSplit& data = small_data()) {
  runtime::SequentialTrainer reference(options.machine.model, options.machine.optimizer,
                                       options.machine.global_batch, 1);
  runtime::Batcher batcher(data.train, options.shuffle_seed, options.machine.global_batch, 1, 1);
  batcher.start_epoch(0);
  for (int step = 0; step < options.max_steps_per_epoch; ++step) {
    reference.train_batch(batcher, step);
  }
  const auto parameters = reference.model().parameters();
  return {parameters.begin(), parameters.end()};
}

// Largest |a - b| relative to the largest |b|; infinity when sizes differ.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return INFINITY;
  double worst = 0.0;
  double scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

}  // namespace pipevm::vm_test
