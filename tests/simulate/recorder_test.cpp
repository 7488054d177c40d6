// The recorder behind `pipevm run --trace/--profile`, fed by hand on two
// in-process ranks: it keeps the chosen steps, gathers them to rank 0 and
// writes a Chrome trace of one step and the medians of all recorded steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cost_files.hpp"
#include "inprocess_comm.hpp"
#include "programs.hpp"
#include "simulate.hpp"
#include "trace_recorder.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

TEST(recorder, gathers_one_step_for_the_trace_and_all_for_the_profile) {
  const Program program = testing::gpipe(2, 2);
  Diagnostics diagnostics;
  Costs costs;
  costs.fwd = 1;
  costs.bwd = 2;
  const auto simulated = simulate(program, costs, diagnostics);
  ASSERT_TRUE(simulated);
  const fs::path dir =
      fs::temp_directory_path() / ("pipevm-simulate-recorder-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path trace = dir / "trace.json";
  const fs::path profile = dir / "costs.yaml";

  runtime::InProcessWorld world(2, 1);
  std::vector<bool> written(2, false);
  const auto rank_main = [&](int rank) {
    runtime::InProcessComm comm(world, rank);
    TraceRecorder recorder(1, 2);
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(rank)];
    // Four steps of the simulated timeline in milliseconds (as nanoseconds);
    // step s runs s times slower, so the recorded steps 1 and 2 are told apart.
    for (int step = 0; step < 4; ++step) {
      const std::int64_t origin = step * 100'000'000;
      for (std::size_t i = 0; i < program.rank(rank).size(); ++i) {
        const InstructionTime& t = simulated->timeline.times[begin + i];
        const double scale = 1e6 * (step + 1);
        recorder.on_instruction(rank, i, origin + static_cast<std::int64_t>(t.issued * scale),
                                origin + static_cast<std::int64_t>(t.ended * scale));
      }
    }
    std::string error;
    written[static_cast<std::size_t>(rank)] =
        recorder.write(comm, program, trace.string(), profile.string(), error);
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  EXPECT_TRUE(written[0]);
  EXPECT_TRUE(written[1]);

  std::ifstream trace_in(trace);
  const auto json = nlohmann::json::parse(trace_in);
  double last_end = 0;
  std::size_t flows = 0;
  for (const auto& event : json.at("traceEvents")) {
    if (event.at("ph") == "X" && event.at("args").contains("index")) {
      last_end = std::max(last_end, event.at("ts").get<double>() + event.at("dur").get<double>());
    }
    if (event.value("flow_out", false)) ++flows;
  }
  EXPECT_DOUBLE_EQ(last_end, 2 * 9000.0);  // step 1: twice the simulated 9 ms, in µs
  EXPECT_EQ(flows, 4u);

  Costs measured;
  std::string error;
  ASSERT_TRUE(config::read_costs_yaml(profile.string(), measured, error)) << error;
  EXPECT_DOUBLE_EQ(measured.fwd, 2500);  // steps 1 and 2: 2000 and 3000 µs
  EXPECT_DOUBLE_EQ(measured.backward(), 5000);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipevm
