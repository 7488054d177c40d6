// The golden harness for what users see of a schedule's diagnostics: every
// tests/dsl/golden/*.pipe (programs the front end rejects) and
// tests/check/corpus/*.pipe (programs the checker judges) carries, at its
// end, the whole text `pipevm check` prints for it (message, source excerpt
// and caret, every note, a printed wait-for cycle edge by edge):
//
//   # config: stages=2 micro_batches=4 [chunks=1] [dp=1] [max_instructions=N]
//   ...the schedule...
//   # expect:
//   # | deadlock_receive_first.pipe:7:5: error: deadlock under any buffering: ...
//   # |  7 |     Recv grad 0
//   # |    |     ^~~~~~~~~~~
//
// or `# expect: none`. Each file is one test (dsl.golden.NAME,
// check.corpus.NAME). `golden_tests --update` rewrites the expectations
// from what pipevm reports; review the diff. The configuration defaults to
// stages=4 micro_batches=8.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "check.hpp"
#include "compile.hpp"
#include "register_test.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

const std::string kExpect = "# expect:";
const std::string kQuoted = "# |";

struct Golden {
  fs::path path;
  std::string family;  // the ctest family: "dsl.golden" or "check.corpus"
};

std::vector<Golden> golden_files() {
  std::vector<Golden> files;
  const fs::path root(PIPEVM_SOURCE_DIR);
  for (const auto& [folder, family] : {std::pair{"tests/dsl/golden", "dsl.golden"},
                                       std::pair{"tests/check/corpus", "check.corpus"}}) {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(root / folder)) {
      if (entry.path().extension() == ".pipe") paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) files.push_back({p, family});
  }
  return files;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Trailing blanks are not pinned: an editor may drop them (an excerpt of an
// empty line ends in one).
std::string trimmed(std::string line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

struct Case {
  Config config{4, 8, 1, 1};
  ExpandOptions options;
  std::vector<std::string> program;   // the file without its expectations
  std::vector<std::string> expected;  // the text pinned in it
};

Case read_case(const fs::path& path) {
  Case c;
  bool expecting = false;
  for (const std::string& line : lines_of(slurp(path))) {
    if (line.rfind(kExpect, 0) == 0) {
      expecting = true;
      continue;
    }
    if (expecting && line.rfind(kQuoted, 0) == 0) {
      c.expected.push_back(trimmed(line.size() > kQuoted.size() ? line.substr(kQuoted.size() + 1) : ""));
      continue;
    }
    c.program.push_back(line);
    if (line.rfind("# config:", 0) != 0) continue;
    std::istringstream items(line.substr(9));
    std::string item;
    while (items >> item) {
      const auto eq = item.find('=');
      const std::string key = item.substr(0, eq);
      const long long value = std::stoll(item.substr(eq + 1));
      if (key == "stages") c.config.stages = static_cast<int>(value);
      if (key == "micro_batches") c.config.micro_batches = static_cast<int>(value);
      if (key == "chunks") c.config.chunks = static_cast<int>(value);
      if (key == "dp") c.config.dp = static_cast<int>(value);
      if (key == "max_instructions") c.options.max_instructions = static_cast<std::uint64_t>(value);
    }
  }
  return c;
}

// What `pipevm check FILE` reports for the case, diagnostic by diagnostic:
// the front end's, then (when the program expands) the checker's.
std::vector<Diagnostic> diagnose(const fs::path& path, const Case& c) {
  Diagnostics diagnostics;
  auto file = std::make_shared<const SourceFile>(path.filename().string(), slurp(path));
  const std::optional<Program> program = compile(file, c.config, diagnostics, c.options);
  std::vector<Diagnostic> all = diagnostics.all();
  if (program) {
    const CheckResult result = check(*program);
    all.insert(all.end(), result.diagnostics.begin(), result.diagnostics.end());
  }
  return all;
}

std::vector<std::string> text_of(const std::vector<Diagnostic>& diagnostics) {
  std::ostringstream out;
  for (const Diagnostic& d : diagnostics) print_text(out, d);
  std::vector<std::string> lines = lines_of(out.str());
  for (std::string& line : lines) line = trimmed(std::move(line));
  return lines;
}

// The file as it should be: the program, then the text it reports.
std::string expected_file(const fs::path& path) {
  const Case c = read_case(path);
  const std::vector<std::string> actual = text_of(diagnose(path, c));
  std::vector<std::string> program = c.program;
  while (!program.empty() && program.back().empty()) program.pop_back();
  std::string text;
  for (const std::string& line : program) text += line + "\n";
  if (actual.empty()) return text + kExpect + " none\n";
  text += kExpect + "\n";
  for (const std::string& line : actual) {
    text += line.empty() ? kQuoted + "\n" : kQuoted + " " + line + "\n";
  }
  return text;
}

// Rewrites the file's expectations; true when they changed. An error at the
// end of the file moves with the lines written after it, so this repeats
// until the file stands still (twice at most).
bool update(const fs::path& path) {
  bool changed = false;
  for (int round = 0; round < 3; ++round) {
    const std::string wanted = expected_file(path);
    if (wanted == slurp(path)) return changed;
    std::ofstream(path, std::ios::binary) << wanted;
    changed = true;
  }
  return changed;
}

// One golden file: the text it pins is the text pipevm reports.
void expect_golden(const Golden& g) {
  const Case c = read_case(g.path);
  ASSERT_NE(slurp(g.path).find(kExpect), std::string::npos)
      << g.path.filename() << " has no `# expect:` line";
  if (g.family == "dsl.golden") {
    EXPECT_FALSE(c.expected.empty()) << g.path.filename() << " must fail in the front end";
  }
  EXPECT_EQ(text_of(diagnose(g.path, c)), c.expected)
      << g.path.filename() << ": rewrite its expectations with `golden_tests --update`";
}



std::string stem_of(const Golden& g) { return g.path.stem().string(); }

// The codes each family's files report, over all files.
std::map<std::string, std::set<std::string>> files_per_code(const std::string& family) {
  std::map<std::string, std::set<std::string>> out;
  for (const Golden& g : golden_files()) {
    if (g.family != family) continue;
    for (const Diagnostic& d : diagnose(g.path, read_case(g.path))) {
      out[code(d.kind)].insert(stem_of(g));
      out[std::string(name(class_of(d.kind)))].insert(stem_of(g));
    }
  }
  return out;
}

// Every front-end error has at least one golden file.
void every_front_end_code_has_a_file() {
  const auto seen = files_per_code("dsl.golden");
  for (const char* wanted :
       {"PV1001", "PV1002", "PV1003", "PV1004", "PV1005", "PV1006", "PV1007", "PV1008", "PV1009",
        "PV1010", "PV1011", "PV1012", "PV1013", "PV1014", "PV1100"}) {
    EXPECT_TRUE(seen.count(wanted)) << wanted << " has no golden file";
  }
}

// Every checker class has at least three faulty programs, and there are
// clean ones too.
void every_class_has_three_faulty_programs() {
  const auto seen = files_per_code("check.corpus");
  std::size_t faulty = 0, clean = 0;
  for (const Golden& g : golden_files()) {
    if (g.family != "check.corpus") continue;
    (read_case(g.path).expected.empty() ? clean : faulty) += 1;
  }
  EXPECT_GE(faulty, 45u);
  EXPECT_GE(clean, 3u);
  for (const char* cls : {"require", "deadlock", "buffering-hazard", "unmatched", "wrong-peer",
                          "size-mismatch", "collective-order", "collective-missing",
                          "nonblocking-misuse", "dataflow"}) {
    const auto found = seen.find(cls);
    EXPECT_GE(found == seen.end() ? 0u : found->second.size(), 3u) << cls;
  }
}

}  // namespace
}  // namespace pipevm

int main(int argc, char** argv) {
  using namespace pipevm;
  using test_support::register_test;
  if (argc == 2 && std::string(argv[1]) == "--update") {
    int changed = 0;
    for (const Golden& g : golden_files()) {
      if (update(g.path)) {
        std::cout << "rewrote " << g.path.string() << '\n';
        ++changed;
      }
    }
    std::cout << changed << " file(s) rewritten\n";
    return 0;
  }
  testing::InitGoogleTest(&argc, argv);
  // Suites carry their families, so that ctest -R '^check\.' selects the corpus.
  for (const Golden& g : golden_files()) {
    register_test(g.family, stem_of(g), [g] { expect_golden(g); });
  }
  register_test("dsl.golden_files", "cover_every_front_end_code", every_front_end_code_has_a_file);
  register_test("check.corpus_files", "cover_every_class", every_class_has_three_faulty_programs);
  return RUN_ALL_TESTS();
}
