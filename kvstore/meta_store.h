// MetaStore: the metadata LSM (LevelDB) behind typed accessors.
//
// Reads go straight to LevelDB (its block cache keeps the small metadata
// mostly in memory). Changes are collected in a Batch and applied atomically
// by Write(); sync=true makes the batch durable before returning.
// Thread safety: all methods may be called concurrently; a Batch is owned by
// one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvstore/records.h"
#include "kvstore/schema.h"
#include "vlog/status.h"

namespace leveldb {
class DB;
class WriteBatch;
class Env;
}  // namespace leveldb

namespace sepfs::kv {

struct MetaOptions {
  bool create_if_missing = false;
  bool error_if_exists = false;
  size_t block_cache_bytes = 64u << 20;
  size_t write_buffer_bytes = 16u << 20;
  int bloom_bits_per_key = 10;
  leveldb::Env* env = nullptr;  // nullptr: leveldb::Env::Default()
  // Nothing in dir is written: the files LevelDB writes stay in memory
  // (kv::MemoryOverlayEnv) and are gone at close. For stores on read-only
  // media; the caller holds the store's lock (LevelDB's is in memory too).
  bool writes_in_memory = false;
};

class Batch {
 public:
  Batch();
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  void PutInode(const InodeRecord& r);
  void PutDentry(uint64_t parent, std::string_view name, const DirEntry& e);
  void DeleteDentry(uint64_t parent, std::string_view name);
  void PutBlock(uint64_t ino, uint64_t block, const vlog::BlockPtr& p);
  void PutInlineBlock(uint64_t ino, uint64_t block, std::string_view bytes);
  void DeleteBlock(uint64_t ino, uint64_t block);
  size_t ApproximateSize() const;
  bool empty() const;
  void Clear();

 private:
  friend class MetaStore;
  std::unique_ptr<leveldb::WriteBatch> rep_;
  size_t count_ = 0;
};

class MetaStore {
 public:
  // Opens the LevelDB in `dir`. LevelDB errors become Status with errno
  // (EIO for corruption, EBUSY when its LOCK is held).
  static Status Open(const std::string& dir, const MetaOptions& options,
                     std::unique_ptr<MetaStore>* out);
  ~MetaStore();

  // NotFound (ENOENT) when absent.
  Status Get(std::string_view key, std::string* value);
  // After a failed write every later Write fails with EIO (LevelDB's log
  // cannot take more records safely); reopening the store recovers.
  // Concurrent writers enter LevelDB together: its writer queue commits the
  // synced ones waiting in one log record and one fsync.
  Status Write(Batch* batch, bool sync);
  // Makes every write that completed before the call durable: syncs the
  // write-ahead logs directly (LogGuardEnv::SyncLogs), without holding
  // LevelDB's writer queue, or does nothing when a sync covered them all.
  // A failed sync makes every later Write fail, as a failed write does.
  // The before-sync hook runs first, with the writes to cover chosen.
  Status Sync();
  // OK while writes work; after a write or sync failed, the error every
  // later Write returns (until the store is reopened).
  Status WriteError();
  // What Sync() and a synced Write() make durable before the log: the
  // filesystem syncs the vLog, so no pointer becomes durable before the
  // record it names. Set once, before concurrent use; cleared (nullptr)
  // before what it calls goes away.
  void SetBeforeSync(std::function<Status()> fn);

  // Calls fn(key, value) for keys in [start, end) in order until fn returns
  // false. One iterator, one range scan. LevelDB has no upper bound for an
  // iterator: each step past a key walks every deletion marker up to the
  // next live key, wherever that is (after a batch of deletes, thousands of
  // markers of other files). A caller that knows which key is the last it
  // wants returns false there, and the scan steps no further.
  Status Scan(std::string_view start, std::string_view end,
              const std::function<bool(std::string_view key, std::string_view value)>& fn);
  // Scan over all keys with this prefix.
  Status ScanPrefix(std::string_view prefix,
                    const std::function<bool(std::string_view key, std::string_view value)>& fn);
  // Calls fn(block, key, value) for the block pointers of inode ino with
  // first <= block < end, in order, until fn returns false. Once block
  // end - 1 has been seen it steps no further (see Scan: the deletion
  // markers behind it are not walked). A key in the range that is not a
  // block key of ino is Corruption.
  Status ScanBlocks(
      uint64_t ino, uint64_t first, uint64_t end,
      const std::function<bool(uint64_t block, std::string_view key, std::string_view value)>& fn);
  // Calls fn(key, ino, block, value) for every block pointer of every inode,
  // in key order, until fn returns false. Pointers whose key or value does
  // not decode are passed over: fsck reports them.
  Status ScanAllBlocks(const std::function<bool(std::string_view key, uint64_t ino,
                                                uint64_t block, const BlockValue& v)>& fn);

  // For each key of `keys` (sorted ascending), calls fn(index, value or
  // nullptr if absent) using one iterator that steps forward with Next()
  // when the next key is near and Seek()s otherwise; readdirplus uses it to
  // fetch the inode records of a directory's children, whose numbers
  // cluster (see ino_alloc.h). Counts seeks in stats().
  Status MultiGetSorted(const std::vector<std::string>& keys,
                        const std::function<void(size_t index, const std::string* value)>& fn);

  // Typed reads.
  Status GetInode(uint64_t ino, InodeRecord* r);
  Status GetDentry(uint64_t parent, std::string_view name, DirEntry* e);
  Status GetSuperblock(Superblock* s);
  Status GetCounter(std::string_view name, uint64_t* v);  // NotFound if unset

  struct Stats {
    uint64_t gets = 0;
    uint64_t writes = 0;
    uint64_t synced_writes = 0;  // synced writes and Sync() calls that synced the log
    uint64_t scans = 0;
    uint64_t seeks = 0;  // iterator Seek() calls across Scan/MultiGetSorted
  };
  Stats stats() const;
  // LevelDB's own property text ("leveldb.stats"), for `sepfs stats`.
  std::string LevelDbStats() const;
  // Approximate bytes of the LevelDB files: a scan of the directory at most
  // a second old, plus the bytes of the batches written since.
  uint64_t ApproximateBytes() const;

  leveldb::DB* TEST_db() const;

  class Impl;

 private:
  explicit MetaStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Counter value codec (8 bytes big-endian), for CounterKey values.
std::string EncodeCounter(uint64_t v);
Status DecodeCounter(std::string_view src, uint64_t* v);

}  // namespace sepfs::kv
