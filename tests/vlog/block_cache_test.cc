#include "vlog/block_cache.h"

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sepfs::vlog {
namespace {

BlockPtr Ptr(uint32_t seg, uint32_t off, uint32_t len, uint64_t seq) {
  BlockPtr p;
  p.segment = seg;
  p.offset = off;
  p.length = len;
  p.seq = seq;
  return p;
}

RecordRef Data(size_t n, char c) { return RefOf(std::make_shared<const std::string>(n, c)); }

constexpr uint64_t kCharge1k = 1024 + BlockCache::kEntryOverhead;

TEST(BlockCacheTest, HitMissAndExactPointerMatch) {
  BlockCache c(1 << 20, 1);
  const BlockPtr p = Ptr(3, 64, 1024, 7);
  EXPECT_EQ(c.Lookup(p, 1, 0).data, nullptr);
  c.Insert(p, 1, 0, Data(1024, 'a'), false);
  CacheHit h = c.Lookup(p, 1, 0);
  ASSERT_NE(h.data, nullptr);
  EXPECT_EQ(*h.data, std::string(1024, 'a'));
  EXPECT_FALSE(h.prefetched);
  EXPECT_TRUE(c.Contains(p, 1, 0));

  // Same location, another record (seq, length, owner or block differ): miss.
  EXPECT_FALSE(c.Contains(Ptr(3, 64, 1024, 8), 1, 0));
  EXPECT_FALSE(c.Contains(p, 2, 0));
  EXPECT_FALSE(c.Contains(p, 1, 1));
  EXPECT_FALSE(c.Contains(Ptr(3, 64, 512, 7), 1, 0));
  // A lookup with a different seq drops the stale entry.
  EXPECT_EQ(c.Lookup(Ptr(3, 64, 1024, 8), 1, 0).data, nullptr);
  EXPECT_FALSE(c.Contains(p, 1, 0));

  BlockCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.inserts, 1u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.usage, 0u);
}

TEST(BlockCacheTest, DisabledAtCapacityZero) {
  BlockCache c(0);
  EXPECT_FALSE(c.enabled());
  const BlockPtr p = Ptr(1, 64, 10, 1);
  c.Insert(p, 1, 0, Data(10, 'x'), true);
  EXPECT_EQ(c.Lookup(p, 1, 0).data, nullptr);
  EXPECT_EQ(c.stats().entries, 0u);
}

TEST(BlockCacheTest, LruEvictionWithinCapacity) {
  BlockCache c(4 * kCharge1k, 1);  // room for exactly 4 entries
  for (uint32_t i = 0; i < 4; i++) c.Insert(Ptr(1, 64 + i * 2000, 1024, i + 1), 1, i, Data(1024, 'a' + i), false);
  EXPECT_EQ(c.stats().usage, 4 * kCharge1k);
  // Touch entry 0: entry 1 becomes the least recently used.
  ASSERT_NE(c.Lookup(Ptr(1, 64, 1024, 1), 1, 0).data, nullptr);
  c.Insert(Ptr(1, 64 + 4 * 2000, 1024, 5), 1, 4, Data(1024, 'e'), false);
  EXPECT_TRUE(c.Contains(Ptr(1, 64, 1024, 1), 1, 0));
  EXPECT_FALSE(c.Contains(Ptr(1, 64 + 2000, 1024, 2), 1, 1));
  EXPECT_TRUE(c.Contains(Ptr(1, 64 + 4 * 2000, 1024, 5), 1, 4));
  BlockCacheStats s = c.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 4u);
  EXPECT_LE(s.usage, s.capacity);
}

// An entry whose data lies inside a larger read buffer is charged its
// share of that buffer, and its hits say so.
TEST(BlockCacheTest, InPlaceEntriesAreChargedTheirShare) {
  BlockCache c(1 << 20, 1);
  c.Insert(Ptr(1, 64, 1024, 1), 1, 0, Data(1024, 'a'), false, /*in_place_share=*/4096);
  c.Insert(Ptr(1, 2000, 1024, 2), 1, 1, Data(1024, 'b'), false);
  EXPECT_EQ(c.stats().usage, 4096 + BlockCache::kEntryOverhead + kCharge1k);
  EXPECT_TRUE(c.Lookup(Ptr(1, 64, 1024, 1), 1, 0).in_place);
  EXPECT_FALSE(c.Lookup(Ptr(1, 2000, 1024, 2), 1, 1).in_place);
  c.Erase(Ptr(1, 64, 1024, 1));
  EXPECT_EQ(c.stats().usage, kCharge1k);
}

TEST(BlockCacheTest, TooLargeEntryIsNotCached) {
  BlockCache c(2048, 1);
  c.Insert(Ptr(1, 64, 4096, 1), 1, 0, Data(4096, 'z'), false);
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(c.stats().inserts, 0u);
}

TEST(BlockCacheTest, TooLargePrefetchedEntryCountsAsWasted) {
  BlockCache c(2048, 1);
  c.Insert(Ptr(1, 64, 4096, 1), 1, 0, Data(4096, 'z'), /*prefetched=*/true);
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(c.stats().evicted_unused_bytes, 4096u);
}

TEST(BlockCacheTest, SmallCacheUsesFewerShardsAndStillCaches) {
  // 1 MiB over 16 shards would give 64 KiB a shard: not one 64 KiB block
  // (plus its charge) would fit, and every insert would be dropped.
  constexpr uint64_t kBlock = 64 << 10;
  BlockCache c(1 << 20, 16, kBlock);
  EXPECT_EQ(c.num_shards(), 2u);  // 512 KiB a shard: 7 blocks
  for (uint32_t i = 0; i < 8; i++) {
    c.Insert(Ptr(1, 64 + i * (kBlock + 64), kBlock, i + 1), 1, i, Data(kBlock, 'a'), true);
  }
  BlockCacheStats s = c.stats();
  EXPECT_EQ(s.inserts, 8u);
  EXPECT_GE(s.entries, 4u);
  EXPECT_LE(s.usage, s.capacity);
  // A large cache keeps its shards; no size hint keeps them too.
  EXPECT_EQ(BlockCache(256 << 20, 16, kBlock).num_shards(), 16u);
  EXPECT_EQ(BlockCache(1 << 20, 16).num_shards(), 16u);
  // Smaller than kMinEntriesPerShard blocks: one shard, which holds what fits.
  BlockCache one(2 * (kBlock + BlockCache::kEntryOverhead), 16, kBlock);
  EXPECT_EQ(one.num_shards(), 1u);
  one.Insert(Ptr(1, 64, kBlock, 1), 1, 0, Data(kBlock, 'a'), false);
  EXPECT_EQ(one.stats().entries, 1u);
}

TEST(BlockCacheTest, WastedCountsOnlyUnusedPrefetchedBytes) {
  BlockCache c(2 * kCharge1k, 1);
  c.Insert(Ptr(1, 64, 1024, 1), 1, 0, Data(1024, 'a'), /*prefetched=*/true);   // will be used
  c.Insert(Ptr(1, 2000, 1024, 2), 1, 1, Data(1024, 'b'), /*prefetched=*/true);  // never used
  CacheHit h = c.Lookup(Ptr(1, 64, 1024, 1), 1, 0);
  ASSERT_NE(h.data, nullptr);
  EXPECT_TRUE(h.prefetched);
  EXPECT_TRUE(h.first_hit);
  EXPECT_FALSE(c.Lookup(Ptr(1, 64, 1024, 1), 1, 0).first_hit);
  // Two more inserts push both out: only the unused one is wasted.
  c.Insert(Ptr(1, 4000, 1024, 3), 1, 2, Data(1024, 'c'), false);
  c.Insert(Ptr(1, 6000, 1024, 4), 1, 3, Data(1024, 'd'), false);
  BlockCacheStats s = c.stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.evicted_unused_bytes, 1024u);
  // Foreground (not prefetched) entries are never wasted.
  c.Insert(Ptr(1, 8000, 1024, 5), 1, 4, Data(1024, 'e'), false);
  c.Insert(Ptr(1, 9000, 1024, 6), 1, 5, Data(1024, 'f'), false);
  EXPECT_EQ(c.stats().evicted_unused_bytes, 1024u);
  // Erase of an unused prefetched entry counts too.
  c.Insert(Ptr(2, 64, 100, 9), 2, 0, Data(100, 'g'), true);
  c.Erase(Ptr(2, 64, 100, 9));
  EXPECT_EQ(c.stats().evicted_unused_bytes, 1124u);
}

TEST(BlockCacheTest, MarkUsedTakesAnEntryOutOfWasteAndToTheFront) {
  BlockCache c(2 * kCharge1k, 1);
  c.Insert(Ptr(1, 64, 1024, 1), 1, 0, Data(1024, 'a'), /*prefetched=*/true);
  c.Insert(Ptr(1, 2000, 1024, 2), 1, 1, Data(1024, 'b'), /*prefetched=*/true);
  c.MarkUsed(Ptr(1, 64, 1024, 9), 1, 0);  // another record at that place: no effect
  c.MarkUsed(Ptr(1, 64, 1024, 1), 2, 0);  // another owner: no effect
  {
    BlockCache d(2 * kCharge1k, 1);  // the same calls on a copy: order unchanged
    d.Insert(Ptr(1, 64, 1024, 1), 1, 0, Data(1024, 'a'), true);
    d.Insert(Ptr(1, 2000, 1024, 2), 1, 1, Data(1024, 'b'), true);
    d.MarkUsed(Ptr(1, 64, 1024, 9), 1, 0);
    d.MarkUsed(Ptr(1, 64, 1024, 1), 2, 0);
    d.Insert(Ptr(1, 4000, 1024, 3), 1, 2, Data(1024, 'c'), false);
    EXPECT_FALSE(d.Contains(Ptr(1, 64, 1024, 1), 1, 0));  // the oldest went
    EXPECT_EQ(d.stats().evicted_unused_bytes, 1024u);     // unused
  }
  c.MarkUsed(Ptr(1, 64, 1024, 1), 1, 0);
  // The older entry is now the most recently used: the other one goes first.
  c.Insert(Ptr(1, 4000, 1024, 3), 1, 2, Data(1024, 'c'), false);
  EXPECT_TRUE(c.Contains(Ptr(1, 64, 1024, 1), 1, 0));
  EXPECT_FALSE(c.Contains(Ptr(1, 2000, 1024, 2), 1, 1));
  EXPECT_EQ(c.stats().evicted_unused_bytes, 1024u);
  c.Insert(Ptr(1, 6000, 1024, 4), 1, 3, Data(1024, 'd'), false);
  EXPECT_FALSE(c.Contains(Ptr(1, 64, 1024, 1), 1, 0));
  EXPECT_EQ(c.stats().evicted_unused_bytes, 1024u);  // the marked one was used
  BlockCacheStats s = c.stats();
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.misses, 0u);
}

TEST(BlockCacheTest, ReaderKeepsEvictedData) {
  BlockCache c(kCharge1k, 1);
  c.Insert(Ptr(1, 64, 1024, 1), 1, 0, Data(1024, 'a'), false);
  auto held = c.Lookup(Ptr(1, 64, 1024, 1), 1, 0).data;
  c.Insert(Ptr(1, 2000, 1024, 2), 1, 1, Data(1024, 'b'), false);
  EXPECT_FALSE(c.Contains(Ptr(1, 64, 1024, 1), 1, 0));
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, std::string(1024, 'a'));
}

TEST(BlockCacheTest, ShardedCapacityHoldsUnderConcurrency) {
  BlockCache c(64 * kCharge1k, 8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&c, t] {
      for (uint32_t i = 0; i < 2000; i++) {
        const BlockPtr p = Ptr(t + 1, 64 + (i % 300) * 1100, 1024, i + 1);
        if (c.Lookup(p, t, i % 300).data == nullptr) c.Insert(p, t, i % 300, Data(1024, 'q'), i % 2);
      }
    });
  }
  for (auto& t : ts) t.join();
  BlockCacheStats s = c.stats();
  EXPECT_LE(s.usage, s.capacity);
  EXPECT_EQ(s.usage, s.entries * kCharge1k);
  EXPECT_GT(s.evictions, 0u);
}

// Evicted buffers come back for the next miss of their size class, up to
// the pool's limit; a buffer may outlive its pool.
TEST(BufferPoolTest, RecyclesBuffersBySizeClassUpToTheLimit) {
  std::shared_ptr<std::string> outlives;
  {
    BufferPool pool(3 * 65536);
    auto a = pool.Get(65536);
    ASSERT_EQ(a->size(), 65536u);
    std::memset(a->data(), 'x', a->size());
    const char* a_bytes = a->data();
    a.reset();  // back to the pool
    EXPECT_EQ(pool.free_bytes(), 65536u);
    auto b = pool.Get(65000);  // same 4 KiB class: the same memory
    EXPECT_EQ(b->data(), a_bytes);
    EXPECT_EQ(b->size(), 65000u);
    EXPECT_EQ(pool.reused(), 1u);
    EXPECT_EQ(pool.free_bytes(), 0u);
    auto c = pool.Get(4096);  // another class: fresh, zeroed
    EXPECT_EQ(*c, std::string(4096, '\0'));
    EXPECT_EQ(pool.reused(), 1u);
    // Five buffers of 64 KiB released: three fit under the limit.
    std::vector<std::shared_ptr<std::string>> many;
    for (int i = 0; i < 5; i++) many.push_back(pool.Get(65536));
    many.clear();
    EXPECT_EQ(pool.free_bytes(), 3u * 65536);
    outlives = pool.Get(100);
  }
  outlives->assign("still usable");  // the pool is gone; freeing it is safe
  outlives.reset();
}

// The block cache hands out pooled buffers and takes them back on eviction
// (its pool keeps up to 1/16 of the capacity).
TEST(BufferPoolTest, CacheEvictionsFeedTheNextMisses) {
  BlockCache cache(32 * (65536 + BlockCache::kEntryOverhead), 1);
  for (uint32_t i = 0; i < 40; i++) {
    auto buf = cache.NewBuffer(65536);
    cache.Insert(BlockPtr{1, 64 + i * 70000, 65536, i + 1}, 7, i, RefOf(std::move(buf)), false);
  }
  EXPECT_EQ(cache.stats().evictions, 8u);
  // Once full, each miss reuses the buffer the previous insert evicted: the
  // 8 evictions served 7 misses, and the last evicted buffer waits.
  EXPECT_EQ(cache.stats().buffers_reused, 7u);
  auto a = cache.NewBuffer(65536), b = cache.NewBuffer(65536);
  EXPECT_EQ(cache.stats().buffers_reused, 8u);
}

}  // namespace
}  // namespace sepfs::vlog
