#include "kvstore/log_guard_env.h"

#include <memory>

namespace sepfs::kv {
namespace {

class GuardedLogFile final : public leveldb::WritableFile {
 public:
  explicit GuardedLogFile(leveldb::WritableFile* f) : f_(f) {}

  leveldb::Status Append(const leveldb::Slice& data) override {
    return Latch(failed_.ok() ? f_->Append(data) : failed_);
  }
  leveldb::Status Flush() override { return Latch(failed_.ok() ? f_->Flush() : failed_); }
  leveldb::Status Sync() override { return Latch(failed_.ok() ? f_->Sync() : failed_); }
  leveldb::Status Close() override {
    leveldb::Status s = Sync();
    leveldb::Status c = f_->Close();
    return s.ok() ? c : s;
  }

 private:
  leveldb::Status Latch(leveldb::Status s) {
    if (!s.ok() && failed_.ok()) failed_ = s;
    return s;
  }

  std::unique_ptr<leveldb::WritableFile> f_;
  leveldb::Status failed_;  // LevelDB calls a log file from one writer at a time
};

leveldb::Status Wrap(const std::string& f, leveldb::Status s, leveldb::WritableFile** r) {
  if (s.ok() && IsLevelDbLogFile(f)) *r = new GuardedLogFile(*r);
  return s;
}

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

leveldb::Status LogGuardEnv::NewWritableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewWritableFile(f, r), r);
}

leveldb::Status LogGuardEnv::NewAppendableFile(const std::string& f, leveldb::WritableFile** r) {
  return Wrap(f, target()->NewAppendableFile(f, r), r);
}

}  // namespace sepfs::kv
