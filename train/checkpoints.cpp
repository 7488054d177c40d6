// A run's identity, resuming from a checkpoint and the checkpoint schedule
// (checkpoints.hpp).
#include "checkpoints.hpp"

#include <charconv>
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

}  // namespace

std::vector<runtime::LayerRange> recorded_split(const std::string& directory, int layers) {
  const runtime::Manifest manifest = runtime::read_manifest(directory);
  const auto found = manifest.made_for.find("model.split");
  const std::string key = found == manifest.made_for.end() ? "" : found->second;
  std::vector<runtime::LayerRange> split;
  const char* at = key.data();
  const char* const end = key.data() + key.size();
  // Pieces must be contiguous, cover every layer and be written as split_key writes them.
  while (at < end) {
    runtime::LayerRange piece;
    int last = -1;
    auto parsed = std::from_chars(at, end, piece.begin);
    if (parsed.ec == std::errc{} && parsed.ptr < end && *parsed.ptr == '-') {
      parsed = std::from_chars(parsed.ptr + 1, end, last);
    } else {
      parsed.ec = std::errc::invalid_argument;
    }
    piece.end = last + 1;
    const int expected_begin = split.empty() ? 0 : split.back().end;
    if (parsed.ec != std::errc{} || piece.begin != expected_begin || piece.end <= piece.begin ||
        (parsed.ptr < end && *parsed.ptr != '|')) {
      split.clear();
      break;
    }
    split.push_back(piece);
    at = parsed.ptr < end ? parsed.ptr + 1 : end;
  }
  if (split.empty() || split.back().end != layers) {
    throw runtime::CheckpointError(
        "--resume " + directory + ": the manifest does not say how the model of " +
        std::to_string(layers) + " layers was cut (model.split '" + key + "')");
  }
  return split;
}

runtime::RunIdentity run_identity(const config::RunConfig& config, const Program& program,
                                  const std::vector<runtime::LayerRange>& split) {
  std::uint64_t digest = runtime::kFnv1aBasis;
  for (int rank = 0; rank < program.ranks(); ++rank) {
    const std::string text = disassemble_rank(program, rank);
    digest = runtime::fnv1a_bytes(std::as_bytes(std::span<const char>(text)), digest);
  }
  const std::string sizes = runtime::describe(config.model);
  const runtime::OptimizerConfig& optimizer = config.optimizer;
  runtime::RunIdentity identity = {{"schedule", program.name},
                                   {"schedule.program_fnv1a64", hex(digest)},
                                   {"world.ranks", std::to_string(program.config.ranks())},
                                   {"world.stages", std::to_string(program.config.stages)},
                                   {"world.dp", std::to_string(program.config.dp)},
                                   {"world.chunks", std::to_string(program.config.chunks)},
                                   {"world.placement", std::string(name(program.placement))},
                                   {"model.sizes", sizes},
                                   {"model.loss", std::string(runtime::name(config.model.loss))},
                                   {"model.seed", std::to_string(config.model.seed)},
                                   {"model.split", split_key(split)},
                                   {"data.source", config.data},
                                   {"training.batch_size", std::to_string(config.batch_size)},
                                   {"training.micro_batches", std::to_string(config.micro_batches)},
                                   {"training.seed", std::to_string(config.seed)},
                                   {"training.optimizer", optimizer.kind},
                                   {"training.lr", shortest_text(optimizer.lr)},
                                   {"training.momentum", shortest_text(optimizer.momentum)},
                                   {"training.beta1", shortest_text(optimizer.beta1)},
                                   {"training.beta2", shortest_text(optimizer.beta2)},
                                   {"training.eps", shortest_text(optimizer.eps)}};
  if (config.data == "synthetic") {
    identity["data.synthetic_train"] = std::to_string(config.synthetic_train);
    identity["data.synthetic_test"] = std::to_string(config.synthetic_test);
  }
  return identity;
}

Resumed read_resume(const std::string& directory, const runtime::RunIdentity& identity, int rank) {
  const runtime::Manifest manifest = runtime::read_manifest(directory);
  const std::string mismatch = runtime::identity_mismatch(manifest.made_for, identity);
  if (!mismatch.empty()) {
    throw runtime::CheckpointError("--resume " + directory + ": " + mismatch);
  }
  return {manifest.position, runtime::read_piece(directory, manifest, rank)};
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
      runtime::write_checkpoint(comm, directory_, position, identity_, trainer.checkpoint());
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
