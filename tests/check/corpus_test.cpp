// The golden corpus: every tests/check/corpus/*.pipe declares the
// configuration it is checked with and the diagnostics it must produce, in
// order, as comments:
//   # config: stages=2 micro_batches=4 dp=1 chunks=1
//   # expect: PV2001 @ 12:5        (one line per diagnostic, at the end of
//                                   the file; `none` if clean)
// tests/check/update_expectations.py --update rewrites the expect lines from
// what pipevm check reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "check.hpp"
#include "compile.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

struct Case {
  fs::path path;
  Config config;
  std::vector<std::string> expected;
};

Case read_case(const fs::path& path) {
  Case c;
  c.path = path;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# config:", 0) == 0) {
      std::istringstream words(line.substr(9));
      std::string word;
      while (words >> word) {
        const auto eq = word.find('=');
        const std::string key = word.substr(0, eq);
        const int value = std::stoi(word.substr(eq + 1));
        if (key == "stages") c.config.stages = value;
        if (key == "micro_batches") c.config.micro_batches = value;
        if (key == "dp") c.config.dp = value;
        if (key == "chunks") c.config.chunks = value;
      }
    } else if (line.rfind("# expect:", 0) == 0) {
      std::string what = line.substr(9);
      what.erase(0, what.find_first_not_of(' '));
      if (what != "none") c.expected.push_back(what);
    }
  }
  return c;
}

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(PIPEVM_SOURCE_DIR) / "tests/check/corpus")) {
    if (entry.path().extension() == ".pipe") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string describe(const Diagnostic& d) {
  std::string out = code(d.kind);
  if (d.location.file) {
    const LineColumn p = d.location.file->position(d.location.range.begin);
    out += " @ " + std::to_string(p.line) + ":" + std::to_string(p.column);
  }
  return out;
}

// What `pipevm check` reports for the case: expansion's diagnostics, then the checker's.
std::vector<Diagnostic> run_case(const Case& c) {
  Diagnostics diagnostics;
  auto file = read_source(c.path.string(), diagnostics);
  if (!file) return diagnostics.all();
  const std::optional<Program> program = compile(file, c.config, diagnostics);
  std::vector<Diagnostic> all = diagnostics.all();
  if (program) {
    CheckResult result = check(*program);
    all.insert(all.end(), result.diagnostics.begin(), result.diagnostics.end());
  }
  return all;
}

TEST(check_corpus, every_file_produces_its_expected_diagnostics) {
  const auto files = corpus_files();
  ASSERT_FALSE(files.empty());
  for (const fs::path& path : files) {
    const Case c = read_case(path);
    std::vector<std::string> actual;
    for (const Diagnostic& d : run_case(c)) actual.push_back(describe(d));
    EXPECT_EQ(actual, c.expected) << path.filename().string()
                                  << " (update with tests/check/update_expectations.py --update)";
  }
}

TEST(check_corpus, covers_every_class_with_at_least_three_faulty_programs) {
  std::map<std::string, std::set<std::string>> files_per_class;
  std::size_t faulty = 0, clean = 0;
  for (const fs::path& path : corpus_files()) {
    const Case c = read_case(path);
    if (c.expected.empty()) {
      ++clean;
      continue;
    }
    ++faulty;
    for (const Diagnostic& d : run_case(c)) {
      files_per_class[std::string(name(class_of(d.kind)))].insert(path.filename().string());
    }
  }
  EXPECT_GE(faulty, 45u);
  EXPECT_GE(clean, 3u);
  for (const char* cls : {"require", "deadlock", "buffering-hazard", "unmatched", "wrong-peer",
                          "size-mismatch", "collective-order", "collective-missing",
                          "nonblocking-misuse", "dataflow"}) {
    EXPECT_GE(files_per_class[cls].size(), 3u) << cls;
  }
}

}  // namespace
}  // namespace pipevm
