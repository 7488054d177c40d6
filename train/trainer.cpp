// The epoch loop, evaluation on world rank 0 and the replica digest.
#include "trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "digest.hpp"

namespace pipevm {

namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

// Which of a rank's chunks contribute to the gathered model: those on lane 0
// (under mirror placement lane 1 holds copies of the same pieces), and only
// on the first data-parallel replica.
bool contributes(const Machine& machine, std::size_t chunk) {
  return machine.dp_rank() == 0 && machine.position(chunk).lane == 0;
}

}  // namespace

std::uint64_t fnv1a(std::span<const float> values, std::uint64_t hash) {
  return runtime::fnv1a_bytes(std::as_bytes(values), hash);
}

bool needs_data(const Program& program, int rank) {
  const auto stream = program.rank(rank);
  // What loads a micro-batch's inputs or targets (not the other rows of
  // class data: Release, Hold, Drop).
  return std::any_of(stream.begin(), stream.end(), [](const Instruction& in) {
    const ValueSet made = info(in.op).produces;
    return made.contains(Value::input) || made.contains(Value::target);
  });
}

bool loads_inputs(const Program& program, int rank) {
  const auto stream = program.rank(rank);
  return std::any_of(stream.begin(), stream.end(),
                     [](const Instruction& in) { return in.op == Opcode::LoadInput; });
}

Trainer::Trainer(const Program& program, runtime::Comm& comm, const TrainingOptions& options,
                 const runtime::DataSplit* data)
    : program_(program),
      comm_(comm),
      options_(options),
      data_(data),
      machine_(program, comm.world_rank(), comm, options.machine) {
  const Config& config = program.config;
  if (data_ != nullptr) {
    batcher_ = std::make_unique<runtime::Batcher>(data_->train, options.shuffle_seed,
                                                  options.machine.global_batch, config.dp,
                                                  config.micro_batches);
    steps_per_epoch_ = batcher_->batches_per_epoch();
  }
  if (comm.world_rank() == 0) {
    if (data_ == nullptr) throw std::invalid_argument("world rank 0 needs the data");
    if (options.max_steps_per_epoch >= 0) {
      steps_per_epoch_ = std::min(steps_per_epoch_, options.max_steps_per_epoch);
    }
    const runtime::LayerRange all{0, runtime::layer_count(options.machine.model.sizes)};
    whole_model_ = std::make_unique<runtime::Piece>(options.machine.model, all);
  }
  // Ranks without data learn the epoch's length from rank 0.
  std::int32_t steps = steps_per_epoch_;
  comm.broadcast_from_root(std::as_writable_bytes(std::span<std::int32_t>(&steps, 1)));
  steps_per_epoch_ = steps;
}

EpochReport Trainer::train_epoch(int epoch, const std::function<void(int, int)>& on_step,
                                 VmObserver* observer) {
  if (epoch != epoch_) {
    epoch_ = epoch;
    step_ = 0;
    sums_ = {};
  }
  EpochReport report;
  report.epoch = epoch;
  report.steps = steps_per_epoch_;
  if (batcher_) batcher_->start_epoch(epoch);

  const int first_step = step_;
  const auto start = std::chrono::steady_clock::now();
  while (step_ < steps_per_epoch_) {
    machine_.set_batch(batcher_.get(), step_);
    const StepResult result = Vm::run(program_, machine_, observer);
    sums_.loss += result.loss;
    sums_.correct += result.correct;
    sums_.rows += result.rows;
    ++step_;
    if (on_step) on_step(step_, steps_per_epoch_);
  }
  const StepResult totals = sums_;
  epoch_ = epoch + 1;
  step_ = 0;
  sums_ = {};
  report.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double samples =
      static_cast<double>(steps_per_epoch_ - first_step) * options_.machine.global_batch;
  if (report.train_seconds > 0.0) report.samples_per_second = samples / report.train_seconds;

  const float mine[3] = {static_cast<float>(totals.loss), static_cast<float>(totals.correct),
                         static_cast<float>(totals.rows)};
  std::vector<std::size_t> counts;
  const std::vector<float> all = gather_floats_to_root(comm_, mine, counts);
  double loss = 0.0;
  double correct = 0.0;
  double rows = 0.0;
  for (std::size_t i = 0; i + 2 < all.size(); i += 3) {
    loss += static_cast<double>(all[i]);
    correct += static_cast<double>(all[i + 1]);
    rows += static_cast<double>(all[i + 2]);
  }
  if (steps_per_epoch_ > 0) report.train_loss = loss / steps_per_epoch_;
  if (rows > 0.0) report.train_accuracy = correct / rows;

  if (options_.evaluate) {
    // Gossip replicas differ: evaluate their global average.
    if (program_.topology) machine_.swap_in_global_average();
    const std::vector<float> parameters = gather_parameters();
    if (program_.topology) machine_.restore_parameters();
    if (comm_.world_rank() == 0 && data_->test.samples > 0) {
      std::copy(parameters.begin(), parameters.end(), whole_model_->parameters().begin());
      report.test_accuracy = runtime::evaluate(*whole_model_, data_->test).accuracy;
    }
  }
  return report;
}

std::vector<float> Trainer::gather_parameters() {
  // Each rank sends its contributing chunks in chunk order; rank 0 knows
  // from the placement where each lands in the whole model. Every rank
  // reads every chunk: sharded weights come back from all the replicas.
  std::vector<float> mine;
  for (std::size_t c = 0; c < machine_.chunk_count(); ++c) {
    const std::vector<float> p = machine_.whole_parameters(c);
    if (contributes(machine_, c)) mine.insert(mine.end(), p.begin(), p.end());
  }
  std::vector<std::size_t> counts;
  const std::vector<float> gathered = gather_floats_to_root(comm_, mine, counts);
  if (comm_.world_rank() != 0) return {};

  const Config& config = program_.config;
  const runtime::ModelConfig& shape = options_.machine.model;
  const std::vector<runtime::LayerRange> pieces = model_split(program_, options_.machine);
  std::vector<float> model(runtime::parameter_count(shape, {0, runtime::layer_count(shape.sizes)}));
  std::size_t read = 0;
  for (int rank = 0; rank < config.stages; ++rank) {  // replica 0 holds world ranks [0, stages)
    const int stage = stage_of(config, rank);
    for (int c = 0; c < chunks_per_rank(program_.placement, config); ++c) {
      const PipelinePosition where = position_of(program_.placement, config, stage, c);
      if (where.lane != 0) continue;
      const runtime::LayerRange layers = pieces[to_size(piece_at(where))];
      const std::size_t offset = runtime::parameter_count(shape, {0, layers.begin});
      const std::size_t count = runtime::parameter_count(shape, layers);
      std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(read), count,
                  model.begin() + static_cast<std::ptrdiff_t>(offset));
      read += count;
    }
  }
  return model;
}

runtime::CheckpointPosition Trainer::position() const {
  return {static_cast<std::int64_t>(epoch_) * steps_per_epoch_ + step_, epoch_, step_,
          steps_per_epoch_};
}

runtime::RankCheckpoint Trainer::checkpoint() {
  if (program_.topology) {
    throw std::logic_error("a gossip run's replicas hold different weights: no checkpoint");
  }
  runtime::RankCheckpoint mine;
  const auto members = static_cast<std::size_t>(program_.config.dp);
  const auto replica = static_cast<std::size_t>(machine_.dp_rank());
  for (std::size_t c = 0; c < machine_.chunk_count(); ++c) {
    if (machine_.position(c).lane != 0) continue;
    const runtime::Optimizer::State state = machine_.optimizer(c).state();
    for (const Machine::HeldLayer& held : machine_.held_layers(c)) {
      const std::size_t size =
          runtime::parameter_count(options_.machine.model, {held.layer, held.layer + 1});
      const std::size_t per = (size + members - 1) / members;
      const std::size_t begin = std::max(std::min(size, per * replica), held.offset);
      const std::size_t end = std::min({size, per * replica + per, held.offset + held.count});
      if (begin >= end) continue;
      const std::size_t from = begin - held.offset;
      const std::span<const float> params =
          machine_.held_parameters(c, held.layer).subspan(from, end - begin);
      runtime::SliceState slice{{held.layer, begin, end}, {params.begin(), params.end()}, {}};
      slice.optimizer.steps = state.steps;
      for (const auto& [name, values] : state.arrays) {
        const auto first = values.begin() + static_cast<std::ptrdiff_t>(held.state_offset + from);
        slice.optimizer.arrays.emplace_back(
            name, std::vector<float>(first, first + static_cast<std::ptrdiff_t>(end - begin)));
      }
      mine.slices.push_back(std::move(slice));
    }
  }
  mine.epoch = {sums_.loss, sums_.correct, sums_.rows};
  return mine;
}

std::vector<runtime::LayerSlice> Trainer::resume_slices() const {
  std::vector<runtime::LayerSlice> wanted;
  for (std::size_t c = 0; c < machine_.chunk_count(); ++c) {
    for (const Machine::HeldLayer& held : machine_.held_layers(c)) {
      if (held.count > 0) wanted.push_back({held.layer, held.offset, held.offset + held.count});
    }
  }
  return wanted;
}

void Trainer::resume(std::span<const runtime::SliceState> slices,
                     const runtime::CheckpointPosition& position, const runtime::EpochSums& sums) {
  if (position.steps_per_epoch != steps_per_epoch_) {
    throw std::invalid_argument(
        "the checkpoint was made with " + std::to_string(position.steps_per_epoch) +
        " steps per epoch, this run has " + std::to_string(steps_per_epoch_) +
        " (is the data set another one?)");
  }
  const std::vector<runtime::LayerSlice> wanted = resume_slices();
  if (slices.size() != wanted.size()) {
    throw std::invalid_argument("the checkpoint gives " + std::to_string(slices.size()) +
                                " slices of layers, this rank holds " +
                                std::to_string(wanted.size()));
  }
  std::size_t next = 0;
  for (std::size_t c = 0; c < machine_.chunk_count(); ++c) {
    runtime::Optimizer::State state = machine_.optimizer(c).state();
    for (const Machine::HeldLayer& held : machine_.held_layers(c)) {
      if (held.count == 0) continue;
      const runtime::SliceState& slice = slices[next++];
      if (slice.where != wanted[next - 1] || slice.parameters.size() != held.count ||
          slice.optimizer.arrays.size() != state.arrays.size()) {
        throw std::invalid_argument("the checkpoint's slice of layer " +
                                    std::to_string(slice.where.layer) +
                                    " is not what this rank holds of it");
      }
      const std::span<float> params = machine_.held_parameters(c, held.layer);
      std::copy(slice.parameters.begin(), slice.parameters.end(), params.begin());
      state.steps = slice.optimizer.steps;
      for (std::size_t a = 0; a < state.arrays.size(); ++a) {
        const auto& [name, values] = slice.optimizer.arrays[a];
        if (name != state.arrays[a].first || values.size() != held.count) {
          throw std::invalid_argument("the checkpoint's optimizer state of layer " +
                                      std::to_string(held.layer) + " is not " +
                                      options_.machine.optimizer.kind + "'s");
        }
        std::copy(values.begin(), values.end(),
                  state.arrays[a].second.begin() + static_cast<std::ptrdiff_t>(held.state_offset));
      }
    }
    machine_.optimizer(c).restore(state);
  }
  epoch_ = position.epoch;
  step_ = position.step_in_epoch;
  sums_.loss = sums.loss;
  sums_.correct = static_cast<int>(sums.correct);
  sums_.rows = static_cast<int>(sums.rows);
}

std::uint64_t Trainer::local_digest() {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (std::size_t c = 0; c < machine_.chunk_count(); ++c) {
    hash = fnv1a(machine_.whole_parameters(c), hash);
  }
  return hash;
}

bool Trainer::replicas_agree() {
  const std::uint64_t digest = local_digest();
  std::vector<std::size_t> counts;
  const std::vector<std::byte> all =
      comm_.gather_to_root(std::as_bytes(std::span<const std::uint64_t>(&digest, 1)), counts);
  bool agree = true;
  if (comm_.world_rank() == 0) {
    const Config& config = program_.config;
    std::vector<std::uint64_t> digests(to_size(config.ranks()));
    std::memcpy(digests.data(), all.data(), digests.size() * sizeof(std::uint64_t));
    for (int rank = config.stages; rank < config.ranks(); ++rank) {
      agree = agree && digests[to_size(rank)] == digests[to_size(stage_of(config, rank))];
    }
  }
  return comm_.all_ok(agree);
}

}  // namespace pipevm
