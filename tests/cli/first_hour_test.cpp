// A new user's first hour (issue 39): each command either does the right
// thing or says exactly what to do. One test per finding of the issue, run
// as a user runs the executable; where the text matters it is pinned whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_pipevm.hpp"

namespace {

namespace fs = std::filesystem;
using pipevm::testing::lines;
using pipevm::testing::PipevmRun;
using pipevm::testing::run_pipevm;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// A small run: the model and data of tests/vm/small.yaml, one rank.
const char* const kSmallRun = "--config tests/vm/small.yaml --no-progress";

class first_hour : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pipevm-first-hour-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  fs::path dir_;
};

// 1. A program written for 2 stages, run on 1 rank: one line with the fix,
// exit 2, before the checker's findings for the stages the world leaves.
TEST_F(first_hour, item1_run_checks_the_world_size_first) {
  const PipevmRun run = run_pipevm(std::string("run tests/vm/synthesized-p2-m4.pipe ") + kSmallRun);
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "pipevm run: error: tests/vm/synthesized-p2-m4.pipe is written for 2 stages, not the 1 "
            "rank of this run: run it with `mpirun -n 2`\n");
}

// 2. Without costs, a rank's work is the same whatever its chunks: zb-v with
// two chunks is no longer the slowest; given costs with chunks are said to
// be per chunk; several files make one table with peak bytes; the grid and
// the SVG show peak bytes.
TEST_F(first_hour, item2_default_costs_compare_fairly_and_files_compare_in_one_table) {
  const auto makespan = [](const std::string& args) {
    const PipevmRun run = run_pipevm("simulate " + args + " -p 4 -m 8 --format json");
    EXPECT_EQ(run.status, 0) << args << "\n" << run.err;
    return nlohmann::json::parse(run.out)["makespan"].get<double>();
  };
  const double one_f_one_b = makespan("schedules/1f1b.pipe");
  EXPECT_EQ(one_f_one_b, 33);
  EXPECT_LT(makespan("schedules/zb-v.pipe --chunks 2"), one_f_one_b);
  EXPECT_LT(makespan("schedules/interleaved-1f1b.pipe --chunks 2"), one_f_one_b);

  const PipevmRun per_chunk =
      run_pipevm("simulate schedules/zb-v.pipe -p 4 -m 8 --chunks 2 --cost fwd=1,bwd=2");
  EXPECT_EQ(per_chunk.status, 0) << per_chunk.err;
  EXPECT_TRUE(contains(per_chunk.err,
                       "pipevm simulate: note: schedules/zb-v.pipe: the costs are "
                       "per chunk: each rank runs 2 chunks"))
      << per_chunk.err;

  const PipevmRun table = run_pipevm("simulate schedules/1f1b.pipe schedules/zb-h1.pipe -p 4 -m 8");
  EXPECT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(table.out, read_text(PIPEVM_SOURCE_DIR "/tests/cli/data/compare_1f1b_zb-h1.txt"));

  const std::string svg = path("t.svg");
  const PipevmRun text = run_pipevm("simulate schedules/1f1b.pipe -p 4 -m 8 --svg " + svg);
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "peak bytes per rank (as `pipevm check` counts them): 0: "))
      << text.out;
  EXPECT_TRUE(contains(read_text(svg), "; peak ")) << read_text(svg).substr(0, 400);
}

// 3. A profile of a fused-backward schedule times both halves.
TEST_F(first_hour, item3_profile_of_1f1b_gives_both_backward_halves) {
  const std::string profile = path("prof.yaml");
  const PipevmRun run = run_pipevm(
      std::string("run schedules/1f1b.pipe ") + kSmallRun + " --profile " + profile, 120);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string yaml = read_text(profile);
  for (const char* key : {"\nbwd: ", "\nbwd-input: ", "\nbwd-weight: "}) {
    const std::size_t at = yaml.find(key);
    ASSERT_NE(at, std::string::npos) << key << "\n" << yaml;
    EXPECT_GT(std::stod(yaml.substr(at + std::string(key).size())), 0) << key << "\n" << yaml;
  }
}

// 4. --stages and --micro-batches name one configuration: the file's
// declared dp range is not swept, and the memory lines are printed.
TEST_F(first_hour, item4_explicit_stages_and_micro_batches_are_one_configuration) {
  const PipevmRun run = run_pipevm("check schedules/zb-h1.pipe --stages 4 --micro-batches 8");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "ok for 1 configuration")) << run.out;
  EXPECT_TRUE(contains(run.out, "peak")) << run.out;
  const PipevmRun sweep = run_pipevm("check schedules/zb-h1.pipe --stages 4 --micro-batches 8..9");
  EXPECT_TRUE(contains(sweep.out, "ok for 4 configurations")) << sweep.out;
}

// 5. README puts synthesize among the first commands, with the loop.
TEST_F(first_hour, item5_readme_shows_synthesize_and_the_profile_loop) {
  const std::string readme = read_text(PIPEVM_SOURCE_DIR "/README.md");
  EXPECT_TRUE(contains(readme, "./pipevm synthesize -p 4 -m 8")) << readme.substr(0, 2000);
  EXPECT_TRUE(contains(readme, "--profile prof.yaml"));
  EXPECT_TRUE(contains(readme, "--costs prof.yaml -o syn.pipe"));
  EXPECT_TRUE(contains(readme, "docs/synthesize.md"));
}

// 7. Cost files that are wrong are refused with their place; a compute
// cost the program runs that the file leaves unset is a warning; costs
// that overflow are refused up front by synthesize as by simulate.
TEST_F(first_hour, item7_wrong_cost_files_are_refused_with_their_place) {
  const std::string gpipe = "simulate schedules/gpipe.pipe -p 4 -m 8 --costs ";
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty.yaml:1:1: the cost file sets no cost"},
      {"fwd: 1\nbwd: 2\nfwd: 3\n", "twice.yaml:3:1: 'fwd' is given twice (first at 1:1)"},
      {"fwd: 1\nforward: 2\n", "unknown.yaml:2:"},
      {"stages:\n  - fwd: 1\n    fwd: 2\n", "stage_twice.yaml:3:5: 'fwd' is given twice"},
  };
  const char* const names[] = {"empty.yaml", "twice.yaml", "unknown.yaml", "stage_twice.yaml"};
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const PipevmRun run = run_pipevm(gpipe + write(names[i], cases[i].first));
    EXPECT_EQ(run.status, 2) << names[i] << "\n" << run.err;
    EXPECT_EQ(lines(run.err), 1u) << run.err;
    EXPECT_TRUE(contains(run.err, cases[i].second)) << run.err;
  }
  std::string six = "fwd: 1\nbwd: 2\nstages:\n";
  for (int s = 0; s < 6; ++s) six += "  - fwd: 1\n";
  // The count is known only with the program: the error points at the
  // file's `stages:` all the same, in simulate and in synthesize.
  const std::string six_file = write("six.yaml", six);
  for (const std::string& command : {gpipe, std::string("synthesize -p 4 -m 8 --costs ")}) {
    const PipevmRun too_many = run_pipevm(command + six_file);
    EXPECT_EQ(too_many.status, 2) << command;
    EXPECT_EQ(lines(too_many.err), 1u) << too_many.err;
    EXPECT_TRUE(contains(too_many.err,
                         "six.yaml:3:1: the costs give 6 `stages:` entries, for a program of 4 "
                         "stages"))
        << too_many.err;
  }

  const PipevmRun only_fwd = run_pipevm(gpipe + write("fwd.yaml", "fwd: 1\n"));
  EXPECT_EQ(only_fwd.status, 0) << only_fwd.err;
  EXPECT_EQ(only_fwd.err,
            "pipevm simulate: warning: the costs leave 'bwd' unset: Bwd takes no time\n");
  const PipevmRun zb = run_pipevm("simulate schedules/zb-h1.pipe -p 4 -m 8 --dp 1 --cost fwd=1");
  EXPECT_TRUE(contains(zb.err, "'bwd-input' unset: BwdInput takes no time")) << zb.err;
  EXPECT_TRUE(contains(zb.err, "'bwd-weight' unset: BwdWeight takes no time")) << zb.err;
  // Per-layer costs give the compute keys layer by layer: nothing unset.
  const PipevmRun layers = run_pipevm(
      "simulate schedules/1f1b.pipe -p 4 -m 8 --costs tests/synthesize/data/ten-layers.yaml");
  EXPECT_EQ(layers.status, 0) << layers.err;
  EXPECT_FALSE(contains(layers.err, "unset")) << layers.err;
  // synthesize warns the same of the program it writes: its backward is
  // split, and only bwd-input is given.
  const PipevmRun synthesized =
      run_pipevm("synthesize -p 2 -m 4 --cost fwd=1,bwd-input=1 -o " + write("syn.pipe", ""));
  EXPECT_EQ(synthesized.status, 0) << synthesized.err;
  EXPECT_TRUE(contains(synthesized.err,
                       "pipevm synthesize: warning: the costs leave 'bwd-weight' unset: BwdWeight "
                       "takes no time"))
      << synthesized.err;

  const PipevmRun overflow = run_pipevm("synthesize -p 4 -m 8 --cost fwd=1e308");
  EXPECT_EQ(overflow.status, 2);
  EXPECT_EQ(lines(overflow.err), 1u) << overflow.err;
  EXPECT_TRUE(contains(overflow.err, "pipevm synthesize: the costs overflow")) << overflow.err;
}

// 8. Progress that reads well in a log: the epoch lines say the time left.
TEST_F(first_hour, item8_epoch_lines_say_the_time_left) {
  const PipevmRun run =
      run_pipevm(std::string("run schedules/gpipe.pipe ") + kSmallRun + " --epochs 2", 120);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "samples/s")) << run.out;
  EXPECT_TRUE(contains(run.out, " s left\nepoch 2/2")) << run.out;
  EXPECT_FALSE(contains(run.out, "\r")) << run.out;
}

// 9. Range errors in words, "did you mean" for commands, a help: line under
// a diagnostic whose docs give a fix, write errors with the OS's reason,
// and every exit status in the help.
TEST_F(first_hour, item9_errors_say_what_to_do) {
  const PipevmRun rank = run_pipevm("expand schedules/1f1b.pipe -p 4 -m 8 --rank -1");
  EXPECT_EQ(rank.status, 2);
  EXPECT_TRUE(contains(rank.err, "--rank: must be ≥ 0, got -1")) << rank.err;
  const PipevmRun limit = run_pipevm("synthesize -p 4 -m 8 --time-limit -1");
  EXPECT_TRUE(contains(limit.err, "--time-limit: must be ≥ 0, got -1")) << limit.err;

  const PipevmRun typo = run_pipevm("simulat x.pipe");
  EXPECT_EQ(typo.status, 2);
  EXPECT_EQ(typo.err, "pipevm: unknown command 'simulat'; did you mean 'simulate'?\n");
  const PipevmRun word = run_pipevm("frobnicate");
  EXPECT_EQ(word.status, 2);
  EXPECT_EQ(
      word.err,
      "pipevm: 'frobnicate' is neither a command (expand, check, simulate, synthesize, costs, "
      "run, lsp) nor a schedule file; see pipevm --help\n");

  const PipevmRun misspelt = run_pipevm(
      "check " + write("misspelt.pipe", "for m in 0..micro_batch {\n  Fwd m\n}\n") + " -p 1 -m 2");
  EXPECT_EQ(misspelt.status, 1) << misspelt.err;
  EXPECT_TRUE(contains(misspelt.out + misspelt.err,
                       "unknown name 'micro_batch'; did you mean 'micro_batches'?"))
      << misspelt.out << misspelt.err;

  const PipevmRun hazard =
      run_pipevm("check tests/check/corpus/buffering_1f1b_two_stages.pipe -p 2 -m 4");
  EXPECT_EQ(hazard.status, 1);
  EXPECT_TRUE(contains(hazard.out + hazard.err,
                       "\nhelp: use ISend and a Wait for one of the sends, or reorder the sends "
                       "and receives\n"))
      << hazard.out << hazard.err;

  const PipevmRun unwritable = run_pipevm("synthesize -p 2 -m 2 -o /nonexistent/x.pipe");
  EXPECT_EQ(unwritable.status, 2);
  EXPECT_EQ(unwritable.err,
            "pipevm synthesize: cannot write /nonexistent/x.pipe: No such file or directory\n");
  const PipevmRun svg =
      run_pipevm("simulate schedules/1f1b.pipe -p 2 -m 2 --svg /nonexistent/x.svg");
  EXPECT_EQ(svg.status, 2);
  EXPECT_EQ(svg.out, "");
  EXPECT_EQ(svg.err,
            "pipevm simulate: cannot write /nonexistent/x.svg: No such file or directory\n");

  const PipevmRun garbage = run_pipevm("synthesize --lower " + write("garbage.csv", "0X0,,\n"));
  EXPECT_EQ(garbage.status, 1) << garbage.err;
  EXPECT_TRUE(contains(run_pipevm("synthesize --help").out, "1 errors in the --lower file"));
  for (const char* command : {"expand", "check", "simulate", "synthesize", "costs", "run", "lsp"}) {
    EXPECT_TRUE(contains(run_pipevm(std::string(command) + " --help").out, "Exit status: 0"))
        << command;
  }
}

// 10. synthesize -o says what it wrote; simulate of the program times it
// with the costs its header records; the header names one bubble.
TEST_F(first_hour, item10_synthesized_programs_say_what_they_are) {
  const std::string program = path("syn.pipe");
  const PipevmRun synthesized = run_pipevm(
      "synthesize -p 4 -m 8 --cost fwd=1,bwd-input=1,bwd-weight=0.5,send=0.25 --time-limit 0 -o " +
      program);
  ASSERT_EQ(synthesized.status, 0) << synthesized.err;
  EXPECT_EQ(synthesized.out, "");
  EXPECT_EQ(lines(synthesized.err), 1u) << synthesized.err;
  EXPECT_TRUE(contains(synthesized.err, "pipevm synthesize: wrote " + program +
                                            ": 4 stages x 8 micro-batches, predicted makespan "))
      << synthesized.err;
  const std::string text = read_text(program);
  EXPECT_FALSE(contains(text, "Zero Bubble rate")) << text;
  const std::size_t at = text.find("# predicted makespan ");
  ASSERT_NE(at, std::string::npos) << text;
  const double predicted = std::stod(text.substr(at + 21));

  const PipevmRun simulated = run_pipevm("simulate " + program + " --format json");
  EXPECT_EQ(simulated.status, 0) << simulated.err;
  EXPECT_TRUE(contains(simulated.err, "timing with the costs")) << simulated.err;
  EXPECT_EQ(nlohmann::json::parse(simulated.out)["makespan"].get<double>(), predicted);

  // Per-layer costs have no flags to record: the header says none, and
  // simulate says it times the program with the defaults instead.
  const PipevmRun by_layers = run_pipevm("simulate tests/vm/synthesized-cut-p2-m4.pipe");
  EXPECT_EQ(by_layers.status, 0) << by_layers.err;
  EXPECT_FALSE(contains(read_text(PIPEVM_SOURCE_DIR "/tests/vm/synthesized-cut-p2-m4.pipe"), "# costs: "));
  EXPECT_TRUE(contains(by_layers.err,
                       "synthesized with per-stage or per-layer costs, which its header does not "
                       "record: timing with the defaults"))
      << by_layers.err;
}

// 11. Resuming a finished run says so and how to continue.
TEST_F(first_hour, item11_resuming_a_finished_run_says_so) {
  const std::string checkpoint = path("ck");
  const PipevmRun first = run_pipevm(
      std::string("run schedules/gpipe.pipe ") + kSmallRun + " --checkpoint " + checkpoint, 120);
  ASSERT_EQ(first.status, 0) << first.err;
  const PipevmRun again = run_pipevm(std::string("run schedules/gpipe.pipe ") + kSmallRun +
                                         " --resume " + checkpoint + " --epochs 1",
                                     120);
  EXPECT_EQ(again.status, 2);
  EXPECT_EQ(again.err, "pipevm run: error: checkpoint " + checkpoint +
                           " completed 1 epoch and --epochs is 1: nothing to train; raise --epochs "
                           "(e.g. --epochs 2) to continue\n");
}

// 12. Lowering is never longer than the input's own: PyTorch's lowering of
// a compute table (its _add_send_recv rule, pytorch/lower.cpp), or a
// table's own communication, under the same clock. The tables: PyTorch's
// ZB-V (the 4 ranks, and 2 ranks; tests/pytorch/data/README.md),
// its zero-bubble 1P test artifacts, and interleaved, interleaved
// zero-bubble and looped BFS tables of 2 and 4 ranks from the shipped
// files. At the V's turn neither lowering sends anything: on the ZB-V
// tables the lowering spans what their compute order spans under this
// clock (the order's own bound, `compute order` in the header), where a
// message to the rank itself had cost 0.75 and 1.5 to 3.5 more.
TEST_F(first_hour, item12_lowering_is_never_longer_than_pytorchs) {
  const std::string clock =
      " --p2p-order posted --transfer rendezvous"
      " --cost fwd=1,bwd=2,bwd-input=1,bwd-weight=1,send=0.25";
  const auto makespan = [&](const std::string& file) {
    const PipevmRun run = run_pipevm("simulate " + file + clock + " --format json");
    EXPECT_EQ(run.status, 0) << file << "\n" << run.err;
    return run.status == 0 ? nlohmann::json::parse(run.out)["makespan"].get<double>() : -1.0;
  };
  std::vector<std::string> tables;
  for (const char* table : {"zbv_4rank_4mb_compute.csv", "zbv_2rank_4mb_compute.csv",
                            "zbv_2rank_8mb_compute.csv", "zb1p_2rank_2stagep_compute.csv",
                            "zb1p_2rank_2stagep_comms.csv"}) {
    tables.push_back(std::string("tests/pytorch/data/") + table);
  }
  for (const char* schedule : {"interleaved-1f1b", "interleaved-zb", "looped-bfs"}) {
    for (const char* ranks : {"2", "4"}) {
      const PipevmRun table = run_pipevm(std::string("expand schedules/") + schedule +
                                         ".pipe -p " + ranks + " -m 8 --chunks 2 --format torch-csv");
      ASSERT_EQ(table.status, 0) << schedule << "\n" << table.err;
      tables.push_back(write(std::string(schedule) + "-" + ranks + ".csv", table.out));
    }
  }
  std::map<std::string, double> lowered_spans;
  for (const std::string& input : tables) {
    const std::string name = fs::path(input).filename().string();
    const std::string lowered = path(name + ".pipe");
    const PipevmRun run = run_pipevm("synthesize --lower " + input + clock + " -o " + lowered);
    ASSERT_EQ(run.status, 0) << name << "\n" << run.err;
    lowered_spans[name] = makespan(lowered);
    EXPECT_LE(lowered_spans[name], makespan(input)) << name;
  }
  EXPECT_EQ(lowered_spans["zbv_4rank_4mb_compute.csv"], 40.0);
  EXPECT_EQ(lowered_spans["zbv_2rank_4mb_compute.csv"], 26.5);
  EXPECT_EQ(lowered_spans["zbv_2rank_8mb_compute.csv"], 50.5);
  // PyTorch's lowering, as pipevm reads the table, sends nothing at the turn either.
  const PipevmRun pytorchs = run_pipevm("expand tests/pytorch/data/zbv_2rank_4mb_compute.csv");
  ASSERT_EQ(pytorchs.status, 0) << pytorchs.err;
  const std::string last = pytorchs.out.substr(pytorchs.out.find("stage 1 {"));
  EXPECT_FALSE(contains(last, "Recv act 0 chunk 1")) << last;
  EXPECT_FALSE(contains(last, "ISend grad 0 chunk 1")) << last;
}

}  // namespace
