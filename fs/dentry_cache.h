// Complete copies of the entries of recently listed directories, so that
// listing a directory again, and looking up a name in it (present or not),
// reads no LevelDB key. Directories that churn (create and delete names)
// leave deletion markers in LevelDB until compaction, and a scan of the
// directory's keys walks every one of them: a 50-entry listing took 54 us
// in a fresh store and 315 us after 40 000 creates and deletes in the same
// directory (bench/RESULTS.md, "Directory entries from memory").
//
// Exact, not a hint: Filesystem fills a directory from a full scan taken
// under its namespace lock (shared), and applies every later change of its
// entries (Put/Erase, under the lock held exclusively, after the batch is
// written), so a cached directory answers as LevelDB would. A directory
// that grows past max_entries_per_dir is dropped, as is the least recently
// used one once the cache holds more than max_bytes.
//
// Thread-safe (its own mutex; readers under the shared namespace lock use
// it concurrently).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvstore/records.h"

namespace sepfs::fs {

// One entry of a directory listing.
struct DirListEntry {
  std::string name;
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits
};

struct DentryCacheStats {
  uint64_t dirs = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;    // lookups and listings answered
  uint64_t misses = 0;  // ... of directories not cached
};

class DentryCache {
 public:
  DentryCache(size_t max_bytes, size_t max_entries_per_dir)
      : max_bytes_(max_bytes), max_entries_(max_entries_per_dir) {}

  // If dir is cached: true, with *found and (if found) *e.
  bool Lookup(uint64_t dir, std::string_view name, kv::DirEntry* e, bool* found);
  // If dir is cached: true, its entries appended to *out in name order (the
  // order of LevelDB's keys).
  bool List(uint64_t dir, std::vector<DirListEntry>* out);
  // If dir is cached: true, with *empty.
  bool Empty(uint64_t dir, bool* empty);

  // All of dir's entries, in name order, as a scan returned them; ignored if
  // there are more than max_entries_per_dir.
  void Fill(uint64_t dir, std::vector<DirListEntry>::const_iterator begin,
            std::vector<DirListEntry>::const_iterator end);
  // A change of dir's entries (nothing if dir is not cached).
  void Put(uint64_t dir, std::string_view name, const kv::DirEntry& e);
  void Erase(uint64_t dir, std::string_view name);
  // Forgets dir (it was removed).
  void Drop(uint64_t dir);

  DentryCacheStats stats() const;

 private:
  using Entries = std::map<std::string, kv::DirEntry, std::less<>>;
  struct Dir {
    Entries entries;
    size_t bytes = 0;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  static size_t EntryBytes(std::string_view name);
  // What a directory costs without entries (its hash node, LRU node and
  // empty map, with malloc's overhead): empty directories count too, so
  // a million of them (mkdir puts each in) cannot grow past the budget.
  static constexpr size_t kDirBytes = 160;
  Dir* FindLocked(uint64_t dir);  // counts a hit or miss; refreshes its LRU place
  void EraseLocked(std::unordered_map<uint64_t, Dir>::iterator it);
  void TrimLocked();

  const size_t max_bytes_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Dir> dirs_;
  std::list<uint64_t> lru_;  // most recent first
  size_t bytes_ = 0;
  size_t entries_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace sepfs::fs
