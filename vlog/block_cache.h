// BlockCache: a sharded LRU cache of verified vLog record data.
//
// Entries are keyed by where the record lives, (segment, offset), and
// remember the whole BlockPtr (length and seq included) plus the owning
// (inode, block). A lookup returns data only when all of these match the
// caller's pointer exactly: a pointer that changed (flush, truncate, GC,
// a segment id reused after deletion) never gets another record's bytes,
// because sequence numbers are unique across the whole log. A mismatching
// entry found on lookup is dropped.
//
// Capacity is in bytes (record data plus a small per-entry charge), split
// evenly over the shards; capacity 0 disables the cache (Insert does
// nothing, Lookup always misses). Given the largest entry callers insert
// (a block), fewer shards are used when a shard would hold fewer than
// kMinEntriesPerShard of them: a small cache still caches. An entry larger
// than a shard's capacity is not cached (a prefetched one counts as wasted).
//
// Values are RecordRefs: a reader keeps the data alive after the entry is
// evicted. An entry whose data lies in place inside a larger shared read
// buffer (ReadRequest::in_place) is charged its share of that buffer, and
// a hit says so (CacheHit::in_place).
//
// "Wasted" accounting: an entry inserted with prefetched=true that is
// evicted, replaced or erased before any lookup hit it, or that did not fit
// a shard, adds its data bytes to evicted_unused_bytes.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "vlog/buffer_pool.h"
#include "vlog/format.h"
#include "vlog/record_ref.h"

namespace sepfs::vlog {

struct BlockCacheStats {
  uint64_t capacity = 0;              // bytes
  uint64_t usage = 0;                 // bytes charged now
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t evictions = 0;             // entries pushed out by capacity
  uint64_t evicted_unused_bytes = 0;  // prefetched data dropped before any hit
  uint64_t buffers_reused = 0;        // NewBuffer calls served by evicted buffers
};

// What a hit found.
struct CacheHit {
  RecordRef data;           // null on a miss
  bool prefetched = false;  // the entry was inserted by a prefetch
  bool in_place = false;    // data is a share of a larger read buffer
  bool first_hit = false;   // ... and this is its first hit
};

class BlockCache {
 public:
  // Bytes charged per entry on top of its data (key, list node, control block).
  static constexpr uint64_t kEntryOverhead = 128;

  static constexpr uint64_t kMinEntriesPerShard = 4;

  // num_shards is rounded up to a power of two (at least 1), then halved
  // while a shard would hold fewer than kMinEntriesPerShard entries of
  // largest_entry data bytes (0: no limit).
  explicit BlockCache(uint64_t capacity_bytes, unsigned num_shards = 16,
                      uint64_t largest_entry = 0);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  bool enabled() const { return capacity_ > 0; }

  // The data of the record at ptr if cached for exactly (ptr, inode, block);
  // marks the entry most recently used. Counts a hit or a miss.
  CacheHit Lookup(const BlockPtr& ptr, uint64_t inode, uint64_t block);
  // True if an entry for exactly (ptr, inode, block) is cached. Changes no
  // counter and no LRU position.
  bool Contains(const BlockPtr& ptr, uint64_t inode, uint64_t block) const;
  // The caller used the data of the entry for exactly (ptr, inode, block)
  // without a Lookup (a reader that waited for the prefetch inserting it):
  // the entry counts as used and most recently used. Changes no counter.
  void MarkUsed(const BlockPtr& ptr, uint64_t inode, uint64_t block);
  // Caches data (data->size() == ptr.length) for (ptr, inode, block),
  // replacing any entry at the same (segment, offset). Evicts least recently
  // used entries of the shard to make room. in_place_share: nonzero when
  // data lies inside a larger shared read buffer, the bytes of it the entry
  // is charged for (ReadRequest::in_place_share).
  void Insert(const BlockPtr& ptr, uint64_t inode, uint64_t block, RecordRef data,
              bool prefetched, uint64_t in_place_share = 0);
  // Drops the entry at (ptr.segment, ptr.offset), whatever its seq.
  void Erase(const BlockPtr& ptr);

  // A buffer of n bytes for data to Insert, recycled from evicted entries
  // (vlog/buffer_pool.h); contents unspecified.
  std::shared_ptr<std::string> NewBuffer(size_t n) { return pool_.Get(n); }

  BlockCacheStats stats() const;
  unsigned num_shards() const { return num_shards_; }

 private:
  struct Entry {
    BlockPtr ptr;
    uint64_t inode = 0;
    uint64_t block = 0;
    RecordRef data;
    uint64_t charge = 0;
    bool prefetched = false;
    bool used = false;  // hit at least once
    bool in_place = false;
  };
  struct Shard {
    mutable std::mutex mu;
    std::list<Entry> lru;  // front = most recently used
    std::unordered_map<uint64_t, std::list<Entry>::iterator> map;
    uint64_t usage = 0;
    uint64_t hits = 0, misses = 0, inserts = 0, evictions = 0, evicted_unused = 0;
  };

  static uint64_t KeyOf(const BlockPtr& p) {
    return (uint64_t{p.segment} << 32) | p.offset;
  }
  Shard& ShardOf(uint64_t key) const;
  // Removes it from shard s (s.mu held), counting unused prefetched bytes.
  static void RemoveLocked(Shard& s, std::list<Entry>::iterator it);

  const uint64_t capacity_;
  BufferPool pool_;
  uint64_t shard_capacity_ = 0;
  std::unique_ptr<Shard[]> shards_;
  unsigned num_shards_ = 1;
};

}  // namespace sepfs::vlog
