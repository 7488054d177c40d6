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
// (config/rank_layout.hpp): from here on `rank` is the program rank; rank 0
// prints where every rank runs when the ranks span hosts.
//
// Output on rank 0: a header, one line per epoch (mean training loss, test
// accuracy of the whole model gathered to rank 0, samples/s, elapsed), a
// progress bar when stdout is a terminal, the model digest at the end.
//
// train() is its steps, in order, over one RunState: load_config,
// place_and_check_outputs, compile_schedule, cut_model, check_schedule,
// read_checkpoint, load_rank_data, resume_or_init, then print_header,
// train_epochs, write_recordings, finish_model. Outputs (--save, --trace,
// --profile, the checkpoint directory) are checked before the schedule is
// compiled or data loaded; checkpoints and resuming are in run_outputs.hpp.
// Not here: the VM (interpreter/vm.hpp), the epoch loop (train/trainer.hpp).
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
#include "run_overrides.hpp"
#include "topology_file.hpp"
#include "run_links.hpp"
#include "run_outputs.hpp"
#include "safetensors.hpp"
#include "schedule_input.hpp"
#include "shared_cpus.hpp"
#include "tensor.hpp"
#include "trace_recorder.hpp"
#include "trainer.hpp"

namespace pipevm::cli {

namespace {

// Exit codes: 0 trained, 1 the schedule or the training failed, 2 bad
// configuration, flags or input files.
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct RunFlags {
  std::string file;
  std::string config_file;
  config::RunOverrides overrides;  // the flags that were given
  std::string resume;  // a checkpoint directory to continue from
  bool no_progress = false;
  std::string wait = "spin";       // how MPI waits: spin or sleep
  std::string split = "measured";  // how the model is cut into pieces: measured or flops
  std::string trace;               // Chrome trace of one step of the first epoch
  std::string profile;             // measured costs for `pipevm simulate --costs`
  int profile_steps = 20;          // training steps --trace and --profile record
  std::string report;              // JSON: per-epoch figures and per-rank memory
  std::string topology;            // gossip: a built-in name or FILE.yaml
};

// The data this rank needs, or the reason it cannot have it.
runtime::DataSplit load_data(const config::RunConfig& config, runtime::DataParts parts) {
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
  std::vector<std::string> hosts;     // by program rank
  std::vector<std::string> lines;     // what rank 0 prints; empty on one host
  std::vector<std::string> warnings;  // rank 0's: hosts of one machine bound to one CPU
};

Placement place_ranks(runtime::MpiSession& session, config::RankLayout layout, int stages) {
  const std::vector<std::string> by_mpi_rank = session.host_names();
  const std::vector<int> program = config::program_ranks(by_mpi_rank, layout, stages);
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
  if (!one_host || layout != config::RankLayout::mpi) {
    placement.lines = config::describe_placement(placement.hosts, mpi_rank_of, layout, stages);
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

// What the steps of a run share. Each step fills its part and returns the
// exit status when the run must stop there (every rank returns it), else
// nullopt.
struct RunState {
  RunState(const RunFlags& run_flags, runtime::MpiSession& mpi, int& rank)
      : flags(run_flags), session(mpi), world_rank(rank), root(rank == 0) {}

  const RunFlags& flags;
  runtime::MpiSession& session;
  int& world_rank;  // the MPI rank, then the program rank once placed
  const bool root;  // rank 0 in both numberings

  config::RunConfig config;
  int stages = 1;
  Placement placement;
  Config shape;
  std::shared_ptr<const SourceFile> source;
  Diagnostics diagnostics;  // of both compilations: printed only when one fails
  ExpandOptions expand_options;
  std::optional<Program> program;
  int pieces = 1;
  std::vector<runtime::LayerRange> split;
  std::vector<double> layer_costs;
  runtime::RunIdentity identity;
  std::optional<Resumed> resumed;
  std::unique_ptr<runtime::DataSplit> data;
  std::unique_ptr<runtime::MpiComm> comm;
  std::unique_ptr<Trainer> trainer;
  std::optional<Checkpoints> checkpoints;
  std::vector<EpochReport> epochs;  // rank 0's

  // For failures every rank meets alike: rank 0 says it, all return.
  int everyone_fails(int status, const std::string& message) const {
    if (root) std::cerr << "pipevm run: error: " << message << "\n";
    return status;
  }
  bool session_agrees(const std::string& error) const {
    return agree([&](bool ok) { return session.all_ok(ok); }, world_rank, error);
  }
  void print_diagnostics(const std::vector<Diagnostic>& found) const {
    if (!root) return;
    for (const Diagnostic& d : found) print_text(std::cerr, d, isatty(2) != 0);
  }
};

using Stop = std::optional<int>;

// The configuration (YAML, then flags) and the stages the world leaves.
Stop load_config(RunState& run) {
  try {
    run.config = config::resolve_run_config(api::declared_configuration_of(run.flags.file),
                                            run.flags.config_file, run.flags.overrides);
  } catch (const config::ConfigError& error) {
    return run.everyone_fails(kExitUsage, error.what());
  }
  const config::RunConfig& config = run.config;
  const int world = run.session.world_size();
  if (world % config.dp != 0) {
    return run.everyone_fails(
        kExitUsage, "the world size " + std::to_string(world) + " is not divisible by dp = " +
                        std::to_string(config.dp) + " (stages = world size / dp)");
  }
  run.stages = world / config.dp;
  if (config.batch_size % (config.dp * config.micro_batches) != 0) {
    return run.everyone_fails(
        kExitUsage, "the batch size " + std::to_string(config.batch_size) +
                        " is not divisible by dp x micro-batches = " + std::to_string(config.dp) +
                        " x " + std::to_string(config.micro_batches));
  }
  run.shape = Config{run.stages, config.micro_batches, config.chunks, config.dp};
  return std::nullopt;
}

// Which program rank this process plays, and whether the outputs can be
// written: before anything long, a run must not train for hours and then
// fail to write.
Stop place_and_check_outputs(RunState& run) {
  run.session.set_timeout(run.config.timeout);
  const config::RankLayout layout = *config::rank_layout_from_name(run.config.layout);
  run.placement = place_ranks(run.session, layout, run.stages);
  run.world_rank = run.placement.rank;
  const RunOutputs outputs{run.config.save,       run.flags.trace,  run.flags.profile,
                           run.config.checkpoint, run.flags.resume, run.flags.report};
  if (!run.session_agrees(check_outputs(outputs, run.root))) return kExitUsage;
  return std::nullopt;
}

// The schedule compiled for the whole world (the checker needs every
// rank's stream), and the model pieces it needs.
Stop compile_schedule(RunState& run) {
  Diagnostics& diagnostics = run.diagnostics;
  run.source = read_source(run.flags.file, diagnostics);
  if (std::string error; !config::topology_option(run.flags.topology, run.expand_options, error)) {
    return run.everyone_fails(kExitUsage, error);
  }
  run.expand_options.layer_widths = run.config.model.sizes;
  if (run.source) run.program = compile(run.source, run.shape, diagnostics, run.expand_options);
  if (!run.program || diagnostics.has_errors()) {
    run.print_diagnostics(diagnostics.all());
    return run.source ? kExitFailed : kExitUsage;
  }
  run.pieces = model_pieces(run.program->placement, run.shape);
  const int layers = runtime::layer_count(run.config.model.sizes);
  if (run.pieces > layers) {
    return run.everyone_fails(
        kExitUsage, "the schedule cuts the model into " + std::to_string(run.pieces) + " pieces (" +
                        std::to_string(run.stages) + " stages), more than the " +
                        std::to_string(layers) + " layer(s) of the model " +
                        runtime::describe(run.config.model));
  }
  return std::nullopt;
}

// Where the model is cut: by each layer's time measured on rank 0 (every
// rank must cut it alike), or by multiply-adds; a resumed run where its
// checkpoint's run did. Every layer computes the same bits whatever the
// cut, so the trained weights do not depend on it. The schedule is
// compiled again when its `layer L` operands named another cut.
Stop cut_model(RunState& run) {
  const config::RunConfig& config = run.config;
  const int layers = runtime::layer_count(config.model.sizes);
  if (!run.flags.resume.empty()) {
    std::string resume_error;
    try {
      run.split = recorded_split(run.flags.resume, layers);
      if (static_cast<int>(run.split.size()) != run.pieces) {
        resume_error = "--resume " + run.flags.resume + ": the checkpoint's model is cut into " +
                       std::to_string(run.split.size()) + " pieces, this schedule needs " +
                       std::to_string(run.pieces);
      }
    } catch (const runtime::CheckpointError& error) {
      resume_error = error.what();
    }
    if (!run.session_agrees(resume_error)) return kExitUsage;
  }
  if (run.split.empty() && run.pieces > 1 && run.flags.split == "measured") {
    run.layer_costs.assign(static_cast<std::size_t>(layers), 0.0);
    if (run.root) {
      const int rows = config.batch_size / (config.dp * config.micro_batches);
      run.layer_costs =
          runtime::measure_layer_costs(config.model, config.optimizer, rows, config.micro_batches);
    }
    run.session.broadcast_from_root(std::as_writable_bytes(std::span<double>(run.layer_costs)));
  }
  if (run.split.empty()) {
    run.split = runtime::split_layers(config.model.sizes, run.pieces, run.layer_costs);
  }
  if (run.program->layer_split != run.split) {
    // `layer L` operands and layer_begin/layer_end name the layers of this cut.
    run.expand_options.split = run.split;
    run.program = compile(run.source, run.shape, run.diagnostics, run.expand_options);
    if (!run.program) {
      run.print_diagnostics(run.diagnostics.all());
      return kExitFailed;
    }
  }
  return std::nullopt;
}

// The checker's proof, before any rank starts.
Stop check_schedule(RunState& run) {
  CheckOptions check_options;
  check_options.layer_widths = run.config.model.sizes;
  check_options.split = run.split;
  const CheckResult checked = check(*run.program, check_options);
  if (checked.ok()) return std::nullopt;
  run.print_diagnostics(checked.diagnostics);
  if (run.root) {
    std::cerr << "pipevm run: error: the schedule fails the checker for " << run.stages
              << " stages x " << run.config.dp << " dp, " << run.config.micro_batches
              << " micro-batches; it does not start\n";
  }
  return kExitFailed;
}

// Resuming: every rank reads and checks its piece before the data loads.
Stop read_checkpoint(RunState& run) {
  run.identity = run_identity(run.config, *run.program, run.split);
  if (run.flags.resume.empty()) return std::nullopt;
  std::string resume_error;
  try {
    run.resumed = read_resume(run.flags.resume, run.identity, run.world_rank);
  } catch (const runtime::CheckpointError& error) {
    resume_error = error.what();
  }
  if (!run.session_agrees(resume_error)) return kExitUsage;
  return std::nullopt;
}

// Data: only ranks that load inputs or targets (and rank 0, which
// evaluates), and of it only what they read: the training pixels where
// inputs are loaded, the test set on rank 0.
Stop load_rank_data(RunState& run) {
  std::string data_error;
  if (run.root || needs_data(*run.program, run.world_rank)) {
    runtime::DataParts parts;
    parts.train_pixels = run.root || loads_inputs(*run.program, run.world_rank);
    parts.test = run.root;
    try {
      run.data = std::make_unique<runtime::DataSplit>(load_data(run.config, parts));
    } catch (const std::exception& error) {
      data_error = error.what();
    }
  }
  if (!run.session_agrees(data_error)) return kExitUsage;
  return std::nullopt;
}

// The communicator and the trainer, from the checkpoint's state when
// resuming, and the checkpoints to write.
Stop resume_or_init(RunState& run) {
  const config::RunConfig& config = run.config;
  runtime::tune_eigen_for_one_core();
  TrainingOptions options;
  options.machine.model = config.model;
  options.machine.optimizer = config.optimizer;
  options.machine.global_batch = config.batch_size;
  options.machine.split = run.split;
  options.shuffle_seed = config.seed;
  try {
    runtime::MpiCommOptions comm_options;
    comm_options.wait =
        run.flags.wait == "spin" ? runtime::WaitMode::spin : runtime::WaitMode::sleep;
    comm_options.timeout_seconds = config.timeout;
    comm_options.rank = run.world_rank;
    comm_options.hosts = run.placement.hosts;
    run.comm = std::make_unique<runtime::MpiComm>(
        run.session, run.stages, MessageTags(run.program->placement, run.shape).max_tag(),
        comm_options);
    run.trainer = std::make_unique<Trainer>(*run.program, *run.comm, options, run.data.get());
  } catch (const std::exception& error) {
    return run.everyone_fails(kExitUsage, error.what());
  }
  if (run.resumed) {
    std::string resume_error;
    try {
      run.trainer->resume(run.resumed->piece, run.resumed->position);
    } catch (const std::invalid_argument& error) {
      resume_error = "--resume " + run.flags.resume + ": " + error.what();
    }
    if (!agree([&](bool ok) { return run.comm->all_ok(ok); }, run.world_rank, resume_error)) {
      return kExitUsage;
    }
    run.resumed.reset();  // the piece's copy of the weights is no longer needed
  }
  if (!config.checkpoint.empty()) {
    run.checkpoints.emplace(config.checkpoint, config.checkpoint_every, run.identity);
  }
  return std::nullopt;
}

// Rank 0's header: the run, the cut, the hosts, checkpoints and resuming.
void print_header(const RunState& run) {
  if (!run.root) return;
  const config::RunConfig& config = run.config;
  std::printf(
      "pipevm run: %s, %d stage(s) x %d dp, %d micro-batches of %d, model %s (%s), %s lr %g, "
      "data %s (%d train, %d test)\n",
      run.program->name.c_str(), run.stages, config.dp, config.micro_batches,
      run.trainer->machine().micro_batch_rows(), runtime::describe(config.model).c_str(),
      std::string(runtime::name(config.model.loss)).c_str(), config.optimizer.kind.c_str(),
      static_cast<double>(config.optimizer.lr), config.data.c_str(), run.data->train.samples,
      run.data->test.samples);
  std::printf("pipevm run: GEMMs on %s; %s\n", runtime::gemm_backend().c_str(),
              describe_split(run.split, run.layer_costs, !run.flags.resume.empty()).c_str());
  for (const std::string& line : run.placement.lines) std::printf("%s\n", line.c_str());
  for (const std::string& warning : run.placement.warnings) {
    std::cerr << "pipevm run: warning: " << warning << " [" << code(DiagnosticKind::SharedCpu)
              << "]\n";
  }
  if (run.checkpoints) {
    const std::string when = config.checkpoint_every > 0
                                 ? "every " + std::to_string(config.checkpoint_every) + " steps"
                                 : "after every epoch";
    std::printf("checkpoints into %s %s\n", config.checkpoint.c_str(), when.c_str());
  }
  if (!run.flags.resume.empty()) {
    std::printf("resumed from %s at %s\n", run.flags.resume.c_str(),
                describe(run.trainer->position()).c_str());
  }
  std::fflush(stdout);
}

// The epochs, a line each on rank 0; a failure inside brings every rank down.
void train_epochs(RunState& run, TraceRecorder* recorder) {
  const config::RunConfig& config = run.config;
  Trainer& trainer = *run.trainer;
  ProgressBar bar(run.root && !run.flags.no_progress && isatty(1) != 0);
  const auto start = std::chrono::steady_clock::now();
  const int first_epoch = trainer.position().epoch;
  try {
    for (int epoch = first_epoch; epoch < config.epochs; ++epoch) {
      const EpochReport report = trainer.train_epoch(
          epoch,
          [&](int done, int total) {
            bar.show(epoch + 1, config.epochs, done, total);
            if (run.checkpoints) run.checkpoints->after_step(trainer, *run.comm, done, total);
          },
          epoch == first_epoch ? recorder : nullptr);
      bar.clear();
      if (run.checkpoints) run.checkpoints->after_epoch(trainer, *run.comm);
      if (!run.root) continue;
      run.epochs.push_back(report);
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
    print_text(message, to_diagnostic(error, *run.program, run.world_rank));
    run.comm->abort(message.str());
  } catch (const std::exception& error) {
    // Between steps: the epoch's report, a checkpoint.
    run.comm->abort("pipevm run: error: rank " + std::to_string(run.world_rank) + " at " +
                    describe(trainer.position()) + ": " + error.what());
  }
}

// World-wide (no rank may return before their collectives): the trace and
// profile, the report with every rank's memory peak; false when one fails.
bool write_recordings(RunState& run, TraceRecorder* recorder) {
  bool recorded = true;
  if (recorder != nullptr) {
    std::string error;
    recorded = recorder->write(*run.comm, *run.program, run.flags.trace, run.flags.profile, error);
    if (!recorded) std::cerr << "pipevm run: error: " << error << "\n";
  }
  if (!run.flags.report.empty()) {
    std::string error;
    if (!write_run_report(run.flags.report, *run.comm, *run.program, run.trainer->machine(),
                          run.epochs, error)) {
      std::cerr << "pipevm run: error: " << error << "\n";
      recorded = false;
    }
  }
  return recorded;
}

// The trained model: gossip's final average, the replicas compared, the
// digest and latest checkpoint printed, the weights saved.
int finish_model(RunState& run, bool recorded) {
  const config::RunConfig& config = run.config;
  Trainer& trainer = *run.trainer;
  if (run.program->topology) trainer.finish_gossip();
  const bool replicas_agree = trainer.replicas_agree();
  const std::vector<float> model = trainer.gather_parameters();
  if (!replicas_agree) {
    return run.everyone_fails(kExitFailed, "the data-parallel replicas hold different weights");
  }
  if (!run.root) return recorded ? 0 : kExitFailed;
  std::printf("model digest fnv1a64 %016" PRIx64 " (%zu parameters%s)\n", fnv1a(model),
              model.size(), config.dp > 1 ? ", data-parallel replicas identical" : "");
  if (run.checkpoints && run.checkpoints->latest()) {
    std::printf("latest checkpoint %s at %s\n", run.checkpoints->directory().c_str(),
                describe(*run.checkpoints->latest()).c_str());
  }
  if (!config.save.empty()) {
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

int train(const RunFlags& flags, runtime::MpiSession& session, int& world_rank) {
  RunState run(flags, session, world_rank);
  for (Stop (*step)(RunState&) :
       {load_config, place_and_check_outputs, compile_schedule, cut_model, check_schedule,
        read_checkpoint, load_rank_data, resume_or_init}) {
    if (const Stop stop = step(run)) return *stop;
  }
  print_header(run);
  std::unique_ptr<TraceRecorder> recorder;
  if (!flags.trace.empty() || !flags.profile.empty()) {
    recorder = std::make_unique<TraceRecorder>(run.trainer->steps_per_epoch() > 1 ? 1 : 0,
                                               flags.profile_steps);
  }
  // A message's cost: a blocking receive in the run mostly waits for its
  // sender, so the profile times messages apart, before the first step.
  if (!flags.profile.empty()) {
    recorder->set_measured_links(measure_links(*run.comm, run.placement.hosts,
                                               run.config.model.sizes, run.split,
                                               run.trainer->machine().micro_batch_rows()));
  }
  train_epochs(run, recorder.get());
  const bool recorded = write_recordings(run, recorder.get());
  return finish_model(run, recorded);
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
  config::RunOverrides& f = flags->overrides;
  app->add_option("--dp", f.dp, "Data-parallel replicas (default 1)");
  app->add_option("--micro-batches", f.micro_batches, "Micro-batches per batch (default 4)");
  app->add_option("--batch-size", f.batch_size, "Global batch size (default 128)");
  app->add_option("--epochs", f.epochs, "Epochs (default 5)");
  app->add_option("--lr", f.lr, "Learning rate (default 0.001)");
  app->add_option("--optimizer", f.optimizer, "adam or sgd (default adam)");
  app->add_option("--seed", f.seed, "Shuffling seed (default 0)");
  app->add_option("--data", f.data, "fashion-mnist, synthetic or a directory of IDX files");
  app->add_option("--chunks", f.chunks, "Model chunks per rank (default 1)");
  app->add_option("--loss", f.loss, "cross-entropy or softmax-mse");
  app->add_option("--model", f.model,
                  "vit, mlp, or the MLP's layer widths, input first (default "
                  "784,128,127,126,125,124,123,10; Fashion-MNIST needs 784 in and 10 out)");
  app->add_option("--save", f.save, "Write the trained model (.safetensors)")->type_name("FILE");
  app->add_option("--checkpoint", f.checkpoint,
                  "Write a checkpoint into DIR after every epoch (created when missing; it "
                  "keeps the latest complete one); resume it with --resume DIR")
      ->type_name("DIR");
  app->add_option("--checkpoint-every", f.checkpoint_every,
                  "Checkpoint every N steps (counted across epochs) instead of after every epoch")
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
         "Write the measured median cost of each instruction kind (per stage, and per chunk "
         "when ranks hold several), and the links' message "
         "latency and bandwidth from a ping-pong at start-up (YAML for simulate --costs)")
      ->type_name("FILE");
  app->add_option("--profile-steps", flags->profile_steps,
                  "How many training steps --profile takes medians over (default 20, from the "
                  "second step on; fewer when the run has fewer)")
      ->type_name("N")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--report", flags->report,
                  "Write the run's figures as JSON: per epoch the loss, accuracy and seconds; per "
                  "rank the peak bytes of its buffers by category, as the runtime counted them "
                  "(the per_rank of simulate --format json; docs/running.md)")
      ->type_name("FILE");
  app->add_option("--layout", f.layout,
                  "Which parallel dimension stays inside a host: pp-inner (a replica's "
                  "stages share a host; the all-reduce crosses hosts), dp-inner (a stage's "
                  "replicas share a host; pipeline messages cross hosts) or mpi (MPI rank = "
                  "program rank, as mpirun placed them; default)")
      ->check(CLI::IsMember({"mpi", "pp-inner", "dp-inner"}));
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
