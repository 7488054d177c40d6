// Sequential training on one process: the reference every pipeline schedule
// must reproduce (same initial weights, same batches, same micro-batch
// split, same summation order of the micro-batches' gradients), and the
// baseline of the runtime benchmark. Leaves out data parallelism and any
// communication: with dp > 1, run each replica's share in turn yourself.
#pragma once

#include <cstdint>

#include "data.hpp"
#include "model.hpp"
#include "optimizer.hpp"

namespace pipevm::runtime {

struct EpochResult {
  double loss = 0.0;      // mean training loss per sample over the epoch
  double accuracy = 0.0;  // fraction of training samples predicted right (before each step)
  int steps = 0;
};

class SequentialTrainer {
 public:
  // One Piece holding the whole model; micro-batches of batch / micro_batches rows.
  SequentialTrainer(const ModelConfig& model, const OptimizerConfig& optimizer, int batch,
                    int micro_batches);

  // One optimizer step on global batch `batch` of `batcher`'s current epoch:
  // zero the gradients, forward and backward each micro-batch in order with
  // the loss scaled by 1 / batch, step. Adds the batch's loss and correct
  // predictions to *loss_sum and *correct when given.
  void train_batch(const Batcher& batcher, int batch, double* loss_sum = nullptr,
                   long* correct = nullptr);
  // Every batch of epoch `epoch` (calls batcher.start_epoch(epoch) first).
  EpochResult train_epoch(Batcher& batcher, int epoch);

  Piece& model() { return model_; }
  const Piece& model() const { return model_; }

 private:
  Piece model_;
  Optimizer optimizer_;
  int batch_;
  int micro_batches_;
  std::vector<float> input_;
  std::vector<std::uint8_t> labels_;
};

}  // namespace pipevm::runtime
