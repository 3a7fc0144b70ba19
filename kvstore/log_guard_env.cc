#include "kvstore/log_guard_env.h"

#include <memory>

namespace sepfs::kv {
namespace {

class GuardedLogFile final : public leveldb::WritableFile {
 public:
  GuardedLogFile(leveldb::WritableFile* f, LogGuardEnv* env) : f_(f), env_(env) {}
  // LevelDB 1.23 deletes a log it switches away from without calling Close
  // (under its mutex): the sync happens here then, and a failure reaches
  // MetaStore through the env. A log whose records were all synced (the
  // usual case under fsyncs) costs nothing.
  ~GuardedLogFile() override {
    if (!closed_ && (unsynced_ || !failed_.ok())) {
      leveldb::Status s = Sync();
      if (!s.ok()) env_->NoteLostLog(s);
    }
  }

  leveldb::Status Append(const leveldb::Slice& data) override {
    unsynced_ = true;
    return Latch(failed_.ok() ? f_->Append(data) : failed_);
  }
  leveldb::Status Flush() override { return Latch(failed_.ok() ? f_->Flush() : failed_); }
  leveldb::Status Sync() override {
    leveldb::Status s = Latch(failed_.ok() ? f_->Sync() : failed_);
    if (s.ok()) unsynced_ = false;
    return s;
  }
  leveldb::Status Close() override {
    leveldb::Status s = unsynced_ || !failed_.ok() ? Sync() : leveldb::Status::OK();
    leveldb::Status c = f_->Close();
    closed_ = true;
    return s.ok() ? c : s;
  }

 private:
  leveldb::Status Latch(leveldb::Status s) {
    if (!s.ok() && failed_.ok()) failed_ = s;
    return s;
  }

  std::unique_ptr<leveldb::WritableFile> f_;
  LogGuardEnv* const env_;
  // LevelDB calls a log file from one writer at a time (the head of its
  // writer queue; the switch under its mutex), so these need no lock.
  leveldb::Status failed_;
  bool unsynced_ = false;  // appended to since the last successful Sync
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
  if (s.ok() && IsLevelDbLogFile(f)) *r = new GuardedLogFile(*r, this);
  return s;
}

leveldb::Status LogGuardEnv::NewWritableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewWritableFile(f, r), r);
}

leveldb::Status LogGuardEnv::NewAppendableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewAppendableFile(f, r), r);
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
