// `pipevm run --report` against `pipevm simulate`: the bytes each rank's
// buffers held at their worst moment, as the runtime's ledger measured them
// in a real MPI run (the vm.mpi.report_* tests write the reports), equal
// the simulator's count for the same program and configuration, rank by
// rank and category by category; and FSDP's weights, gradients and
// optimizer state per rank are at most 0.6 of data parallelism's on 4
// ranks with Adam (docs/memory.md). The same for a ViT (report_vit.yaml),
// whose blocks keep stashes between forward, input half and weight half.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_pipevm.hpp"

namespace pipevm {
namespace {

using testing::run_pipevm;

nlohmann::json read_report(const std::string& name) {
  std::ifstream in(std::string(PIPEVM_BINARY_DIR) + "/tests/vm/" + name + "_report.json");
  EXPECT_TRUE(in) << "no report of " << name << " (run the vm.mpi.report_ tests first)";
  if (!in) return {};
  return nlohmann::json::parse(in);
}

// `schedule` names a shipped schedule, or with a '/' a file of the source
// tree (without .pipe), whose report's name has '_' for each '/'.
nlohmann::json simulated(const std::string& schedule, int stages, int dp, int micro_batches,
                         const std::string& config) {
  const std::string file =
      schedule.find('/') == std::string::npos ? "schedules/" + schedule : schedule;
  const auto run = run_pipevm("simulate " + file + ".pipe --stages " + std::to_string(stages) +
                              " --micro-batches " + std::to_string(micro_batches) + " --dp " +
                              std::to_string(dp) + " --config tests/vm/" + config + ".yaml --format json");
  EXPECT_EQ(run.status, 0) << run.err;
  return run.status == 0 ? nlohmann::json::parse(run.out) : nlohmann::json{};
}

// `config` names the run's configuration in tests/vm (without .yaml); a
// report of another than report.yaml has its name first.
void expect_measured_equals_simulated(const std::string& schedule, int stages, int dp,
                                      int micro_batches = 4,
                                      const std::string& config = "report") {
  std::string name = (config == "report" ? "" : config + "_") + schedule;
  std::replace(name.begin(), name.end(), '/', '_');
  const nlohmann::json report = read_report(name);
  const nlohmann::json simulation = simulated(schedule, stages, dp, micro_batches, config);
  ASSERT_TRUE(report.contains("per_rank") && simulation.contains("per_rank"));
  const nlohmann::json& measured = report["per_rank"];
  const nlohmann::json& counted = simulation["per_rank"];
  ASSERT_EQ(measured.size(), static_cast<std::size_t>(stages * dp));
  ASSERT_EQ(counted.size(), measured.size());
  for (std::size_t r = 0; r < measured.size(); ++r) {
    for (const char* key : {"rank", "stage", "peak_bytes", "weights", "gradients", "optimizer",
                            "activations", "activation_gradients", "messages", "host",
                            "peak_host_bytes"}) {
      EXPECT_EQ(measured[r][key], counted[r][key]) << schedule << ", rank " << r << ": " << key;
    }
    EXPECT_EQ(measured[r]["total"], measured[r]["peak_bytes"]);
    EXPECT_GT(measured[r]["peak_bytes"].get<std::uint64_t>(), 0U);
  }
  // The rest of the report: one epoch, its figures.
  ASSERT_EQ(report["epochs"].size(), 1U);
  const nlohmann::json& epoch = report["epochs"][0];
  EXPECT_EQ(epoch["epoch"], 1);
  EXPECT_GT(epoch["loss"].get<double>(), 0.0);
  EXPECT_GE(epoch["train_accuracy"].get<double>(), 0.0);
  EXPECT_LE(epoch["train_accuracy"].get<double>(), 1.0);
  EXPECT_TRUE(epoch["test_accuracy"].is_number());
  EXPECT_GT(epoch["seconds"].get<double>(), 0.0);
  EXPECT_EQ(report["configuration"]["dp"], dp);
  EXPECT_EQ(report["configuration"]["stages"], stages);
}

TEST(report, dp_measured_equals_simulated) {
  expect_measured_equals_simulated("dp", 1, 4);
}

TEST(report, fsdp_measured_equals_simulated) {
  expect_measured_equals_simulated("fsdp", 1, 4);
}

TEST(report, pipeline_measured_equals_simulated) {
  expect_measured_equals_simulated("1f1b", 2, 2);
}

// Values held past their last use (tests/vm/holds.pipe): activations and
// gradients in their own categories until dropped or the step's end, the
// model's input gradient on stage 0, weight gradients apart.
TEST(report, holds_measured_equals_simulated) {
  expect_measured_equals_simulated("tests/vm/holds", 2, 1);
}

// Two of the LLM Training Puzzles' programs, which hold what the reference
// solutions keep, run on report.yaml's model: FSDP holds each layer's
// input and the gradient coming into it until its reduce-scatter, GPipe
// keeps every micro-batch's weight gradients apart until the update.
TEST(report, puzzle_fsdp_measured_equals_simulated) {
  expect_measured_equals_simulated("examples/puzzles/fsdp", 1, 4, 1);
}

TEST(report, puzzle_gpipe_measured_equals_simulated) {
  expect_measured_equals_simulated("examples/puzzles/gpipe", 4, 1);
}

TEST(report, vit_pipeline_measured_equals_simulated) {
  expect_measured_equals_simulated("1f1b", 4, 1, 4, "report_vit");
}

// ZB-H1 splits every backward: between a block's input half and its weight
// half it holds the stash the weight half reads.
TEST(report, vit_zero_bubble_measured_equals_simulated) {
  expect_measured_equals_simulated("zb-h1", 4, 1, 4, "report_vit");
}

// Memory policies (docs/memory.md): recomputation and offload measured as
// counted, device and host apart, on the MLP (2 stages x 2 replicas) and
// the ViT (4 stages).
TEST(report, recompute_measured_equals_simulated) {
  expect_measured_equals_simulated("1f1b-recompute", 2, 2);
  expect_measured_equals_simulated("1f1b-recompute", 4, 1, 4, "report_vit");
}

TEST(report, offload_measured_equals_simulated) {
  expect_measured_equals_simulated("1f1b-offload", 2, 2);
  expect_measured_equals_simulated("1f1b-offload", 4, 1, 4, "report_vit");
}

// Their device peak, the most of any rank, is below 1f1b's; only offload
// holds host memory.
TEST(report, memory_policies_keep_less_on_the_device_than_1f1b) {
  const auto most = [](const nlohmann::json& report, const char* key) {
    std::uint64_t peak = 0;
    for (const nlohmann::json& rank : report["per_rank"]) {
      peak = std::max(peak, rank[key].get<std::uint64_t>());
    }
    return peak;
  };
  for (const char* prefix : {"", "report_vit_"}) {
    const nlohmann::json plain = read_report(std::string(prefix) + "1f1b");
    ASSERT_TRUE(plain.contains("per_rank")) << prefix;
    for (const char* schedule : {"1f1b-recompute", "1f1b-offload"}) {
      const nlohmann::json kept = read_report(std::string(prefix) + schedule);
      ASSERT_TRUE(kept.contains("per_rank")) << prefix << schedule;
      EXPECT_LT(most(kept, "peak_bytes"), most(plain, "peak_bytes")) << prefix << schedule;
      EXPECT_EQ(most(kept, "peak_host_bytes") > 0, std::string(schedule) == "1f1b-offload")
          << prefix << schedule;
    }
  }
}

std::uint64_t model_state(const nlohmann::json& rank) {
  return rank["weights"].get<std::uint64_t>() + rank["gradients"].get<std::uint64_t>() +
         rank["optimizer"].get<std::uint64_t>();
}

TEST(report, fsdp_holds_at_most_six_tenths_of_data_parallel_state) {
  const nlohmann::json dp = read_report("dp");
  const nlohmann::json fsdp = read_report("fsdp");
  ASSERT_TRUE(dp.contains("per_rank") && fsdp.contains("per_rank"));
  ASSERT_EQ(dp["per_rank"].size(), 4U);
  ASSERT_EQ(fsdp["per_rank"].size(), 4U);
  for (std::size_t r = 0; r < 4; ++r) {
    const double ratio = static_cast<double>(model_state(fsdp["per_rank"][r])) /
                         static_cast<double>(model_state(dp["per_rank"][r]));
    EXPECT_LE(ratio, 0.6) << "rank " << r;
    // The optimizer state is a quarter, up to each layer's shard rounding
    // up (9 layers, 2 Adam states, 4 bytes, less than one float each).
    const auto optimizer = [](const nlohmann::json& rank) {
      return rank["optimizer"].get<std::uint64_t>();
    };
    EXPECT_GE(4 * optimizer(fsdp["per_rank"][r]), optimizer(dp["per_rank"][r]));
    EXPECT_LT(4 * optimizer(fsdp["per_rank"][r]), optimizer(dp["per_rank"][r]) + 4 * 9 * 2 * 4);
  }
}

}  // namespace
}  // namespace pipevm
