// `pipevm simulate` as a user runs it: exit codes, JSON alone on stdout,
// stable output, and the files --svg and --trace write.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string out;
};

// Runs `pipevm simulate ARGS` from the source directory; stderr goes to `err_file`.
Outcome simulate(const std::string& args, const fs::path& err_file = "/dev/null") {
  const std::string command = "cd '" PIPEVM_SOURCE_DIR "' && '" PIPEVM_BINARY_DIR
                              "/pipevm' simulate " +
                              args + " 2>'" + err_file.string() + "'";
  Outcome outcome;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    outcome.out.append(buffer, n);
  const int status = pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class cli : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unique per process: other build directories may run these tests at once.
    dir_ = fs::temp_directory_path() /
           ("pipevm-simulate-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(cli, json_is_alone_on_stdout_and_stable) {
  const std::string args =
      "schedules/1f1b.pipe --stages 4 --micro-batches 8 --cost fwd=1,bwd=2 --format json";
  const Outcome first = simulate(args);
  const Outcome second = simulate(args);
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.out, second.out);
  const auto json = nlohmann::json::parse(first.out);  // throws if anything else is on stdout
  EXPECT_DOUBLE_EQ(json.at("makespan").get<double>(), 33);
  EXPECT_NEAR(json.at("bubble_fraction").get<double>(), 3.0 / 11, 1e-12);
  EXPECT_EQ(json.at("per_stage").size(), 4u);
}

// The figures as a user reads them: the largest idle of per_stage
// at F = I = W = 1 per chunk (given: without costs, a chunk costs half a
// stage's default) equals DeepSeek's (PP/2-1)(F&B+B-3W) for DualPipe and
// (PP-1)(F&B+B-3W) for DualPipeV, F&B = F + B = 3.
TEST_F(cli, dualpipe_idle_is_the_published_figure) {
  struct Case {
    const char* schedule;
    int stages, micro_batches;
    double idle;
  };
  for (const Case& c : {Case{"dualpipe", 4, 8, 2}, Case{"dualpipe", 8, 20, 6},
                        Case{"dualpipev", 4, 8, 6}, Case{"dualpipev", 8, 16, 14}}) {
    const Outcome outcome =
        simulate("schedules/" + std::string(c.schedule) + ".pipe --stages " +
                 std::to_string(c.stages) + " --micro-batches " + std::to_string(c.micro_batches) +
                 " --chunks 2 --cost fwd=1,bwd-input=1,bwd-weight=1 --format json");
    ASSERT_EQ(outcome.status, 0) << outcome.out;
    const auto json = nlohmann::json::parse(outcome.out);
    double idle = 0;
    for (const auto& stage : json.at("per_stage")) {
      idle = std::max(idle, stage.at("idle").get<double>());
    }
    EXPECT_DOUBLE_EQ(idle, c.idle) << c.schedule << " p=" << c.stages;
  }
}

TEST_F(cli, hosts_and_layout_decide_what_crosses_hosts) {
  // gpipe, 2 stages x dp 2 on 2 hosts; default model, batch 128: rows 16,
  // an activation 128 x 16 x 4 = 8,192 bytes, 8 per replica and step.
  const std::string args =
      "schedules/gpipe.pipe -p 2 -m 4 --dp 2 --hosts 2 --format json "
      "--cost fwd=1,bwd=2,cross-host-send=1,cross-host-bandwidth=8192 --layout ";
  const Outcome pp = simulate(args + "pp-inner");
  const Outcome dp = simulate(args + "dp-inner");
  ASSERT_EQ(pp.status, 0);
  ASSERT_EQ(dp.status, 0);
  const auto pp_json = nlohmann::json::parse(pp.out);
  const auto dp_json = nlohmann::json::parse(dp.out);
  EXPECT_EQ(pp_json.at("traffic").at("across_hosts").at("messages"), 0);
  EXPECT_EQ(pp_json.at("traffic").at("across_hosts").at("all_reduces"), 2);
  EXPECT_EQ(dp_json.at("traffic").at("across_hosts").at("messages"), 16);
  EXPECT_DOUBLE_EQ(dp_json.at("traffic").at("across_hosts").at("message_bytes").get<double>(),
                   16 * 8192.0);
  EXPECT_EQ(dp_json.at("traffic").at("same_host").at("all_reduces"), 2);
  // Free links give (m + p - 1)(F + B) = 15; each layout pays for what crosses.
  EXPECT_GT(dp_json.at("makespan").get<double>(), 15);
  EXPECT_GT(pp_json.at("makespan").get<double>(), 15);
  EXPECT_FALSE(simulate("schedules/gpipe.pipe -p 2 -m 4 --format json").out.find("traffic") !=
               std::string::npos);
  // A hostfile with too few slots is bad input.
  const fs::path hostfile = dir_ / "hosts";
  std::ofstream(hostfile) << "a slots=1  # one slot\nb\n";
  EXPECT_EQ(simulate("schedules/gpipe.pipe -p 2 -m 4 --dp 2 --hostfile '" + hostfile.string() + "'")
                .status,
            2);
  EXPECT_EQ(
      simulate("schedules/gpipe.pipe -p 2 -m 4 --hostfile '" + hostfile.string() + "'").status, 0);
}

TEST_F(cli, text_shows_the_grid_and_files_are_written) {
  const fs::path svg = dir_ / "gpipe.svg";
  const fs::path trace = dir_ / "gpipe.json";
  const Outcome outcome =
      simulate("schedules/gpipe.pipe -p 2 -m 2 --cost fwd=1,bwd=2 --width 18 --svg '" +
               svg.string() + "' --trace '" + trace.string() + "'");
  ASSERT_EQ(outcome.status, 0);
  EXPECT_NE(outcome.out.find("stage 0 |F0F1......B0BBB1BB|\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("makespan 9 "), std::string::npos) << outcome.out;
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);
  const auto events = nlohmann::json::parse(slurp(trace)).at("traceEvents");
  EXPECT_GT(events.size(), 10u);
}

TEST_F(cli, costs_come_from_yaml_and_flags_override_them) {
  const fs::path costs = dir_ / "costs.yaml";
  std::ofstream(costs) << "fwd: 2\nbwd: 4\n";
  const Outcome from_file =
      simulate("schedules/gpipe.pipe -p 2 -m 2 --format json --costs '" + costs.string() + "'");
  ASSERT_EQ(from_file.status, 0);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(from_file.out).at("makespan").get<double>(), 18);
  const Outcome overridden = simulate("schedules/gpipe.pipe -p 2 -m 2 --format json --costs '" +
                                      costs.string() + "' --cost fwd=1,bwd=2");
  ASSERT_EQ(overridden.status, 0);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(overridden.out).at("makespan").get<double>(), 9);
}

TEST_F(cli, a_hang_exits_1_and_points_at_check) {
  const fs::path file = dir_ / "hang.pipe";
  std::ofstream(file) << "# 1F1B with blocking sends: stages wait on each other\n"
                         "let warmup = min(stages - stage - 1, micro_batches)\n"
                         "proc f(mb) {\n"
                         "  if stage == 0 { LoadInput mb } else { Recv act mb }\n"
                         "  Fwd mb\n"
                         "  if stage == stages - 1 { LoadTarget mb } else { Send act mb }\n"
                         "}\n"
                         "proc b(mb) {\n"
                         "  if stage < stages - 1 { Recv grad mb }\n"
                         "  Bwd mb\n"
                         "  if stage > 0 { Send grad mb }\n"
                         "}\n"
                         "ZeroGrad\n"
                         "for i in 0 .. warmup { f(i) }\n"
                         "for i in 0 .. micro_batches - warmup { f(i + warmup)\n b(i) }\n"
                         "for i in micro_batches - warmup .. micro_batches { b(i) }\n"
                         "OptimizerStep\n";
  const fs::path err = dir_ / "err.txt";
  const Outcome outcome = simulate("'" + file.string() + "' -p 4 -m 8 --format json", err);
  EXPECT_EQ(outcome.status, 1);
  EXPECT_EQ(outcome.out, "");
  const std::string message = slurp(err);
  EXPECT_NE(message.find("[PV2001]"), std::string::npos) << message;
  EXPECT_NE(message.find("pipevm check"), std::string::npos) << message;
}

TEST_F(cli, usage_errors_exit_2) {
  EXPECT_EQ(simulate("schedules/gpipe.pipe -p 2 -m 2 --cost fwd=fast").status, 2);
  EXPECT_EQ(simulate("schedules/gpipe.pipe -p 2 -m 2 --cost speed=1").status, 2);
  EXPECT_EQ(simulate("schedules/gpipe.pipe -p 2").status, 2);
  EXPECT_EQ(simulate("no/such/file.pipe -p 2 -m 2").status, 2);
  EXPECT_EQ(simulate("schedules/gpipe.pipe -p 2 -m 2 --format xml").status, 2);
}

}  // namespace

// Memory in bytes of the run configuration given with --config: a model of
// 8 x 4 x 2 (P = 8*4+4 + 4*2+2 = 46 parameters), element size 2, Adam (two
// states per parameter), batch 8 over dp 2 x 2 micro-batches (2 rows).
// Sharding over the two replicas halves the optimizer state (ShardStep) and,
// between a Release and the next AllGather, the weights.
TEST_F(cli, per_rank_bytes_follow_the_config_and_the_shards) {
  const fs::path config = dir_ / "model.yaml";
  std::ofstream(config) << "model:\n  sizes: [8, 4, 2]\n  element_bytes: 2\n"
                           "training:\n  batch_size: 8\n  optimizer: adam\n";
  const auto peak = [&](const std::string& schedule) {
    const Outcome o =
        simulate("schedules/" + schedule +
                 ".pipe --stages 1 --micro-batches 2 --dp 2 --format json --config '" +
                 config.string() + "'");
    EXPECT_EQ(o.status, 0) << schedule;
    const nlohmann::json json = nlohmann::json::parse(o.out);
    EXPECT_EQ(json.at("per_rank").size(), 2u);
    return json.at("per_rank").at(0);
  };
  const nlohmann::json dp = peak("dp");
  const nlohmann::json wsdp = peak("wsdp");
  EXPECT_EQ(dp.at("weights"), 46 * 2);
  EXPECT_EQ(dp.at("gradients"), 46 * 2);
  EXPECT_EQ(dp.at("optimizer"), 2 * 46 * 2);
  EXPECT_EQ(wsdp.at("optimizer"), 2 * 23 * 2);
  // One micro-batch's boundaries (8 + 4 + 2 floats a row, 2 rows) stashed at once.
  EXPECT_EQ(dp.at("activations"), 14 * 2 * 2);
  EXPECT_EQ(dp.at("peak_bytes"),
            dp.at("weights").get<int>() + dp.at("gradients").get<int>() +
                dp.at("optimizer").get<int>() + dp.at("activations").get<int>() +
                dp.at("activation_gradients").get<int>() + dp.at("messages").get<int>());
}

TEST_F(cli, a_bad_config_is_a_usage_error) {
  const fs::path config = dir_ / "bad.yaml";
  std::ofstream(config) << "model:\n  element_bytes: 0\n";
  EXPECT_EQ(
      simulate("schedules/dp.pipe --stages 1 --micro-batches 2 --config '" + config.string() + "'")
          .status,
      2);
}

// The costs of a configuration's `costs` section, per layer and row
// (compute-rows), and the schedule's one declared configuration: a model of
// 2 layers, 4 rows a micro-batch. Fwd costs 1 x 2 layers x 4 / 2 rows = 4,
// Bwd 2 x 2 x 2 = 8, the step 0.5 x 2 layers = 1; --cost overrides a key.
TEST_F(cli, costs_come_per_layer_and_row_from_the_config) {
  const fs::path config = dir_ / "model.yaml";
  std::ofstream(config) << "model:\n  sizes: [4, 3, 2]\ntraining:\n  batch_size: 4\n"
                           "costs:\n  compute-rows: 2\n  fwd: 1\n  bwd: 2\n  optimizer: 0.5\n";
  const fs::path schedule = dir_ / "one.pipe";
  std::ofstream(schedule) << "check stages 1 micro_batches 1\n"
                             "ZeroGrad\nLoadInput 0\nFwd 0\nLoadTarget 0\nBwd 0\nOptimizerStep\n";
  const auto makespan = [&](const std::string& more) {
    const Outcome o = simulate("'" + schedule.string() + "' --format json --config '" +
                               config.string() + "'" + more);
    EXPECT_EQ(o.status, 0) << more;
    return o.status == 0 ? nlohmann::json::parse(o.out).at("makespan").get<double>() : -1.0;
  };
  EXPECT_DOUBLE_EQ(makespan(""), 13.0);
  EXPECT_DOUBLE_EQ(makespan(" --cost fwd=2"), 17.0);
  // One layer at a time costs the same in total.
  std::ofstream(schedule) << "check stages 1 micro_batches 1\nZeroGrad\nLoadInput 0\n"
                             "for l in 0 .. layers { Fwd 0 layer l }\nLoadTarget 0\n"
                             "for l in reversed(0 .. layers) { Bwd 0 layer l }\nOptimizerStep\n";
  EXPECT_DOUBLE_EQ(makespan(""), 13.0);
}

// A collective's ring takes 2 (n - 1) steps of `send` latency unless
// ring-send says otherwise: over 2 replicas, 0.3 + 2 x 0.2, or 0.3 alone.
TEST_F(cli, ring_send_prices_the_steps_of_a_collective) {
  const auto makespan = [&](const std::string& costs) {
    const Outcome o = simulate(
        "schedules/dp.pipe --stages 1 --micro-batches 1 --dp 2 --format json --cost " + costs);
    EXPECT_EQ(o.status, 0) << costs;
    return o.status == 0 ? nlohmann::json::parse(o.out).at("makespan").get<double>() : -1.0;
  };
  EXPECT_DOUBLE_EQ(makespan("allreduce=0.3,send=0.2"), 0.3 + 2 * 0.2);
  EXPECT_DOUBLE_EQ(makespan("allreduce=0.3,send=0.2,ring-send=0"), 0.3);
}

TEST_F(cli, a_schedule_declaring_several_configurations_needs_the_flags) {
  const fs::path err = dir_ / "err.txt";
  const Outcome o = simulate("schedules/1f1b.pipe", err);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(slurp(err).find("--stages and --micro-batches are required"), std::string::npos)
      << slurp(err);
}

TEST_F(cli, a_bad_cost_in_the_config_names_its_line) {
  const fs::path config = dir_ / "costs.yaml";
  std::ofstream(config) << "costs:\n  fwd: 1\n  warp: 2\n";
  const fs::path err = dir_ / "err.txt";
  const Outcome o = simulate(
      "schedules/dp.pipe --stages 1 --micro-batches 1 --config '" + config.string() + "'", err);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(slurp(err).find("costs.yaml:3:9: costs: "), std::string::npos) << slurp(err);
}

// Posted order on a table PyTorch's lowering wrote (pipevm lowers a
// compute-only table by its rule, docs/pytorch.md): Megatron's interleaved
// 1F1B at p = 4, m = 4, v = 2. A rank's receive of its next input is posted
// before the send of its last output, so under NCCL's stream order the
// send waits for the receive (as in pytorch#188833): the step gets longer,
// and the grid and the trace show where.
TEST_F(cli, posted_order_stalls_a_pytorch_interleaved_table) {
  const fs::path table = dir_ / "interleaved.csv";
  const std::string expand = "cd '" PIPEVM_SOURCE_DIR "' && '" PIPEVM_BINARY_DIR
                             "/pipevm' expand schedules/interleaved-1f1b.pipe -p 4 -m 4 -v 2 "
                             "--format torch-csv > '" +
                             table.string() + "'";
  ASSERT_EQ(std::system(expand.c_str()), 0);
  const std::string args =
      "'" + table.string() + "' --cost fwd=1,bwd-input=1,bwd-weight=1,send=0.2 --transfer eager";
  const Outcome independent = simulate(args + " --format json");
  const Outcome posted = simulate(args + " --p2p-order posted --format json");
  ASSERT_EQ(independent.status, 0);
  ASSERT_EQ(posted.status, 0);
  const auto free_order = nlohmann::json::parse(independent.out);
  const auto stream_order = nlohmann::json::parse(posted.out);
  EXPECT_DOUBLE_EQ(free_order.at("makespan").get<double>(), 35.8);
  EXPECT_DOUBLE_EQ(stream_order.at("makespan").get<double>(), 47);
  EXPECT_EQ(free_order.at("held"), 0);
  EXPECT_GT(stream_order.at("held").get<int>(), 0);

  const fs::path trace = dir_ / "trace.json";
  const Outcome grid = simulate(args + " --p2p-order posted --trace '" + trace.string() + "'");
  ASSERT_EQ(grid.status, 0);
  EXPECT_NE(grid.out.find("stage 0 |F0F1F2F3#-f0#####f1"), std::string::npos) << grid.out;
  EXPECT_NE(grid.out.find("# held in posted order"), std::string::npos) << grid.out;
  const auto events = nlohmann::json::parse(slurp(trace)).at("traceEvents");
  int held = 0;
  for (const auto& event : events) {
    if (event.contains("args") && event.at("args").contains("held_by")) ++held;
  }
  EXPECT_EQ(held, stream_order.at("held").get<int>());
}
