// The in-process Comm: message order and matching by tag, non-blocking
// receives posted before the send, data-parallel sums, world gathers and
// agreements, abort() waking every rank instead of hanging, and the
// start-up ping-pong of run --profile (link_probe.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "inprocess_comm.hpp"
#include "link_probe.hpp"

namespace pipevm::runtime {
namespace {

TEST(comm, messages_match_by_tag_and_keep_order) {
  run_in_process(2, 1, [](Comm& comm) {
    if (comm.stage() == 0) {
      const std::vector<float> a = {1, 2}, b = {3, 4}, c = {5, 6};
      comm.send(1, 7, a);
      comm.send(1, 9, b);
      comm.send(1, 7, c);
    } else {
      std::vector<float> x(2), y(2), z(2);
      comm.recv(0, 9, y);  // tag 9 first, although it was sent second
      comm.recv(0, 7, x);
      comm.recv(0, 7, z);
      EXPECT_EQ(x, (std::vector<float>{1, 2}));
      EXPECT_EQ(y, (std::vector<float>{3, 4}));
      EXPECT_EQ(z, (std::vector<float>{5, 6}));
    }
  });
}

TEST(comm, receives_posted_early_take_messages_in_posting_order) {
  run_in_process(2, 1, [](Comm& comm) {
    if (comm.stage() == 1) {
      std::vector<float> first(1), second(1);
      const auto r1 = comm.irecv(0, 3, first);
      const auto r2 = comm.irecv(0, 3, second);
      EXPECT_EQ(comm.pending(), 2);
      comm.wait(r2);
      comm.wait(r1);
      EXPECT_EQ(first[0], 10.0F);
      EXPECT_EQ(second[0], 20.0F);
      EXPECT_EQ(comm.pending(), 0);
    } else {
      const std::vector<float> a = {10}, b = {20};
      comm.isend(1, 3, a);
      comm.isend(1, 3, b);
      comm.wait_all();
      EXPECT_EQ(comm.pending(), 0);
    }
  });
}

TEST(comm, probe_times_each_neighbour_pair_once_per_size) {
  std::vector<std::vector<ProbeTiming>> by_rank(6);
  run_in_process(3, 2, [&](Comm& comm) {
    const std::size_t sizes[] = {2, 1000};
    by_rank[static_cast<std::size_t>(comm.world_rank())] = probe_pipeline_links(comm, sizes, 3);
  });
  for (int rank = 0; rank < 6; ++rank) {
    const std::vector<ProbeTiming>& timings = by_rank[static_cast<std::size_t>(rank)];
    if (rank % 3 == 2) {  // the last stage of each pipeline only answers
      EXPECT_TRUE(timings.empty()) << "rank " << rank;
      continue;
    }
    ASSERT_EQ(timings.size(), 2U) << "rank " << rank;
    EXPECT_EQ(timings[0].rank, rank);
    EXPECT_EQ(timings[0].peer, rank + 1);
    EXPECT_EQ(timings[0].bytes, 8.0);
    EXPECT_EQ(timings[1].bytes, 4000.0);
    for (const ProbeTiming& t : timings) EXPECT_GT(t.one_way_us, 0.0);
  }
}

TEST(comm, allreduce_sums_within_the_stage_only) {
  run_in_process(2, 3, [](Comm& comm) {
    std::vector<float> values = {static_cast<float>(comm.world_rank()), 1.0F};
    comm.allreduce_sum(values);
    // Stage s is held by world ranks s, s + 2, s + 4.
    const float expected = static_cast<float>(3 * comm.stage() + 6);
    EXPECT_EQ(values[0], expected);
    EXPECT_EQ(values[1], 3.0F);
    std::vector<float> more = {2.0F};
    comm.wait(comm.iallreduce_sum(more));
    EXPECT_EQ(more[0], 6.0F);
  });
}

TEST(comm, split_groups_sum_among_their_members_only) {
  run_in_process(4, 1, [](Comm& comm) {
    // Stages s and 3 - s form a group, like mirror placement's holders.
    const int stage = comm.stage();
    const Comm::Group pair = comm.split(std::min(stage, 3 - stage), stage);
    EXPECT_NE(pair, Comm::kDataParallel);
    std::vector<float> values = {static_cast<float>(stage), 1.0F};
    comm.allreduce_sum(values, pair);
    EXPECT_EQ(values[0], 3.0F);
    EXPECT_EQ(values[1], 2.0F);
    std::vector<float> alone = {5.0F};
    comm.allreduce_sum(alone);  // the data-parallel group: the rank alone (dp = 1)
    EXPECT_EQ(alone[0], 5.0F);
  });
}

TEST(comm, gather_broadcast_and_agreement) {
  run_in_process(2, 2, [](Comm& comm) {
    std::vector<float> mine(static_cast<std::size_t>(comm.world_rank()) + 1,
                            static_cast<float>(comm.world_rank()));
    std::vector<std::size_t> counts;
    const std::vector<float> all = gather_floats_to_root(comm, mine, counts);
    if (comm.world_rank() == 0) {
      EXPECT_EQ(counts, (std::vector<std::size_t>{1, 2, 3, 4}));
      EXPECT_EQ(all, (std::vector<float>{0, 1, 1, 2, 2, 2, 3, 3, 3, 3}));
    } else {
      EXPECT_TRUE(all.empty());
    }
    std::vector<std::byte> word(4, std::byte{static_cast<unsigned char>(comm.world_rank())});
    if (comm.world_rank() == 0) word.assign(4, std::byte{42});
    comm.broadcast_from_root(word);
    EXPECT_EQ(word[3], std::byte{42});
    EXPECT_TRUE(comm.all_ok(true));
    EXPECT_FALSE(comm.all_ok(comm.world_rank() != 2));
  });
}

TEST(comm, abort_wakes_every_rank) {
  std::atomic<int> woken = 0;
  EXPECT_THROW(run_in_process(3, 1,
                              [&](Comm& comm) {
                                if (comm.stage() == 0) comm.abort("rank 0 gives up");
                                std::vector<float> never(1);
                                try {
                                  comm.recv(0, 1, never);
                                } catch (const CommError&) {
                                  ++woken;
                                  throw;
                                }
                              }),
               CommError);
  EXPECT_EQ(woken.load(), 2);
}

TEST(comm, a_receive_that_never_comes_times_out) {
  InProcessWorld world(2, 1, std::chrono::milliseconds(50));
  InProcessComm comm(world, 1);
  std::vector<float> never(1);
  EXPECT_THROW(comm.recv(0, 1, never), CommError);
}

}  // namespace
}  // namespace pipevm::runtime
