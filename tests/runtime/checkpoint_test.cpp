// Checkpoint files over the in-process Comm: what is written reads back bit
// for bit, cut and joined into other slices than were written; a reader
// reads only the files it needs; the manifest commits only complete
// checkpoints, older ones and leftovers go at the next commit; a damaged
// checkpoint (no manifest, a missing, truncated or changed piece, today's
// older format) is refused with a message that says which and why. Also
// the optimizer's state round trip that checkpoints rely on.
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

// The value of float i of layer `layer` in made-up array `array` (0: the
// parameters), as every writer and reader below agrees.
float value(int layer, int array, std::uint64_t i) {
  return static_cast<float>(layer * 1000 + array * 100 + static_cast<int>(i)) / 7.0F;
}

SliceState slice_of(LayerSlice where) {
  SliceState slice{where, {}, {}};
  slice.optimizer.steps = 40;
  slice.optimizer.arrays = {{"first_moment", {}}, {"second_moment", {}}};
  for (std::uint64_t i = where.begin; i < where.end; ++i) {
    slice.parameters.push_back(value(where.layer, 0, i));
    slice.optimizer.arrays[0].second.push_back(value(where.layer, 1, i));
    slice.optimizer.arrays[1].second.push_back(value(where.layer, 2, i));
  }
  return slice;
}

// What each rank of a 2-rank world writes: layer 0 and the first part of
// layer 1 on rank 0, the rest of layer 1 and layer 2 on rank 1.
RankCheckpoint piece_of(int rank) {
  RankCheckpoint piece;
  if (rank == 0) {
    piece.slices = {slice_of({0, 0, 10}), slice_of({1, 0, 4})};
  } else {
    piece.slices = {slice_of({1, 4, 9}), slice_of({2, 0, 6})};
  }
  // Not exact in decimal; rank 1's has the sign bit set (its bits pass 2^63).
  piece.epoch = {rank == 0 ? 0.1 : -1.1, 17 + rank, 32};
  return piece;
}

const RunRecord kRecord = {{{"model.sizes", "4-3-2"}, {"training.lr", "0.1"}},
                           {{"schedule", "1f1b"}, {"world.ranks", "2"}}};

CheckpointPosition at_step(std::int64_t step) {
  return {step, static_cast<int>(step / 8), static_cast<int>(step % 8), 8};
}

// Every rank of a 2-rank world writes its piece at `step`; the results.
std::vector<CheckpointResult> write_all(const std::string& directory, std::int64_t step) {
  std::vector<CheckpointResult> results(2);
  std::mutex mutex;
  run_in_process(2, 1, [&](Comm& comm) {
    const CheckpointResult result =
        write_checkpoint(comm, directory, at_step(step), kRecord, piece_of(comm.world_rank()));
    std::lock_guard lock(mutex);
    results[static_cast<std::size_t>(comm.world_rank())] = result;
  });
  return results;
}

void expect_same(const std::vector<SliceState>& read, const std::vector<LayerSlice>& wanted) {
  ASSERT_EQ(read.size(), wanted.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    const SliceState expected = slice_of(wanted[i]);
    EXPECT_EQ(read[i].where, wanted[i]);
    EXPECT_EQ(read[i].parameters, expected.parameters);  // the same bits, not nearly
    EXPECT_EQ(read[i].optimizer.steps, expected.optimizer.steps);
    EXPECT_EQ(read[i].optimizer.arrays, expected.optimizer.arrays);
  }
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

const std::vector<LayerSlice> kWhole = {{0, 0, 10}, {1, 0, 9}, {2, 0, 6}};

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
  EXPECT_EQ(manifest.run.made_for, kRecord.made_for);
  EXPECT_EQ(manifest.run.layout, kRecord.layout);
  ASSERT_EQ(manifest.pieces.size(), 2u);
  EXPECT_EQ(manifest.pieces[1].file, "step-00000013/rank-0001.safetensors");
  EXPECT_EQ(manifest.pieces[1].slices, (std::vector<LayerSlice>{{1, 4, 9}, {2, 0, 6}}));
  ASSERT_EQ(manifest.epoch_sums.size(), 2u);
  EXPECT_EQ(manifest.epoch_sums[1].loss, -1.1);
  EXPECT_EQ(manifest.epoch_sums[1].correct, 18);
  expect_same(read_slices(dir, manifest, kWhole), kWhole);
  fs::remove_all(dir);
}

TEST(checkpoint, slices_are_cut_and_joined_across_pieces) {
  const std::string dir = fresh_directory("checkpoint-reslice");
  write_all(dir, 8);
  const Manifest manifest = read_manifest(dir);
  const std::vector<LayerSlice> wanted = {{2, 1, 3}, {1, 2, 7}, {0, 9, 10}};
  expect_same(read_slices(dir, manifest, wanted), wanted);
  fs::remove_all(dir);
}

TEST(checkpoint, a_rank_without_slices_writes_no_file) {
  const std::string dir = fresh_directory("checkpoint-empty-rank");
  run_in_process(2, 1, [&](Comm& comm) {
    RankCheckpoint mine = comm.world_rank() == 0 ? piece_of(0) : RankCheckpoint{};
    mine.epoch.rows = 5;
    EXPECT_TRUE(write_checkpoint(comm, dir, at_step(3), kRecord, mine).committed);
  });
  const Manifest manifest = read_manifest(dir);
  ASSERT_EQ(manifest.pieces.size(), 1u);
  EXPECT_EQ(manifest.pieces[0].rank, 0);
  EXPECT_EQ(manifest.epoch_sums.at(1).rows, 5);
  EXPECT_FALSE(fs::exists(dir + "/step-00000003/rank-0001.safetensors"));
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
  const std::vector<LayerSlice> second = {{2, 0, 6}};

  fs::resize_file(piece, fs::file_size(piece) - 3);
  EXPECT_NE(refusal([&] { read_slices(dir, manifest, second); }).find("truncated"),
            std::string::npos);
  // A reader that needs nothing of the damaged piece does not read it.
  const std::vector<LayerSlice> first = {{0, 0, 10}, {1, 0, 4}};
  expect_same(read_slices(dir, manifest, first), first);

  write_all(dir, 8);
  {
    std::fstream file(piece, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }
  EXPECT_NE(refusal([&] { read_slices(dir, manifest, second); }).find("digest"),
            std::string::npos);

  fs::remove(piece);
  const std::string missing = refusal([&] { read_slices(dir, manifest, second); });
  EXPECT_NE(missing.find("missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("rank-0001.safetensors"), std::string::npos) << missing;
  const std::vector<LayerSlice> beyond = {{3, 0, 1}};
  EXPECT_NE(refusal([&] { read_slices(dir, manifest, beyond); })
                .find("no piece holds floats [0, 1) of layer 3"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(checkpoint, with_a_malformed_manifest_is_refused) {
  const std::string dir = fresh_directory("checkpoint-malformed");
  std::ofstream(dir + "/manifest.json") << "{\"format\": \"pipevm checkpoint 2\"}";
  EXPECT_NE(refusal([&] { read_manifest(dir); }).find("not a pipevm checkpoint manifest"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(checkpoint, of_the_old_format_is_refused_with_what_to_do) {
  const std::string dir = fresh_directory("checkpoint-old-format");
  std::ofstream(dir + "/manifest.json") << "{\"format\": \"pipevm checkpoint 1\"}";
  const std::string message = refusal([&] { read_manifest(dir); });
  EXPECT_NE(message.find("'pipevm checkpoint 1' (one piece per rank"), std::string::npos)
      << message;
  EXPECT_NE(message.find("finish that run with the pipevm that wrote it"), std::string::npos)
      << message;
  fs::remove_all(dir);
}

TEST(checkpoint, identity_mismatch_names_every_difference) {
  const RunIdentity now = {{"model.sizes", "4-3-2"}, {"training.lr", "0.2"}, {"extra", "1"}};
  EXPECT_EQ(identity_mismatch(kRecord.made_for, kRecord.made_for), "");
  EXPECT_EQ(identity_mismatch(kRecord.made_for, now),
            "the checkpoint was made for training.lr 0.1 (this run: 0.2); extra none (this run: "
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
