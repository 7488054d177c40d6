// `pipevm run FILE` (also `pipevm FILE`): train the MLP with a schedule on
// the MPI ranks mpiexec started. Every rank reads the configuration, compiles
// the schedule for the whole world and checks it; what depends only on the
// command line and files fails the same way on every rank, so rank 0 prints
// it once and all ranks return. A failure during training (one rank only)
// prints its message with its position in the schedule, then MPI_Abort
// brings every rank down: never a hang. A wait that makes no progress for
// --timeout seconds (the watchdog, runtime/mpi_comm.hpp) is such a failure.
//
// Which MPI process plays which program rank is --layout's choice
// (runtime/rank_layout.hpp): from here on `rank` is the program rank; rank 0
// prints where every rank runs when the ranks span hosts.
//
// Output on rank 0: a header, one line per epoch (mean training loss, test
// accuracy of the whole model gathered to rank 0, samples/s, elapsed), a
// progress bar when stdout is a terminal, the model digest at the end.
//
// Outputs (--save, --trace, --profile, the checkpoint directory) are checked
// before the schedule is compiled or data loaded; checkpoints and resuming
// are in run_outputs.hpp.
// Not here: the VM (interpreter/vm.hpp), the epoch loop (vm_training.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "check.hpp"
#include "commands.hpp"
#include "compile.hpp"
#include "layer_costs.hpp"
#include "layers.hpp"
#include "mpi_comm.hpp"
#include "options.hpp"
#include "rank_layout.hpp"
#include "run_config.hpp"
#include "run_outputs.hpp"
#include "safetensors.hpp"
#include "shared_cpus.hpp"
#include "tensor.hpp"
#include "trace_recorder.hpp"
#include "vm_training.hpp"

namespace pipevm::cli {

namespace {

// Exit codes: 0 trained, 1 the schedule or the training failed, 2 bad
// configuration, flags or input files.
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct RunFlags {
  std::string file;
  std::string config_file;
  RunConfig flags;  // values of the flags that were given
  CLI::Option* dp = nullptr;
  CLI::Option* micro_batches = nullptr;
  CLI::Option* batch_size = nullptr;
  CLI::Option* epochs = nullptr;
  CLI::Option* lr = nullptr;
  CLI::Option* optimizer = nullptr;
  CLI::Option* seed = nullptr;
  CLI::Option* data = nullptr;
  CLI::Option* chunks = nullptr;
  CLI::Option* loss = nullptr;
  CLI::Option* model = nullptr;
  CLI::Option* save = nullptr;
  CLI::Option* checkpoint = nullptr;
  CLI::Option* checkpoint_every = nullptr;
  CLI::Option* layout = nullptr;
  CLI::Option* timeout = nullptr;
  std::string resume;  // a checkpoint directory to continue from
  std::string loss_name;
  std::string model_widths;
  bool no_progress = false;
  std::string wait = "spin";       // how MPI waits: spin or sleep
  std::string split = "measured";  // how the model is cut into pieces: measured or flops
  std::string trace;               // Chrome trace of one step of the first epoch
  std::string profile;             // measured costs for `pipevm simulate --costs`
  std::string report;              // JSON: per-epoch figures and per-rank memory
  std::string topology;            // gossip: a built-in name or FILE.yaml
};

bool given(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

RunConfig resolve_config(const RunFlags& f) {
  RunConfig config;
  if (!f.config_file.empty()) apply_yaml_file(f.config_file, config);
  if (given(f.dp)) config.dp = f.flags.dp;
  if (given(f.micro_batches)) config.micro_batches = f.flags.micro_batches;
  if (given(f.batch_size)) config.batch_size = f.flags.batch_size;
  if (given(f.epochs)) config.epochs = f.flags.epochs;
  if (given(f.lr)) config.optimizer.lr = f.flags.optimizer.lr;
  if (given(f.optimizer)) config.optimizer.kind = f.flags.optimizer.kind;
  if (given(f.seed)) config.seed = f.flags.seed;
  if (given(f.data)) config.data = f.flags.data;
  if (given(f.chunks)) config.chunks = f.flags.chunks;
  if (given(f.loss)) config.model.loss = parse_loss(f.loss_name);
  if (given(f.model)) {
    if (runtime::model_kind_from_name(f.model_widths)) {
      set_model_kind(f.model_widths, config.model);
    } else {
      set_model_kind("mlp", config.model);
      config.model.sizes = parse_widths(f.model_widths);
    }
  }
  if (given(f.save)) config.save = f.flags.save;
  if (given(f.checkpoint)) config.checkpoint = f.flags.checkpoint;
  if (given(f.checkpoint_every)) config.checkpoint_every = f.flags.checkpoint_every;
  if (given(f.layout)) config.layout = f.flags.layout;
  if (given(f.timeout)) config.timeout = f.flags.timeout;
  if (given(f.checkpoint_every) && config.checkpoint.empty()) {
    throw ConfigError(
        "--checkpoint-every needs a directory (--checkpoint DIR, or "
        "checkpoint.directory in the configuration)");
  }
  validate(config);
  return config;
}

// The data this rank needs, or the reason it cannot have it.
runtime::DataSplit load_data(const RunConfig& config, runtime::DataParts parts) {
  runtime::DataSplit data;
  if (config.data == "synthetic") {
    data = runtime::synthetic(config.synthetic_train, config.synthetic_test,
                              config.model.sizes.front(), config.model.sizes.back(),
                              config.model.seed + 1);
  } else {
    const std::string directory =
        config.data == "fashion-mnist" ? runtime::kFashionMnistDirectory : config.data;
    data = runtime::load_directory(directory, 0.15, parts);
  }
  if (data.train.features != config.model.sizes.front()) {
    throw std::runtime_error("the data has " + std::to_string(data.train.features) +
                             " features per sample, the model's input width is " +
                             std::to_string(config.model.sizes.front()));
  }
  if (data.train.classes > config.model.sizes.back()) {
    throw std::runtime_error("the data has " + std::to_string(data.train.classes) +
                             " classes, the model's output width is only " +
                             std::to_string(config.model.sizes.back()));
  }
  return data;
}

// "layers 0-1 | 2-6, split by measured time 48% | 52%" (or by multiply-adds,
// or as the checkpoint a run resumes from was).
std::string describe_split(const std::vector<runtime::LayerRange>& split,
                           const std::vector<double>& layer_costs, bool resumed) {
  std::string layers = "layers ";
  std::string shares;
  double total = 0.0;
  for (const double cost : layer_costs) total += cost;
  for (const runtime::LayerRange& piece : split) {
    const std::string separator = piece.begin == 0 ? "" : " | ";
    layers += separator + std::to_string(piece.begin);
    if (piece.size() > 1) layers += "-" + std::to_string(piece.end - 1);
    if (total > 0.0) {
      double cost = 0.0;
      for (int layer = piece.begin; layer < piece.end; ++layer) {
        cost += layer_costs[static_cast<std::size_t>(layer)];
      }
      shares += separator + std::to_string(static_cast<int>(100.0 * cost / total + 0.5)) + "%";
    }
  }
  if (split.size() == 1) return "one piece";
  if (resumed) return layers + ", as in the checkpoint";
  return layers + (total > 0.0 ? ", split by measured time " + shares : ", split by multiply-adds");
}

// World-wide agreement after a step that may fail on some ranks: true when
// `error` is empty on every rank. Otherwise the failing ranks print their
// error (rank 0 alone when it failed too: the ranks then mostly share the
// cause) and every rank returns false. `all_ok` is the world's agreement.
bool agree(const std::function<bool(bool)>& all_ok, int rank, const std::string& error) {
  const bool root_ok = all_ok(rank != 0 || error.empty());
  if (all_ok(error.empty())) return true;
  if (!error.empty() && (rank == 0 || root_ok)) {
    std::istringstream lines(error);
    for (std::string line; std::getline(lines, line);) {
      std::cerr << "pipevm run: error: " << (rank == 0 ? "" : "rank " + std::to_string(rank) + ": ")
                << line << "\n";
    }
  }
  return false;
}

// Redraws "epoch 2/3 [#####.....] 120/398" in place on a terminal, only
// when the bar grows, so that a log of it stays short.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void show(int epoch, int epochs, int done, int total) {
    if (!enabled_ || total <= 0) return;
    const int filled = done * kWidth / total;
    if (filled == drawn_ && done != total) return;
    drawn_ = filled;
    std::printf("\repoch %d/%d [%s%s] %d/%d", epoch, epochs,
                std::string(static_cast<std::size_t>(filled), '#').c_str(),
                std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total);
    std::fflush(stdout);
  }
  void clear() {
    if (!enabled_) return;
    drawn_ = -1;
    std::printf("\r%*s\r", 60, "");
    std::fflush(stdout);
  }

 private:
  static constexpr int kWidth = 30;
  bool enabled_;
  int drawn_ = -1;
};

// Where the ranks run: the program rank this process plays (`rank`) and the
// host of every program rank.
struct Placement {
  int rank = 0;
  std::vector<std::string> hosts;  // by program rank
  std::vector<std::string> lines;  // what rank 0 prints; empty on one host
  std::vector<std::string> warnings;  // rank 0's: hosts of one machine bound to one CPU
};

Placement place_ranks(runtime::MpiSession& session, runtime::RankLayout layout, int stages) {
  const std::vector<std::string> by_mpi_rank = session.host_names();
  const std::vector<int> program = runtime::program_ranks(by_mpi_rank, layout, stages);
  Placement placement;
  placement.rank = program[static_cast<std::size_t>(session.world_rank())];
  placement.hosts.resize(by_mpi_rank.size());
  std::vector<int> mpi_rank_of(by_mpi_rank.size());
  for (std::size_t mpi = 0; mpi < by_mpi_rank.size(); ++mpi) {
    const auto rank = static_cast<std::size_t>(program[mpi]);
    placement.hosts[rank] = by_mpi_rank[mpi];
    mpi_rank_of[rank] = static_cast<int>(mpi);
  }
  const bool one_host =
      std::all_of(by_mpi_rank.begin(), by_mpi_rank.end(),
                  [&](const std::string& host) { return host == by_mpi_rank[0]; });
  if (!one_host || layout != runtime::RankLayout::mpi) {
    placement.lines = runtime::describe_placement(placement.hosts, mpi_rank_of, layout, stages);
  }
  if (!one_host) {
    std::vector<runtime::RankCpus> cpus;
    for (const std::string& text :
         session.all_gather_text(runtime::encode(runtime::this_rank_cpus()),
                                 "in the world-wide exchange of CPUs at start-up")) {
      cpus.push_back(runtime::decode(text).value_or(runtime::RankCpus{}));
    }
    placement.warnings = runtime::shared_cpu_warnings(by_mpi_rank, cpus);
  }
  return placement;
}

int train(const RunFlags& flags, runtime::MpiSession& session, int& world_rank) {
  const bool root = world_rank == 0;
  // For failures every rank meets alike: rank 0 says it, all return.
  const auto everyone_fails = [&](int status, const std::string& message) {
    if (root) std::cerr << "pipevm run: error: " << message << "\n";
    return status;
  };

  RunConfig config;
  try {
    config = resolve_config(flags);
  } catch (const ConfigError& error) {
    return everyone_fails(kExitUsage, error.what());
  }
  const int world = session.world_size();
  if (world % config.dp != 0) {
    return everyone_fails(kExitUsage, "the world size " + std::to_string(world) +
                                          " is not divisible by dp = " + std::to_string(config.dp) +
                                          " (stages = world size / dp)");
  }
  const int stages = world / config.dp;
  if (config.batch_size % (config.dp * config.micro_batches) != 0) {
    return everyone_fails(
        kExitUsage, "the batch size " + std::to_string(config.batch_size) +
                        " is not divisible by dp x micro-batches = " + std::to_string(config.dp) +
                        " x " + std::to_string(config.micro_batches));
  }
  session.set_timeout(config.timeout);
  const runtime::RankLayout layout = *runtime::rank_layout_from_name(config.layout);
  const Placement placement = place_ranks(session, layout, stages);
  world_rank = placement.rank;
  const auto session_agrees = [&](const std::string& error) {
    return agree([&](bool ok) { return session.all_ok(ok); }, world_rank, error);
  };
  // Before anything long: a run must not train for hours and then fail to write.
  const RunOutputs outputs{config.save,       flags.trace,  flags.profile,
                           config.checkpoint, flags.resume, flags.report};
  if (!session_agrees(check_outputs(outputs, root))) return kExitUsage;

  // Compile for the whole world: the checker needs every rank's stream.
  Diagnostics diagnostics;
  const Config shape{stages, config.micro_batches, config.chunks, config.dp};
  const std::shared_ptr<const SourceFile> source = read_source(flags.file, diagnostics);
  std::optional<Program> program;
  ExpandOptions expand_options;
  if (std::string error; !topology_option(flags.topology, expand_options, error)) {
    return everyone_fails(kExitUsage, error);
  }
  expand_options.layer_widths = config.model.sizes;
  if (source) program = compile(source, shape, diagnostics, expand_options);
  if (!program || diagnostics.has_errors()) {
    if (root) {
      for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, isatty(2) != 0);
    }
    return source ? kExitFailed : kExitUsage;
  }
  const int pieces = model_pieces(program->placement, shape);
  const int layers = runtime::layer_count(config.model.sizes);
  if (pieces > layers) {
    return everyone_fails(kExitUsage, "the schedule cuts the model into " + std::to_string(pieces) +
                                          " pieces (" + std::to_string(stages) +
                                          " stages), more than the " + std::to_string(layers) +
                                          " layer(s) of the model " +
                                          runtime::describe(config.model));
  }
  // Where the model is cut: by each layer's time measured on rank 0 (every
  // rank must cut it alike), or by multiply-adds; a resumed run where its
  // checkpoint's run did. Every layer computes the same bits whatever the
  // cut, so the trained weights do not depend on it.
  std::vector<runtime::LayerRange> split;
  if (!flags.resume.empty()) {
    std::string resume_error;
    try {
      split = recorded_split(flags.resume, layers);
      if (static_cast<int>(split.size()) != pieces) {
        resume_error = "--resume " + flags.resume + ": the checkpoint's model is cut into " +
                       std::to_string(split.size()) + " pieces, this schedule needs " +
                       std::to_string(pieces);
      }
    } catch (const runtime::CheckpointError& error) {
      resume_error = error.what();
    }
    if (!session_agrees(resume_error)) return kExitUsage;
  }
  std::vector<double> layer_costs;
  if (split.empty() && pieces > 1 && flags.split == "measured") {
    layer_costs.assign(static_cast<std::size_t>(layers), 0.0);
    if (root) {
      const int rows = config.batch_size / (config.dp * config.micro_batches);
      layer_costs =
          runtime::measure_layer_costs(config.model, config.optimizer, rows, config.micro_batches);
    }
    session.broadcast_from_root(std::as_writable_bytes(std::span<double>(layer_costs)));
  }
  if (split.empty()) split = runtime::split_layers(config.model.sizes, pieces, layer_costs);
  if (program->layer_split != split) {
    // `layer L` operands and layer_begin/layer_end name the layers of this cut.
    expand_options.split = split;
    program = compile(source, shape, diagnostics, expand_options);
    if (!program) {
      if (root) {
        for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, isatty(2) != 0);
      }
      return kExitFailed;
    }
  }
  CheckOptions check_options;
  check_options.layer_widths = config.model.sizes;
  check_options.split = split;
  const CheckResult checked = check(*program, check_options);
  if (!checked.ok()) {
    if (root) {
      for (const Diagnostic& d : checked.diagnostics) print_text(std::cerr, d, isatty(2) != 0);
      std::cerr << "pipevm run: error: the schedule fails the checker for " << stages
                << " stages x " << config.dp << " dp, " << config.micro_batches
                << " micro-batches; it does not start\n";
    }
    return kExitFailed;
  }

  // Resuming: every rank reads and checks its piece before the data loads.
  const runtime::RunIdentity identity = run_identity(config, *program, split);
  std::optional<Resumed> resumed;
  if (!flags.resume.empty()) {
    std::string resume_error;
    try {
      resumed = read_resume(flags.resume, identity, world_rank);
    } catch (const runtime::CheckpointError& error) {
      resume_error = error.what();
    }
    if (!session_agrees(resume_error)) return kExitUsage;
  }

  // Data: only ranks that load inputs or targets (and rank 0, which
  // evaluates), and of it only what they read: the training pixels where
  // inputs are loaded, the test set on rank 0.
  std::unique_ptr<runtime::DataSplit> data;
  std::string data_error;
  if (root || needs_data(*program, world_rank)) {
    runtime::DataParts parts;
    parts.train_pixels = root || loads_inputs(*program, world_rank);
    parts.test = root;
    try {
      data = std::make_unique<runtime::DataSplit>(load_data(config, parts));
    } catch (const std::exception& error) {
      data_error = error.what();
    }
  }
  if (!session_agrees(data_error)) return kExitUsage;

  runtime::tune_eigen_for_one_core();
  TrainingOptions options;
  options.machine.model = config.model;
  options.machine.optimizer = config.optimizer;
  options.machine.global_batch = config.batch_size;
  options.machine.split = split;
  options.shuffle_seed = config.seed;

  std::unique_ptr<runtime::MpiComm> comm;
  std::unique_ptr<Trainer> trainer;
  try {
    runtime::MpiCommOptions comm_options;
    comm_options.wait = flags.wait == "spin" ? runtime::WaitMode::spin : runtime::WaitMode::sleep;
    comm_options.timeout_seconds = config.timeout;
    comm_options.rank = world_rank;
    comm_options.hosts = placement.hosts;
    comm = std::make_unique<runtime::MpiComm>(
        session, stages, MessageTags(program->placement, shape).max_tag(), comm_options);
    trainer = std::make_unique<Trainer>(*program, *comm, options, data.get());
  } catch (const std::exception& error) {
    return everyone_fails(kExitUsage, error.what());
  }
  if (resumed) {
    std::string resume_error;
    try {
      trainer->resume(resumed->piece, resumed->position);
    } catch (const std::invalid_argument& error) {
      resume_error = "--resume " + flags.resume + ": " + error.what();
    }
    if (!agree([&](bool ok) { return comm->all_ok(ok); }, world_rank, resume_error)) {
      return kExitUsage;
    }
    resumed.reset();  // the piece's copy of the weights is no longer needed
  }
  std::optional<Checkpoints> checkpoints;
  if (!config.checkpoint.empty()) {
    checkpoints.emplace(config.checkpoint, config.checkpoint_every, identity);
  }

  if (root) {
    std::printf(
        "pipevm run: %s, %d stage(s) x %d dp, %d micro-batches of %d, model %s (%s), %s lr %g, "
        "data %s (%d train, %d test)\n",
        program->name.c_str(), stages, config.dp, config.micro_batches,
        trainer->machine().micro_batch_rows(), runtime::describe(config.model).c_str(),
        std::string(runtime::name(config.model.loss)).c_str(), config.optimizer.kind.c_str(),
        static_cast<double>(config.optimizer.lr), config.data.c_str(), data->train.samples,
        data->test.samples);
    std::printf("pipevm run: GEMMs on %s; %s\n", runtime::gemm_backend().c_str(),
                describe_split(split, layer_costs, !flags.resume.empty()).c_str());
    for (const std::string& line : placement.lines) std::printf("%s\n", line.c_str());
    for (const std::string& warning : placement.warnings) {
      std::cerr << "pipevm run: warning: " << warning << " [" << code(DiagnosticKind::SharedCpu)
                << "]\n";
    }
    if (checkpoints) {
      const std::string when = config.checkpoint_every > 0
                                   ? "every " + std::to_string(config.checkpoint_every) + " steps"
                                   : "after every epoch";
      std::printf("checkpoints into %s %s\n", config.checkpoint.c_str(), when.c_str());
    }
    if (!flags.resume.empty()) {
      std::printf("resumed from %s at %s\n", flags.resume.c_str(),
                  describe(trainer->position()).c_str());
    }
    std::fflush(stdout);
  }

  ProgressBar bar(root && !flags.no_progress && isatty(1) != 0);
  std::unique_ptr<TraceRecorder> recorder;
  if (!flags.trace.empty() || !flags.profile.empty()) {
    recorder = std::make_unique<TraceRecorder>(trainer->steps_per_epoch() > 1 ? 1 : 0, 20);
  }
  const auto start = std::chrono::steady_clock::now();
  const int first_epoch = trainer->position().epoch;
  std::vector<EpochReport> epochs;
  try {
    for (int epoch = first_epoch; epoch < config.epochs; ++epoch) {
      const EpochReport report = trainer->train_epoch(
          epoch,
          [&](int done, int total) {
            bar.show(epoch + 1, config.epochs, done, total);
            if (checkpoints) checkpoints->after_step(*trainer, *comm, done, total);
          },
          epoch == first_epoch ? recorder.get() : nullptr);
      bar.clear();
      if (checkpoints) checkpoints->after_epoch(*trainer, *comm);
      if (!root) continue;
      epochs.push_back(report);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string test = "n/a";
      if (report.test_accuracy) {
        std::ostringstream out;
        out.precision(2);
        out << std::fixed << 100.0 * *report.test_accuracy << "%";
        test = out.str();
      }
      std::printf(
          "epoch %d/%d  loss %.4f  test accuracy %s  %.0f samples/s  %.3f s/epoch  elapsed %.1f "
          "s\n",
          epoch + 1, config.epochs, report.train_loss, test.c_str(), report.samples_per_second,
          report.train_seconds, elapsed);
      std::fflush(stdout);
    }
  } catch (const VmError& error) {
    std::ostringstream message;
    print_text(message, to_diagnostic(error, *program, world_rank));
    comm->abort(message.str());
  } catch (const std::exception& error) {
    // Between steps: the epoch's report, a checkpoint.
    comm->abort("pipevm run: error: rank " + std::to_string(world_rank) + " at " +
                describe(trainer->position()) + ": " + error.what());
  }

  // World-wide: no rank may return before the collectives below.
  bool recorded = true;
  if (recorder) {
    std::string error;
    recorded = recorder->write(*comm, *program, flags.trace, flags.profile, error);
    if (!recorded) std::cerr << "pipevm run: error: " << error << "\n";
  }

  // World-wide: every rank's memory peak goes to rank 0.
  if (!flags.report.empty()) {
    std::string error;
    if (!write_run_report(flags.report, *comm, *program, trainer->machine(), epochs, error)) {
      std::cerr << "pipevm run: error: " << error << "\n";
      recorded = false;
    }
  }

  // Gossip ends with the global average of the replicas.
  if (program->topology) trainer->finish_gossip();
  const bool replicas_agree = trainer->replicas_agree();
  const std::vector<float> model = trainer->gather_parameters();
  if (!replicas_agree) {
    return everyone_fails(kExitFailed, "the data-parallel replicas hold different weights");
  }
  if (root) {
    std::printf("model digest fnv1a64 %016" PRIx64 " (%zu parameters%s)\n", fnv1a(model),
                model.size(), config.dp > 1 ? ", data-parallel replicas identical" : "");
    if (checkpoints && checkpoints->latest()) {
      std::printf("latest checkpoint %s at %s\n", checkpoints->directory().c_str(),
                  describe(*checkpoints->latest()).c_str());
    }
  }
  if (root && !config.save.empty()) {
    try {
      if (config.model.kind == runtime::ModelKind::vit) {
        runtime::save_vit_model(config.save, config.model.vit, model);
      } else {
        runtime::save_model(config.save, config.model.sizes, model);
      }
      std::printf("saved %s\n", config.save.c_str());
    } catch (const std::exception& error) {
      std::cerr << "pipevm run: error: " << error.what() << "\n";
      return kExitFailed;
    }
  }
  return recorded ? 0 : kExitFailed;
}

int run(const RunFlags& flags) {
  runtime::MpiSession session(nullptr, nullptr);
  int rank = session.world_rank();  // the program rank, once placed
  try {
    return train(flags, session, rank);
  } catch (const runtime::CommError& error) {
    // Outside the VM: at start-up, between steps (the epoch's report, a
    // checkpoint) or at the end. Inside it, train() aborts with the
    // instruction's place.
    const bool timeout = dynamic_cast<const runtime::CommTimeout*>(&error) != nullptr;
    runtime::MpiSession::abort(
        "pipevm run: error: rank " + std::to_string(rank) + ": " + error.what(),
        timeout ? runtime::MpiSession::kWatchdogGraceSeconds : 0.0);
  }
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto flags = std::make_shared<RunFlags>();
  Command command;
  CLI::App* app = root.add_subcommand(
      "run",
      "Train the MLP with a schedule on the MPI ranks (the default command):\n"
      "  mpirun -n 4 pipevm run schedules/gpipe.pipe [--config FILE.yaml] [flags]\n"
      "stages = number of ranks / dp; flags override the YAML file.\n"
      "Every output (--save, --trace, --profile, --report, --checkpoint) is checked writable\n"
      "before the run starts; a bad one stops it at once with the path and the reason.");
  command.app = app;
  app->add_option("file", flags->file, "The schedule (.pipe)")->required();
  app->add_option("--config", flags->config_file, "YAML configuration (see examples/)");
  RunConfig& f = flags->flags;
  flags->dp = app->add_option("--dp", f.dp, "Data-parallel replicas (default 1)");
  flags->micro_batches =
      app->add_option("--micro-batches", f.micro_batches, "Micro-batches per batch (default 4)");
  flags->batch_size =
      app->add_option("--batch-size", f.batch_size, "Global batch size (default 128)");
  flags->epochs = app->add_option("--epochs", f.epochs, "Epochs (default 5)");
  flags->lr = app->add_option("--lr", f.optimizer.lr, "Learning rate (default 0.001)");
  flags->optimizer = app->add_option("--optimizer", f.optimizer.kind, "adam or sgd (default adam)");
  flags->seed = app->add_option("--seed", f.seed, "Shuffling seed (default 0)");
  flags->data =
      app->add_option("--data", f.data, "fashion-mnist, synthetic or a directory of IDX files");
  flags->chunks = app->add_option("--chunks", f.chunks, "Model chunks per rank (default 1)");
  flags->loss = app->add_option("--loss", flags->loss_name, "cross-entropy or softmax-mse");
  flags->model =
      app->add_option("--model", flags->model_widths,
                      "vit, mlp, or the MLP's layer widths, input first (default "
                      "784,128,127,126,125,124,123,10; Fashion-MNIST needs 784 in and 10 out)");
  flags->save = app->add_option("--save", f.save, "Write the trained model (.safetensors)")
                    ->type_name("FILE");
  flags->checkpoint =
      app->add_option("--checkpoint", f.checkpoint,
                      "Write a checkpoint into DIR after every epoch (created when missing; it "
                      "keeps the latest complete one); resume it with --resume DIR")
          ->type_name("DIR");
  flags->checkpoint_every =
      app->add_option("--checkpoint-every", f.checkpoint_every,
                      "Checkpoint every N steps (counted across epochs) instead of after every "
                      "epoch")
          ->type_name("N");
  app->add_option("--resume", flags->resume,
                  "Continue from the checkpoint in DIR (made by the same schedule, world, model "
                  "and training configuration; --epochs may differ): the final weights are the "
                  "bits an uninterrupted run would give")
      ->type_name("DIR");
  app->add_option(
         "--trace", flags->trace,
         "Write a Chrome/Perfetto trace of one training step (the format of simulate --trace)")
      ->type_name("FILE");
  app->add_option(
         "--profile", flags->profile,
         "Write the measured median cost of each instruction kind (YAML for simulate --costs)")
      ->type_name("FILE");
  app->add_option("--report", flags->report,
                  "Write the run's figures as JSON: per epoch the loss, accuracy and seconds; per "
                  "rank the peak bytes of its buffers by category, as the runtime counted them "
                  "(the per_rank of simulate --format json; docs/running.md)")
      ->type_name("FILE");
  flags->layout =
      app->add_option("--layout", f.layout,
                      "Which parallel dimension stays inside a host: pp-inner (a replica's "
                      "stages share a host; the all-reduce crosses hosts), dp-inner (a stage's "
                      "replicas share a host; pipeline messages cross hosts) or mpi (MPI rank = "
                      "program rank, as mpirun placed them; default)")
          ->check(CLI::IsMember({"mpi", "pp-inner", "dp-inner"}));
  flags->timeout =
      app->add_option("--timeout", f.timeout,
                      "The watchdog: a wait for another rank that makes no progress for SECONDS "
                      "is an error naming the instruction and the peer, and every rank stops "
                      "(default 300; 0: wait for ever)")
          ->type_name("SECONDS");
  app->add_option("--mpi-wait", flags->wait,
                  "How a rank waits for messages: spin (inside MPI; default, fastest on a "
                  "machine that is otherwise idle) or sleep (test, then nap: leaves the core "
                  "to the others when the machine is loaded)")
      ->check(CLI::IsMember({"sleep", "spin"}));
  app->add_option("--split", flags->split,
                  "Where stages cut the model: measured (each layer's time, measured on rank 0 "
                  "at start-up; default) or flops (multiply-adds, as pipevm check assumes)")
      ->check(CLI::IsMember({"measured", "flops"}));
  app->add_option("--topology", flags->topology, kTopologyHelp);
  app->add_flag("--no-progress", flags->no_progress,
                "No progress bar (mpiexec shows ranks a terminal even when piped)");
  command.run = [flags] { return run(*flags); };
  return command;
}

}  // namespace pipevm::cli
