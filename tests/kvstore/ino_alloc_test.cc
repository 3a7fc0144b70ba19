#include "kvstore/ino_alloc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

using testing::TempDir;

class InodeAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    Open();
  }
  void Open() {
    alloc_.reset();
    store_.reset();
    MetaOptions o;
    o.create_if_missing = true;
    Status s = MetaStore::Open(tmp_.Sub("meta"), o, &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    alloc_ = std::make_unique<InodeAllocator>(store_.get());
    s = alloc_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  uint64_t Alloc(uint64_t parent) {
    uint64_t ino = 0;
    Status s = alloc_->Allocate(parent, &ino);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ino;
  }
  uint64_t PersistedCounter() {
    uint64_t v = 0;
    EXPECT_TRUE(store_->GetCounter("next_ino", &v).ok());
    return v;
  }

  TempDir tmp_;
  std::unique_ptr<MetaStore> store_;
  std::unique_ptr<InodeAllocator> alloc_;
};

TEST_F(InodeAllocatorTest, FreshStoreStartsAtFirstIno) {
  EXPECT_EQ(alloc_->TEST_next(), InodeAllocator::kFirstIno);
  EXPECT_EQ(Alloc(1), InodeAllocator::kFirstIno);
}

TEST_F(InodeAllocatorTest, ChildrenOfOneParentAreConsecutive) {
  std::vector<uint64_t> a, b;
  // Interleave two parents: each still gets a consecutive run.
  for (uint64_t i = 0; i < InodeAllocator::kDirRunSize; ++i) {
    a.push_back(Alloc(1));
    b.push_back(Alloc(77));
  }
  for (size_t i = 1; i < a.size(); ++i) {
    EXPECT_EQ(a[i], a[i - 1] + 1);
    EXPECT_EQ(b[i], b[i - 1] + 1);
  }
  // After a run is used up, the next child starts a new run, still above.
  const uint64_t next = Alloc(1);
  EXPECT_GT(next, std::max(a.back(), b.back()));
  EXPECT_EQ(Alloc(1), next + 1);
}

TEST_F(InodeAllocatorTest, CounterIsPersistedBeforeNumbersAreUsed) {
  uint64_t max_ino = 0;
  // Enough parents to need several leases.
  for (uint64_t p = 0; p < 3 * InodeAllocator::kLeaseSize / InodeAllocator::kDirRunSize; ++p) {
    max_ino = std::max(max_ino, Alloc(1000 + p));
    ASSERT_GT(PersistedCounter(), max_ino);
  }
  EXPECT_GE(store_->stats().synced_writes, 3u);
}

TEST_F(InodeAllocatorTest, NumbersAreNeverReusedAfterReopenWithoutShutdown) {
  std::set<uint64_t> before;
  for (uint64_t p = 1; p <= 20; ++p) {
    for (int i = 0; i < 5; ++i) before.insert(Alloc(p));
  }
  ASSERT_EQ(before.size(), 100u);
  const uint64_t max_before = *before.rbegin();
  // No "save": the allocator and the store just go away, as in a crash after
  // the last synced write.
  Open();
  for (uint64_t p = 1; p <= 20; ++p) {
    const uint64_t ino = Alloc(p);
    EXPECT_GT(ino, max_before);
    EXPECT_EQ(before.count(ino), 0u);
  }
  EXPECT_GT(alloc_->TEST_next(), max_before);
}

TEST_F(InodeAllocatorTest, ForgetDirStartsANewRun) {
  const uint64_t first = Alloc(5);
  Alloc(6);  // another directory takes the numbers after 5's run
  alloc_->ForgetDir(5);
  const uint64_t after = Alloc(5);
  EXPECT_GE(after, first + InodeAllocator::kDirRunSize);
}

TEST_F(InodeAllocatorTest, ManyDirectoriesStayUniqueWhenRunsAreDropped) {
  // More parents than the sub-lease map keeps; numbers must stay unique.
  std::set<uint64_t> seen;
  for (uint64_t round = 0; round < 2; ++round) {
    for (uint64_t p = 0; p < 5000; ++p) {
      EXPECT_TRUE(seen.insert(Alloc(p)).second);
    }
  }
  EXPECT_EQ(seen.size(), 10000u);
}

TEST_F(InodeAllocatorTest, UniqueAndIncreasingAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  std::vector<std::vector<uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        uint64_t ino = 0;
        // Half the calls share parent 1, half use the thread's own parent.
        const uint64_t parent = (i % 2 == 0) ? 1 : 100 + t;
        ASSERT_TRUE(alloc_->Allocate(parent, &ino).ok());
        got[t].push_back(ino);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(got[t].size(), static_cast<size_t>(kPerThread));
    // Each parent's numbers, as one thread sees them, strictly increase.
    for (int parity = 0; parity < 2; ++parity) {
      uint64_t last = 0;
      for (int i = parity; i < kPerThread; i += 2) {
        EXPECT_GT(got[t][i], last);
        last = got[t][i];
      }
    }
    all.insert(got[t].begin(), got[t].end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_GT(PersistedCounter(), *all.rbegin());
}

TEST_F(InodeAllocatorTest, CorruptCounterFailsInit) {
  Batch b;
  b.Put(CounterKey("next_ino"), "bad");
  ASSERT_TRUE(store_->Write(&b, true).ok());
  InodeAllocator fresh(store_.get());
  Status s = fresh.Init();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

}  // namespace
}  // namespace sepfs::kv
