// The first steps of a run (steps.hpp): the configuration and the world it
// leaves, which program rank each process plays, and whether the outputs
// can be written.
#include <algorithm>

#include "rank_layout.hpp"
#include "run_outputs.hpp"
#include "run_overrides.hpp"
#include "schedule_input.hpp"
#include "shared_cpus.hpp"
#include "steps.hpp"

namespace pipevm::train {

namespace {

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

// A flat program (`stage N { ... }` blocks, as synthesize and expand write
// it) runs on stages x dp ranks and no other count: said in one line with
// the fix, before the schedule is compiled, rather than as the checker's
// findings for the stages the world leaves.
std::string world_mismatch(const std::string& file, int world, int dp) {
  const int stages = api::implied_stages_of(file);
  if (stages == 0 || world == stages * dp) return "";
  std::string fix = "run it with `mpirun -n " + std::to_string(stages * dp) + "`";
  if (world % stages == 0) fix += " or with --dp " + std::to_string(world / stages);
  return file + " is written for " + std::to_string(stages) + (stages == 1 ? " stage" : " stages") +
         (dp > 1 ? " x " + std::to_string(dp) + " dp" : "") + ", not the " + std::to_string(world) +
         (world == 1 ? " rank" : " ranks") + " of this run: " + fix;
}

}  // namespace

// The configuration (the schedule's declared one, the YAML file, then the
// flags: config/run_overrides.hpp) and the stages the world leaves.
Stop load_config(RunState& run) {
  try {
    run.config = config::resolve_run_config(api::declared_configuration_of(run.request.file),
                                            run.request.config_file, run.request.overrides);
  } catch (const config::ConfigError& error) {
    return run.everyone_fails(kExitUsage, error.what());
  }
  const config::RunConfig& config = run.config;
  const int world = run.session.world_size();
  if (const std::string error = world_mismatch(run.request.file, world, config.dp);
      !error.empty()) {
    return run.everyone_fails(kExitUsage, error);
  }
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
                        " x " + std::to_string(config.micro_batches) +
                        (run.request.resume.empty()
                             ? ""
                             : " (--resume keeps the checkpoint's global batch: choose dp and "
                               "micro-batches whose product divides it)"));
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
  const RunOutputs outputs{run.config.save,       run.request.trace,  run.request.profile,
                           run.config.checkpoint, run.request.resume, run.request.report};
  if (!run.session_agrees(check_outputs(outputs, run.root))) return kExitUsage;
  return std::nullopt;
}

}  // namespace pipevm::train
