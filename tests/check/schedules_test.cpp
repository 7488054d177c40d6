// The shipped schedules (every schedules/*.pipe, found at test time) pass the
// checker for stages 1..8 x micro-batches 1..16 wherever their `require`
// holds; 1F1B's memory figure matches its formula; the output is
// deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "check.hpp"
#include "compile.hpp"

namespace pipevm {
namespace {

namespace fs = std::filesystem;

const fs::path kSource(PIPEVM_SOURCE_DIR);

std::vector<fs::path> shipped_schedules() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSource / "schedules")) {
    if (entry.path().extension() == ".pipe") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Whether the code (not its comments or strings) says `chunk C` somewhere.
// Scanned by hand: GCC 12 warns inside <regex> under ASan (-Wmaybe-uninitialized).
bool names_chunk_operands(const std::string& text) {
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  bool in_string = false;
  bool in_comment = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      in_comment = in_string = false;
    } else if (in_comment) {
      continue;
    } else if (c == '"') {
      in_string = !in_string;
    } else if (!in_string && c == '#') {
      in_comment = true;
    } else if (!in_string && text.compare(i, 5, "chunk") == 0 && (i == 0 || !is_word(text[i - 1])) &&
               (i + 5 == text.size() || !is_word(text[i + 5]))) {
      return true;
    }
  }
  return false;
}

bool require_failed(const Diagnostics& diagnostics) {
  return std::any_of(diagnostics.all().begin(), diagnostics.all().end(), [](const Diagnostic& d) {
    return d.kind == DiagnosticKind::RequireFailed;
  });
}

TEST(schedules, shipped_schedules_pass_the_sweep) {
  const auto files = shipped_schedules();
  ASSERT_FALSE(files.empty());
  for (const fs::path& path : files) {
    Diagnostics diagnostics;
    const auto file = read_source(path.string(), diagnostics);
    ASSERT_TRUE(file) << path;
    const auto schedule = parse(file, diagnostics);
    ASSERT_TRUE(schedule) << path;
    // Schedules that place chunks are checked with two per rank.
    const bool chunked =
        placement_of(*schedule) != Placement::looped || names_chunk_operands(file->text());
    int checked = 0;
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        Diagnostics expansion;
        const auto program = expand(*schedule, Config{p, m, chunked ? 2 : 1}, expansion);
        if (!program) {
          EXPECT_TRUE(require_failed(expansion)) << path << " P=" << p << " M=" << m;
          continue;
        }
        ++checked;
        const CheckResult result = check(*program);
        EXPECT_TRUE(result.ok()) << path.filename() << " P=" << p << " M=" << m << ": "
                                 << (result.diagnostics.empty() ? std::string("suppressed")
                                                                : result.diagnostics[0].message);
      }
    }
    EXPECT_GT(checked, 0) << path;
  }
}

std::optional<Program> compile_file(const fs::path& path, const Config& c) {
  Diagnostics diagnostics;
  const auto file = read_source(path.string(), diagnostics);
  if (!file) return std::nullopt;
  return compile(file, c, diagnostics);
}

TEST(schedules, one_f_one_b_stage_s_holds_min_of_stages_minus_s_and_micro_batches) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = p; m <= 16; ++m) {
      const auto program = compile_file(kSource / "schedules/1f1b.pipe", Config{p, m});
      ASSERT_TRUE(program);
      const CheckResult result = check(*program);
      ASSERT_EQ(result.memory.size(), static_cast<std::size_t>(p));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(result.memory[static_cast<std::size_t>(s)].peak_activations, std::min(p - s, m))
            << "P=" << p << " M=" << m << " stage " << s;
      }
    }
  }
}

TEST(schedules, gpipe_holds_every_micro_batch) {
  const auto program = compile_file(kSource / "schedules/gpipe.pipe", Config{4, 8});
  ASSERT_TRUE(program);
  for (const StageMemory& m : check(*program).memory) EXPECT_EQ(m.peak_activations, 8);
}

TEST(schedules, blocking_one_f_one_b_is_a_buffering_hazard_naming_two_sends) {
  const fs::path path = kSource / "tests/check/corpus/buffering_1f1b_blocking.pipe";
  for (int p = 2; p <= 8; ++p) {
    for (int m = 2; m <= 16; ++m) {
      const auto program = compile_file(path, Config{p, m});
      ASSERT_TRUE(program);
      const CheckResult result = check(*program);
      ASSERT_EQ(result.diagnostics.size(), 1u) << "P=" << p << " M=" << m;
      const Diagnostic& d = result.diagnostics[0];
      EXPECT_EQ(d.kind, DiagnosticKind::BufferingHazard) << "P=" << p << " M=" << m;
      EXPECT_NE(d.message.find("buffers `Send act "), std::string::npos) << d.message;
      EXPECT_NE(d.message.find("`, `Send grad "), std::string::npos) << d.message;
    }
  }
  const auto single = compile_file(path, Config{4, 1});
  ASSERT_TRUE(single);
  EXPECT_TRUE(check(*single).ok()) << "one micro-batch never needs a buffer";
}

std::string checked_json(const fs::path& path, const Config& c) {
  const auto program = compile_file(path, c);
  if (!program) return "";
  const CheckResult result = check(*program);
  nlohmann::json diagnostics = nlohmann::json::array();
  for (const Diagnostic& d : result.diagnostics) diagnostics.push_back(to_json(d));
  return nlohmann::json{{"diagnostics", diagnostics}, {"memory", memory_to_json(result.memory)}}
      .dump();
}

TEST(schedules, checking_twice_gives_identical_json) {
  for (const fs::path& path : {kSource / "schedules/1f1b.pipe",
                               kSource / "tests/check/corpus/buffering_1f1b_blocking.pipe",
                               kSource / "tests/check/corpus/collective_order_cycle.pipe"}) {
    const Config c = path.filename() == "collective_order_cycle.pipe" ? Config{2, 1, 1, 2}
                                                                       : Config{6, 12};
    const std::string first = checked_json(path, c);
    ASSERT_FALSE(first.empty()) << path;
    EXPECT_EQ(first, checked_json(path, c)) << path;
  }
}

}  // namespace
}  // namespace pipevm
