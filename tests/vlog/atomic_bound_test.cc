#include "vlog/atomic_bound.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace sepfs {
namespace {

TEST(AtomicBound, RaiseOnlyRaises) {
  std::atomic<uint64_t> a{10};
  RaiseAtLeast(a, uint64_t{5});
  EXPECT_EQ(a.load(), 10u);
  RaiseAtLeast(a, uint64_t{10});
  EXPECT_EQ(a.load(), 10u);
  RaiseAtLeast(a, uint64_t{11}, std::memory_order_relaxed);
  EXPECT_EQ(a.load(), 11u);
}

TEST(AtomicBound, LowerOnlyLowers) {
  std::atomic<uint64_t> a{10};
  LowerAtMost(a, uint64_t{20});
  EXPECT_EQ(a.load(), 10u);
  LowerAtMost(a, uint64_t{3}, std::memory_order_relaxed);
  EXPECT_EQ(a.load(), 3u);
  LowerAtMost(a, uint64_t{0});
  EXPECT_EQ(a.load(), 0u);
}

// Racing threads leave the extreme of everything they offered, whatever the
// interleaving.
TEST(AtomicBound, RacingThreadsKeepTheExtreme) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 20000;
  std::atomic<uint64_t> hi{0}, lo{UINT64_MAX};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; i++) {
        const uint64_t v = i * kThreads + static_cast<uint64_t>(t) + 1;
        RaiseAtLeast(hi, v);
        LowerAtMost(lo, v);
      }
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(hi.load(), kPerThread * kThreads);
  EXPECT_EQ(lo.load(), 1u);
}

}  // namespace
}  // namespace sepfs
