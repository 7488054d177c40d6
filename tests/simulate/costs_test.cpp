// The cost model: flags, YAML files, derived keys, medians of measured runs,
// and latency and bandwidth fitted to measured message timings.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cost_files.hpp"
#include "cost_fit.hpp"
#include "costs.hpp"
#include "programs.hpp"

namespace pipevm {
namespace {

using config::parse_cost_flags;
using config::parse_costs_yaml;
using config::read_costs_yaml;
using config::write_costs_yaml;

TEST(costs, flags_set_keys_and_leave_the_rest_zero) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(parse_cost_flags("fwd=1, bwd=2,send=0.1", costs, error)) << error;
  EXPECT_EQ(costs.fwd, 1);
  EXPECT_EQ(costs.backward(), 2);
  EXPECT_EQ(costs.send, 0.1);
  EXPECT_EQ(costs.bwd_input, 0);
  EXPECT_EQ(costs.allreduce, 0);
}

TEST(costs, backward_defaults_to_its_two_halves) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(parse_cost_flags("bwd-input=1.5,bwd-weight=0.5", costs, error)) << error;
  EXPECT_EQ(costs.backward(), 2);
  ASSERT_TRUE(parse_cost_flags("bwd=3", costs, error)) << error;
  EXPECT_EQ(costs.backward(), 3);
  EXPECT_EQ(costs.duration(info(Opcode::Bwd).cost), 3);
  EXPECT_EQ(costs.duration(info(Opcode::BwdInput).cost), 1.5);
  EXPECT_EQ(default_costs().backward(), 2);
}

// FwdBwd has its own key; unset, the pair costs its forward plus its
// backward (no overlap), so a schedule of pairs times like one without.
TEST(costs, overlapped_pair_defaults_to_forward_plus_backward) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(parse_cost_flags("fwd=1,bwd-input=1,bwd-weight=1", costs, error)) << error;
  EXPECT_EQ(costs.duration(info(Opcode::FwdBwd).cost), 3);
  ASSERT_TRUE(parse_cost_flags("bwd=4", costs, error)) << error;
  EXPECT_EQ(costs.duration(info(Opcode::FwdBwd).cost), 5);
  ASSERT_TRUE(parse_cost_flags("fwd-bwd=2.5", costs, error)) << error;
  EXPECT_EQ(costs.duration(info(Opcode::FwdBwd).cost), 2.5);
  EXPECT_NE(describe(costs).find("fwd-bwd=2.5"), std::string::npos) << describe(costs);
  std::ostringstream yaml;
  write_costs_yaml(yaml, costs);
  Costs back;
  ASSERT_TRUE(parse_costs_yaml(yaml.str(), back, error)) << error;
  EXPECT_EQ(back.overlapped(), 2.5);
}

TEST(costs, link_fit_recovers_latency_and_bandwidth) {
  // 5 us + bytes / 2000 bytes per us, at two sizes, two pairs each.
  const LinkFit fit = fit_link({{8, 5.004}, {8, 5.004}, {40008, 25.004}, {40008, 25.004}});
  EXPECT_NEAR(fit.latency, 5.0, 1e-9);
  EXPECT_NEAR(fit.bandwidth, 2000.0, 1e-6);
}

TEST(costs, link_fit_without_a_time_per_byte_is_latency_only) {
  const LinkFit one_size = fit_link({{8, 3.0}, {8, 5.0}, {8, 4.0}});
  EXPECT_EQ(one_size.latency, 4.0);
  EXPECT_EQ(one_size.bandwidth, 0.0);
  const LinkFit noisy = fit_link({{8, 6.0}, {4000, 5.0}});  // the larger message came back sooner
  EXPECT_EQ(noisy.bandwidth, 0.0);
  EXPECT_EQ(fit_link({}).latency, 0.0);
}

TEST(costs, measured_links_set_their_class_keys_only) {
  Costs costs;
  costs.cross_host_send = 30;
  set_link_costs(costs, {LinkFit{2.5, 4000}, std::nullopt, std::nullopt});
  EXPECT_EQ(costs.send, 2.5);
  EXPECT_EQ(costs.bandwidth, 4000);
  EXPECT_EQ(costs.cross_host_send, 30);
  set_link_costs(costs, {std::nullopt, LinkFit{40, 120}, std::nullopt});
  EXPECT_EQ(costs.send, 2.5);
  EXPECT_EQ(costs.cross_host_send, 40);
  EXPECT_EQ(costs.cross_host_bandwidth, 120);
  EXPECT_EQ(costs.host_latency, 0);
  set_link_costs(costs, {std::nullopt, std::nullopt, LinkFit{3, 9000}});
  EXPECT_EQ(costs.host_latency, 3);
  EXPECT_EQ(costs.host_bandwidth, 9000);
  EXPECT_EQ(costs.cross_host_send, 40);
  EXPECT_EQ(costs.host_copy_time(18000), 5) << "latency + bytes / bandwidth";
}

TEST(costs, bad_flags_say_what_is_wrong) {
  Costs costs;
  std::string error;
  EXPECT_FALSE(parse_cost_flags("fwdd=1", costs, error));
  EXPECT_NE(error.find("unknown cost 'fwdd'"), std::string::npos) << error;
  EXPECT_NE(error.find("bwd-weight"), std::string::npos) << error;
  EXPECT_FALSE(parse_cost_flags("fwd=x", costs, error));
  EXPECT_FALSE(parse_cost_flags("fwd", costs, error));
  EXPECT_FALSE(parse_cost_flags("fwd=-1", costs, error));
  EXPECT_NE(error.find(">= 0"), std::string::npos) << error;
}

TEST(costs, yaml_round_trips_every_key) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(
      parse_cost_flags("fwd=1.25,bwd=2,bwd-input=1,bwd-weight=1,load=0.01,zero-grad=0.02,"
                       "optimizer=0.5,allreduce=3,send=0.1,bandwidth=1000,act-bytes=4096,"
                       "grad-bytes=8192,cross-host-send=2.5,cross-host-bandwidth=125",
                       costs, error))
      << error;
  std::ostringstream out;
  write_costs_yaml(out, costs, "measured by a test");
  EXPECT_NE(out.str().find("# measured by a test"), std::string::npos);
  Costs read;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error;
  EXPECT_EQ(read.fwd, 1.25);
  EXPECT_EQ(read.backward(), 2);
  EXPECT_EQ(read.load, 0.01);
  EXPECT_EQ(read.zero_grad, 0.02);
  EXPECT_EQ(read.optimizer, 0.5);
  EXPECT_EQ(read.allreduce, 3);
  EXPECT_EQ(read.bandwidth, 1000);
  EXPECT_EQ(read.grad_bytes, 8192);
  EXPECT_EQ(read.cross_host_send, 2.5);
  EXPECT_EQ(read.cross_host_bandwidth, 125);
  EXPECT_DOUBLE_EQ(read.message_time(MessageKind::act), 0.1 + 4.096);
}

// `transfer` is a name in a file and in --cost; the eager limits are
// optional numbers whose default is the runtime's.
TEST(costs, transfer_and_eager_limits_round_trip) {
  Costs costs;
  EXPECT_EQ(costs.transfer, TransferModel::automatic);
  EXPECT_EQ(costs.same_host_eager_limit(), 4096);
  EXPECT_EQ(costs.across_hosts_eager_limit(), 4194304);
  std::string error;
  ASSERT_TRUE(parse_costs_yaml("transfer: eager\neager-limit: 65536\n", costs, error)) << error;
  EXPECT_EQ(costs.transfer, TransferModel::eager);
  EXPECT_EQ(costs.same_host_eager_limit(), 65536);
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error;
  EXPECT_EQ(read.transfer, TransferModel::eager);
  EXPECT_EQ(read.same_host_eager_limit(), 65536);
  EXPECT_NE(describe(read).find("transfer=eager"), std::string::npos) << describe(read);
  ASSERT_TRUE(parse_cost_flags("transfer=rendezvous", read, error)) << error;
  EXPECT_EQ(read.transfer, TransferModel::rendezvous);
  EXPECT_FALSE(parse_costs_yaml("transfer: sometimes\n", read, error));
  EXPECT_EQ(error, "1:11: cost 'transfer' is auto, eager or rendezvous, not 'sometimes'");
}

// A measured profile has more digits than six: it reads back as written.
TEST(costs, yaml_keeps_every_digit_of_a_measured_cost) {
  Costs costs;
  costs.fwd = 123.456789012345;
  costs.bwd_input = 1.0 / 3.0;
  costs.stages.resize(1);
  costs.stages[0].fwd = 98765.4321001;
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  std::string error;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error << '\n' << out.str();
  EXPECT_EQ(read.fwd, costs.fwd) << out.str();
  EXPECT_EQ(read.bwd_input, costs.bwd_input) << out.str();
  ASSERT_EQ(read.stages.size(), 1U);
  EXPECT_EQ(read.stages[0].fwd, costs.stages[0].fwd) << out.str();
}

TEST(costs, yaml_errors_name_the_key) {
  Costs costs;
  std::string error;
  EXPECT_FALSE(parse_costs_yaml("fwd: fast\n", costs, error));
  EXPECT_NE(error.find("'fwd'"), std::string::npos) << error;
  EXPECT_FALSE(parse_costs_yaml("- 1\n- 2\n", costs, error));
  EXPECT_FALSE(parse_costs_yaml("fwd: [1\n", costs, error));
  EXPECT_FALSE(read_costs_yaml("/nonexistent/costs.yaml", costs, error));
  EXPECT_TRUE(parse_costs_yaml("", costs, error));
}

TEST(costs, measurements_give_medians_in_microseconds) {
  const Program program = testing::make_program(
      {1, 3, 1, 1},
      {{testing::op(Opcode::Fwd, 0), testing::op(Opcode::Fwd, 1), testing::op(Opcode::Fwd, 2),
        testing::op(Opcode::Bwd, 0), testing::op(Opcode::Bwd, 1)}});
  const std::vector<MeasuredInstruction> measured = {
      {0, 0, 0, 1000},     {0, 1, 1000, 4000},   {0, 2, 4000, 6000},
      {0, 3, 6000, 10000}, {0, 4, 10000, 16000}, {0, 9, 0, 1}};  // index 9: ignored
  const Costs costs = costs_from_measurements(program, measured);
  EXPECT_DOUBLE_EQ(costs.fwd, 2);
  EXPECT_DOUBLE_EQ(costs.backward(), 5);
  EXPECT_DOUBLE_EQ(costs.optimizer, 0);
}

// A Recompute's key is its own median (unset: the forward's); the copies
// of Offload and Reload are the host link's, measured apart (run_links.cpp).
TEST(costs, measured_recomputation_has_its_own_key) {
  const Program program = testing::make_program(
      {1, 1, 1, 1}, {{testing::op(Opcode::FwdCheckpoint), testing::op(Opcode::Offload),
                      testing::op(Opcode::Recompute)}});
  Costs costs = costs_from_measurements(program, {{0, 0, 0, 2000}, {0, 2, 2000, 5000}});
  EXPECT_DOUBLE_EQ(costs.fwd, 2);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::recompute), 3);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::host_copy), 0);
  costs.recompute.reset();
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::recompute), 2) << "default: the forward's";
  std::string error;
  ASSERT_TRUE(parse_cost_flags("recompute=0.5,host-latency=2,host-bandwidth=100", costs, error))
      << error;
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::recompute), 0.5);
  EXPECT_DOUBLE_EQ(costs.host_copy_time(300), 5);
}

TEST(costs, measurements_give_medians_per_stage_too) {
  // Two stages, one Fwd and one Bwd each; stage 1's take three times longer.
  const Program program =
      testing::make_program({2, 1, 1, 1}, {{testing::op(Opcode::Fwd), testing::op(Opcode::Bwd)},
                                           {testing::op(Opcode::Fwd), testing::op(Opcode::Bwd)}});
  const std::vector<MeasuredInstruction> measured = {
      {0, 0, 0, 1000}, {0, 1, 1000, 3000}, {1, 0, 0, 3000}, {1, 1, 3000, 9000}};
  const Costs costs = costs_from_measurements(program, measured);
  EXPECT_DOUBLE_EQ(costs.fwd, 2);  // the median of 1 and 3: no stage's
  ASSERT_EQ(costs.stages.size(), 2U);
  EXPECT_DOUBLE_EQ(costs.stages[0].fwd, 1);
  EXPECT_DOUBLE_EQ(costs.stages[1].fwd, 3);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::bwd, 0), 2);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::bwd, 1), 6);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::bwd, 2), 4);  // no entry: the keys above
  // One stage: nothing per stage.
  const Program one = testing::make_program({1, 1, 1, 1}, {{testing::op(Opcode::Fwd)}});
  EXPECT_TRUE(costs_from_measurements(one, {{0, 0, 0, 1000}}).stages.empty());
}

TEST(costs, a_collective_counts_its_shortest_replica_per_occurrence) {
  // dp 2, one AllReduce per step, three steps: each occurrence takes the
  // replica that arrived last (the shortest wait), 1, 2 and 3 us.
  const Program program =
      testing::make_program({1, 1, 1, 2}, {{testing::op(Opcode::AllReduce)},
                                           {testing::op(Opcode::AllReduce)}});
  const std::vector<MeasuredInstruction> measured = {
      {0, 0, 0, 10000},     {1, 0, 9000, 10000},  {0, 0, 20000, 22000},
      {1, 0, 13000, 22000}, {0, 0, 30000, 37000}, {1, 0, 34000, 37000}};
  EXPECT_DOUBLE_EQ(costs_from_measurements(program, measured).allreduce, 2);
}

TEST(costs, stages_round_trip_and_flags_override_every_stage) {
  std::string error;
  Costs costs;
  ASSERT_TRUE(
      parse_costs_yaml("fwd: 1\nsend: 5\nstages:\n  - fwd: 2\n    bwd: 3\n  - {}\n", costs, error))
      << error;
  ASSERT_EQ(costs.stages.size(), 2U);
  EXPECT_EQ(costs.stages[0].fwd, 2);
  EXPECT_EQ(costs.stages[0].backward(), 3);
  EXPECT_EQ(costs.stages[1].fwd, 1);  // from the file's other keys
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error << out.str();
  ASSERT_EQ(read.stages.size(), 2U);
  EXPECT_EQ(read.stages[0].fwd, 2);
  EXPECT_EQ(read.stages[0].backward(), 3);
  EXPECT_EQ(read.stages[1].fwd, 1);
  EXPECT_EQ(read.send, 5);
  // A flag given after the file sets the key for every stage.
  ASSERT_TRUE(parse_cost_flags("fwd=7,send=1", read, error)) << error;
  EXPECT_EQ(read.duration(CostKind::fwd, 0), 7);
  EXPECT_EQ(read.duration(CostKind::fwd, 1), 7);
  EXPECT_NE(describe(read).find("compute per stage for 2 stages"), std::string::npos);
}

TEST(costs, stages_take_only_keys_that_differ_by_stage) {
  Costs costs;
  std::string error;
  EXPECT_FALSE(parse_costs_yaml("stages:\n  - fwd: 1\n  - send: 2\n", costs, error));
  EXPECT_NE(error.find("stage 1: 'send' is not a cost that differs by stage"), std::string::npos)
      << error;
  EXPECT_FALSE(parse_costs_yaml("stages: 3\n", costs, error));
  EXPECT_NE(error.find("'stages' is a list"), std::string::npos) << error;
  EXPECT_FALSE(parse_costs_yaml("stages:\n  - 1\n", costs, error));
  EXPECT_NE(error.find("stage 0 of 'stages' is not a mapping"), std::string::npos) << error;
  EXPECT_FALSE(parse_costs_yaml("stages:\n  - fwd: -1\n", costs, error));
  EXPECT_NE(error.find("stage 0: cost 'fwd' must be"), std::string::npos) << error;
}

TEST(costs, chunks_of_a_stage_take_their_own_keys_and_round_trip) {
  std::string error;
  Costs costs;
  ASSERT_TRUE(
      parse_costs_yaml("fwd: 1\nbwd: 9\nstages:\n"
                       "  - fwd: 2\n    chunks:\n      - fwd: 5\n        bwd: 6\n      - {}\n"
                       "  - fwd: 3\n",
                       costs, error))
      << error;
  EXPECT_EQ(costs.duration(CostKind::fwd, 0, 0), 5);
  EXPECT_EQ(costs.duration(CostKind::bwd, 0, 0), 6);
  EXPECT_EQ(costs.duration(CostKind::fwd, 0, 1), 2);  // an entry without keys: its stage's
  EXPECT_EQ(costs.duration(CostKind::bwd, 0, 1), 9);  // the stage's, from the file's keys
  EXPECT_EQ(costs.duration(CostKind::fwd, 0, 2), 2);  // no entry: the stage's
  EXPECT_EQ(costs.duration(CostKind::fwd, 1, 0), 3);
  EXPECT_EQ(costs.duration(CostKind::fwd, 2, 1), 1);  // no stage entry: the file's keys
  EXPECT_EQ(costs.duration(CostKind::fwd, 0), 2);     // readers that ignore chunks
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error << out.str();
  ASSERT_EQ(read.stages.size(), 2U) << out.str();
  ASSERT_EQ(read.stages[0].chunks.size(), 2U) << out.str();
  EXPECT_TRUE(read.stages[1].chunks.empty()) << out.str();
  EXPECT_EQ(read.duration(CostKind::fwd, 0, 0), 5) << out.str();
  EXPECT_EQ(read.duration(CostKind::bwd, 0, 0), 6) << out.str();
  EXPECT_EQ(read.duration(CostKind::fwd, 0, 1), 2) << out.str();
  EXPECT_NE(describe(read).find("per chunk"), std::string::npos) << describe(read);
  // A flag sets its key for every chunk too.
  ASSERT_TRUE(parse_cost_flags("fwd=7", read, error)) << error;
  EXPECT_EQ(read.duration(CostKind::fwd, 0, 0), 7);
  EXPECT_EQ(read.duration(CostKind::fwd, 0, 1), 7);
}

TEST(costs, an_instruction_costs_what_its_chunk_costs) {
  Costs costs;
  std::string error;
  ASSERT_TRUE(
      parse_costs_yaml("stages:\n  - fwd: 2\n    bwd: 4\n    chunks:\n"
                       "      - fwd: 3\n        bwd: 5\n      - fwd: 1\n        bwd: 2\n",
                       costs, error))
      << error;
  EXPECT_EQ(costs.duration(testing::op(Opcode::Fwd, 0, 0), 0), 3);
  EXPECT_EQ(costs.duration(testing::op(Opcode::Fwd, 0, 1), 0), 1);
  // An overlapped pair of two chunks without fwd-bwd: the forward's chunk's
  // forward and the backward's chunk's backward.
  Instruction pair = testing::op(Opcode::FwdBwd, 0, 0);
  set_second_cell(pair, {1, 1});
  EXPECT_EQ(costs.duration(pair, 0), 3 + 2);
  // With fwd-bwd given for the forward's chunk, that.
  costs.stages[0].chunks[0].fwd_bwd = 6.5;
  EXPECT_EQ(costs.duration(pair, 0), 6.5);
  // A stage without an entry: the file's keys, as before.
  EXPECT_EQ(costs.duration(pair, 1), 0);
}

TEST(costs, errors_in_a_cost_file_name_line_and_column) {
  Costs costs;
  std::string error;
  EXPECT_FALSE(parse_costs_yaml(
      "stages:\n  - fwd: 1\n    chunks:\n      - fwd: 1\n      - send: 2\n", costs, error));
  EXPECT_EQ(error.rfind("5:9: stage 0 chunk 1: 'send' is not a cost that differs by stage", 0), 0U)
      << error;
  EXPECT_FALSE(parse_costs_yaml("stages:\n  - fwd: 1\n    chunks: 3\n", costs, error));
  EXPECT_EQ(error.rfind("3:13: stage 0: 'chunks' is a list", 0), 0U) << error;
  EXPECT_FALSE(parse_costs_yaml("stages:\n  - chunks:\n      - fwd: -1\n", costs, error));
  EXPECT_EQ(error.rfind("3:14: stage 0 chunk 0: cost 'fwd' must be", 0), 0U) << error;
  EXPECT_FALSE(parse_costs_yaml("fwd: 1\nbwd: fast\n", costs, error));
  EXPECT_EQ(error.rfind("2:6: cost 'bwd' is not a number", 0), 0U) << error;
  const std::string path = ::testing::TempDir() + "pipevm-costs-position.yaml";
  {
    std::ofstream out(path);
    out << "fwd: 1\nstages:\n  - fwd: 2\n    send: 1\n";
  }
  EXPECT_FALSE(read_costs_yaml(path, costs, error));
  EXPECT_EQ(error.rfind(path + ":4:5: stage 0: 'send'", 0), 0U) << error;
  std::remove(path.c_str());
}

TEST(costs, measurements_give_medians_per_chunk_with_several_chunks) {
  // Two stages of two looped chunks; on stage 0 chunk 0's forwards take 3 us
  // and chunk 1's 1 us; stage 0 runs no BwdInput on chunk 1.
  Program program = testing::make_program(
      {2, 2, 2, 1}, {{testing::op(Opcode::Fwd, 0, 0), testing::op(Opcode::Fwd, 1, 0),
                      testing::op(Opcode::Fwd, 0, 1), testing::op(Opcode::Fwd, 1, 1),
                      testing::op(Opcode::BwdInput, 0, 0)},
                     {testing::op(Opcode::Fwd, 0, 0), testing::op(Opcode::Fwd, 0, 1)}});
  const std::vector<MeasuredInstruction> measured = {
      {0, 0, 0, 3000},     {0, 1, 3000, 6000}, {0, 2, 6000, 7000}, {0, 3, 7000, 8000},
      {0, 4, 8000, 12000}, {1, 0, 0, 5000},    {1, 1, 5000, 7000}};
  const Costs costs = costs_from_measurements(program, measured);
  ASSERT_EQ(costs.stages.size(), 2U);
  ASSERT_EQ(costs.stages[0].chunks.size(), 2U);
  EXPECT_DOUBLE_EQ(costs.stages[0].fwd, 2);  // over both chunks, for readers that ignore chunks
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::fwd, 0, 0), 3);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::fwd, 0, 1), 1);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::fwd, 1, 0), 5);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::fwd, 1, 1), 2);
  EXPECT_DOUBLE_EQ(costs.duration(CostKind::bwd_input, 0, 1), 4);  // never ran: the stage's
  // Written and read back, the chunks survive.
  std::ostringstream out;
  write_costs_yaml(out, costs);
  Costs read;
  std::string error;
  ASSERT_TRUE(parse_costs_yaml(out.str(), read, error)) << error << out.str();
  EXPECT_DOUBLE_EQ(read.duration(CostKind::fwd, 0, 1), 1) << out.str();
  EXPECT_DOUBLE_EQ(read.duration(CostKind::fwd, 1, 0), 5) << out.str();
  // One chunk per rank: no chunk entries.
  program.config.chunks = 1;
  for (const Costs& stage : costs_from_measurements(program, measured).stages) {
    EXPECT_TRUE(stage.chunks.empty());
  }
}

}  // namespace
}  // namespace pipevm
