#include <thread>

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/memory_relief.h"
#include "runtime/memory/shared_account.h"

namespace memtrain::runtime {
namespace {

TEST(MemoryPool, CountsLiveAndPeakBytesExactly) {
  MemoryPool pool("device");
  {
    PoolScope scope(&pool);
    torch::Tensor a = torch::empty({1000}, torch::kFloat32);
    EXPECT_EQ(pool.live(), 4000);
    {
      torch::Tensor b = torch::empty({250}, torch::kFloat64);
      EXPECT_EQ(pool.live(), 6000);
    }
    EXPECT_EQ(pool.live(), 4000);
    EXPECT_EQ(pool.peak(), 6000);
    pool.reset_peak();
    EXPECT_EQ(pool.peak(), 4000);
  }
  EXPECT_EQ(pool.live(), 0);
  EXPECT_EQ(pool.allocations(), 2);
}

TEST(MemoryPool, EnforcedBudgetThrowsOutOfBudgetAndChargesNothing) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  torch::Tensor a = torch::empty({100}, torch::kFloat32);
  pool.set_budget(1000);
  pool.set_enforced(true);
  try {
    torch::Tensor b = torch::empty({200}, torch::kFloat32);
    FAIL() << "allocated over budget";
  } catch (const OutOfBudget& e) {
    EXPECT_EQ(e.request(), 800);
    EXPECT_EQ(e.live(), 400);
    EXPECT_EQ(e.budget(), 1000);
    EXPECT_NE(std::string(e.what()).find("device memory: allocating 800 bytes with 400 bytes live"), std::string::npos);
  }
  EXPECT_EQ(pool.live(), 400);
  EXPECT_EQ(pool.peak(), 400);
  EXPECT_EQ(pool.refusals(), 1);
  pool.set_enforced(false);
  torch::Tensor c = torch::empty({200}, torch::kFloat32);
  EXPECT_EQ(pool.peak(), 1200) << "unenforced: counted, not refused";
  EXPECT_EQ(pool.refusals(), 1);
}

// Frees tensors it holds, one at a time, as a pool over budget asks.
class DroppingRelief : public MemoryRelief {
 public:
  Bytes relieve(Bytes bytes) override {
    ++calls;
    asked.push_back(bytes);
    if (held.empty()) return 0;
    const Bytes freed = static_cast<Bytes>(held.back().nbytes());
    held.pop_back();
    return freed;
  }
  std::vector<torch::Tensor> held;
  std::vector<Bytes> asked;
  int calls = 0;
};

TEST(MemoryPool, AReliefFreesWhatItHoldsBeforeTheBudgetRefuses) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  DroppingRelief relief;
  relief.held = {torch::empty({100}, torch::kFloat32), torch::empty({100}, torch::kFloat32)};
  pool.set_budget(1000);
  pool.set_enforced(true);
  pool.relieve_with(&relief);
  // 800 live; 700 more needs 500 freed: one held tensor (400) is not enough, two are.
  torch::Tensor c = torch::empty({175}, torch::kFloat32);
  EXPECT_EQ(pool.live(), 700);
  EXPECT_EQ(relief.calls, 2);
  EXPECT_EQ(relief.asked, (std::vector<Bytes>{500, 100}));
  EXPECT_LE(pool.peak(), 1000);
  EXPECT_EQ(pool.refused(), 0) << "nothing was refused";
  // Nothing left to free: refused as without a relief, charging nothing.
  EXPECT_THROW(torch::empty({200}, torch::kFloat32), OutOfBudget);
  EXPECT_EQ(relief.calls, 3);
  EXPECT_EQ(pool.live(), 700);
  EXPECT_EQ(pool.refused(), 1500);
  pool.relieve_with(nullptr);
}

TEST(MemoryPool, AReliefsOwnAllocationsAreNeverRelievedAgain) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  struct Allocating : MemoryRelief {
    int calls = 0;
    Bytes relieve(Bytes) override {
      ++calls;
      torch::Tensor t = torch::empty({1000}, torch::kFloat32);  // over budget itself: refused, not relieved
      return 0;
    }
  } relief;
  pool.set_budget(1000);
  pool.set_enforced(true);
  pool.relieve_with(&relief);
  EXPECT_THROW(torch::empty({500}, torch::kFloat32), OutOfBudget);
  EXPECT_EQ(relief.calls, 1);
  EXPECT_EQ(pool.live(), 0);
  pool.relieve_with(nullptr);
}

// Another process's view of one budget: charges count here too.
class CountingAccount : public SharedAccount {
 public:
  explicit CountingAccount(Bytes budget) : budget_(budget) {}
  bool charge(Bytes bytes) override {
    if (live_ + bytes > budget_) return false;
    live_ += bytes;
    return true;
  }
  void refund(Bytes bytes) override { live_ -= bytes; }
  std::string name() const override { return "job group test"; }
  Bytes live() const override { return live_; }
  Bytes budget() const override { return budget_; }

 private:
  Bytes budget_, live_ = 0;
};

TEST(MemoryPool, ASharedAccountRefusesPastItsBudgetEvenWhenThePoolIsNotEnforced) {
  MemoryPool pool("device");
  CountingAccount account(1000);
  PoolScope scope(&pool);
  torch::Tensor before = torch::empty({50}, torch::kFloat32);  // held when the pool begins to share
  ASSERT_TRUE(pool.share(&account));
  EXPECT_EQ(account.live(), 200) << "what the pool held is charged at once";
  torch::Tensor a = torch::empty({100}, torch::kFloat32);
  EXPECT_EQ(account.live(), 600);
  try {
    torch::Tensor b = torch::empty({120}, torch::kFloat32);
    FAIL() << "allocated past the shared budget";
  } catch (const OutOfBudget& e) {
    EXPECT_EQ(e.budget(), 1000);
    EXPECT_NE(std::string(e.what()).find("job group test"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.live(), 600) << "the refused block is charged nowhere";
  EXPECT_EQ(account.live(), 600);
  EXPECT_EQ(pool.refusals(), 1) << "the shared budget's refusal is the pool's too";
  before = torch::Tensor();
  EXPECT_EQ(account.live(), 400) << "a block from before sharing refunds the sum charged for it";
  torch::Tensor after = torch::empty({25}, torch::kFloat32);
  after = torch::Tensor();
  EXPECT_EQ(account.live(), 400) << "the carried sum is spent: a block charged on its own refunds its own";
  a = torch::Tensor();
  EXPECT_EQ(account.live(), 0);
  torch::Tensor c = torch::empty({10}, torch::kFloat32);
  EXPECT_TRUE(pool.share(nullptr));  // detached: c's free later touches the pool only
  c = torch::Tensor();
  EXPECT_EQ(account.live(), 40);
  EXPECT_EQ(pool.live(), 0);
}

TEST(MemoryPool, SharingIsRefusedWhenTheAccountCannotHoldWhatThePoolHolds) {
  MemoryPool pool("device");
  CountingAccount account(100);
  PoolScope scope(&pool);
  torch::Tensor held = torch::empty({50}, torch::kFloat32);
  EXPECT_FALSE(pool.share(&account));
  EXPECT_FALSE(pool.shared());
  EXPECT_EQ(account.live(), 0);
  torch::Tensor more = torch::empty({50}, torch::kFloat32);  // not refused: nothing is shared
  EXPECT_EQ(account.live(), 0);
}

TEST(MemoryPool, OutOfBudgetSurfacesThroughAutogradBackward) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  torch::Tensor w = torch::randn({64, 64}, torch::requires_grad());
  torch::Tensor loss = torch::matmul(torch::randn({512, 64}), w).relu().sum();
  pool.set_budget(pool.live() + 100);
  pool.set_enforced(true);
  EXPECT_THROW(loss.backward(), OutOfBudget);
}

TEST(MemoryPool, HostPoolIsCountedSeparately) {
  CpuDeviceMemory memory;
  auto scope = memory.activate();
  torch::Tensor d = torch::empty({10}, torch::kFloat32);
  {
    PoolScope host(&memory.host());
    torch::Tensor h = torch::empty({100}, torch::kFloat32);
    EXPECT_EQ(memory.host().live(), 400);
    EXPECT_EQ(memory.live(), 40);
  }
  EXPECT_EQ(memory.host().live(), 0);
}

TEST(MemoryPool, FreeOnAnotherThreadIsChargedBackToTheRightPool) {
  MemoryPool pool("device");
  torch::Tensor t;
  {
    PoolScope scope(&pool);
    t = torch::empty({1024}, torch::kUInt8);
  }
  std::thread([moved = std::move(t)]() mutable { moved = torch::Tensor(); }).join();
  EXPECT_EQ(pool.live(), 0);
}

TEST(MemoryPool, ConcurrentThreadsKeepExactCounts) {
  MemoryPool pool("device");
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&pool, k] {
      PoolScope scope(&pool);
      for (int i = 0; i < 500; ++i) {
        torch::Tensor a = torch::empty({1 + (i * 7 + k) % 300}, torch::kFloat32);
        torch::Tensor b = torch::empty({3}, torch::kInt64);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.live(), 0);
  EXPECT_EQ(pool.allocations(), 4 * 500 * 2);
  EXPECT_GT(pool.peak(), 0);
}

TEST(MemoryPool, ATensorMayOutliveItsPool) {
  torch::Tensor t;
  {
    MemoryPool pool("short-lived");
    PoolScope scope(&pool);
    t = torch::ones({16});
  }
  EXPECT_EQ(t.sum().item<float>(), 16.0f);
  t = torch::Tensor();  // frees into the released counters without touching freed memory
}

TEST(MemoryPool, RawAllocationsAreCountedToo) {
  MemoryPool pool("device");
  PoolScope scope(&pool);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  void* p = allocator->raw_allocate(333);
  EXPECT_EQ(pool.live(), 333);
  allocator->raw_deallocate(p);
  EXPECT_EQ(pool.live(), 0);
}

TEST(MemoryPool, AllocationsOutsideAScopeAreNotChargedToAPool) {
  MemoryPool pool("device");
  install_counting_allocator();
  const Bytes before = unpooled_live_bytes();
  torch::Tensor t = torch::empty({100}, torch::kFloat32);
  EXPECT_EQ(unpooled_live_bytes() - before, 400);
  EXPECT_EQ(pool.live(), 0);
}

TEST(DeviceMemory, CpuIsKnownAndCudaNeedsACudaBuild) {
  EXPECT_EQ(make_device_memory("cpu")->device(), torch::Device(torch::kCPU));
  EXPECT_THROW(make_device_memory("tpu"), UsageError);
#ifndef MEMTRAIN_WITH_CUDA
  EXPECT_THROW(make_device_memory("cuda"), UsageError);
#endif
}

TEST(DeviceMemory, AThreadCountsOnceItActivatesTheDevice) {
  CpuDeviceMemory memory;
  std::thread worker([&] {
    EXPECT_FALSE(memory.counts_this_thread());
    {
      const auto scope = memory.activate();
      EXPECT_TRUE(memory.counts_this_thread());
      torch::Tensor t = torch::empty({256}, torch::kFloat32);
      EXPECT_EQ(memory.live(), 1024);
    }
    EXPECT_FALSE(memory.counts_this_thread());
  });
  worker.join();
}

}  // namespace
}  // namespace memtrain::runtime
