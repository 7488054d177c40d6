// Golden diagnostics: every tests/dsl/golden/*.pipe must fail with exactly
// the errors its `# expect: PV1003 @ 4:9` lines list, in order. The
// configuration comes from a `# config: stages=2 micro_batches=3` line.
// tests/dsl/update_golden.py --update rewrites the expect lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "support.hpp"

namespace pipevm {
namespace {

struct Golden {
  Config config = test::config(4, 8);
  ExpandOptions options;
  std::vector<std::string> expected;
};

// Reads `# expect: PV1003 @ 4:9` and `# config: key=value ...` lines.
Golden read_expectations(const SourceFile& file) {
  Golden g;
  const std::string expect = "# expect: ";
  const std::string config = "# config:";
  std::istringstream lines(file.text());
  std::string line;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.rfind(expect, 0) == 0) g.expected.push_back(line.substr(expect.size()));
    if (line.rfind(config, 0) != 0) continue;
    std::istringstream items(line.substr(config.size()));
    std::string item;
    while (items >> item) {
      const auto eq = item.find('=');
      const std::string key = item.substr(0, eq);
      const long long value = std::stoll(item.substr(eq + 1));
      if (key == "stages") g.config.stages = static_cast<int>(value);
      if (key == "micro_batches") g.config.micro_batches = static_cast<int>(value);
      if (key == "chunks") g.config.chunks = static_cast<int>(value);
      if (key == "dp") g.config.dp = static_cast<int>(value);
      if (key == "max_instructions") g.options.max_instructions = static_cast<std::uint64_t>(value);
    }
  }
  return g;
}

TEST(dsl, golden_diagnostics) {
  const std::filesystem::path folder =
      std::filesystem::path(PIPEVM_SOURCE_DIR) / "tests/dsl/golden";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".pipe") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 25u);
  std::set<std::string> codes_seen;
  for (const auto& path : files) {
    Diagnostics d;
    const auto file = read_source(path.string(), d);
    ASSERT_TRUE(file) << path;
    const Golden g = read_expectations(*file);
    EXPECT_FALSE(g.expected.empty()) << path.filename() << " has no # expect: line";
    EXPECT_FALSE(compile(file, g.config, d, g.options)) << path.filename() << " expanded";
    std::vector<std::string> actual;
    for (const Diagnostic& x : d.all()) {
      if (x.severity != Severity::error) continue;
      const LineColumn at = file->position(x.location.range.begin);
      actual.push_back(code(x.kind) + " @ " + std::to_string(at.line) + ":" +
                       std::to_string(at.column));
      codes_seen.insert(code(x.kind));
    }
    EXPECT_EQ(actual, g.expected) << path.filename()
                                  << " (tests/dsl/update_golden.py --update rewrites expectations)";
  }
  // Every front-end error has at least one golden file.
  for (const char* wanted :
       {"PV1001", "PV1002", "PV1003", "PV1004", "PV1005", "PV1006", "PV1007", "PV1008", "PV1009",
        "PV1010", "PV1011", "PV1012", "PV1013", "PV1014", "PV1100"}) {
    EXPECT_TRUE(codes_seen.count(wanted)) << wanted << " has no golden file";
  }
}

}  // namespace
}  // namespace pipevm
