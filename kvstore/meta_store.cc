#include "kvstore/meta_store.h"

#include <atomic>
#include <mutex>
#include <cerrno>
#include <vector>

#include "kvstore/leveldb_status.h"
#include "kvstore/log_guard_env.h"
#include "kvstore/memory_overlay_env.h"
#include "leveldb/cache.h"
#include "leveldb/db.h"
#include "leveldb/env.h"
#include "leveldb/filter_policy.h"
#include "leveldb/iterator.h"
#include "leveldb/write_batch.h"
#include "vlog/atomic_bound.h"

namespace sepfs::kv {
namespace {

// MultiGetSorted steps forward with Next() at most this many times before
// falling back to a Seek(); a Next() within a block is far cheaper.
constexpr int kMaxNextSteps = 8;

leveldb::Slice ToSlice(std::string_view s) { return leveldb::Slice(s.data(), s.size()); }
std::string_view ToView(const leveldb::Slice& s) { return std::string_view(s.data(), s.size()); }

// Every block read from a table file is checked against its CRC: a damaged
// table yields Corruption (EIO), never wrong metadata.
leveldb::ReadOptions ReadOpts() {
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = true;
  return ro;
}

}  // namespace

// ---------------------------------------------------------------- Batch

Batch::Batch() : rep_(std::make_unique<leveldb::WriteBatch>()) {}
Batch::~Batch() = default;

void Batch::Put(std::string_view key, std::string_view value) {
  rep_->Put(ToSlice(key), ToSlice(value));
  ++count_;
}

void Batch::Delete(std::string_view key) {
  rep_->Delete(ToSlice(key));
  ++count_;
}

void Batch::PutInode(const InodeRecord& r) { Put(InodeKey(r.ino), EncodeInode(r)); }

void Batch::PutDentry(uint64_t parent, std::string_view name, const DirEntry& e) {
  Put(DentryKey(parent, name), EncodeDirEntry(e));
}

void Batch::DeleteDentry(uint64_t parent, std::string_view name) {
  Delete(DentryKey(parent, name));
}

void Batch::PutBlock(uint64_t ino, uint64_t block, const vlog::BlockPtr& p) {
  Put(BlockKey(ino, block), EncodeBlockValue(p));
}

void Batch::PutInlineBlock(uint64_t ino, uint64_t block, std::string_view bytes) {
  Put(BlockKey(ino, block), EncodeInlineBlock(bytes));
}

void Batch::DeleteBlock(uint64_t ino, uint64_t block) { Delete(BlockKey(ino, block)); }

size_t Batch::ApproximateSize() const { return rep_->ApproximateSize(); }

bool Batch::empty() const { return count_ == 0; }

void Batch::Clear() {
  rep_->Clear();
  count_ = 0;
}

// ---------------------------------------------------------------- Impl

class MetaStore::Impl {
 public:
  Impl(std::string dir, leveldb::Env* env, bool writes_in_memory)
      : dir_(std::move(dir)),
        overlay_(writes_in_memory ? std::make_unique<MemoryOverlayEnv>(env) : nullptr),
        env_(overlay_ ? overlay_.get() : env),
        guard_env_(env_) {}
  ~Impl() {
    // The DB uses the cache and the filter policy until it is gone.
    db_.reset();
    cache_.reset();
    filter_.reset();
  }

  Status Error(const leveldb::Status& s, std::string_view what) const {
    return FromLevelDb(s, "metadata store " + dir_ + ": " + std::string(what));
  }

  Status WriteError() {
    std::lock_guard<std::mutex> l(error_mu_);
    if (write_error_.ok()) {
      const leveldb::Status lost = guard_env_.lost_log();
      if (lost.ok()) return Status::OK();
      write_error_ = Error(lost, "sync of a write-ahead log LevelDB left");
    }
    return Status::FromErrno(EIO, "metadata store " + dir_ +
                                      ": read-only after an earlier write failed (" +
                                      write_error_.ToString() + "); remount to recover");
  }
  void LatchWriteError(const Status& st) {
    std::lock_guard<std::mutex> l(error_mu_);
    if (write_error_.ok()) write_error_ = st;
  }
  // All unsynced writes counted up to `written` are durable.
  void MarkSynced(uint64_t written) { RaiseAtLeast(synced_upto_, written); }

  std::string dir_;
  std::unique_ptr<MemoryOverlayEnv> overlay_;  // MetaOptions::writes_in_memory
  leveldb::Env* env_;      // the options' Env, or overlay_ over it
  LogGuardEnv guard_env_;  // what LevelDB uses: env_ with guarded log files
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<leveldb::DB> db_;

  // Writers enter LevelDB concurrently and its writer queue commits them
  // in groups; LogGuardEnv keeps a failed log from taking more records.
  std::mutex error_mu_;
  Status write_error_;  // first failed write; latched (error_mu_)
  // Unsynced writes completed so far, and how many of them a synced write
  // made durable (it syncs the log with all that was appended before it,
  // and LogGuardEnv syncs a log LevelDB switches away from). Sync() with
  // nothing new has nothing to do.
  std::atomic<uint64_t> unsynced_written_{0};
  std::atomic<uint64_t> synced_upto_{0};
  std::mutex sync_mu_;  // one Sync() at a time
  std::function<Status()> before_sync_;  // SetBeforeSync

  // ApproximateBytes: the last directory scan's total, when (env_ micros)
  // and the bytes written through Write by then.
  std::mutex size_mu_;
  bool size_known_ = false;
  uint64_t size_total_ = 0;
  uint64_t size_at_us_ = 0;
  uint64_t size_written_ = 0;
  std::atomic<uint64_t> bytes_written_{0};  // batch bytes given to Write

  std::atomic<uint64_t> gets_{0};
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> synced_writes_{0};
  std::atomic<uint64_t> scans_{0};
  std::atomic<uint64_t> seeks_{0};
};

// ---------------------------------------------------------------- MetaStore

MetaStore::MetaStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetaStore::~MetaStore() = default;

Status MetaStore::Open(const std::string& dir, const MetaOptions& options,
                       std::unique_ptr<MetaStore>* out) {
  leveldb::Env* env = options.env != nullptr ? options.env : leveldb::Env::Default();
  auto impl = std::make_unique<Impl>(dir, env, options.writes_in_memory);
  if (options.bloom_bits_per_key > 0) {
    impl->filter_.reset(leveldb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  }
  impl->cache_.reset(leveldb::NewLRUCache(options.block_cache_bytes));

  leveldb::Options lo;
  lo.create_if_missing = options.create_if_missing;
  lo.error_if_exists = options.error_if_exists;
  lo.paranoid_checks = true;
  lo.env = &impl->guard_env_;
  lo.block_cache = impl->cache_.get();
  lo.write_buffer_size = options.write_buffer_bytes;
  lo.filter_policy = impl->filter_.get();

  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(lo, dir, &db);
  if (!s.ok()) return impl->Error(s, "open");
  impl->db_.reset(db);
  if (impl->overlay_ != nullptr) impl->overlay_->RefuseNewFiles();
  out->reset(new MetaStore(std::move(impl)));
  return Status::OK();
}

Status MetaStore::Get(std::string_view key, std::string* value) {
  impl_->gets_.fetch_add(1, std::memory_order_relaxed);
  leveldb::Status s = impl_->db_->Get(ReadOpts(), ToSlice(key), value);
  if (s.IsNotFound()) return Status::NotFound(DescribeKey(key) + " not found");
  if (!s.ok()) return impl_->Error(s, "get " + DescribeKey(key));
  return Status::OK();
}

Status MetaStore::WriteError() { return impl_->WriteError(); }

Status MetaStore::Write(Batch* batch, bool sync) {
  impl_->writes_.fetch_add(1, std::memory_order_relaxed);
  if (sync) impl_->synced_writes_.fetch_add(1, std::memory_order_relaxed);
  impl_->bytes_written_.fetch_add(batch->ApproximateSize(), std::memory_order_relaxed);
  SEPFS_RETURN_IF_ERROR(impl_->WriteError());
  const uint64_t before = impl_->unsynced_written_.load(std::memory_order_acquire);
  // A synced write makes every earlier write durable too: what they name
  // first (the hook syncs the vLog), as in Sync().
  if (sync && impl_->before_sync_) SEPFS_RETURN_IF_ERROR(impl_->before_sync_());
  leveldb::WriteOptions wo;
  wo.sync = sync;
  leveldb::Status s = impl_->db_->Write(wo, batch->rep_.get());
  if (!s.ok()) {
    // Refuse all further writes: the log may end in a torn record (see
    // LogGuardEnv), and the caller may have counted on this one.
    Status st = impl_->Error(s, sync ? "synced write" : "write");
    impl_->LatchWriteError(st);
    return st;
  }
  if (sync) {
    impl_->MarkSynced(before);
  } else {
    impl_->unsynced_written_.fetch_add(1, std::memory_order_acq_rel);
  }
  return Status::OK();
}

void MetaStore::SetBeforeSync(std::function<Status()> fn) { impl_->before_sync_ = std::move(fn); }

Status MetaStore::Sync() {
  const uint64_t written = impl_->unsynced_written_.load(std::memory_order_acquire);
  if (impl_->synced_upto_.load(std::memory_order_acquire) >= written) {
    return impl_->WriteError();
  }
  // One caller syncs at a time; those that waited usually find their
  // writes covered (a group commit of fsyncs).
  std::lock_guard<std::mutex> l(impl_->sync_mu_);
  if (impl_->synced_upto_.load(std::memory_order_acquire) >= written) {
    return impl_->WriteError();
  }
  SEPFS_RETURN_IF_ERROR(impl_->WriteError());
  impl_->synced_writes_.fetch_add(1, std::memory_order_relaxed);
  // Every write counted here has reached a log (LevelDB appends before it
  // returns), and the logs are synced beside LevelDB's writer queue. What
  // those writes name (the vLog records) is made durable first.
  const uint64_t covered = impl_->unsynced_written_.load(std::memory_order_acquire);
  if (impl_->before_sync_) SEPFS_RETURN_IF_ERROR(impl_->before_sync_());
  leveldb::Status s = impl_->guard_env_.SyncLogs();
  if (!s.ok()) {
    // The log latched the failure: LevelDB's next write to it fails too.
    Status st = impl_->Error(s, "log sync");
    impl_->LatchWriteError(st);
    return st;
  }
  impl_->MarkSynced(covered);
  return impl_->WriteError();
}

Status MetaStore::Scan(
    std::string_view start, std::string_view end,
    const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  impl_->scans_.fetch_add(1, std::memory_order_relaxed);
  impl_->seeks_.fetch_add(1, std::memory_order_relaxed);
  leveldb::ReadOptions ro = ReadOpts();
  std::unique_ptr<leveldb::Iterator> it(impl_->db_->NewIterator(ro));
  const leveldb::Slice end_slice = ToSlice(end);
  for (it->Seek(ToSlice(start)); it->Valid(); it->Next()) {
    if (!end.empty() && it->key().compare(end_slice) >= 0) break;
    if (!fn(ToView(it->key()), ToView(it->value()))) break;
  }
  if (!it->status().ok()) return impl_->Error(it->status(), "scan from " + DescribeKey(start));
  return Status::OK();
}

Status MetaStore::ScanPrefix(
    std::string_view prefix,
    const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  return Scan(prefix, PrefixEnd(prefix), fn);
}

Status MetaStore::ScanBlocks(
    uint64_t ino, uint64_t first, uint64_t end,
    const std::function<bool(uint64_t block, std::string_view key, std::string_view value)>& fn) {
  if (first >= end) return Status::OK();
  Status bad;
  Status st = Scan(BlockKey(ino, first), BlockKey(ino, end),
                   [&](std::string_view key, std::string_view value) {
                     uint64_t i = 0, b = 0;
                     if (!ParseBlockKey(key, &i, &b) || i != ino) {
                       bad = Status::Corruption("malformed block key " + DescribeKey(key));
                       return false;
                     }
                     return fn(b, key, value) && b + 1 < end;
                   });
  return st.ok() ? bad : st;
}

Status MetaStore::ScanAllBlocks(const std::function<bool(std::string_view key, uint64_t ino,
                                                          uint64_t block, const BlockValue& v)>& fn) {
  return ScanPrefix(std::string(1, kTagBlock), [&](std::string_view key, std::string_view value) {
    uint64_t ino = 0, block = 0;
    BlockValue v;
    if (!ParseBlockKey(key, &ino, &block) || !DecodeBlock(value, &v).ok()) return true;
    return fn(key, ino, block, v);
  });
}

Status MetaStore::MultiGetSorted(
    const std::vector<std::string>& keys,
    const std::function<void(size_t index, const std::string* value)>& fn) {
  if (keys.empty()) return Status::OK();
  impl_->scans_.fetch_add(1, std::memory_order_relaxed);
  leveldb::ReadOptions ro = ReadOpts();
  std::unique_ptr<leveldb::Iterator> it(impl_->db_->NewIterator(ro));
  uint64_t seeks = 0;
  std::string value;
  // Invariant after positioning for keys[i]: the iterator is at the smallest
  // key >= keys[i], or invalid when there is none.
  for (size_t i = 0; i < keys.size(); ++i) {
    const leveldb::Slice key = ToSlice(keys[i]);
    bool positioned = i > 0 && keys[i - 1] <= keys[i];  // unsorted input: seek
    if (positioned && it->Valid()) {
      for (int steps = 0; steps < kMaxNextSteps && it->Valid() && it->key().compare(key) < 0;
           ++steps) {
        it->Next();
      }
      positioned = !it->Valid() || it->key().compare(key) >= 0;
    }
    if (!positioned) {
      it->Seek(key);
      ++seeks;
    }
    if (!it->status().ok()) break;
    if (it->Valid() && it->key() == key) {
      value.assign(it->value().data(), it->value().size());
      fn(i, &value);
    } else {
      fn(i, nullptr);
    }
  }
  impl_->seeks_.fetch_add(seeks, std::memory_order_relaxed);
  if (!it->status().ok()) return impl_->Error(it->status(), "multi-get");
  return Status::OK();
}

Status MetaStore::GetInode(uint64_t ino, InodeRecord* r) {
  std::string value;
  SEPFS_RETURN_IF_ERROR(Get(InodeKey(ino), &value));
  Status s = DecodeInode(value, r);
  if (!s.ok()) return s.WithContext("inode " + std::to_string(ino));
  return Status::OK();
}

Status MetaStore::GetDentry(uint64_t parent, std::string_view name, DirEntry* e) {
  std::string value;
  SEPFS_RETURN_IF_ERROR(Get(DentryKey(parent, name), &value));
  Status s = DecodeDirEntry(value, e);
  if (!s.ok()) return s.WithContext(DescribeKey(DentryKey(parent, name)));
  return Status::OK();
}

Status MetaStore::GetSuperblock(Superblock* s) {
  std::string value;
  Status st = Get(SuperKey(), &value);
  if (st.IsNotFound()) {
    return Status::NotFound("metadata store " + impl_->dir_ +
                            ": no superblock (not a sepfs store?)");
  }
  SEPFS_RETURN_IF_ERROR(st);
  st = DecodeSuperblock(value, s);
  if (!st.ok()) return st.WithContext("metadata store " + impl_->dir_);
  return Status::OK();
}

Status MetaStore::GetCounter(std::string_view name, uint64_t* v) {
  std::string value;
  SEPFS_RETURN_IF_ERROR(Get(CounterKey(name), &value));
  Status s = DecodeCounter(value, v);
  if (!s.ok()) return s.WithContext(DescribeKey(CounterKey(name)));
  return Status::OK();
}

MetaStore::Stats MetaStore::stats() const {
  Stats st;
  st.gets = impl_->gets_.load(std::memory_order_relaxed);
  st.writes = impl_->writes_.load(std::memory_order_relaxed);
  st.synced_writes = impl_->synced_writes_.load(std::memory_order_relaxed);
  st.scans = impl_->scans_.load(std::memory_order_relaxed);
  st.seeks = impl_->seeks_.load(std::memory_order_relaxed);
  return st;
}

std::string MetaStore::LevelDbStats() const {
  std::string out;
  if (!impl_->db_->GetProperty("leveldb.stats", &out)) return "";
  return out;
}

uint64_t MetaStore::ApproximateBytes() const {
  // A scan costs a stat(2) per file, and statfs asks on every call (dbench:
  // about 2 000 a second): a scan serves for kSizeReuseMicros, plus what
  // was written since (compactions may shrink the real figure meanwhile).
  constexpr uint64_t kSizeReuseMicros = 1000000;
  // Read under the lock: a scan that raced ahead never leaves a later
  // size_written_ than the figure a caller subtracts it from.
  std::lock_guard<std::mutex> l(impl_->size_mu_);
  const uint64_t now = impl_->env_->NowMicros();
  const uint64_t written = impl_->bytes_written_.load(std::memory_order_relaxed);
  if (impl_->size_known_ && now >= impl_->size_at_us_ &&
      now - impl_->size_at_us_ < kSizeReuseMicros) {
    return impl_->size_total_ + (written - impl_->size_written_);
  }
  std::vector<std::string> children;
  if (!impl_->env_->GetChildren(impl_->dir_, &children).ok()) return 0;
  uint64_t total = 0;
  for (const std::string& name : children) {
    if (name == "." || name == "..") continue;
    uint64_t size = 0;
    if (impl_->env_->GetFileSize(impl_->dir_ + "/" + name, &size).ok()) total += size;
  }
  impl_->size_known_ = true;
  impl_->size_total_ = total;
  impl_->size_at_us_ = now;
  impl_->size_written_ = written;
  return total;
}

leveldb::DB* MetaStore::TEST_db() const { return impl_->db_.get(); }

// ---------------------------------------------------------------- counters

std::string EncodeCounter(uint64_t v) {
  std::string out;
  PutBE64(&out, v);
  return out;
}

Status DecodeCounter(std::string_view src, uint64_t* v) {
  if (src.size() != 8) {
    return Status::Corruption("counter has " + std::to_string(src.size()) +
                              " bytes, expected 8");
  }
  *v = GetBE64(src.data());
  return Status::OK();
}

}  // namespace sepfs::kv
