// Bad input gets a clear error: for every subcommand that reads a schedule
// or a YAML file, a directory, a FIFO (without blocking), a device and a file
// over the size limit are one line on stderr and exit 2; so are costs whose
// sum overflows and sweeps over --max-configurations. Nothing but that line
// is printed: no half-written output, no `null` in JSON, no abort. Sweeps
// print each configuration's result as soon as it is checked.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_pipevm.hpp"

namespace {

namespace fs = std::filesystem;
using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;
using pipevm::testing::lines;

// Exit 2, nothing on stdout, one line on stderr that contains `reason`.
void expect_refused(const PipevmRun& run, const std::string& reason, const std::string& what) {
  EXPECT_EQ(run.status, 2) << what << "\n" << run.err;
  EXPECT_EQ(run.out, "") << what;
  EXPECT_EQ(lines(run.err), 1u) << what << "\n" << run.err;
  EXPECT_NE(run.err.find(reason), std::string::npos) << what << "\n" << run.err;
}

class cli_bad_input : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pipevm-bad-input-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string fifo() const {
    const std::string name = path("fifo");
    EXPECT_EQ(mkfifo(name.c_str(), 0600), 0);
    return name;
  }
  // A sparse file: its size costs no disk.
  std::string file_of_size(const std::string& name, std::uintmax_t bytes) const {
    std::ofstream(path(name)).put('#');
    fs::resize_file(path(name), bytes);
    return path(name);
  }

  fs::path dir_;
};

const char* const kScheduleReaders[] = {"check", "expand", "simulate"};

TEST_F(cli_bad_input, a_directory_is_not_a_schedule) {
  for (const char* command : kScheduleReaders) {
    expect_refused(run_pipevm(std::string(command) + " " + dir_.string() + " -p 2 -m 2"),
                   "is a directory [PV1015]", command);
  }
  expect_refused(run_pipevm("run " + dir_.string()), "is a directory [PV1015]", "run");
}

TEST_F(cli_bad_input, a_fifo_is_refused_without_waiting_for_a_writer) {
  const std::string name = fifo();
  for (const char* command : kScheduleReaders) {
    expect_refused(run_pipevm(std::string(command) + " " + name + " -p 2 -m 2", 20),
                   "is a FIFO (named pipe), not a regular file", command);
  }
  expect_refused(run_pipevm("run " + name, 20), "is a FIFO", "run");
}

TEST_F(cli_bad_input, a_device_is_not_a_schedule) {
  expect_refused(run_pipevm("check /dev/zero -p 2 -m 2"), "is a device, not a regular file",
                 "check /dev/zero");
}

TEST_F(cli_bad_input, a_schedule_over_256_mib_is_refused_unread) {
  const std::string big = file_of_size("big.pipe", 256u * 1024 * 1024 + 1);
  for (const char* command : kScheduleReaders) {
    expect_refused(run_pipevm(std::string(command) + " " + big + " -p 2 -m 2"),
                   "is 257 MiB, over the 256 MiB limit for schedules", command);
  }
}

TEST_F(cli_bad_input, yaml_files_are_read_the_same_way) {
  const std::string gpipe = "schedules/gpipe.pipe -p 2 -m 2";
  expect_refused(run_pipevm("simulate " + gpipe + " --costs " + dir_.string()),
                 "cannot read cost file '" + dir_.string() + "': is a directory", "--costs dir");
  expect_refused(run_pipevm("simulate " + gpipe + " --costs " + fifo(), 20), "is a FIFO",
                 "--costs fifo");
  expect_refused(
      run_pipevm("simulate " + gpipe + " --costs " + file_of_size("big.yaml", 1024 * 1024 + 1)),
      "over the 1 MiB limit for cost files", "--costs big");
  expect_refused(run_pipevm("run schedules/gpipe.pipe --config " + dir_.string()),
                 "cannot read the configuration file: is a directory", "--config dir");
  // A cost file of exactly 1 MiB is read.
  std::ofstream(path("limit.yaml")) << "fwd: 3\n" << std::string(1024 * 1024 - 8, '#') << '\n';
  ASSERT_EQ(fs::file_size(path("limit.yaml")), 1024u * 1024u);
  const PipevmRun at_limit =
      run_pipevm("simulate " + gpipe + " --format json --costs " + path("limit.yaml"));
  EXPECT_EQ(at_limit.status, 0) << at_limit.err;
  EXPECT_EQ(nlohmann::json::parse(at_limit.out)["makespan"], 9);  // (m + p - 1) F, F = 3
}

TEST_F(cli_bad_input, costs_that_overflow_are_an_error_not_an_abort_or_null) {
  const std::string args =
      "simulate schedules/1f1b.pipe -p 4 -m 8 --cost fwd=1e308,bwd=1e308 --trace " + path("t.json");
  expect_refused(run_pipevm(args), "the costs overflow", "text");
  expect_refused(run_pipevm(args + " --format json"), "the costs overflow", "json");
  EXPECT_FALSE(fs::exists(path("t.json")));
  // Large but finite costs are fine.
  const PipevmRun large =
      run_pipevm("simulate schedules/1f1b.pipe -p 4 -m 8 --cost fwd=1e300,bwd=1e300 --format json");
  EXPECT_EQ(large.status, 0) << large.err;
  EXPECT_EQ(large.out.find("null"), std::string::npos) << large.out;
  // (m + p - 1) (F + B) = 11 x 2e300
  EXPECT_NEAR(nlohmann::json::parse(large.out)["makespan"].get<double>() / 22e300, 1, 1e-12);
}

TEST_F(cli_bad_input, a_sweep_over_the_limit_is_refused_before_reading) {
  expect_refused(
      run_pipevm("check " + dir_.string() + " --stages 1..32767 --micro-batches 1..1073741824"),
      "has 35183298347008 configurations, over the limit of 100000: narrow the "
      "ranges or raise the limit with --max-configurations",
      "huge sweep");
  const std::string sweep = "check schedules/gpipe.pipe --stages 1..3 --micro-batches 1..4 --dp 1";
  expect_refused(run_pipevm(sweep + " --max-configurations 11"), "has 12 configurations",
                 "12 > 11");
  const PipevmRun raised = run_pipevm(sweep + " --max-configurations 12 --format json");
  EXPECT_EQ(raised.status, 0) << raised.err;
  EXPECT_EQ(nlohmann::json::parse(raised.out)["files"][0]["configurations"]["checked"], 12);
}

TEST_F(cli_bad_input, text_results_come_out_file_by_file) {
  // A file declaring a million configurations after one that declares a few
  // hundred, stopped after 5 seconds: the first file's summary is out.
  std::ifstream in(std::string(PIPEVM_SOURCE_DIR) + "/schedules/1f1b.pipe");
  std::ostringstream text;
  text << in.rdbuf();
  std::string big = text.str();
  big.replace(big.find("check stages"),
              big.find('\n', big.find("check stages")) - big.find("check stages"),
              "check stages 2..1001 micro_batches 1..1000");
  std::ofstream(path("big.pipe")) << big;
  const PipevmRun run = run_pipevm(
      "check schedules/gpipe.pipe " + path("big.pipe") + " --max-configurations 1000000", 5);
  EXPECT_EQ(run.status, 124) << "the sweep should still run after 5 s";
  EXPECT_EQ(run.out.rfind("schedules/gpipe.pipe: ok for 512 configurations", 0), 0u) << run.out;
}

TEST_F(cli_bad_input, streamed_sweeps_stay_one_json_document) {
  const std::string findings =
      "check tests/check/corpus/buffering_1f1b_two_stages.pipe -p 2 -m 1..3 ";
  const PipevmRun json = run_pipevm(findings + "--format json");
  EXPECT_EQ(json.status, 1);
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["files"].size(), 1u);
  EXPECT_EQ(j["files"][0]["configurations"]["checked"], 3);
  const PipevmRun sarif = run_pipevm(findings + "--format sarif");
  EXPECT_EQ(sarif.status, 1);
  const auto s = nlohmann::json::parse(sarif.out);
  EXPECT_EQ(s["version"], "2.1.0");
  const auto& run = s["runs"][0];
  ASSERT_GE(run["results"].size(), 2u);
  for (const auto& result : run["results"]) {
    const auto& rule = run["tool"]["driver"]["rules"][result["ruleIndex"].get<std::size_t>()];
    EXPECT_EQ(rule["id"], result["ruleId"]);
  }
}

}  // namespace
