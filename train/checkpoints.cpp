// A run's record, resuming from a checkpoint under any layout and the
// checkpoint schedule (checkpoints.hpp).
#include "checkpoints.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "digest.hpp"
#include "shortest_text.hpp"

namespace pipevm::train {

namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

// "0-1|2-6": the layers of each piece, in order.
std::string split_key(const std::vector<runtime::LayerRange>& split) {
  std::string key;
  for (const runtime::LayerRange& piece : split) {
    key += (key.empty() ? "" : "|") + std::to_string(piece.begin) + "-" +
           std::to_string(piece.end - 1);
  }
  return key;
}

std::string value_of(const runtime::RunIdentity& identity, const std::string& key) {
  const auto found = identity.find(key);
  return found == identity.end() ? "?" : found->second;
}

}  // namespace

runtime::RunRecord run_record(const config::RunConfig& config, const Program& program,
                              const std::vector<runtime::LayerRange>& split,
                              const std::vector<std::string>& hosts) {
  std::uint64_t digest = runtime::kFnv1aBasis;
  for (int rank = 0; rank < program.ranks(); ++rank) {
    const std::string text = disassemble_rank(program, rank);
    digest = runtime::fnv1a_bytes(std::as_bytes(std::span<const char>(text)), digest);
  }
  std::vector<std::string> distinct = hosts;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const runtime::OptimizerConfig& optimizer = config.optimizer;
  runtime::RunRecord record;
  record.made_for = {{"model.sizes", runtime::describe(config.model)},
                     {"model.loss", std::string(runtime::name(config.model.loss))},
                     {"model.seed", std::to_string(config.model.seed)},
                     {"data.source", config.data},
                     {"training.batch_size", std::to_string(config.batch_size)},
                     {"training.seed", std::to_string(config.seed)},
                     {"training.optimizer", optimizer.kind},
                     {"training.lr", shortest_text(optimizer.lr)},
                     {"training.momentum", shortest_text(optimizer.momentum)},
                     {"training.beta1", shortest_text(optimizer.beta1)},
                     {"training.beta2", shortest_text(optimizer.beta2)},
                     {"training.eps", shortest_text(optimizer.eps)}};
  if (config.data == "synthetic") {
    record.made_for["data.synthetic_train"] = std::to_string(config.synthetic_train);
    record.made_for["data.synthetic_test"] = std::to_string(config.synthetic_test);
  }
  record.layout = {{"schedule", program.name},
                   {"schedule.program_fnv1a64", hex(digest)},
                   {"world.ranks", std::to_string(program.config.ranks())},
                   {"world.stages", std::to_string(program.config.stages)},
                   {"world.dp", std::to_string(program.config.dp)},
                   {"world.chunks", std::to_string(program.config.chunks)},
                   {"world.placement", std::string(name(program.placement))},
                   {"world.hosts", std::to_string(std::max<std::size_t>(1, distinct.size()))},
                   {"model.split", split_key(split)},
                   {"training.micro_batches", std::to_string(program.config.micro_batches)}};
  return record;
}

std::string describe_layout(const runtime::RunIdentity& layout) {
  const std::string chunks = value_of(layout, "world.chunks");
  const std::string hosts = value_of(layout, "world.hosts");
  return value_of(layout, "schedule") + " x " + value_of(layout, "world.stages") +
         " stages" + (chunks == "1" ? "" : " x " + chunks + " chunks") + " x dp " +
         value_of(layout, "world.dp") + (hosts == "1" ? "" : " on " + hosts + " hosts");
}

runtime::Manifest read_resume(const std::string& directory, const runtime::RunIdentity& now) {
  runtime::Manifest manifest = runtime::read_manifest(directory);
  const std::string mismatch = runtime::identity_mismatch(manifest.run.made_for, now);
  if (!mismatch.empty()) {
    throw runtime::CheckpointError("--resume " + directory + ": " + mismatch);
  }
  return manifest;
}

Resumed read_rank_state(const std::string& directory, const runtime::Manifest& manifest,
                        const Trainer& trainer, int rank, int world) {
  Resumed resumed;
  const std::vector<runtime::LayerSlice> wanted = trainer.resume_slices();
  resumed.slices = runtime::read_slices(directory, manifest, wanted);
  const std::vector<runtime::EpochSums>& sums = manifest.epoch_sums;
  if (static_cast<int>(sums.size()) == world) {
    resumed.sums = sums[static_cast<std::size_t>(rank)];
  } else if (rank == 0) {
    for (const runtime::EpochSums& other : sums) {
      resumed.sums.loss += other.loss;
      resumed.sums.correct += other.correct;
      resumed.sums.rows += other.rows;
    }
  }
  return resumed;
}

void Checkpoints::after_step(Trainer& trainer, runtime::Comm& comm, int done, int total) {
  // The last step of an epoch is checkpointed after the epoch's report.
  if (every_steps_ > 0 && done < total && trainer.position().step % every_steps_ == 0) {
    write(trainer, comm);
  }
}

void Checkpoints::after_epoch(Trainer& trainer, runtime::Comm& comm) {
  if (every_steps_ == 0 || trainer.position().step % every_steps_ == 0) write(trainer, comm);
}

void Checkpoints::write(Trainer& trainer, runtime::Comm& comm) {
  const runtime::CheckpointPosition position = trainer.position();
  const runtime::CheckpointResult result =
      runtime::write_checkpoint(comm, directory_, position, record_, trainer.checkpoint());
  if (result.committed) latest_ = position;
  if (!result.error.empty()) {
    log_.warning(
        (comm.world_rank() == 0 ? "" : "rank " + std::to_string(comm.world_rank()) + ": ") +
        "no checkpoint at " + describe(position) + " in " + directory_ + ": " + result.error);
  }
}

std::string describe(const runtime::CheckpointPosition& position) {
  return "epoch " + std::to_string(position.epoch + 1) + ", step " +
         std::to_string(position.step_in_epoch) + "/" + std::to_string(position.steps_per_epoch) +
         " (" + std::to_string(position.step) + " steps in all)";
}

}  // namespace pipevm::train
