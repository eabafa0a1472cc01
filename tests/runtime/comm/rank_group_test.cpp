// Real ranks: forked processes meeting over loopback through a store the
// test serves, as `memtrain train --ranks N` does, or rank 0 serves, as
// ranks started by hand do.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <torch/torch.h>

#include "runtime/comm/rank_group.h"
#include "support/forked_ranks.h"

namespace memtrain::runtime {
namespace {

using testing::run_ranks;
using testing::StoreHost;

std::string hex(const torch::Tensor& t) {
  std::ostringstream out;
  const torch::Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  for (std::size_t i = 0; i < c.nbytes(); ++i) out << std::hex << static_cast<int>(p[i]) << ".";
  return out.str();
}

// What rank r contributes: values whose sum depends on the order of adding.
torch::Tensor contribution(int rank) {
  torch::manual_seed(100 + rank);
  return torch::randn({257}).mul_(std::pow(10.0, 3 * rank));
}

TEST(RankGroup, OrderedSumIsTheSumInRankOrderBitForBit) {
  for (int world : {2, 3}) {
    const auto outcomes = run_ranks(world, 20, [](RankGroup& g) {
      std::vector<torch::Tensor> ts{contribution(g.rank()), contribution(g.rank()).mul(-0.5)};
      g.ordered_sum(ts);
      return hex(ts[0]) + "|" + hex(ts[1]);
    });
    torch::Tensor a = contribution(0), b = contribution(0).mul(-0.5);
    for (int r = 1; r < world; ++r) {
      a = a + contribution(r);
      b = b + contribution(r).mul(-0.5);
    }
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(outcomes[r].status, 0) << outcomes[r].text;
      EXPECT_EQ(outcomes[r].text, hex(a) + "|" + hex(b)) << "rank " << r << " of " << world;
    }
  }
}

// Tensors of several shapes that buckets of 1 KiB group as
// {0, 1, 2}, {3} (alone: larger than a bucket), {4, 5}.
std::vector<torch::Tensor> bucketed_tensors(int rank) {
  std::vector<torch::Tensor> ts;
  const std::vector<std::vector<std::int64_t>> shapes{{10}, {4, 8}, {3}, {300}, {2, 3, 5}, {40}};
  for (std::size_t k = 0; k < shapes.size(); ++k)
    ts.push_back(torch::randn(shapes[k], at::detail::createCPUGenerator(static_cast<std::uint64_t>(100 * rank) + k)));
  return ts;
}

TEST(RankGroup, TensorsInBucketsAreSummedAndBroadcastAsOneByOne) {
  const Bytes bucket = 1024;
  ASSERT_EQ(tensor_buckets(bucketed_tensors(0), bucket).size(), 3u);
  const int world = 3;
  const auto outcomes = run_ranks(world, 20, [&](RankGroup& g) {
    std::vector<torch::Tensor> ordered = bucketed_tensors(g.rank()), ring = bucketed_tensors(g.rank()),
                               shared = bucketed_tensors(g.rank());
    g.ordered_sum(ordered, bucket);
    g.sum(ring, bucket);
    g.broadcast(shared, 2, bucket);
    std::string out;
    for (std::size_t k = 0; k < ordered.size(); ++k) {
      // The ring may add in another order: equal within rounding.
      const bool ring_close = torch::allclose(ring[k], ordered[k], 1e-5, 1e-6);
      out += hex(ordered[k]) + "|" + hex(shared[k]) + "|" + (ring_close ? "close" : "far") + ";";
    }
    return out;
  });
  std::vector<torch::Tensor> sums = bucketed_tensors(0);
  for (int r = 1; r < world; ++r) {
    const std::vector<torch::Tensor> theirs = bucketed_tensors(r);
    for (std::size_t k = 0; k < sums.size(); ++k) sums[k] = sums[k] + theirs[k];
  }
  const std::vector<torch::Tensor> roots = bucketed_tensors(2);
  std::string expected;
  for (std::size_t k = 0; k < sums.size(); ++k) expected += hex(sums[k]) + "|" + hex(roots[k]) + "|close;";
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(outcomes[r].status, 0) << outcomes[r].text;
    EXPECT_EQ(outcomes[r].text, expected) << "rank " << r;
  }
}

TEST(RankGroup, SumBroadcastAndGatherAgreeOnEveryRank) {
  const int world = 3;
  const auto outcomes = run_ranks(world, 20, [](RankGroup& g) {
    std::vector<torch::Tensor> s{torch::full({5}, static_cast<float>(g.rank() + 1))};
    g.sum(s);
    std::vector<torch::Tensor> b{torch::full({3}, static_cast<float>(10 * g.rank() + 7))};
    g.broadcast(b, 1);
    const auto all = g.gather({static_cast<double>(g.rank()), 0.5 * g.rank()});
    std::ostringstream out;
    out << s[0].sum().item<float>() << " " << b[0][2].item<float>();
    for (const auto& v : all) out << " " << v[0] << "/" << v[1];
    return out.str();
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(outcomes[r].status, 0) << outcomes[r].text;
    EXPECT_EQ(outcomes[r].text, "30 17 0/0 1/0.5 2/1");  // (1+2+3)*5, rank 1's 17, every rank's pair
  }
}

TEST(RankGroup, AKilledRankIsNamedByTheOthers) {
  const int world = 3;
  const auto outcomes = run_ranks(world, 30, [](RankGroup& g) {
    std::vector<torch::Tensor> t{torch::ones({4})};
    g.sum(t);  // everyone met
    if (g.rank() == 2) raise(SIGKILL);
    g.sum(t);
    return std::string("finished");
  });
  EXPECT_TRUE(WIFSIGNALED(outcomes[2].status));
  for (int r : {0, 1}) {
    EXPECT_EQ(WEXITSTATUS(outcomes[r].status), 1) << outcomes[r].text;
    EXPECT_NE(outcomes[r].text.find("rank 2 died or stopped"), std::string::npos) << outcomes[r].text;
  }
}

// Rank 0 serves the store and finds rank 1 dead long before rank 2 gets to
// its next collective: rank 0 keeps the store up until rank 2 has looked,
// so rank 2 too names rank 1, not the store's host for leaving.
TEST(RankGroup, ARankThatServesTheStoreOutlastsTheOthersDiagnoses) {
  const int world = 3;
  const auto outcomes = run_ranks(
      world, 30,
      [](RankGroup& g) {
        std::vector<torch::Tensor> t{torch::ones({4})};
        g.sum(t);
        if (g.rank() == 1) raise(SIGKILL);
        if (g.rank() == 2) sleep(5);  // rank 0 has diagnosed rank 1 by now
        g.broadcast(t, 1);            // rank 0 hears from dead rank 1 directly
        return std::string("finished");
      },
      nullptr, StoreHost::kRankZero);
  EXPECT_TRUE(WIFSIGNALED(outcomes[1].status));
  for (int r : {0, 2}) {
    EXPECT_EQ(WEXITSTATUS(outcomes[r].status), 1) << outcomes[r].text;
    EXPECT_NE(outcomes[r].text.find("rank 1 died or stopped"), std::string::npos) << outcomes[r].text;
  }
}

// Rank 0 serves the store and gives up: the others hear why, at once.
TEST(RankGroup, ARankThatServesTheStoreAndGivesUpSaysWhy) {
  const int world = 2;
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = run_ranks(
      world, 30,
      [](RankGroup& g) -> std::string {
        std::vector<torch::Tensor> t{torch::ones({4})};
        g.sum(t);
        if (g.rank() == 0) {
          g.fail("rank 0: the data ran out");
          throw Error("rank 0: the data ran out");
        }
        sleep(2);  // rank 0 has given up by now
        g.sum(t);
        return "finished";
      },
      nullptr, StoreHost::kRankZero);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(WEXITSTATUS(outcomes[0].status), 1) << outcomes[0].text;
  EXPECT_EQ(WEXITSTATUS(outcomes[1].status), 1) << outcomes[1].text;
  EXPECT_NE(outcomes[1].text.find("rank 0 gave up: rank 0: the data ran out"), std::string::npos) << outcomes[1].text;
  // Its connections closed, rank 1 did not wait out the 30 s timeout.
  EXPECT_LT(seconds, 25) << outcomes[1].text;
}

TEST(RankGroup, AFailedRankSaysWhy) {
  const int world = 2;
  const auto outcomes = run_ranks(world, 30, [](RankGroup& g) {
    std::vector<torch::Tensor> t{torch::ones({4})};
    if (g.rank() == 1) {
      g.fail("rank 1: budget 1 MiB is below the minimum");
      _exit(3);
    }
    g.sum(t);
    return std::string("finished");
  });
  EXPECT_EQ(WEXITSTATUS(outcomes[1].status), 3);
  EXPECT_TRUE(WIFEXITED(outcomes[0].status)) << "rank 0 killed by signal " << WTERMSIG(outcomes[0].status);
  EXPECT_EQ(WEXITSTATUS(outcomes[0].status), 1);
  EXPECT_NE(outcomes[0].text.find("rank 1 gave up: rank 1: budget 1 MiB is below the minimum"), std::string::npos)
      << outcomes[0].text;
}

TEST(RankGroup, AHungRankIsNamedAfterTheTimeout) {
  const int world = 2;
  const auto outcomes = run_ranks(world, 2, [](RankGroup& g) {
    std::vector<torch::Tensor> t{torch::ones({4})};
    g.sum(t);
    if (g.rank() == 1) {
      // Alive (heartbeat beating) but never reaching the next collective.
      sleep(6);
      _exit(4);
    }
    g.sum(t);
    return std::string("finished");
  });
  EXPECT_EQ(WEXITSTATUS(outcomes[0].status), 1);
  EXPECT_NE(outcomes[0].text.find("rank 1 is alive but did not reach it"), std::string::npos) << outcomes[0].text;
}

TEST(RankGroup, ARankThatNeverArrivesIsNamedByTheOthers) {
  const int world = 3;
  const auto outcomes = run_ranks(
      world, 3, [](RankGroup&) { return std::string("met"); },
      [](int rank) {
        if (rank == 2) _exit(3);  // dies before it reaches the store
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(WEXITSTATUS(outcomes[r].status), 1) << outcomes[r].text;
    EXPECT_NE(outcomes[r].text.find("rank 2 never arrived"), std::string::npos) << outcomes[r].text;
  }
  EXPECT_EQ(WEXITSTATUS(outcomes[2].status), 3);
}

TEST(RankGroup, BadAddressesAreRefused) {
  RankAddress a;
  a.world = 2;
  a.rank = 2;
  EXPECT_THROW(RankGroup{a}, UsageError);
  RankAddress m;
  EXPECT_THROW(parse_master("nohost", "--master", m), UsageError);
  EXPECT_THROW(parse_master("host:99999", "--master", m), UsageError);
  parse_master("10.1.2.3:29400", "--master", m);
  EXPECT_EQ(m.host, "10.1.2.3");
  EXPECT_EQ(m.port, 29400);
}

}  // namespace
}  // namespace memtrain::runtime
