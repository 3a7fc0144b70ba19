#include "kvstore/memory_overlay_env.h"

#include <algorithm>
#include <cstring>

namespace sepfs::kv {

struct MemoryOverlayEnv::File {
  std::mutex mu;
  std::string data;  // guarded by mu
};

namespace {

using File = MemoryOverlayEnv::File;

leveldb::Status Refused(const std::string& f) {
  return leveldb::Status::IOError(f, "the store is opened read-only: no file is written after "
                                     "its open");
}

// Copies up to n bytes of f from offset into scratch; *result names them.
void ReadAt(File& f, uint64_t offset, size_t n, leveldb::Slice* result, char* scratch) {
  std::lock_guard lk(f.mu);
  const size_t k = offset >= f.data.size() ? 0 : std::min<uint64_t>(n, f.data.size() - offset);
  if (k > 0) std::memcpy(scratch, f.data.data() + offset, k);
  *result = leveldb::Slice(scratch, k);
}

class MemorySequentialFile final : public leveldb::SequentialFile {
 public:
  explicit MemorySequentialFile(std::shared_ptr<File> f) : f_(std::move(f)) {}
  leveldb::Status Read(size_t n, leveldb::Slice* result, char* scratch) override {
    ReadAt(*f_, pos_, n, result, scratch);
    pos_ += result->size();
    return leveldb::Status::OK();
  }
  leveldb::Status Skip(uint64_t n) override {
    pos_ += n;
    return leveldb::Status::OK();
  }

 private:
  std::shared_ptr<File> f_;
  uint64_t pos_ = 0;
};

class MemoryRandomAccessFile final : public leveldb::RandomAccessFile {
 public:
  explicit MemoryRandomAccessFile(std::shared_ptr<File> f) : f_(std::move(f)) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override {
    ReadAt(*f_, offset, n, result, scratch);
    return leveldb::Status::OK();
  }

 private:
  std::shared_ptr<File> f_;
};

class MemoryWritableFile final : public leveldb::WritableFile {
 public:
  explicit MemoryWritableFile(std::shared_ptr<File> f) : f_(std::move(f)) {}
  leveldb::Status Append(const leveldb::Slice& data) override {
    std::lock_guard lk(f_->mu);
    f_->data.append(data.data(), data.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }

 private:
  std::shared_ptr<File> f_;
};

// LevelDB's info log (LOG) is not kept: nothing would read it.
class NullLogger final : public leveldb::Logger {
 public:
  void Logv(const char*, va_list) override {}
};

class MemoryLock final : public leveldb::FileLock {
 public:
  explicit MemoryLock(std::string name) : name(std::move(name)) {}
  const std::string name;
};

// The directory part of path ("" if none).
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

MemoryOverlayEnv::~MemoryOverlayEnv() = default;

std::shared_ptr<File> MemoryOverlayEnv::Find(const std::string& f) const {
  auto it = files_.find(f);
  return it == files_.end() ? nullptr : it->second;
}

bool MemoryOverlayEnv::InTarget(const std::string& f) const {
  return hidden_.count(f) == 0 && target()->FileExists(f);
}

leveldb::Status MemoryOverlayEnv::CopyIn(const std::string& f, std::shared_ptr<File>* out) {
  uint64_t size = 0;
  leveldb::Status s = target()->GetFileSize(f, &size);
  if (!s.ok()) return s;
  leveldb::SequentialFile* raw = nullptr;
  s = target()->NewSequentialFile(f, &raw);
  if (!s.ok()) return s;
  std::unique_ptr<leveldb::SequentialFile> in(raw);
  auto copy = std::make_shared<File>();
  std::string scratch(64 << 10, '\0');
  for (;;) {
    leveldb::Slice got;
    s = in->Read(scratch.size(), &got, scratch.data());
    if (!s.ok()) return s;
    if (got.empty()) break;
    copy->data.append(got.data(), got.size());
  }
  *out = std::move(copy);
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::NewSequentialFile(const std::string& f,
                                                    leveldb::SequentialFile** r) {
  {
    std::lock_guard lk(mu_);
    if (auto file = Find(f)) {
      *r = new MemorySequentialFile(std::move(file));
      return leveldb::Status::OK();
    }
    if (hidden_.count(f)) {
      *r = nullptr;
      return leveldb::Status::NotFound(f, "removed");
    }
  }
  return target()->NewSequentialFile(f, r);
}

leveldb::Status MemoryOverlayEnv::NewRandomAccessFile(const std::string& f,
                                                      leveldb::RandomAccessFile** r) {
  {
    std::lock_guard lk(mu_);
    if (auto file = Find(f)) {
      *r = new MemoryRandomAccessFile(std::move(file));
      return leveldb::Status::OK();
    }
    if (hidden_.count(f)) {
      *r = nullptr;
      return leveldb::Status::NotFound(f, "removed");
    }
  }
  return target()->NewRandomAccessFile(f, r);
}

void MemoryOverlayEnv::RefuseNewFiles() {
  std::lock_guard lk(mu_);
  refuse_new_files_ = true;
}

leveldb::Status MemoryOverlayEnv::NewWritableFile(const std::string& f,
                                                  leveldb::WritableFile** r) {
  *r = nullptr;
  auto file = std::make_shared<File>();
  std::lock_guard lk(mu_);
  if (refuse_new_files_) return Refused(f);
  files_[f] = file;
  hidden_.insert(f);
  *r = new MemoryWritableFile(std::move(file));
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::NewAppendableFile(const std::string& f,
                                                    leveldb::WritableFile** r) {
  *r = nullptr;
  std::shared_ptr<File> file;
  bool copy = false;
  {
    std::lock_guard lk(mu_);
    if (refuse_new_files_) return Refused(f);
    file = Find(f);
    copy = file == nullptr && InTarget(f);
  }
  if (copy) {
    leveldb::Status s = CopyIn(f, &file);
    if (!s.ok()) return s;
  }
  if (file == nullptr) file = std::make_shared<File>();
  std::lock_guard lk(mu_);
  files_[f] = file;
  hidden_.insert(f);
  *r = new MemoryWritableFile(std::move(file));
  return leveldb::Status::OK();
}

bool MemoryOverlayEnv::FileExists(const std::string& f) {
  std::lock_guard lk(mu_);
  return Find(f) != nullptr || InTarget(f);
}

leveldb::Status MemoryOverlayEnv::GetChildren(const std::string& dir,
                                              std::vector<std::string>* r) {
  std::vector<std::string> names;
  leveldb::Status s = target()->GetChildren(dir, &names);
  std::lock_guard lk(mu_);
  bool any = false;
  std::set<std::string> out;
  for (const auto& [path, file] : files_) {
    if (DirOf(path) == dir) {
      out.insert(path.substr(dir.size() + 1));
      any = true;
    }
  }
  if (!s.ok() && !any) return s;
  for (const std::string& n : names) {
    if (hidden_.count(dir + "/" + n) == 0) out.insert(n);
  }
  r->assign(out.begin(), out.end());
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::RemoveFile(const std::string& f) {
  std::lock_guard lk(mu_);
  const bool was = files_.erase(f) > 0 || InTarget(f);
  hidden_.insert(f);
  return was ? leveldb::Status::OK() : leveldb::Status::NotFound(f, "no such file");
}

leveldb::Status MemoryOverlayEnv::CreateDir(const std::string&) { return leveldb::Status::OK(); }
leveldb::Status MemoryOverlayEnv::RemoveDir(const std::string&) { return leveldb::Status::OK(); }

leveldb::Status MemoryOverlayEnv::GetFileSize(const std::string& f, uint64_t* size) {
  {
    std::lock_guard lk(mu_);
    if (auto file = Find(f)) {
      std::lock_guard flk(file->mu);
      *size = file->data.size();
      return leveldb::Status::OK();
    }
    if (hidden_.count(f)) return leveldb::Status::NotFound(f, "removed");
  }
  return target()->GetFileSize(f, size);
}

leveldb::Status MemoryOverlayEnv::RenameFile(const std::string& src, const std::string& target) {
  std::shared_ptr<File> file;
  bool copy = false;
  {
    std::lock_guard lk(mu_);
    file = Find(src);
    if (file == nullptr && !InTarget(src)) return leveldb::Status::NotFound(src, "no such file");
    copy = file == nullptr;
  }
  if (copy) {
    leveldb::Status s = CopyIn(src, &file);
    if (!s.ok()) return s;
  }
  std::lock_guard lk(mu_);
  files_.erase(src);
  hidden_.insert(src);
  files_[target] = std::move(file);
  hidden_.insert(target);
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::LockFile(const std::string& f, leveldb::FileLock** lock) {
  std::lock_guard lk(mu_);
  if (!locked_.insert(f).second) return leveldb::Status::IOError(f, "already locked");
  *lock = new MemoryLock(f);
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::UnlockFile(leveldb::FileLock* lock) {
  auto* l = static_cast<MemoryLock*>(lock);
  {
    std::lock_guard lk(mu_);
    locked_.erase(l->name);
  }
  delete l;
  return leveldb::Status::OK();
}

leveldb::Status MemoryOverlayEnv::NewLogger(const std::string&, leveldb::Logger** r) {
  *r = new NullLogger();
  return leveldb::Status::OK();
}

uint64_t MemoryOverlayEnv::MemoryBytes() const {
  std::lock_guard lk(mu_);
  uint64_t n = 0;
  for (const auto& [path, file] : files_) {
    std::lock_guard flk(file->mu);
    n += file->data.size();
  }
  return n;
}

}  // namespace sepfs::kv
