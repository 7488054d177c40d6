// Checkpoint files over the in-process Comm: what is written reads back bit
// for bit, the manifest commits only complete checkpoints, older ones and
// leftovers go at the next commit, and a damaged checkpoint (no manifest, a
// missing, truncated or changed piece, another run's identity) is refused
// with a message that says which and why. Also the optimizer's state round
// trip that checkpoints rely on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "checkpoint.hpp"
#include "inprocess_comm.hpp"
#include "optimizer.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;

std::string fresh_directory(const std::string& name) {
  const fs::path path =
      fs::temp_directory_path() / ("pipevm-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path.string();
}

// Rank `rank`'s made-up state: values that differ by rank, chunk and array.
RankCheckpoint piece_of(int rank, int chunks = 2) {
  RankCheckpoint piece;
  for (int c = 0; c < chunks; ++c) {
    const auto value = [&](int array, int i) {
      return static_cast<float>(rank * 1000 + c * 100 + array * 10 + i) / 7.0F;
    };
    RankCheckpoint::Chunk chunk;
    for (int i = 0; i < 5 + c; ++i) {
      chunk.parameters.push_back(value(0, i));
      chunk.gradients.push_back(value(1, i));
    }
    chunk.optimizer.steps = 40 + rank;
    chunk.optimizer.arrays.emplace_back("first_moment", chunk.parameters);
    chunk.optimizer.arrays.emplace_back("second_moment", chunk.gradients);
    piece.chunks.push_back(std::move(chunk));
  }
  // Not exact in decimal; rank 1's has the sign bit set (its bits pass 2^63).
  piece.epoch_loss = rank == 0 ? 0.1 : -1.1;
  piece.epoch_correct = 17 + rank;
  piece.epoch_rows = 32;
  return piece;
}

const RunIdentity kIdentity = {{"schedule", "1f1b"}, {"world.ranks", "2"}};

CheckpointPosition at_step(std::int64_t step) {
  return {step, static_cast<int>(step / 8), static_cast<int>(step % 8), 8};
}

// Every rank of a 2-stage world writes its piece at `step`; the results.
std::vector<CheckpointResult> write_all(const std::string& directory, std::int64_t step) {
  std::vector<CheckpointResult> results(2);
  std::mutex mutex;
  run_in_process(2, 1, [&](Comm& comm) {
    const CheckpointResult result =
        write_checkpoint(comm, directory, at_step(step), kIdentity, piece_of(comm.world_rank()));
    std::lock_guard lock(mutex);
    results[static_cast<std::size_t>(comm.world_rank())] = result;
  });
  return results;
}

void expect_same(const RankCheckpoint& a, const RankCheckpoint& b) {
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (std::size_t c = 0; c < a.chunks.size(); ++c) {
    EXPECT_EQ(a.chunks[c].parameters, b.chunks[c].parameters);
    EXPECT_EQ(a.chunks[c].gradients, b.chunks[c].gradients);
    EXPECT_EQ(a.chunks[c].optimizer.steps, b.chunks[c].optimizer.steps);
    EXPECT_EQ(a.chunks[c].optimizer.arrays, b.chunks[c].optimizer.arrays);
  }
  EXPECT_EQ(a.epoch_loss, b.epoch_loss);  // the same bits, not nearly
  EXPECT_EQ(a.epoch_correct, b.epoch_correct);
  EXPECT_EQ(a.epoch_rows, b.epoch_rows);
}

// The message of the CheckpointError that `read` throws, or "(no error)".
template <typename Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const CheckpointError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(checkpoint, round_trip_is_bit_exact) {
  const std::string dir = fresh_directory("checkpoint-round-trip");
  for (const CheckpointResult& result : write_all(dir, 13)) {
    EXPECT_TRUE(result.committed);
    EXPECT_EQ(result.error, "");
  }
  const Manifest manifest = read_manifest(dir);
  EXPECT_EQ(manifest.position.step, 13);
  EXPECT_EQ(manifest.position.epoch, 1);
  EXPECT_EQ(manifest.position.step_in_epoch, 5);
  EXPECT_EQ(manifest.made_for, kIdentity);
  ASSERT_EQ(manifest.pieces.size(), 2u);
  EXPECT_EQ(manifest.pieces[1].file, "step-00000013/rank-0001.safetensors");
  for (int rank = 0; rank < 2; ++rank) expect_same(read_piece(dir, manifest, rank), piece_of(rank));
  fs::remove_all(dir);
}

TEST(checkpoint, commit_replaces_the_previous_and_removes_leftovers) {
  const std::string dir = fresh_directory("checkpoint-replace");
  write_all(dir, 8);
  // What a run killed while writing step 30 leaves behind: a piece, no manifest.
  fs::create_directories(dir + "/step-00000030");
  std::ofstream(dir + "/step-00000030/rank-0000.safetensors") << "half";
  std::ofstream(dir + "/manifest.json.tmp.123") << "{";
  EXPECT_EQ(read_manifest(dir).position.step, 8) << "a half-written checkpoint was taken";

  write_all(dir, 16);
  EXPECT_EQ(read_manifest(dir).position.step, 16);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "step-00000016"}));
  fs::remove_all(dir);
}

TEST(checkpoint, without_manifest_is_refused) {
  const std::string dir = fresh_directory("checkpoint-no-manifest");
  write_all(dir, 8);
  fs::remove(dir + "/manifest.json");
  EXPECT_FALSE(has_checkpoint(dir));
  EXPECT_NE(refusal([&] { read_manifest(dir); }).find("holds no checkpoint"), std::string::npos);
  fs::remove_all(dir);
}

TEST(checkpoint, with_a_damaged_piece_is_refused) {
  const std::string dir = fresh_directory("checkpoint-damaged");
  write_all(dir, 8);
  const Manifest manifest = read_manifest(dir);
  const std::string piece = dir + "/" + manifest.pieces[1].file;

  fs::resize_file(piece, fs::file_size(piece) - 3);
  EXPECT_NE(refusal([&] { read_piece(dir, manifest, 1); }).find("truncated"), std::string::npos);
  expect_same(read_piece(dir, manifest, 0), piece_of(0));  // the other piece is fine

  write_all(dir, 8);
  {
    std::fstream file(piece, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }
  EXPECT_NE(refusal([&] { read_piece(dir, manifest, 1); }).find("digest"), std::string::npos);

  fs::remove(piece);
  const std::string missing = refusal([&] { read_piece(dir, manifest, 1); });
  EXPECT_NE(missing.find("missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("rank-0001.safetensors"), std::string::npos) << missing;
  EXPECT_NE(refusal([&] { read_piece(dir, manifest, 2); }).find("no piece for rank 2"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(checkpoint, with_a_malformed_manifest_is_refused) {
  const std::string dir = fresh_directory("checkpoint-malformed");
  std::ofstream(dir + "/manifest.json") << "{\"format\": \"pipevm checkpoint 1\"}";
  EXPECT_NE(refusal([&] { read_manifest(dir); }).find("not a pipevm checkpoint manifest"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(checkpoint, identity_mismatch_names_every_difference) {
  const RunIdentity now = {{"schedule", "gpipe"}, {"world.ranks", "2"}, {"extra", "1"}};
  EXPECT_EQ(identity_mismatch(kIdentity, kIdentity), "");
  EXPECT_EQ(identity_mismatch(kIdentity, now),
            "the checkpoint was made for schedule 1f1b (this run: gpipe); extra none (this run: "
            "1)");
}

TEST(checkpoint, into_a_missing_directory_commits_nothing) {
  const std::string dir = fresh_directory("checkpoint-missing") + "/gone";
  const std::vector<CheckpointResult> results = write_all(dir, 8);
  for (const CheckpointResult& result : results) EXPECT_FALSE(result.committed);
  EXPECT_NE(results[1].error.find("No such file or directory"), std::string::npos)
      << results[1].error;
  EXPECT_NE(results[0].error.find("rank(s) 0, 1 could not write their piece"), std::string::npos)
      << results[0].error;
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(checkpoint, optimizer_state_restored_continues_bit_for_bit) {
  for (const char* kind : {"adam", "sgd"}) {
    OptimizerConfig config;
    config.kind = kind;
    config.momentum = 0.9F;
    std::vector<float> params_a = {0.5F, -1.0F, 2.0F};
    const std::vector<float> grads = {0.1F, 0.3F, -0.7F};
    Optimizer a(config, 3);
    for (int i = 0; i < 3; ++i) a.step(params_a, grads);
    Optimizer b(config, 3);
    b.restore(a.state());
    std::vector<float> params_b = params_a;
    for (int i = 0; i < 4; ++i) {
      a.step(params_a, grads);
      b.step(params_b, grads);
    }
    EXPECT_EQ(params_a, params_b) << kind;
    EXPECT_EQ(b.steps_taken(), 7) << kind;
  }
}

TEST(checkpoint, optimizer_refuses_another_optimizers_state) {
  OptimizerConfig adam;
  OptimizerConfig sgd;
  sgd.kind = "sgd";
  Optimizer plain_sgd(sgd, 3);
  EXPECT_THROW(plain_sgd.restore(Optimizer(adam, 3).state()), std::invalid_argument);
  Optimizer wider(adam, 4);
  EXPECT_THROW(wider.restore(Optimizer(adam, 3).state()), std::invalid_argument);
  EXPECT_EQ(wider.steps_taken(), 0);
}

}  // namespace
}  // namespace pipevm::runtime
