#include "vlog/block_cache.h"

#include <algorithm>

namespace sepfs::vlog {

// Up to 1/16 of the capacity (at most 16 MiB) of evicted buffers wait for reuse.
BlockCache::BlockCache(uint64_t capacity_bytes, unsigned num_shards, uint64_t largest_entry)
    : capacity_(capacity_bytes),
      pool_(static_cast<size_t>(std::min<uint64_t>(capacity_bytes / 16, 16u << 20))) {
  unsigned n = 1;
  while (n < num_shards) n <<= 1;
  const uint64_t room = kMinEntriesPerShard * (largest_entry + kEntryOverhead);
  while (n > 1 && largest_entry > 0 && capacity_ / n < room) n >>= 1;
  num_shards_ = n;
  shards_ = std::make_unique<Shard[]>(n);
  shard_capacity_ = capacity_ / n;
}

BlockCache::~BlockCache() = default;

BlockCache::Shard& BlockCache::ShardOf(uint64_t key) const {
  // Mix: neighbouring offsets of one segment spread over the shards.
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return shards_[(h >> 32) & (num_shards_ - 1)];
}

void BlockCache::RemoveLocked(Shard& s, std::list<Entry>::iterator it) {
  if (it->prefetched && !it->used) s.evicted_unused += it->ptr.length;
  s.usage -= it->charge;
  s.map.erase(KeyOf(it->ptr));
  s.lru.erase(it);
}

CacheHit BlockCache::Lookup(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  CacheHit hit;
  if (!enabled()) return hit;
  const uint64_t key = KeyOf(ptr);
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> l(s.mu);
  auto m = s.map.find(key);
  if (m == s.map.end()) {
    s.misses++;
    return hit;
  }
  auto it = m->second;
  if (!(it->ptr == ptr) || it->inode != inode || it->block != block) {
    RemoveLocked(s, it);  // stale: the location now names another record
    s.misses++;
    return hit;
  }
  s.lru.splice(s.lru.begin(), s.lru, it);
  s.hits++;
  hit.data = it->data;
  hit.prefetched = it->prefetched;
  hit.in_place = it->in_place;
  hit.first_hit = !it->used;
  it->used = true;
  return hit;
}

bool BlockCache::Contains(const BlockPtr& ptr, uint64_t inode, uint64_t block) const {
  if (!enabled()) return false;
  const uint64_t key = KeyOf(ptr);
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> l(s.mu);
  auto m = s.map.find(key);
  return m != s.map.end() && m->second->ptr == ptr && m->second->inode == inode &&
         m->second->block == block;
}

void BlockCache::MarkUsed(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  if (!enabled()) return;
  const uint64_t key = KeyOf(ptr);
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> l(s.mu);
  auto m = s.map.find(key);
  if (m == s.map.end()) return;
  auto it = m->second;
  if (!(it->ptr == ptr) || it->inode != inode || it->block != block) return;
  s.lru.splice(s.lru.begin(), s.lru, it);
  it->used = true;
}

void BlockCache::Insert(const BlockPtr& ptr, uint64_t inode, uint64_t block, RecordRef data,
                        bool prefetched, uint64_t in_place_share) {
  if (!enabled() || data == nullptr) return;
  const uint64_t charge = std::max<uint64_t>(data->size(), in_place_share) + kEntryOverhead;
  const uint64_t key = KeyOf(ptr);
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> l(s.mu);
  if (charge > shard_capacity_) {
    if (prefetched) s.evicted_unused += data->size();
    return;
  }
  auto m = s.map.find(key);
  if (m != s.map.end()) RemoveLocked(s, m->second);
  while (s.usage + charge > shard_capacity_ && !s.lru.empty()) {
    s.evictions++;
    RemoveLocked(s, std::prev(s.lru.end()));
  }
  s.lru.push_front(
      Entry{ptr, inode, block, std::move(data), charge, prefetched, false, in_place_share > 0});
  s.map[key] = s.lru.begin();
  s.usage += charge;
  s.inserts++;
}

void BlockCache::Erase(const BlockPtr& ptr) {
  if (!enabled()) return;
  const uint64_t key = KeyOf(ptr);
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> l(s.mu);
  auto m = s.map.find(key);
  if (m != s.map.end()) RemoveLocked(s, m->second);
}

BlockCacheStats BlockCache::stats() const {
  BlockCacheStats st;
  st.capacity = capacity_;
  for (unsigned i = 0; i < num_shards_; i++) {
    const Shard& s = shards_[i];
    std::lock_guard<std::mutex> l(s.mu);
    st.usage += s.usage;
    st.entries += s.map.size();
    st.hits += s.hits;
    st.misses += s.misses;
    st.inserts += s.inserts;
    st.evictions += s.evictions;
    st.evicted_unused_bytes += s.evicted_unused;
  }
  st.buffers_reused = pool_.reused();
  return st;
}

}  // namespace sepfs::vlog
