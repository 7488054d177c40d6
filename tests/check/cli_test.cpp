// `pipevm check` as a user runs it: exit codes, sweeps, and machine formats
// that put nothing else on stdout. Runs the built executable.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Outcome {
  int status = -1;
  std::string out;
};

// Runs `pipevm check ARGS` from the source directory; stderr is discarded.
Outcome pipevm_check(const std::string& args) {
  const std::string command = std::string("cd '") + PIPEVM_SOURCE_DIR + "' && '" +
                              PIPEVM_BINARY_DIR + "/pipevm' check " + args + " 2>/dev/null";
  Outcome run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(cli, exit_codes) {
  EXPECT_EQ(pipevm_check("schedules/gpipe.pipe --stages 4 --micro-batches 8").status, 0);
  EXPECT_EQ(pipevm_check("tests/check/corpus/deadlock_receive_first.pipe -p 2 -m 1").status, 1);
  EXPECT_EQ(pipevm_check("tests/check/corpus/require_micro_batches.pipe -p 4 -m 2").status, 1);
  EXPECT_EQ(pipevm_check("no/such/file.pipe --stages 2 --micro-batches 2").status, 2);
  EXPECT_EQ(pipevm_check("schedules/gpipe.pipe --stages 4..2 --micro-batches 2").status, 2);
  // No --micro-batches and none declared in the file.
  EXPECT_EQ(pipevm_check("tests/check/corpus/deadlock_receive_first.pipe --stages 2").status, 2);
  EXPECT_EQ(pipevm_check("schedules/gpipe.pipe -p 2 -m 2 --format xml").status, 2);
}

TEST(cli, text_summary) {
  const Outcome run =
      pipevm_check("schedules/gpipe.pipe --stages 1..3 --micro-batches 1..4 --dp 1");
  EXPECT_EQ(run.status, 0);
  EXPECT_NE(run.out.find("schedules/gpipe.pipe: ok for 12 configurations"), std::string::npos)
      << run.out;
}

TEST(cli, json_sweep_with_skipped_configurations) {
  const Outcome run = pipevm_check(
      "schedules/1f1b.pipe --stages 2..3 --micro-batches 2 --dp 1 --skip-unsupported --format "
      "json");
  EXPECT_EQ(run.status, 0);
  const auto j = nlohmann::json::parse(run.out);  // nothing but JSON on stdout
  ASSERT_EQ(j["files"].size(), 1u);
  EXPECT_EQ(j["files"][0]["verdict"], "ok");
  EXPECT_EQ(j["files"][0]["configurations"]["checked"], 1);
  EXPECT_EQ(j["files"][0]["configurations"]["skipped"], 1);
  // One configuration: its memory figures.
  const auto one =
      nlohmann::json::parse(pipevm_check("schedules/1f1b.pipe -p 2 -m 2 --dp 1 --format json").out);
  EXPECT_EQ(one["files"][0]["memory"][1]["peak_activations"], 1);
}

// The bytes of each rank are one walk of its stream: check and simulate,
// given the same configuration, report the same figures (the device's and
// the host's, for the memory policies).
TEST(cli, json_per_rank_bytes_equal_the_simulators) {
  for (const char* schedule : {"pp-fsdp", "1f1b-recompute", "1f1b-offload"}) {
    const std::string args = std::string("schedules/") + schedule +
                             ".pipe --stages 2 --micro-batches 2 --dp 2 --format json "
                             "--config examples/synthetic-quick.yaml";
    const Outcome checked = pipevm_check(args);
    ASSERT_EQ(checked.status, 0) << schedule;
    const auto per_rank = nlohmann::json::parse(checked.out)["files"][0]["per_rank"];
    ASSERT_EQ(per_rank.size(), 4u);
    EXPECT_GT(per_rank[0]["peak_bytes"].get<long>(), 0);
    EXPECT_EQ(per_rank[0]["peak_host_bytes"].get<long>() > 0,
              std::string(schedule) == "1f1b-offload");
    const std::string command = std::string("cd '") + PIPEVM_SOURCE_DIR + "' && '" +
                                PIPEVM_BINARY_DIR + "/pipevm' simulate " + args + " 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    std::array<char, 4096> buffer{};
    for (std::size_t n; (n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
      out.append(buffer.data(), n);
    }
    ASSERT_EQ(pclose(pipe), 0);
    EXPECT_EQ(nlohmann::json::parse(out)["per_rank"], per_rank) << schedule;
  }
}

TEST(cli, json_and_sarif_findings) {
  const std::string file = "tests/check/corpus/buffering_1f1b_two_stages.pipe -p 2 -m 2";
  const Outcome json = pipevm_check(file + " --format json");
  EXPECT_EQ(json.status, 1);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["files"][0]["verdict"], "error");
  EXPECT_EQ(j["files"][0]["diagnostics"][0]["code"], "PV2002");
  EXPECT_EQ(j["files"][0]["diagnostics"][0]["class"], "buffering-hazard");

  const Outcome sarif = pipevm_check(file + " --format sarif");
  EXPECT_EQ(sarif.status, 1);
  const auto s = nlohmann::json::parse(sarif.out);
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["runs"][0]["results"][0]["ruleId"], "PV2002");
  EXPECT_EQ(s["runs"][0]["results"][0]["level"], "error");
}

TEST(cli, gcc_format_is_one_line_per_diagnostic_and_note) {
  const Outcome run =
      pipevm_check("tests/check/corpus/buffering_1f1b_two_stages.pipe -p 2 -m 2 --format gcc");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.out.rfind("tests/check/corpus/buffering_1f1b_two_stages.pipe:10:5: error: ", 0), 0u)
      << run.out;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 2);
}

}  // namespace
