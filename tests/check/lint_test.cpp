// `pipevm check` as a lint tool in a pipeline (docs/checker.md): many files
// and standard input in one run with one exit status and one document,
// declared configurations, folded findings, parse recovery, and the
// machine-readable error of exit 2. Runs the built executable.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_pipevm.hpp"

namespace {

namespace fs = std::filesystem;
using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;
using pipevm::testing::lines;

std::size_t count(const std::string& text, const std::string& word) {
  std::size_t n = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// A file in a fresh directory under the system's temporary one.
class lint_files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pipevm-lint-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

const char* const kBlocking1f1b = "tests/check/corpus/buffering_1f1b_blocking.pipe";

TEST(many_files, shipped_schedules_pass_with_no_flags) {
  const PipevmRun run = run_pipevm("check schedules/*.pipe", 120);
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  std::size_t shipped = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(PIPEVM_SOURCE_DIR) / "schedules")) {
    if (entry.path().extension() == ".pipe") ++shipped;
  }
  EXPECT_GE(shipped, 18u);
  EXPECT_EQ(count(run.out, ": ok for "), shipped) << run.out;
  EXPECT_EQ(run.err, "");
}

TEST(many_files, one_exit_status_and_one_json_document) {
  const PipevmRun run = run_pipevm(std::string("check schedules/gpipe.pipe ") + kBlocking1f1b +
                                   " -p 4 -m 8 --format json");
  EXPECT_EQ(run.status, 1);
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["files"][0]["verdict"], "ok");
  EXPECT_EQ(j["files"][1]["verdict"], "error");
  EXPECT_EQ(j["files"][1]["diagnostics"][0]["code"], "PV2002");
  EXPECT_EQ(j["version"], 2);
}

TEST(many_files, an_unreadable_file_makes_the_run_exit_2_after_the_others) {
  const PipevmRun run = run_pipevm("check schedules/gpipe.pipe no/such.pipe -p 2 -m 2 --dp 1");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.out.find("schedules/gpipe.pipe: ok for 1 configuration"), std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("cannot read 'no/such.pipe'"), std::string::npos) << run.err;
}

TEST(many_files, standard_input_is_a_dash) {
  const PipevmRun run = run_pipevm(std::string("check - --stdin-filename piped.pipe -p 4 -m 8 "
                                               "--format json < ") +
                                   kBlocking1f1b);
  EXPECT_EQ(run.status, 1);
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["files"][0]["file"], "piped.pipe");
  EXPECT_EQ(j["files"][0]["diagnostics"][0]["file"], "piped.pipe");
}

TEST(declared, flags_override_one_dimension_of_the_declaration) {
  // gpipe.pipe declares micro_batches 1..32 and dp 1..2: 2 * 32 * 2 = 128 at one stage count.
  const PipevmRun run = run_pipevm("check schedules/gpipe.pipe --stages 3");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("ok for 64 configurations"), std::string::npos) << run.out;
}

TEST(declared, no_declaration_and_no_flags_is_a_usage_error) {
  const PipevmRun run = run_pipevm(std::string("check ") + kBlocking1f1b);
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("give --stages and --micro-batches"), std::string::npos) << run.err;
}

TEST(declared, a_sweep_that_skips_everything_fails) {
  const PipevmRun run = run_pipevm(
      "check schedules/dualpipe.pipe --stages 1..16 --micro-batches 1..64 --chunks 1 "
      "--skip-unsupported");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("[PV1101]"), std::string::npos) << run.out;
}

TEST_F(lint_files, a_declared_sweep_checks_its_configurations) {
  const std::string path =
      write("declared.pipe",
            "schedule declared\ncheck stages 2..3 micro_batches 4, dp 1..2\n"
            "check stages 1 micro_batches 4\n" +
                std::string("ZeroGrad\nfor i in 0 .. micro_batches { "
                            "if stage == 0 { LoadInput i } else { Recv act i }\n"
                            "Fwd i\nif stage < stages - 1 { Send act i } else "
                            "{ LoadTarget i }\n}\n"));
  const PipevmRun run = run_pipevm("check " + path + " --format json");
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["files"][0]["configurations"]["checked"], 5) << run.out;
}

TEST_F(lint_files, a_flat_program_implies_its_stage_count) {
  const PipevmRun expanded = run_pipevm("expand schedules/gpipe.pipe -p 3 -m 2");
  ASSERT_EQ(expanded.status, 0);
  const std::string flat = write("flat.pipe", expanded.out);
  EXPECT_EQ(run_pipevm("check " + flat).status, 0);
  // Without its `check` line the stage count comes from the stage blocks.
  std::string undeclared = expanded.out;
  undeclared.erase(
      undeclared.find("check stages"),
      undeclared.find('\n', undeclared.find("check stages")) - undeclared.find("check stages"));
  const std::string bare = write("bare.pipe", undeclared);
  const PipevmRun run = run_pipevm("check " + bare + " -m 2");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  const PipevmRun fewer = run_pipevm("check " + bare + " -m 2 --stages 1 --format gcc");
  EXPECT_EQ(fewer.status, 1);
  EXPECT_NE(fewer.out.find("[PV1016]"), std::string::npos) << fewer.out;
}

TEST(folding, the_blocking_1f1b_sweep_fits_in_200_lines) {
  const PipevmRun run =
      run_pipevm(std::string("check ") + kBlocking1f1b + " --stages 2..8 --micro-batches 2..16");
  EXPECT_EQ(run.status, 1);
  EXPECT_LE(lines(run.out), 200u) << run.out;
  EXPECT_NE(run.out.find("more folded into"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("of 105 configurations"), std::string::npos) << run.out;
}

TEST(folding, one_statement_on_many_ranks_is_one_finding) {
  const PipevmRun run =
      run_pipevm("check tests/check/lint/1f1b_no_waitall.pipe -p 4 -m 8 --format gcc");
  EXPECT_EQ(run.status, 1);
  EXPECT_LE(count(run.out, ": error: "), 5u) << run.out;
  EXPECT_NE(run.out.find("on ranks 0-2"), std::string::npos) << run.out;
  // Nothing is dropped without a count.
  EXPECT_NE(run.out.find("more folded into this one"), std::string::npos) << run.out;
  const auto j = nlohmann::json::parse(
      run_pipevm("check tests/check/lint/1f1b_no_waitall.pipe -p 4 -m 8 --format json").out);
  EXPECT_GT(j["files"][0]["folded"].get<int>(), 0);
}

TEST(parse_recovery, every_syntax_error_of_a_file_is_reported) {
  const PipevmRun run = run_pipevm("check tests/check/lint/three_syntax_errors.pipe --format gcc");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(count(run.out, "[PV1001]"), 3u) << run.out;
  EXPECT_NE(run.out.find("three_syntax_errors.pipe:6:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("three_syntax_errors.pipe:8:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("three_syntax_errors.pipe:10:"), std::string::npos) << run.out;
}

TEST(exit_2, json_and_sarif_say_why_on_stdout) {
  const PipevmRun json = run_pipevm("check schedules/gpipe.pipe --stages 0 --format json");
  EXPECT_EQ(json.status, 2);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_FALSE(j["errors"].empty());
  const PipevmRun sarif = run_pipevm("check no/such.pipe --format sarif -p 2 -m 2");
  EXPECT_EQ(sarif.status, 2);
  const auto s = nlohmann::json::parse(sarif.out);
  EXPECT_EQ(s["runs"][0]["invocations"][0]["executionSuccessful"], false);
}

TEST_F(lint_files, columns_count_characters) {
  const std::string path = write("utf8.pipe", "let x = 1\nrequire 1 == 1 : \"\xe2\x80\x94\" x\n");
  const PipevmRun run = run_pipevm("check " + path + " -p 1 -m 1 --format gcc");
  EXPECT_EQ(run.status, 1);
  // The dash is one character (three bytes): `x` is character 22, byte 24.
  EXPECT_NE(run.out.find("utf8.pipe:2:22: error"), std::string::npos) << run.out;
}

}  // namespace
