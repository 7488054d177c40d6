// safetensors: the model round trip, the header layout, and bad files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model.hpp"
#include "safetensors.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;

std::string temporary_file(const std::string& name) {
  return (fs::temp_directory_path() / ("pipevm-" + std::to_string(getpid()) + "-" + name)).string();
}

TEST(safetensors, model_round_trip) {
  ModelConfig config;
  config.sizes = {7, 5, 3};
  config.seed = 4;
  const Piece model(config, {0, 2});
  const std::string path = temporary_file("round-trip.safetensors");
  save_model(path, config.sizes, model.parameters());
  const std::vector<float> loaded = load_model(path, config.sizes);
  EXPECT_TRUE(std::equal(loaded.begin(), loaded.end(), model.parameters().begin(),
                         model.parameters().end()));

  const SafetensorsFile file = read_safetensors(path);
  EXPECT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.tensors.at("layers.0.weight").shape, (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(file.tensors.at("layers.1.bias").shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(file.metadata.at("sizes"), "7,5,3");
  EXPECT_THROW(load_model(path, {7, 5, 4}), std::runtime_error);
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path())) {
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos)
        << "temporary left behind";
  }
  fs::remove(path);
}

TEST(safetensors, header_follows_the_format) {
  const std::string path = temporary_file("header.safetensors");
  const std::vector<float> a = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<float> b = {-1.0f};
  write_safetensors(path, {{"a", {2, 3}, a}, {"b", {1}, b}});
  std::ifstream in(path, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  EXPECT_EQ(length % 8, 0u);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  const auto json = nlohmann::json::parse(header);
  EXPECT_EQ(json["a"]["dtype"], "F32");
  EXPECT_EQ(json["a"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(json["b"]["data_offsets"], nlohmann::json::array({24, 28}));
  float first = 0.0f;
  in.read(reinterpret_cast<char*>(&first), 4);
  EXPECT_EQ(first, 1.0f);
  EXPECT_EQ(fs::file_size(path), 8 + length + 28);
  fs::remove(path);
}

TEST(safetensors, rejects_malformed_files) {
  const std::string path = temporary_file("bad.safetensors");
  {
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t length = 1000;
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << "{}";
  }
  EXPECT_THROW(read_safetensors(path), std::runtime_error);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::string header = R"({"x":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})";
    const std::uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << header << "ab";
  }
  EXPECT_THROW(read_safetensors(path), std::runtime_error);
  EXPECT_THROW(write_safetensors(path, {{"x", {2, 2}, std::vector<float>(3)}}), std::runtime_error);
  EXPECT_THROW(read_safetensors(temporary_file("missing.safetensors")), std::runtime_error);
  fs::remove(path);
}

}  // namespace
}  // namespace pipevm::runtime
