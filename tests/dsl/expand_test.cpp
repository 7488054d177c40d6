// Expansion of the shipped schedules, checked instruction by instruction:
// the P=2, M=3 streams are written out by hand; the P=4, M=8 ones are built
// by loops that restate each paper's order independently of the DSL.
#include <gtest/gtest.h>

#include <filesystem>

#include "support.hpp"

namespace pipevm {
namespace {

using test::config;
using Lines = std::vector<std::string>;

Program expand_file(const std::string& file, const Config& c, const ExpandOptions& o = {}) {
  Diagnostics d;
  auto p = test::compile_file(file, c, d, o);
  EXPECT_TRUE(p.has_value()) << (d.empty() ? "" : d.all().front().message);
  return p ? std::move(*p) : Program{};
}

std::string bwd(int mb, int micro_batches) {
  return (mb == micro_batches - 1 ? "BwdAllReduce " : "Bwd ") + std::to_string(mb);
}

TEST(expand, gpipe_two_stages_three_micro_batches) {
  const Program p = expand_file("schedules/gpipe.pipe", config(2, 3));
  EXPECT_EQ(test::stream(p, 0),
            (Lines{"ZeroGrad", "LoadInput 0", "Fwd 0", "Send act 0", "LoadInput 1", "Fwd 1",
                   "Send act 1", "LoadInput 2", "Fwd 2", "Send act 2", "Recv grad 0", "Bwd 0",
                   "Recv grad 1", "Bwd 1", "Recv grad 2", "BwdAllReduce 2", "OptimizerStep"}));
  EXPECT_EQ(test::stream(p, 1),
            (Lines{"ZeroGrad", "Recv act 0", "Fwd 0", "Recv act 1", "Fwd 1", "Recv act 2", "Fwd 2",
                   "LoadTarget 0", "Bwd 0", "Send grad 0", "LoadTarget 1", "Bwd 1", "Send grad 1",
                   "LoadTarget 2", "BwdAllReduce 2", "Send grad 2", "OptimizerStep"}));
}

TEST(expand, one_f_one_b_two_stages_three_micro_batches) {
  const Program p = expand_file("schedules/1f1b.pipe", config(2, 3));
  EXPECT_EQ(
      test::stream(p, 0),
      (Lines{"ZeroGrad", "LoadInput 0", "Fwd 0", "ISend act 0", "LoadInput 1", "Fwd 1",
             "ISend act 1", "Recv grad 0", "Bwd 0", "LoadInput 2", "Fwd 2", "ISend act 2",
             "Recv grad 1", "Bwd 1", "Recv grad 2", "BwdAllReduce 2", "WaitAll", "OptimizerStep"}));
  EXPECT_EQ(
      test::stream(p, 1),
      (Lines{"ZeroGrad", "Recv act 0", "Fwd 0", "LoadTarget 0", "Bwd 0", "ISend grad 0",
             "Recv act 1", "Fwd 1", "LoadTarget 1", "Bwd 1", "ISend grad 1", "Recv act 2", "Fwd 2",
             "LoadTarget 2", "BwdAllReduce 2", "ISend grad 2", "WaitAll", "OptimizerStep"}));
}

TEST(expand, gpipe_four_stages_eight_micro_batches) {
  const int m = 8;
  const Program p = expand_file("schedules/gpipe.pipe", config(4, m));
  Lines first{"ZeroGrad"};
  Lines last{"ZeroGrad"};
  for (int i = 0; i < m; ++i) {
    const std::string mb = std::to_string(i);
    first.insert(first.end(), {"LoadInput " + mb, "Fwd " + mb, "Send act " + mb});
    last.insert(last.end(), {"Recv act " + mb, "Fwd " + mb});
  }
  for (int i = 0; i < m; ++i) {
    const std::string mb = std::to_string(i);
    first.insert(first.end(), {"Recv grad " + mb, bwd(i, m)});
    last.insert(last.end(), {"LoadTarget " + mb, bwd(i, m), "Send grad " + mb});
  }
  first.push_back("OptimizerStep");
  last.push_back("OptimizerStep");
  EXPECT_EQ(test::stream(p, 0), first);
  EXPECT_EQ(test::stream(p, 3), last);
  EXPECT_EQ(p.rank(1).size(), static_cast<std::size_t>(1 + 6 * m + 1));
}

TEST(expand, one_f_one_b_four_stages_eight_micro_batches) {
  const int m = 8;
  const Program p = expand_file("schedules/1f1b.pipe", config(4, m));
  // Stage 0: three warm-up forwards, then forward i+3 / backward i, then drain.
  Lines first{"ZeroGrad"};
  const auto forward0 = [&](int i) {
    const std::string mb = std::to_string(i);
    first.insert(first.end(), {"LoadInput " + mb, "Fwd " + mb, "ISend act " + mb});
  };
  const auto backward0 = [&](int i) {
    first.insert(first.end(), {"Recv grad " + std::to_string(i), bwd(i, m)});
  };
  for (int i = 0; i < 3; ++i) forward0(i);
  for (int i = 0; i < m - 3; ++i) {
    forward0(i + 3);
    backward0(i);
  }
  for (int i = m - 3; i < m; ++i) backward0(i);
  first.insert(first.end(), {"WaitAll", "OptimizerStep"});
  // The last stage: no warm-up, forward and backward of each micro-batch in turn.
  Lines last{"ZeroGrad"};
  for (int i = 0; i < m; ++i) {
    const std::string mb = std::to_string(i);
    last.insert(last.end(),
                {"Recv act " + mb, "Fwd " + mb, "LoadTarget " + mb, bwd(i, m), "ISend grad " + mb});
  }
  last.insert(last.end(), {"WaitAll", "OptimizerStep"});
  EXPECT_EQ(test::stream(p, 0), first);
  EXPECT_EQ(test::stream(p, 3), last);
}

TEST(expand, naive_runs_each_micro_batch_forward_and_back) {
  const Program p = expand_file("schedules/naive.pipe", config(2, 2));
  EXPECT_EQ(test::stream(p, 0), (Lines{"ZeroGrad", "LoadInput 0", "Fwd 0", "Send act 0",
                                       "Recv grad 0", "Bwd 0", "LoadInput 1", "Fwd 1", "Send act 1",
                                       "Recv grad 1", "BwdAllReduce 1", "OptimizerStep"}));
  EXPECT_EQ(test::stream(p, 1), (Lines{"ZeroGrad", "Recv act 0", "Fwd 0", "LoadTarget 0", "Bwd 0",
                                       "Send grad 0", "Recv act 1", "Fwd 1", "LoadTarget 1",
                                       "BwdAllReduce 1", "Send grad 1", "OptimizerStep"}));
}

TEST(expand, default_peers_follow_the_data) {
  const Program p = expand_file("schedules/1f1b.pipe", config(4, 8));
  for (int rank = 0; rank < 4; ++rank) {
    for (const Instruction& in : p.rank(rank)) {
      if (!operand_parts(in.op).peer) continue;
      const bool downstream = (in.kind == MessageKind::act) == is_send(in.op);
      EXPECT_EQ(in.peer, downstream ? rank + 1 : rank - 1) << disassemble(in);
      EXPECT_FALSE(in.explicit_peer());
    }
  }
}

TEST(expand, default_peers_depend_on_placement) {
  Diagnostics d;
  // v placement: chunk 1 runs back from the last stage; its activations go to stage - 1.
  const auto p = test::compile_text(
      "placement v\nstage 1 { Send act 0 chunk 1; Send act 0 }\n"
      "stage 3 { Send act 0 chunk 0 }",
      config(4, 2, 2), d);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->placement, Placement::v);
  EXPECT_EQ(p->rank(1)[0].peer, 0);
  EXPECT_EQ(p->rank(1)[1].peer, 2);
  EXPECT_EQ(p->rank(3)[0].peer, 3);  // the turn of the V stays on the last stage
}

TEST(expand, data_parallel_ranks_follow_pipelines) {
  const Program p = expand_file("schedules/gpipe.pipe", config(2, 2, 1, 3));
  ASSERT_EQ(p.ranks(), 6);
  EXPECT_EQ(test::stream(p, 4), test::stream(p, 0));
  EXPECT_EQ(test::stream(p, 5), test::stream(p, 1));
}

TEST(expand, only_rank_leaves_the_others_empty) {
  ExpandOptions options;
  options.only_rank = 2;
  const Program all = expand_file("schedules/1f1b.pipe", config(4, 8));
  const Program one = expand_file("schedules/1f1b.pipe", config(4, 8), options);
  ASSERT_EQ(one.ranks(), 4);
  EXPECT_EQ(one.rank(0).size(), 0u);
  EXPECT_EQ(one.rank(3).size(), 0u);
  EXPECT_EQ(test::stream(one, 2), test::stream(all, 2));
}

TEST(expand, max_instructions_stops_runaway_expansion) {
  Diagnostics d;
  ExpandOptions options;
  options.max_instructions = 50;
  EXPECT_FALSE(test::compile_file("schedules/gpipe.pipe", config(4, 8), d, options));
  EXPECT_EQ(test::codes(d), (std::vector<std::string>{"PV1010"}));
  EXPECT_EQ(d.all().front().location.rank, 1);
}

TEST(expand, a_failed_require_names_its_message_and_configuration) {
  Diagnostics d;
  EXPECT_FALSE(test::compile_file("schedules/1f1b.pipe", config(4, 3), d));
  ASSERT_EQ(test::codes(d), (std::vector<std::string>{"PV1100"}));
  EXPECT_EQ(class_of(d.all().front().kind), DiagnosticClass::require);
  EXPECT_EQ(d.all().front().message, "1F1B needs at least one micro-batch per stage");
  ASSERT_EQ(d.all().front().notes.size(), 1u);
  EXPECT_NE(d.all().front().notes[0].message.find("micro_batches = 3"), std::string::npos);
}

TEST(expand, errors_inside_procedures_name_the_call_site) {
  Diagnostics d;
  EXPECT_FALSE(test::compile_text("proc f(x) { Fwd 10 / x }\nf(stage)", config(2, 4), d));
  ASSERT_EQ(test::codes(d), (std::vector<std::string>{"PV1007"}));
  ASSERT_EQ(d.all().front().notes.size(), 1u);
  EXPECT_EQ(d.all().front().notes[0].message, "in 'f', called here");
}

// `pipevm expand` prints each rank as a flat program; it must read back as
// the same stream, for every shipped schedule that expands.
TEST(expand, disassembled_ranks_parse_back_to_the_same_stream) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PIPEVM_SOURCE_DIR "/schedules")) {
    if (entry.path().extension() != ".pipe") continue;
    for (const Config c : {config(4, 8), config(4, 8, 2), config(1, 4, 1, 2)}) {
      Diagnostics d;
      const auto p = test::compile_file("schedules/" + entry.path().filename().string(), c, d);
      if (!p) continue;  // a `require` refuses this configuration
      ++checked;
      std::string header = "placement " + std::string(name(p->placement)) + "\n";
      if (p->topology) header += "topology " + p->topology->name + "\n";
      for (const Opcode op : p->carried) header += "carry " + std::string(name(op)) + "\n";
      for (int rank = 0; rank < c.ranks(); ++rank) {
        Diagnostics again;
        const auto back = test::compile_text(header + disassemble_rank(*p, rank), c, again);
        ASSERT_TRUE(back) << entry.path() << " rank " << rank;
        ASSERT_EQ(back->rank(rank).size(), p->rank(rank).size()) << entry.path();
        for (std::size_t i = 0; i < p->rank(rank).size(); ++i) {
          const Instruction& a = p->rank(rank)[i];
          const Instruction& b = back->rank(rank)[i];
          EXPECT_EQ(disassemble(a), disassemble(b)) << entry.path() << " rank " << rank;
          EXPECT_EQ(a.peer, b.peer) << entry.path() << " rank " << rank << ": " << disassemble(a);
          EXPECT_EQ(a.explicit_peer(), b.explicit_peer());
        }
      }
    }
  }
  EXPECT_GE(checked, 3);
}

}  // namespace
}  // namespace pipevm
