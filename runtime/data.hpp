// Training data: Fashion-MNIST (or any IDX image/label pair) kept as bytes,
// a small synthetic set, and the Batcher that slices a shuffled epoch into
// global batches, data-parallel shares and micro-batches.
//
// Inputs are floats pixel * 2 / 255 - 1, in [-1, 1] (the same for every
// dataset, so synthetic bytes and IDX bytes mean the same thing; no
// per-dataset standardisation).
// Leaves out: augmentation, anything not 8-bit images with 8-bit labels.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pipevm::runtime {

struct Dataset {
  int samples = 0;
  int features = 0;  // pixels per image
  int classes = 0;
  std::vector<std::uint8_t> pixels;  // samples x features
  std::vector<std::uint8_t> labels;  // samples
};

// IDX image (idx3, unsigned bytes) and label (idx1) files, gzip or plain.
// classes = largest label + 1. Throws std::runtime_error naming the file.
// Without `with_pixels`, only the image file's header is read (samples and
// features are known, pixels stay empty): for ranks that load targets only.
Dataset load_idx(const std::string& images, const std::string& labels, bool with_pixels = true);

inline constexpr const char* kFashionMnistDirectory = "/usr/share/datasets/fashion-mnist";

struct DataSplit {
  Dataset train;
  Dataset validation;  // the last part of the training file; may be empty
  Dataset test;
};

// What a rank reads of a data directory: a rank that only loads targets
// needs no training pixels, and only the rank that evaluates needs the test
// set. Parts not read stay empty (their sample counts too, for the test set).
struct DataParts {
  bool train_pixels = true;
  bool test = true;
};

// Fashion-MNIST from a directory holding {train,t10k}-{images-idx3,
// labels-idx1}-ubyte, each optionally .gz. The last `validation_fraction` of
// the training file becomes the validation set (0.15: 51,000 train and 9,000
// validation images, ShallowSpeed's split). A missing file throws
// std::runtime_error naming the path tried and the Debian package
// dataset-fashion-mnist.
DataSplit load_directory(const std::string& directory = kFashionMnistDirectory,
                         double validation_fraction = 0.15, DataParts parts = {});

// A learnable synthetic set: each class has a random prototype image; a
// sample is its class's prototype plus noise. Deterministic in its arguments.
// The validation set is empty.
DataSplit synthetic(int train_samples, int test_samples, int features, int classes,
                    std::uint64_t seed);

// pixel * 2 / 255 - 1 for every byte; out.size() must equal pixels.size().
void to_inputs(std::span<const std::uint8_t> pixels, std::span<float> out);

// Slices epochs into batches. Epoch e visits the samples in a permutation
// drawn from (seed, e). Global batch g holds `batch` samples; data-parallel
// rank d of `dp` takes rows [d * batch / dp, (d + 1) * batch / dp) of it, and
// micro-batch m of `micro_batches` takes rows [m * r, (m + 1) * r) of that,
// with r = micro_batch_rows(). batch must be a multiple of dp * micro_batches.
// The last partial batch of an epoch is dropped. Keeps a reference to the
// dataset; after construction nothing allocates.
class Batcher {
 public:
  Batcher(const Dataset& data, std::uint64_t seed, int batch, int dp, int micro_batches);

  int batches_per_epoch() const;
  int micro_batch_rows() const { return micro_batch_rows_; }
  int features() const;
  // Draws epoch `epoch`'s order; call before input() and labels() of that epoch.
  void start_epoch(int epoch);
  // out: micro_batch_rows() x features floats.
  void input(int batch, int dp_rank, int micro_batch, std::span<float> out) const;
  // out: micro_batch_rows() labels.
  void labels(int batch, int dp_rank, int micro_batch, std::span<std::uint8_t> out) const;

 private:
  std::size_t first_sample(int batch, int dp_rank, int micro_batch) const;

  const Dataset* data_;
  std::uint64_t seed_;
  int batch_;
  int dp_;
  int micro_batches_;
  int micro_batch_rows_;
  std::vector<std::uint32_t> order_;
};

}  // namespace pipevm::runtime
