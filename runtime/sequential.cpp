// The sequential reference trainer (see sequential.hpp).
#include "sequential.hpp"

#include <stdexcept>

namespace pipevm::runtime {

SequentialTrainer::SequentialTrainer(const ModelConfig& model, const OptimizerConfig& optimizer,
                                     int batch, int micro_batches)
    : model_(model, LayerRange{0, layer_count(model.sizes)}),
      optimizer_(optimizer, model_.parameters().size()),
      batch_(batch),
      micro_batches_(micro_batches) {
  if (batch < 1 || micro_batches < 1 || batch % micro_batches != 0) {
    throw std::invalid_argument("the batch must be a positive multiple of the micro-batches");
  }
  const int rows = batch / micro_batches;
  model_.reserve(1, rows);
  input_.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(model_.input_width()));
  labels_.resize(static_cast<std::size_t>(rows));
}

void SequentialTrainer::train_batch(const Batcher& batcher, int batch, double* loss_sum,
                                    long* correct) {
  if (batcher.micro_batch_rows() * micro_batches_ != batch_) {
    throw std::invalid_argument("the batcher's micro-batches do not match the trainer's");
  }
  const int rows = batch_ / micro_batches_;
  const float scale = 1.0f / static_cast<float>(batch_);
  model_.zero_grad();
  for (int micro_batch = 0; micro_batch < micro_batches_; ++micro_batch) {
    batcher.input(batch, 0, micro_batch, input_);
    batcher.labels(batch, 0, micro_batch, labels_);
    model_.forward(0, input_, rows);
    const LossResult result = model_.loss(0, labels_, scale);
    if (loss_sum) *loss_sum += static_cast<double>(result.loss);
    if (correct) *correct += result.correct;
    model_.backward_input(0, {});
    model_.backward_weight(0);
  }
  optimizer_.begin_step();
  for (int layer = 0; layer < layer_count(model_.config().sizes); ++layer) {
    const LayerView grads = model_.layer_gradients(layer);
    if (grads.all.empty()) continue;
    optimizer_.update(model_.layer_parameters(layer).all, grads.all, model_.layer_offset(layer));
  }
}

EpochResult SequentialTrainer::train_epoch(Batcher& batcher, int epoch) {
  batcher.start_epoch(epoch);
  double loss_sum = 0.0;
  long correct = 0;
  EpochResult result;
  for (int batch = 0; batch < batcher.batches_per_epoch(); ++batch) {
    train_batch(batcher, batch, &loss_sum, &correct);
    ++result.steps;
  }
  if (result.steps > 0) {
    // Each batch's losses were scaled by 1 / batch: their sum is the batch mean.
    result.loss = loss_sum / result.steps;
    result.accuracy = static_cast<double>(correct) / (static_cast<double>(result.steps) * batch_);
  }
  return result;
}

}  // namespace pipevm::runtime
