// `pipevm run FILE` (also `pipevm FILE`): the options of a training run,
// given to the training library (train/run.hpp), which reads the
// configuration, compiles and checks the schedule and trains on the MPI
// ranks mpiexec started. Each flag binds to an optional that stays empty
// unless given, so that flags override the YAML file
// (config/run_overrides.hpp). Not here: any step of the run.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "options.hpp"
#include "run.hpp"

namespace pipevm::cli {

namespace {

struct RunArguments {
  train::RunRequest request;
  bool no_progress = false;
};

int run(RunArguments arguments) {
  arguments.request.progress = !arguments.no_progress && isatty(STDOUT_FILENO) != 0;
  const train::RunLog log(stdout, std::cerr, isatty(STDERR_FILENO) != 0);
  return train::run(arguments.request, log);
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto arguments = std::make_shared<RunArguments>();
  train::RunRequest& r = arguments->request;
  config::RunOverrides& f = r.overrides;
  Command command;
  CLI::App* app = root.add_subcommand(
      "run",
      "Train the MLP with a schedule on the MPI ranks (the default command):\n"
      "  mpirun -n 4 pipevm run schedules/gpipe.pipe [--config FILE.yaml] [flags]\n"
      "stages = number of ranks / dp; flags override the YAML file.\n"
      "Every output (--save, --trace, --profile, --report, --checkpoint) is checked writable\n"
      "before the run starts; a bad one stops it at once with the path and the reason.");
  command.app = app;
  app->add_option("file", r.file, "The schedule (.pipe)")->required();
  app->add_option("--config", r.config_file, "YAML configuration (see examples/)");
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
  app->add_option("--resume", r.resume,
                  "Continue from the checkpoint in DIR (made by the same schedule, world, model "
                  "and training configuration; --epochs may differ): the final weights are the "
                  "bits an uninterrupted run would give")
      ->type_name("DIR");
  app->add_option(
         "--trace", r.trace,
         "Write a Chrome/Perfetto trace of one training step (the format of simulate --trace)")
      ->type_name("FILE");
  app->add_option("--profile", r.profile,
                  "Write the measured median cost of each instruction kind (per stage, and per "
                  "chunk when ranks hold several), and the links' message latency and bandwidth "
                  "from a ping-pong at start-up (YAML for simulate --costs)")
      ->type_name("FILE");
  app->add_option("--profile-steps", r.profile_steps,
                  "How many training steps --profile takes medians over (default 20, from the "
                  "second step on; fewer when the run has fewer)")
      ->type_name("N")
      ->check(CLI::Range(1, 1000000));
  app->add_option("--report", r.report,
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
  app->add_option("--mpi-wait", r.wait,
                  "How a rank waits for messages: spin (inside MPI; default, fastest on a "
                  "machine that is otherwise idle) or sleep (test, then nap: leaves the core "
                  "to the others when the machine is loaded)")
      ->check(CLI::IsMember({"sleep", "spin"}));
  app->add_option("--split", r.split,
                  "Where stages cut the model: measured (each layer's time, measured on rank 0 "
                  "at start-up; default) or flops (multiply-adds, as pipevm check assumes); a "
                  "program's `cut` line overrides both")
      ->check(CLI::IsMember({"measured", "flops"}));
  app->add_option("--topology", r.topology, kTopologyHelp);
  app->add_flag("--no-progress", arguments->no_progress,
                "No progress bar (mpiexec shows ranks a terminal even when piped)");
  command.run = [arguments] { return run(*arguments); };
  return command;
}

}  // namespace pipevm::cli
