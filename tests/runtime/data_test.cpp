// Data: the IDX reader on files the test writes (plain and gzip), the
// missing-file message, the synthetic set, and the Batcher's slicing.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "data.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("pipevm-runtime-" + std::to_string(getpid()) + "-" + test->name());
    fs::create_directories(path_);
  }
  ~TemporaryDirectory() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<std::uint8_t> big_endian(std::uint32_t value) {
  return {static_cast<std::uint8_t>(value >> 24), static_cast<std::uint8_t>(value >> 16),
          static_cast<std::uint8_t>(value >> 8), static_cast<std::uint8_t>(value)};
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(file);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
}

// Three 2x3 images whose pixels are sample * 10 + pixel, labels 2, 0, 1.
void write_idx_pair(const std::string& images, const std::string& labels, bool gzip) {
  std::vector<std::uint8_t> image_bytes = big_endian(0x803);
  for (const std::uint32_t dimension : {3u, 2u, 3u}) {
    const auto encoded = big_endian(dimension);
    image_bytes.insert(image_bytes.end(), encoded.begin(), encoded.end());
  }
  for (int sample = 0; sample < 3; ++sample)
    for (int pixel = 0; pixel < 6; ++pixel)
      image_bytes.push_back(static_cast<std::uint8_t>(sample * 10 + pixel));
  std::vector<std::uint8_t> label_bytes = big_endian(0x801);
  const auto count = big_endian(3);
  label_bytes.insert(label_bytes.end(), count.begin(), count.end());
  label_bytes.insert(label_bytes.end(), {2, 0, 1});
  write_bytes(images, image_bytes, gzip);
  write_bytes(labels, label_bytes, gzip);
}

void expect_small_dataset(const Dataset& data) {
  EXPECT_EQ(data.samples, 3);
  EXPECT_EQ(data.features, 6);
  EXPECT_EQ(data.classes, 3);
  EXPECT_EQ(data.labels, (std::vector<std::uint8_t>{2, 0, 1}));
  ASSERT_EQ(data.pixels.size(), 18u);
  EXPECT_EQ(data.pixels[0], 0);
  EXPECT_EQ(data.pixels[17], 25);
}

TEST(data, idx_reader_reads_plain_files) {
  TemporaryDirectory directory;
  write_idx_pair(directory.file("images"), directory.file("labels"), false);
  expect_small_dataset(load_idx(directory.file("images"), directory.file("labels")));
}

TEST(data, idx_reader_reads_gzip_files) {
  TemporaryDirectory directory;
  write_idx_pair(directory.file("images.gz"), directory.file("labels.gz"), true);
  expect_small_dataset(load_idx(directory.file("images.gz"), directory.file("labels.gz")));
}

TEST(data, idx_reader_rejects_swapped_or_truncated_files) {
  TemporaryDirectory directory;
  write_idx_pair(directory.file("images"), directory.file("labels"), false);
  EXPECT_THROW(load_idx(directory.file("labels"), directory.file("images")), std::runtime_error);
  write_bytes(directory.file("short"), {0, 0, 8, 3, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 7}, false);
  EXPECT_THROW(load_idx(directory.file("short"), directory.file("labels")), std::runtime_error);
}

TEST(data, directory_reads_the_fashion_mnist_layout_and_splits_validation) {
  TemporaryDirectory directory;
  write_idx_pair(directory.file("train-images-idx3-ubyte.gz"),
                 directory.file("train-labels-idx1-ubyte.gz"), true);
  write_idx_pair(directory.file("t10k-images-idx3-ubyte"), directory.file("t10k-labels-idx1-ubyte"),
                 false);
  const DataSplit split = load_directory(directory.file(""), 1.0 / 3.0);
  EXPECT_EQ(split.train.samples, 2);
  EXPECT_EQ(split.validation.samples, 1);
  EXPECT_EQ(split.validation.labels, (std::vector<std::uint8_t>{1}));
  EXPECT_EQ(split.validation.pixels.front(), 20);
  EXPECT_EQ(split.test.samples, 3);
}

TEST(data, directory_reads_only_the_parts_asked_for) {
  TemporaryDirectory directory;
  write_idx_pair(directory.file("train-images-idx3-ubyte.gz"),
                 directory.file("train-labels-idx1-ubyte.gz"), true);
  write_idx_pair(directory.file("t10k-images-idx3-ubyte"), directory.file("t10k-labels-idx1-ubyte"),
                 false);
  DataParts labels_only;
  labels_only.train_pixels = false;
  labels_only.test = false;
  const DataSplit split = load_directory(directory.file(""), 1.0 / 3.0, labels_only);
  EXPECT_EQ(split.train.samples, 2);
  EXPECT_GT(split.train.features, 0);
  EXPECT_TRUE(split.train.pixels.empty());
  EXPECT_EQ(split.train.labels.size(), 2U);
  EXPECT_EQ(split.validation.labels, (std::vector<std::uint8_t>{1}));
  EXPECT_EQ(split.test.samples, 0);
  const DataSplit full = load_directory(directory.file(""), 1.0 / 3.0);
  EXPECT_EQ(split.train.labels, full.train.labels);
  EXPECT_EQ(split.train.features, full.train.features);
}

TEST(data, missing_files_name_the_debian_package_and_the_path) {
  const std::string missing = "/nonexistent/pipevm-fashion";
  try {
    load_directory(missing);
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("dataset-fashion-mnist"), std::string::npos) << message;
    EXPECT_NE(message.find(missing + "/train-images-idx3-ubyte"), std::string::npos) << message;
  }
}

TEST(data, fashion_mnist_when_installed) {
  if (!fs::exists(std::string(kFashionMnistDirectory) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const DataSplit split = load_directory();
  EXPECT_EQ(split.train.samples, 51000);
  EXPECT_EQ(split.validation.samples, 9000);
  EXPECT_EQ(split.test.samples, 10000);
  EXPECT_EQ(split.train.features, 784);
  EXPECT_EQ(split.train.classes, 10);
}

TEST(data, synthetic_is_deterministic_and_balanced) {
  const DataSplit a = synthetic(500, 100, 30, 5, 1);
  const DataSplit b = synthetic(500, 100, 30, 5, 1);
  EXPECT_EQ(a.train.pixels, b.train.pixels);
  EXPECT_EQ(a.test.labels, b.test.labels);
  EXPECT_NE(a.train.pixels, synthetic(500, 100, 30, 5, 2).train.pixels);
  EXPECT_EQ(a.validation.samples, 0);
  std::vector<int> counts(5);
  for (const auto label : a.train.labels) ++counts[label];
  for (const int count : counts) EXPECT_GT(count, 60);
}

TEST(data, inputs_span_minus_one_to_one) {
  const std::vector<std::uint8_t> pixels = {0, 255, 51};
  std::vector<float> inputs(3);
  to_inputs(pixels, inputs);
  EXPECT_FLOAT_EQ(inputs[0], -1.0f);
  EXPECT_FLOAT_EQ(inputs[1], 1.0f);
  EXPECT_FLOAT_EQ(inputs[2], -0.6f);
}

// A dataset whose first two pixels spell the sample's index.
Dataset indexed(int samples) {
  Dataset data;
  data.samples = samples;
  data.features = 2;
  data.classes = 256;
  for (int i = 0; i < samples; ++i) {
    data.pixels.push_back(static_cast<std::uint8_t>(i / 256));
    data.pixels.push_back(static_cast<std::uint8_t>(i % 256));
    data.labels.push_back(static_cast<std::uint8_t>(i % 256));
  }
  return data;
}

std::vector<int> slice_samples(const Batcher& batcher, int batch, int dp_rank, int micro_batch) {
  std::vector<float> input(static_cast<std::size_t>(batcher.micro_batch_rows()) * 2);
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(batcher.micro_batch_rows()));
  batcher.input(batch, dp_rank, micro_batch, input);
  batcher.labels(batch, dp_rank, micro_batch, labels);
  const auto byte = [](float value) {
    return static_cast<int>(std::lround((value + 1.0f) * 127.5f));
  };
  std::vector<int> samples;
  for (std::size_t row = 0; row < labels.size(); ++row) {
    const int sample = byte(input[2 * row]) * 256 + byte(input[2 * row + 1]);
    EXPECT_EQ(labels[row], sample % 256) << "labels travel with their images";
    samples.push_back(sample);
  }
  return samples;
}

TEST(data, batcher_slices_tile_the_global_batch) {
  const Dataset data = indexed(1000);
  Batcher whole(data, 5, 24, 1, 1);
  Batcher sliced(data, 5, 24, 2, 3);
  EXPECT_EQ(whole.batches_per_epoch(), 41);  // 1000 / 24, the partial batch dropped
  EXPECT_EQ(sliced.micro_batch_rows(), 4);
  std::set<int> seen;
  for (const int epoch : {0, 1}) {
    whole.start_epoch(epoch);
    sliced.start_epoch(epoch);
    seen.clear();
    for (int batch = 0; batch < whole.batches_per_epoch(); ++batch) {
      const std::vector<int> expected = slice_samples(whole, batch, 0, 0);
      std::vector<int> tiled;
      for (int dp_rank = 0; dp_rank < 2; ++dp_rank)
        for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
          const auto part = slice_samples(sliced, batch, dp_rank, micro_batch);
          tiled.insert(tiled.end(), part.begin(), part.end());
        }
      ASSERT_EQ(tiled, expected) << "epoch " << epoch << " batch " << batch;
      seen.insert(expected.begin(), expected.end());
    }
    EXPECT_EQ(seen.size(), 41u * 24u) << "no sample twice in an epoch";
  }
  EXPECT_THROW(slice_samples(sliced, 41, 0, 0), std::out_of_range);
  EXPECT_THROW(Batcher(data, 5, 25, 2, 3), std::invalid_argument);
}

TEST(data, batcher_epoch_order_depends_on_seed_and_epoch_only) {
  const Dataset data = indexed(300);
  Batcher a(data, 1, 10, 1, 1);
  Batcher b(data, 1, 10, 1, 1);
  a.start_epoch(3);
  b.start_epoch(1);
  b.start_epoch(3);
  EXPECT_EQ(slice_samples(a, 0, 0, 0), slice_samples(b, 0, 0, 0));
  b.start_epoch(4);
  EXPECT_NE(slice_samples(a, 0, 0, 0), slice_samples(b, 0, 0, 0));
  Batcher c(data, 2, 10, 1, 1);
  c.start_epoch(3);
  EXPECT_NE(slice_samples(a, 0, 0, 0), slice_samples(c, 0, 0, 0));
}

}  // namespace
}  // namespace pipevm::runtime
