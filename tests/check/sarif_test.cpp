// `pipevm check --format sarif` as GitHub code scanning reads it: the
// fields GitHub needs (rule help, fingerprints, relative percent-encoded
// URIs under %SRCROOT%, properties) and, where Microsoft's validator is
// installed (`npm install -g @microsoft/sarif-multitool`, see .ci/run), zero
// errors from `sarif-multitool validate --rule-kind "Gh;Sarif"` on a
// deadlock, a multi-file run and a parse error. Without the validator those
// tests skip; nothing is downloaded here.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_pipevm.hpp"

namespace {

namespace fs = std::filesystem;
using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;

const char* const kDeadlock = "check tests/check/corpus/deadlock_receive_first.pipe -p 2 -m 1";
const char* const kMultiFile =
    "check schedules/gpipe.pipe tests/check/corpus/buffering_1f1b_blocking.pipe "
    "tests/check/lint/1f1b_no_waitall.pipe -p 2..4 -m 4..8";
const char* const kParseError = "check tests/check/lint/three_syntax_errors.pipe";

nlohmann::json sarif_of(const std::string& command) {
  const PipevmRun run = run_pipevm(command + " --format sarif");
  EXPECT_EQ(run.status, 1) << command << "\n" << run.err;
  return nlohmann::json::parse(run.out);
}

TEST(sarif, rules_carry_what_github_shows) {
  const auto log = sarif_of(kDeadlock);
  const auto& driver = log["runs"][0]["tool"]["driver"];
  EXPECT_TRUE(driver.contains("informationUri"));
  for (const auto& rule : driver["rules"]) {
    EXPECT_TRUE(rule.contains("fullDescription")) << rule.dump();
    EXPECT_TRUE(rule["help"].contains("markdown")) << rule.dump();
    const std::string uri = rule["helpUri"];
    EXPECT_NE(uri.find("docs/checker.md#pv"), std::string::npos) << uri;
  }
  const auto& result = log["runs"][0]["results"][0];
  EXPECT_EQ(result["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"],
            "%SRCROOT%");
  EXPECT_TRUE(result["partialFingerprints"].contains("pipevmFinding/v1"));
  EXPECT_EQ(result["properties"]["configuration"]["stages"], 2);
  EXPECT_TRUE(result["properties"].contains("rank"));
  // The message links each related location: "[rank 1, line 14](1)".
  const std::string text = result["message"]["text"];
  ASSERT_TRUE(result.contains("relatedLocations"));
  for (const auto& related : result["relatedLocations"]) {
    const std::string link = "](" + std::to_string(related["id"].get<int>()) + ")";
    EXPECT_NE(text.find(link), std::string::npos) << text;
  }
}

TEST(sarif, short_descriptions_name_the_rule_not_the_class) {
  std::set<std::string> seen;
  const nlohmann::json log = sarif_of(kMultiFile);  // a range-for would not keep it alive
  for (const auto& rule : log["runs"][0]["tool"]["driver"]["rules"]) {
    EXPECT_TRUE(seen.insert(rule["shortDescription"]["text"]).second) << rule.dump();
  }
}

TEST(sarif, paths_are_percent_encoded_uris) {
  const fs::path dir = fs::temp_directory_path() / ("pipevm sarif #" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(PIPEVM_SOURCE_DIR) / "tests/check/corpus/deadlock_receive_first.pipe",
                dir / "a b#c.pipe", fs::copy_options::overwrite_existing);
  const auto log = sarif_of("check '" + (dir / "a b#c.pipe").string() + "' -p 2 -m 1");
  fs::remove_all(dir);
  const std::string uri =
      log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
  EXPECT_EQ(uri.rfind("file:///", 0), 0u) << uri;
  EXPECT_NE(uri.find("a%20b%23c.pipe"), std::string::npos) << uri;
  EXPECT_EQ(uri.find(' '), std::string::npos) << uri;
}

// The validator's own findings at level error, as "RULE: message" lines.
std::string validator_errors(const std::string& command, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pipevm-sarif-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path input = dir / (name + ".sarif");
  const fs::path output = dir / (name + ".validation.sarif");
  std::ofstream(input) << sarif_of(command).dump(1);
  // npm's wrapper hands the words to a shell again: the list keeps its quotes.
  const std::string validate =
      "sarif-multitool validate --rule-kind '\"Gh;Sarif\"' --log ForceOverwrite --output '" +
      output.string() + "' '" + input.string() + "' >/dev/null 2>&1";
  const int status = std::system(validate.c_str());
  std::ifstream in(output);
  if (!in) return "the validator wrote no log (status " + std::to_string(status) + ")";
  const auto log = nlohmann::json::parse(in);
  std::string errors;
  for (const auto& run : log["runs"]) {
    for (const auto& result : run.value("results", nlohmann::json::array())) {
      if (result.value("level", "warning") != "error") continue;
      errors += result.value("ruleId", "?") + ": " + result["message"].dump() + "\n";
    }
  }
  fs::remove_all(dir);
  return errors;
}

bool have_validator() {
  return std::system("command -v sarif-multitool >/dev/null 2>&1") == 0;
}

TEST(sarif, github_rules_find_no_error) {
  if (!have_validator())
    GTEST_SKIP() << "sarif-multitool is not installed (npm @microsoft/sarif-multitool)";
  EXPECT_EQ(validator_errors(kDeadlock, "deadlock"), "");
  EXPECT_EQ(validator_errors(kMultiFile, "multi-file"), "");
  EXPECT_EQ(validator_errors(kParseError, "parse-error"), "");
}

// Every diagnostic kind has its rule text (cli/check_rules.def), and
// docs/checker.md a section at the anchor the rule's helpUri names.
TEST(sarif, every_kind_has_a_rule_and_a_documented_anchor) {
  const auto slurp = [](const std::string& path) {
    std::ifstream in(std::string(PIPEVM_SOURCE_DIR) + "/" + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string kinds = slurp("core/diagnostic_kinds.def");
  const std::string rules = slurp("cli/check_rules.def");
  const std::string docs = slurp("docs/checker.md");
  const std::regex row(R"(\nPIPEVM_DIAGNOSTIC\((\w+), (\d+), \w+\))");
  int rows = 0;
  for (std::sregex_iterator it(kinds.begin(), kinds.end(), row), end; it != end; ++it, ++rows) {
    const std::string name = (*it)[1];
    const std::string number = (*it)[2];
    EXPECT_NE(rules.find("\nPIPEVM_RULE(" + name + ", "), std::string::npos) << name;
    EXPECT_NE(docs.find("\n### PV" + number + "\n"), std::string::npos) << "PV" << number;
  }
  EXPECT_GT(rows, 40);
}

}  // namespace
