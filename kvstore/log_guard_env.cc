#include "kvstore/log_guard_env.h"

#include <algorithm>
#include <memory>

namespace sepfs::kv {
namespace {

class GuardedLogFile final : public leveldb::WritableFile {
 public:
  // syncer: a second handle of the same file, never appended to, for
  // SyncIfNeeded (nullptr: sync through f under the lock).
  GuardedLogFile(leveldb::WritableFile* f, leveldb::WritableFile* syncer, LogGuardEnv* env)
      : f_(f), syncer_(syncer), env_(env) {
    env_->Register(this);
  }
  // LevelDB 1.23 deletes a log it switches away from without calling Close
  // (under its mutex): the sync happens here then, and a failure reaches
  // MetaStore through the env. A log whose records were all synced (the
  // usual case under fsyncs) costs nothing. The log leaves the env's list
  // only once synced, so LogGuardEnv::SyncLogs never returns before it is.
  ~GuardedLogFile() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!closed_ && (unsynced_ || !failed_.ok())) {
        leveldb::Status s = SyncLocked();
        if (!s.ok()) env_->NoteLostLog(s);
      }
    }
    env_->Unregister(this);
  }

  leveldb::Status Append(const leveldb::Slice& data) override {
    std::lock_guard<std::mutex> l(mu_);
    unsynced_ = true;
    unflushed_ = true;
    appends_++;
    return Latch(failed_.ok() ? f_->Append(data) : failed_);
  }
  leveldb::Status Flush() override {
    std::lock_guard<std::mutex> l(mu_);
    leveldb::Status s = Latch(failed_.ok() ? f_->Flush() : failed_);
    if (s.ok()) unflushed_ = false;
    return s;
  }
  leveldb::Status Sync() override {
    std::lock_guard<std::mutex> l(mu_);
    return SyncLocked();
  }
  leveldb::Status Close() override {
    std::lock_guard<std::mutex> l(mu_);
    leveldb::Status s = unsynced_ || !failed_.ok() ? SyncLocked() : leveldb::Status::OK();
    leveldb::Status c = f_->Close();
    closed_ = true;
    // LevelDB releases may Close a log at a switch and ignore the result:
    // SyncLogs must still report it.
    if (!s.ok()) env_->NoteLostLog(s);
    return s.ok() ? c : s;
  }

  // For LogGuardEnv::SyncLogs, from any thread: makes what was appended
  // and flushed before the call durable. Through the second handle the
  // fdatasync runs without the lock, so LevelDB's writer is not held up.
  leveldb::Status SyncIfNeeded() {
    uint64_t appends;
    bool flushed;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (closed_) return failed_;  // Close synced it, or failed
      if (!failed_.ok() || !unsynced_) return failed_;
      if (syncer_ == nullptr) return SyncLocked();
      appends = appends_;
      flushed = !unflushed_;
    }
    leveldb::Status s = syncer_->Sync();
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok()) return Latch(s);
    // Clean only if nothing was appended meanwhile and nothing was still in
    // LevelDB's buffer (not in the file yet) when the sync began.
    if (flushed && appends == appends_) unsynced_ = false;
    return failed_;
  }

 private:
  leveldb::Status SyncLocked() {
    leveldb::Status s = Latch(failed_.ok() ? f_->Sync() : failed_);
    if (s.ok()) unsynced_ = false;
    return s;
  }
  leveldb::Status Latch(leveldb::Status s) {
    if (!s.ok() && failed_.ok()) failed_ = s;
    return s;
  }

  std::unique_ptr<leveldb::WritableFile> f_;
  std::unique_ptr<leveldb::WritableFile> syncer_;
  LogGuardEnv* const env_;
  // LevelDB appends from one writer at a time (the head of its writer
  // queue), but SyncLogs syncs from MetaStore::Sync's callers: mu_ orders
  // them (LevelDB's buffered file is not safe to flush concurrently).
  std::mutex mu_;
  leveldb::Status failed_;
  bool unsynced_ = false;   // appended to since the last successful Sync
  bool unflushed_ = false;  // appended to since the last successful Flush
  uint64_t appends_ = 0;
  bool closed_ = false;
};

}  // namespace

bool IsLevelDbLogFile(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  constexpr std::string_view kSuffix = ".log";
  if (base.size() <= kSuffix.size() || base.compare(base.size() - 4, 4, kSuffix) != 0) {
    return false;
  }
  for (size_t i = 0; i + kSuffix.size() < base.size(); i++) {
    if (base[i] < '0' || base[i] > '9') return false;
  }
  return true;
}

leveldb::Status LogGuardEnv::Wrap(const std::string& f, leveldb::Status s,
                                  leveldb::WritableFile** r) {
  if (!s.ok() || !IsLevelDbLogFile(f)) return s;
  // The file exists now: a second handle in append mode does not truncate it.
  leveldb::WritableFile* syncer = nullptr;
  if (!target()->NewAppendableFile(f, &syncer).ok()) syncer = nullptr;
  *r = new GuardedLogFile(*r, syncer, this);
  return s;
}

leveldb::Status LogGuardEnv::NewWritableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewWritableFile(f, r), r);
}

leveldb::Status LogGuardEnv::NewAppendableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewAppendableFile(f, r), r);
}

void LogGuardEnv::Register(leveldb::WritableFile* log) {
  std::lock_guard<std::mutex> l(logs_mu_);
  logs_.push_back({log, 0});
}

void LogGuardEnv::Unregister(leveldb::WritableFile* log) {
  std::unique_lock<std::mutex> l(logs_mu_);
  auto it = std::find_if(logs_.begin(), logs_.end(), [&](const Entry& e) { return e.log == log; });
  if (it == logs_.end()) return;
  // A SyncLogs may be syncing this very log: it must outlive that sync.
  unpinned_.wait(l, [&] {
    it = std::find_if(logs_.begin(), logs_.end(), [&](const Entry& e) { return e.log == log; });
    return it->pins == 0;
  });
  logs_.erase(it);
}

leveldb::Status LogGuardEnv::SyncLogs() {
  // The logs open now, pinned so that none is destroyed while it is synced;
  // the list lock is not held through the fsyncs, so a log switch (under
  // LevelDB's mutex) registering a new log never waits for one.
  std::vector<leveldb::WritableFile*> logs;
  {
    std::lock_guard<std::mutex> l(logs_mu_);
    for (Entry& e : logs_) {
      e.pins++;
      logs.push_back(e.log);
    }
  }
  leveldb::Status result;
  for (leveldb::WritableFile* log : logs) {
    leveldb::Status s = static_cast<GuardedLogFile*>(log)->SyncIfNeeded();
    if (result.ok() && !s.ok()) result = s;
  }
  {
    std::lock_guard<std::mutex> l(logs_mu_);
    for (leveldb::WritableFile* log : logs) {
      for (Entry& e : logs_) {
        if (e.log == log) e.pins--;
      }
    }
  }
  unpinned_.notify_all();
  return result.ok() ? lost_log() : result;
}

void LogGuardEnv::NoteLostLog(const leveldb::Status& s) {
  std::lock_guard<std::mutex> l(mu_);
  if (lost_.ok()) lost_ = s;
}

leveldb::Status LogGuardEnv::lost_log() const {
  std::lock_guard<std::mutex> l(mu_);
  return lost_;
}

}  // namespace sepfs::kv
