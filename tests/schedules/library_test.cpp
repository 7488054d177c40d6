// The schedule library (schedules/*.pipe) against what its headers promise:
// the activation-memory peak the checker reports equals each header's
// formula on every stage of every configuration its `require` lines allow
// (for the V family's building blocks: on the stage that holds the most);
// every schedule passes the checker with two data-parallel replicas (the
// checker's own sweep, tests/check/schedules_test.cpp, covers one) and the
// interleaved one with 1..3 chunks; every file carries the header the
// library's conventions ask for and is listed in docs/schedules.md; and
// `pipevm check --format json` prints the same memory figures.
// Training equivalence is tests/schedules/mpi_equivalence.cpp (mpiexec).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "compile.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

const fs::path kSource(PIPEVM_SOURCE_DIR);

// p stages, m micro-batches, v chunks, stage s -> peak activations held.
using MemoryFormula = std::function<int(int p, int m, int v, int s)>;

struct Entry {
  const char* name;
  int chunks;  // per rank, as the schedule requires
  MemoryFormula memory;
  // The formula is the most any stage holds (the others may hold less),
  // not every stage's peak.
  bool largest_only = false;
};

// The library, with the memory formula each header states.
const std::vector<Entry>& library() {
  static const std::vector<Entry> entries = {
      {"naive", 1, [](int, int, int, int) { return 1; }},
      {"gpipe", 1, [](int, int m, int, int) { return m; }},
      {"1f1b", 1, [](int p, int m, int, int s) { return std::min(p - s, m); }},
      {"1f1b-nonblocking", 1, [](int p, int m, int, int s) { return std::min(p - s, m); }},
      {"interleaved-1f1b", 2,
       [](int p, int m, int v, int s) {
         // Megatron's all_warmup_microbatches: every forward first at m = p.
         if (m == p && v > 1) return v * m;
         return std::min(v * m, 2 * (p - s - 1) + (v - 1) * p + 1);
       }},
      {"zb-h1", 1, [](int p, int, int, int) { return p; }},
      {"zb-h2", 1, [](int p, int m, int, int) { return std::min(2 * p - 1, m); }},
      {"dualpipev", 2, [](int p, int, int, int) { return 2 * p + 1; }},
      {"dualpipe", 2, [](int p, int, int, int) { return p + 1; }},
      {"inference", 1, [](int, int m, int, int) { return m; }},
      {"dp", 1, [](int, int, int, int) { return 1; }},
      {"gpipe-allreduce", 1, [](int, int m, int, int) { return m; }},
      {"zb-v", 2, [](int p, int, int, int) { return 2 * p; }},
      {"v-half", 2, [](int p, int m, int, int) { return 2 * std::min(m, (p + 2) / 2); }, true},
      {"v-min", 2, [](int p, int m, int, int) { return 2 * std::min(m, (p + 4) / 3); }, true},
      {"interleaved-zb", 2,
       [](int p, int m, int v, int s) {
         return std::min(v * m, 2 * (p - s - 1) + (v - 1) * p + 1 + s);
       }},
      {"looped-bfs", 2, [](int, int m, int v, int) { return v * m; }},
      {"fsdp", 1, [](int, int, int, int) { return 1; }},
      {"wsdp", 1, [](int, int, int, int) { return 1; }},
      {"pp-fsdp", 1, [](int, int m, int, int) { return m; }},
      {"gossip", 1, [](int, int m, int, int) { return m; }},
      // One micro-batch's activations on the device at a time (the rest is
      // inputs kept, or in host memory).
      {"1f1b-recompute", 1, [](int, int, int, int) { return 1; }},
      {"1f1b-offload", 1, [](int, int, int, int) { return 1; }},
  };
  return entries;
}

fs::path path_of(const std::string& name) { return kSource / "schedules" / (name + ".pipe"); }

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The program, or nothing when a `require` excludes the configuration; any
// other failure to expand fails the test.
std::optional<Program> expand_if_allowed(const Schedule& schedule, const Config& c,
                                         const std::string& what) {
  Diagnostics diagnostics;
  std::optional<Program> program = expand(schedule, c, diagnostics);
  if (!program) {
    const bool excluded = std::all_of(diagnostics.all().begin(), diagnostics.all().end(),
                                      [](const Diagnostic& d) {
                                        return d.kind == DiagnosticKind::RequireFailed;
                                      });
    EXPECT_TRUE(excluded && !diagnostics.empty()) << what << ": expansion failed";
  }
  return program;
}

std::shared_ptr<const Schedule> parse_file(const fs::path& path) {
  Diagnostics diagnostics;
  const auto file = read_source(path.string(), diagnostics);
  if (!file) return nullptr;
  return parse(file, diagnostics);
}

std::string describe(const std::string& name, const Config& c) {
  return name + " P=" + std::to_string(c.stages) + " M=" + std::to_string(c.micro_batches) +
         " V=" + std::to_string(c.chunks) + " D=" + std::to_string(c.dp);
}

std::string first_message(const CheckResult& result) {
  return result.diagnostics.empty() ? std::string("(suppressed)")
                                    : result.diagnostics.front().message;
}

// Every stage's peak (or the largest one's), for stages 1..8 x
// micro-batches 1..24.
void expect_memory_formula(const Entry& entry) {
  const auto schedule = parse_file(path_of(entry.name));
  ASSERT_TRUE(schedule) << entry.name;
  int compared = 0;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 24; ++m) {
      const Config c = Config{p, m, entry.chunks};
      const std::string what = describe(entry.name, c);
      const auto program = expand_if_allowed(*schedule, c, what);
      if (!program) continue;
      const CheckResult result = check(*program);
      ASSERT_TRUE(result.ok()) << what << ": " << first_message(result);
      ASSERT_EQ(result.memory.size(), static_cast<std::size_t>(p)) << what;
      int largest = 0;
      for (int s = 0; s < p; ++s) {
        const int peak = result.memory[static_cast<std::size_t>(s)].peak_activations;
        const int formula = entry.memory(p, m, entry.chunks, s);
        largest = std::max(largest, peak);
        if (entry.largest_only) {
          EXPECT_LE(peak, formula) << what << " stage " << s;
        } else {
          EXPECT_EQ(peak, formula) << what << " stage " << s;
        }
      }
      if (entry.largest_only) {
        EXPECT_EQ(largest, entry.memory(p, m, entry.chunks, 0)) << what;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0) << entry.name << ": no configuration satisfies its requires";
}

const Entry& entry(const std::string& name) {
  const auto& all = library();
  const auto it = std::find_if(all.begin(), all.end(), [&](const Entry& e) { return name == e.name; });
  if (it == all.end()) throw std::invalid_argument("no schedule " + name);
  return *it;
}

TEST(library, memory_naive) { expect_memory_formula(entry("naive")); }
TEST(library, memory_gpipe) { expect_memory_formula(entry("gpipe")); }
TEST(library, memory_1f1b) { expect_memory_formula(entry("1f1b")); }
TEST(library, memory_1f1b_nonblocking) { expect_memory_formula(entry("1f1b-nonblocking")); }
TEST(library, memory_interleaved_1f1b) { expect_memory_formula(entry("interleaved-1f1b")); }
TEST(library, memory_zb_h1) { expect_memory_formula(entry("zb-h1")); }
TEST(library, memory_zb_h2) { expect_memory_formula(entry("zb-h2")); }
TEST(library, memory_dualpipev) { expect_memory_formula(entry("dualpipev")); }
TEST(library, memory_dualpipe) { expect_memory_formula(entry("dualpipe")); }
TEST(library, memory_gossip) { expect_memory_formula(entry("gossip")); }
TEST(library, memory_inference) { expect_memory_formula(entry("inference")); }
TEST(library, memory_dp) { expect_memory_formula(entry("dp")); }
TEST(library, memory_gpipe_allreduce) { expect_memory_formula(entry("gpipe-allreduce")); }
TEST(library, memory_zb_v) { expect_memory_formula(entry("zb-v")); }
TEST(library, memory_v_half) { expect_memory_formula(entry("v-half")); }
TEST(library, memory_v_min) { expect_memory_formula(entry("v-min")); }
TEST(library, memory_interleaved_zb) { expect_memory_formula(entry("interleaved-zb")); }
TEST(library, memory_looped_bfs) { expect_memory_formula(entry("looped-bfs")); }
TEST(library, memory_fsdp) { expect_memory_formula(entry("fsdp")); }
TEST(library, memory_wsdp) { expect_memory_formula(entry("wsdp")); }
TEST(library, memory_pp_fsdp) { expect_memory_formula(entry("pp-fsdp")); }

TEST(library, memory_1f1b_recompute) { expect_memory_formula(entry("1f1b-recompute")); }
TEST(library, memory_1f1b_offload) { expect_memory_formula(entry("1f1b-offload")); }

// The selective forms of 1f1b-recompute and 1f1b-offload: a copy of the
// file with its `let` changed, as the headers say. On the first k stages a
// stage holds one micro-batch's activations, on the others 1F1B's
// min(p-s, m); every other micro-batch: at most 1F1B's, at least one.
TEST(library, selective_memory_policies_pass_with_the_peaks_they_promise) {
  for (const auto& [name, prefix] : {std::pair{"1f1b-recompute", "recompute"},
                                     std::pair{"1f1b-offload", "offload"}}) {
    for (const bool by_stage : {true, false}) {
      const std::string let = std::string("let ") + prefix + (by_stage ? "_stages" : "_every");
      std::string text = slurp(path_of(name));
      const std::size_t at = text.find(let + " = ");
      ASSERT_NE(at, std::string::npos) << name << ": no `" << let << "`";
      const std::size_t end = text.find('\n', at);
      text.replace(at, end - at, let + " = 2");
      Diagnostics diagnostics;
      const auto schedule =
          parse(std::make_shared<const SourceFile>(std::string(name) + ".pipe", text), diagnostics);
      ASSERT_TRUE(schedule) << name;
      for (int dp = 1; dp <= 2; ++dp) {
        for (int p = 1; p <= 6; ++p) {
          for (int m = p; m <= 12; ++m) {
            const Config c = Config{p, m, 1, dp};
            const std::string what = describe(name, c) + " " + let + " = 2";
            const auto program = expand_if_allowed(*schedule, c, what);
            ASSERT_TRUE(program) << what;
            const CheckResult result = check(*program);
            ASSERT_TRUE(result.ok()) << what << ": " << first_message(result);
            for (int s = 0; s < p; ++s) {
              const int peak = result.memory[static_cast<std::size_t>(s)].peak_activations;
              const int plain = std::min(p - s, m);
              if (by_stage) {
                EXPECT_EQ(peak, s < 2 ? 1 : plain) << what << " stage " << s;
              } else {
                EXPECT_LE(peak, plain) << what << " stage " << s;
                EXPECT_GE(peak, 1) << what << " stage " << s;
              }
            }
          }
        }
      }
    }
  }
}

TEST(library, interleaved_memory_with_three_chunks) {
  Entry three = entry("interleaved-1f1b");
  three.chunks = 3;
  expect_memory_formula(three);
}

// The checker's sweep runs dp = 1; here every schedule runs with two
// replicas (AllReduce or BwdAllReduce must cover every chunk's gradients).
TEST(library, every_schedule_passes_the_checker_with_two_replicas) {
  for (const Entry& e : library()) {
    const auto schedule = parse_file(path_of(e.name));
    ASSERT_TRUE(schedule) << e.name;
    int checked = 0;
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        const Config c = Config{p, m, e.chunks, 2};
        const std::string what = describe(e.name, c);
        const auto program = expand_if_allowed(*schedule, c, what);
        if (!program) continue;
        const CheckResult result = check(*program);
        EXPECT_TRUE(result.ok()) << what << ": " << first_message(result);
        ++checked;
      }
    }
    EXPECT_GT(checked, 0) << e.name;
  }
}

// ZB-H2 declares its own sweep (`check stages 1..8 micro_batches 1..32 dp
// 1..2`), twice the micro-batches of the others: its warm-up runs up to
// 2p-1 forwards, so m from 1 to past 2p-1 covers every shape of it.
TEST(library, zb_h2_passes_its_declared_sweep) {
  const auto schedule = parse_file(path_of("zb-h2"));
  ASSERT_TRUE(schedule);
  int checked = 0;
  for (int dp = 1; dp <= 2; ++dp) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 32; ++m) {
        const Config c = Config{p, m, 1, dp};
        const auto program = expand_if_allowed(*schedule, c, describe("zb-h2", c));
        ASSERT_TRUE(program) << describe("zb-h2", c);
        const CheckResult result = check(*program);
        EXPECT_TRUE(result.ok()) << describe("zb-h2", c) << ": " << first_message(result);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 512);
}

TEST(library, interleaved_passes_with_one_to_three_chunks) {
  const auto schedule = parse_file(path_of("interleaved-1f1b"));
  ASSERT_TRUE(schedule);
  for (int v = 1; v <= 3; ++v) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = p; m <= 16; m += p) {
        const Config c = Config{p, m, v};
        const auto program = expand_if_allowed(*schedule, c, describe("interleaved-1f1b", c));
        ASSERT_TRUE(program) << describe("interleaved-1f1b", c);
        const CheckResult result = check(*program);
        EXPECT_TRUE(result.ok()) << describe("interleaved-1f1b", c) << ": "
                                 << first_message(result);
      }
    }
  }
}

// The sweeps skip what a `require` excludes, so a missing require would go
// unnoticed there: each schedule's preconditions are pinned here.
TEST(library, requires_exclude_what_the_headers_say) {
  const std::map<std::string, std::vector<Config>> excluded = {
      {"1f1b", {Config{4, 3, 1}}},
      {"1f1b-recompute", {Config{4, 3, 1}, Config{2, 4, 2}}},
      {"1f1b-offload", {Config{4, 3, 1}, Config{2, 4, 2}}},
      {"zb-h1", {Config{4, 3, 1}}},
      {"zb-h2", {Config{4, 8, 2}}},
      {"interleaved-1f1b", {Config{4, 6, 2}}},
      {"dualpipe", {Config{3, 6, 2}, Config{4, 6, 2}, Config{4, 9, 2}, Config{4, 8, 1}}},
      {"dualpipev", {Config{4, 7, 2}, Config{4, 8, 1}}},
      {"zb-v", {Config{4, 7, 2}, Config{4, 8, 1}}},
      {"v-half", {Config{4, 8, 1}, Config{4, 8, 3}}},
      {"v-min", {Config{4, 8, 1}, Config{4, 8, 3}}},
      {"interleaved-zb", {Config{4, 6, 2}}},
      {"dp", {Config{2, 4, 1}}},
      {"gpipe", {Config{2, 4, 2}}},
  };
  for (const auto& [name, configs] : excluded) {
    const auto schedule = parse_file(path_of(name));
    ASSERT_TRUE(schedule) << name;
    for (const Config& c : configs) {
      Diagnostics diagnostics;
      EXPECT_FALSE(expand(*schedule, c, diagnostics)) << describe(name, c);
      ASSERT_FALSE(diagnostics.empty()) << describe(name, c);
      EXPECT_EQ(diagnostics.all().front().kind, DiagnosticKind::RequireFailed) << describe(name, c);
    }
  }
}

// DualPipe's final AllReduce is what keeps its replicas equal: the sum of
// a mirror piece's two copies inside OptimizerStep stays within one
// pipeline. Without it the checker must object as soon as dp > 1.
TEST(library, dualpipe_without_its_allreduce_fails_with_replicas) {
  std::string text = slurp(path_of("dualpipe"));
  const std::size_t reduce = text.find("\nAllReduce\n");
  ASSERT_NE(reduce, std::string::npos);
  text.erase(reduce, std::string("\nAllReduce").size());
  Diagnostics diagnostics;
  const auto schedule =
      parse(std::make_shared<const SourceFile>("dualpipe-no-reduce.pipe", text), diagnostics);
  ASSERT_TRUE(schedule);
  for (const int dp : {1, 2}) {
    const auto program = expand_if_allowed(*schedule, Config{4, 8, 2, dp}, "dp");
    ASSERT_TRUE(program);
    const CheckResult result = check(*program);
    if (dp == 1) {
      EXPECT_TRUE(result.ok()) << first_message(result);
    } else {
      ASSERT_FALSE(result.diagnostics.empty());
      EXPECT_EQ(result.diagnostics.front().kind, DiagnosticKind::DataflowStepTooEarly)
          << first_message(result);
    }
  }
}

// Every message is an instruction: DualPipe's gradient sum between the two
// holders of each piece is `AllReduce over mirror`, and a rank that drops it
// leaves its partner waiting in a collective and steps with half the sum.
TEST(library, dualpipe_without_the_mirror_sum_on_one_rank_fails) {
  Diagnostics diagnostics;
  const Config config{4, 8, 2, 1};
  std::optional<Program> program =
      compile(read_source(path_of("dualpipe").string(), diagnostics), config, diagnostics);
  ASSERT_TRUE(program) << diagnostics.size();
  ASSERT_TRUE(check(*program).ok());
  const int rank = 1;
  const auto stream = program->rank(rank);
  const auto sum = std::find_if(stream.begin(), stream.end(), [](const Instruction& in) {
    return in.op == Opcode::AllReduce && group_of(in) == Group::mirror;
  });
  ASSERT_NE(sum, stream.end());
  program->code.erase(program->code.begin() +
                      static_cast<std::ptrdiff_t>(program->rank_begin[rank]) +
                      (sum - stream.begin()));
  for (std::size_t r = rank + 1; r < program->rank_begin.size(); ++r) --program->rank_begin[r];
  const CheckResult result = check(*program);
  std::vector<DiagnosticKind> kinds;
  for (const Diagnostic& d : result.diagnostics) kinds.push_back(d.kind);
  EXPECT_EQ(kinds, (std::vector<DiagnosticKind>{DiagnosticKind::CollectiveMissing,
                                                DiagnosticKind::DataflowStepTooEarly}))
      << first_message(result);
  ASSERT_FALSE(result.diagnostics.empty());
  EXPECT_NE(result.diagnostics.front().message.find("a member of the same mirror pair"),
            std::string::npos)
      << result.diagnostics.front().message;
}

TEST(library, every_file_has_the_library_header_and_a_docs_entry) {
  const std::string docs = slurp(kSource / "docs" / "schedules.md");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kSource / "schedules")) {
    if (e.path().extension() == ".pipe") files.push_back(e.path().stem().string());
  }
  EXPECT_EQ(files.size(), library().size()) << "a schedule without a memory formula here";
  for (const std::string& name : files) {
    const std::string text = slurp(path_of(name));
    EXPECT_EQ(text.rfind("# ", 0), 0u) << name << ": starts without a header comment";
    EXPECT_NE(text.find("\nschedule " + name + "\n"), std::string::npos)
        << name << ": `schedule NAME` differs from the file name";
    for (const char* word : {"Idea:", "Bubble", "Memory:"}) {
      EXPECT_NE(text.find(word), std::string::npos) << name << ": header lacks " << word;
    }
    EXPECT_NE(docs.find("`" + name + ".pipe`"), std::string::npos)
        << name << " is missing from docs/schedules.md";
  }
}

// The figures as a user reads them, through the command line.
TEST(library, check_json_reports_the_memory_formula) {
  const std::string command = "cd '" PIPEVM_SOURCE_DIR "' && '" PIPEVM_BINARY_DIR
                              "/pipevm' check schedules/zb-h1.pipe --stages 4 --micro-batches 8 "
                              "--dp 1 --format json";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["files"].size(), 1u);
  EXPECT_EQ(j["files"][0]["verdict"], "ok");
  const nlohmann::json& memory = j["files"][0]["memory"];
  ASSERT_EQ(memory.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(memory[static_cast<std::size_t>(s)]["peak_activations"], 4);
}

}  // namespace
}  // namespace pipevm
