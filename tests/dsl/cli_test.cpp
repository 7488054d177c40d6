// `pipevm expand` as a user runs it: exit codes 0/1/2, text and JSON output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct Result {
  int status = -1;
  std::string out;  // stdout; stderr goes to err
  std::string err;
};

Result pipevm(const std::string& arguments) {
  // One file per process and call: ctest runs these tests in parallel.
  static int calls = 0;
  const std::string err_path = std::string(PIPEVM_BINARY_DIR) + "/dsl_cli_test." +
                               std::to_string(getpid()) + "." + std::to_string(++calls) + ".stderr";
  const std::string command =
      std::string(PIPEVM_BINARY_DIR) + "/pipevm " + arguments + " 2>" + err_path;
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  std::remove(err_path.c_str());
  return r;
}

const std::string kSchedules = std::string(PIPEVM_SOURCE_DIR) + "/schedules/";
const std::string kGolden = std::string(PIPEVM_SOURCE_DIR) + "/tests/dsl/golden/";

TEST(cli, expand_prints_each_rank_as_a_flat_program) {
  const Result r = pipevm("expand " + kSchedules + "gpipe.pipe --stages 2 --micro-batches 3");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("stage 0 {\n    ZeroGrad\n    LoadInput 0\n    Fwd 0\n    Send act 0\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("stage 1 {\n    ZeroGrad\n    Recv act 0\n"), std::string::npos);
}

// Replicas are blocks of their own (`if dp_rank == D` inside the stage), so an
// expanded data-parallel program reads back and checks as the same program.
TEST(cli, expand_with_replicas_reads_back_and_checks) {
  const std::string path =
      std::string(PIPEVM_BINARY_DIR) + "/dsl_cli_dp." + std::to_string(getpid()) + ".pipe";
  for (const std::string schedule : {"dp.pipe -p 1 -m 2 --dp 2", "gpipe.pipe -p 2 -m 3 --dp 2",
                                     "gossip.pipe -p 1 -m 2 --dp 4"}) {
    const Result expanded = pipevm("expand " + kSchedules + schedule);
    ASSERT_EQ(expanded.status, 0) << expanded.err;
    EXPECT_NE(expanded.out.find(" (dp_rank 1)\nstage 0 {\n    if dp_rank == 1 {\n"),
              std::string::npos)
        << expanded.out;
    std::ofstream(path) << expanded.out;
    const Result checked = pipevm("check " + path);
    EXPECT_EQ(checked.status, 0) << schedule << "\n" << checked.err << checked.out;
  }
  std::remove(path.c_str());
}

// The `cut` line survives `expand`: the printed program declares the same
// cut, reads back, and expands to the same text again.
TEST(cli, expand_keeps_the_cut_and_reads_back) {
  const std::string base = std::string(PIPEVM_BINARY_DIR) + "/dsl_cli_cut." + std::to_string(getpid());
  std::ostringstream schedule;
  schedule << std::ifstream(kSchedules + "1f1b.pipe").rdbuf();
  std::string text = schedule.str();
  text.insert(0, "schedule 1f1b-cut\ncut 0-2,3-4,5-6\n");
  text.replace(text.find("schedule 1f1b\n"), 14, "");
  std::ofstream(base + ".pipe") << text;
  const Result first = pipevm("expand " + base + ".pipe -p 3 -m 4");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("\nplacement looped\ncut 0-2,3-4,5-6\n"), std::string::npos) << first.out;
  std::ofstream(base + ".expanded.pipe") << first.out;
  const Result again = pipevm("expand " + base + ".expanded.pipe");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.out.substr(again.out.find('\n')), first.out.substr(first.out.find('\n')));
  const Result json = pipevm("expand " + base + ".pipe -p 3 -m 4 --format json");
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["cut"], "0-2,3-4,5-6");
  const Result wrong = pipevm("expand " + base + ".pipe -p 2 -m 4");
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.err.find(":2:5: error: the cut has 3 pieces but the program has 2 model pieces"),
            std::string::npos)
      << wrong.err;
  std::remove((base + ".pipe").c_str());
  std::remove((base + ".expanded.pipe").c_str());
}

TEST(cli, expand_one_rank) {
  const Result r = pipevm("expand " + kSchedules + "1f1b.pipe -p 4 -m 8 --rank 3");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("stage 0 {"), std::string::npos);
  EXPECT_NE(r.out.find("stage 3 {\n    ZeroGrad\n    Recv act 0\n    Fwd 0\n    LoadTarget 0\n"),
            std::string::npos)
      << r.out;
}

TEST(cli, expand_json) {
  const Result r =
      pipevm("expand " + kSchedules + "1f1b.pipe --stages 2 --micro-batches 2 --format json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["placement"], "looped");
  EXPECT_EQ(j["configuration"]["stages"], 2);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const auto& first = j["ranks"][0]["instructions"];
  EXPECT_EQ(first[0]["op"], "ZeroGrad");
  EXPECT_EQ(first[3]["op"], "ISend");
  EXPECT_EQ(first[3]["kind"], "act");
  EXPECT_EQ(first[3]["peer"], 1);
  // The position of `ISend act mb` in the forward procedure, wherever it is.
  std::ifstream schedule(kSchedules + "1f1b.pipe");
  std::string line;
  int number = 0;
  std::size_t column = std::string::npos;
  while (std::getline(schedule, line)) {
    ++number;
    column = line.find("ISend act mb");
    if (column != std::string::npos) break;
  }
  ASSERT_NE(column, std::string::npos);
  EXPECT_EQ(first[3]["line"], number);
  EXPECT_EQ(first[3]["column"], column + 1);
}

TEST(cli, expand_on_hosts_marks_what_crosses_them) {
  // dp-inner: the stages are on different hosts, every pipeline message crosses.
  const std::string gpipe = "expand " + kSchedules + "gpipe.pipe -p 2 -m 2 --dp 2 --hosts 2 ";
  const Result dp = pipevm(gpipe + "--layout dp-inner");
  ASSERT_EQ(dp.status, 0) << dp.err;
  EXPECT_NE(dp.out.find("# rank 0 (dp_rank 0) on host h1\nstage 0 {\n    if dp_rank == 0 {\n"
                        "        ZeroGrad\n        LoadInput 0\n        Fwd 0\n        Send act 0"
                        "  # across hosts: to rank 1 on h2\n"),
            std::string::npos)
      << dp.out;
  EXPECT_NE(dp.out.find("# placement (--layout dp-inner), 2 host(s): 2 of 2 pipeline neighbour "
                        "pairs and 0 of 2 data-parallel groups cross hosts\n"),
            std::string::npos)
      << dp.out;
  EXPECT_EQ(dp.out.find("group spans hosts"), std::string::npos);
  // pp-inner: the replicas are on different hosts, only the all-reduces cross.
  const Result pp = pipevm(gpipe + "--layout pp-inner --format json");
  ASSERT_EQ(pp.status, 0) << pp.err;
  const auto j = nlohmann::json::parse(pp.out);
  int crossing = 0;
  for (const auto& rank : j["ranks"]) {
    EXPECT_EQ(rank["host"], rank["rank"].get<int>() < 2 ? "h1" : "h2");
    for (const auto& in : rank["instructions"]) {
      if (!in.contains("across_hosts")) continue;
      ++crossing;
      EXPECT_EQ(in["op"], "BwdAllReduce");
    }
  }
  EXPECT_EQ(crossing, 4);
  // The marked text is still a schedule that checks (one replica: stages on two hosts).
  const std::string path =
      std::string(PIPEVM_BINARY_DIR) + "/dsl_cli_hosts." + std::to_string(getpid()) + ".pipe";
  std::ofstream(path) << pipevm("expand " + kSchedules + "gpipe.pipe -p 2 -m 2 --hosts 2").out;
  EXPECT_EQ(pipevm("check " + path + " -p 2 -m 2").status, 0);
  std::remove(path.c_str());
}

TEST(cli, program_errors_exit_1_with_a_located_message) {
  const Result r = pipevm("expand " + kGolden + "unknown_opcode.pipe --stages 2 --micro-batches 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("unknown_opcode.pipe:3:5: error: unknown instruction 'Fdw'; did you mean "
                       "'Fwd'? [PV1002]"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("    Fdw mb\n"), std::string::npos) << r.err;
}

TEST(cli, a_failed_require_exits_1) {
  const Result r = pipevm("expand " + kSchedules + "1f1b.pipe --stages 4 --micro-batches 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[PV1100]"), std::string::npos) << r.err;
}

TEST(cli, unreadable_files_and_bad_usage_exit_2) {
  EXPECT_EQ(pipevm("expand /nonexistent/x.pipe --stages 2 --micro-batches 2").status, 2);
  EXPECT_EQ(pipevm("expand " + kSchedules + "gpipe.pipe --stages 0 --micro-batches 2").status, 2);
  EXPECT_EQ(pipevm("expand " + kSchedules + "gpipe.pipe --micro-batches 2").status, 2);
  EXPECT_EQ(pipevm("expand " + kSchedules + "gpipe.pipe -p 2 -m 2 --rank 2").status, 2);
  EXPECT_EQ(pipevm("expand " + kSchedules + "gpipe.pipe -p 2 -m 2 --format xml").status, 2);
}

TEST(cli, help_shows_an_example) {
  const Result r = pipevm("expand --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("pipevm expand schedules/1f1b.pipe"), std::string::npos) << r.out;
}

}  // namespace
