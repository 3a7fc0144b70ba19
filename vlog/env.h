// Env: the one seam through which sepfs touches the disk.
//
// Every file operation of the vLog (and of the tools) goes through an Env, so
// a test can override a single call (fail the Nth write, return ENOSPC, drop
// unsynced data) by deriving from EnvWrapper. Env::Default() is the POSIX one.
// Files and directories are created owner-only (0600 / 0700) whatever the
// umask, because the store holds every user's bytes.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vlog/status.h"

namespace sepfs {

// An open file. The descriptor is closed by the destructor.
// Read and Write are positional and thread-safe.
class File {
 public:
  virtual ~File() = default;
  // Reads up to n bytes at off into buf; *got < n only at end of file.
  virtual Status Read(uint64_t off, size_t n, char* buf, size_t* got) = 0;
  // Reads the bytes at off into the pieces of iov in turn (scatter read);
  // *got < their total only at end of file. The default reads each piece
  // with Read, so a wrapper that overrides Read alone sees every read.
  virtual Status ReadV(uint64_t off, std::span<const iovec> iov, size_t* got);
  // Writes all of data at off (loops over short writes).
  virtual Status Write(uint64_t off, std::string_view data) = 0;
  // As Write, but bypassing the page cache (O_DIRECT) where the file system
  // allows it: no page is allocated and no copy made for bytes that are
  // only read back rarely. off, data.size() and data.data() must be
  // multiples of kDirectAlign. The default is Write, so a wrapper that
  // overrides Write alone sees every write.
  static constexpr size_t kDirectAlign = 4096;
  virtual Status WriteDirect(uint64_t off, std::string_view data) { return Write(off, data); }
  // As Read, but bypassing the page cache (O_DIRECT) where the file system
  // allows it: the device fills buf, and the kernel neither allocates pages
  // for nor copies bytes the caller keeps in its own cache. off, n and buf
  // must be multiples of kDirectAlign. The default is Read, so a wrapper
  // that overrides Read alone sees every read.
  virtual Status ReadDirect(uint64_t off, size_t n, char* buf, size_t* got) {
    return Read(off, n, buf, got);
  }
  // fdatasync.
  virtual Status Sync() = 0;
  virtual Status Size(uint64_t* size) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Frees the byte range (fallocate PUNCH_HOLE|KEEP_SIZE); reads then see zeros.
  virtual Status PunchHole(uint64_t off, uint64_t len) = 0;
  // posix_fadvise hint; failures are ignored.
  virtual void Advise(uint64_t off, uint64_t len, int advice) = 0;
  virtual const std::string& path() const = 0;
};

// Held while a store is in use; the lock is released by the destructor.
class FileLock {
 public:
  virtual ~FileLock() = default;
  // What the lock does not guard against, for a log line; empty if nothing.
  virtual std::string Caveat() const { return {}; }
};

enum class OpenMode {
  kRead,            // must exist
  kReadWrite,       // must exist
  kCreate,          // read-write, created if missing
  kCreateExclusive  // read-write, EEXIST if present
};

enum class RenameMode { kReplace, kNoReplace };

class Env {
 public:
  virtual ~Env() = default;
  // The process-wide POSIX Env. Never deleted.
  static Env* Default();

  // A path that is not a regular file fails (without blocking on a FIFO)
  // with EISDIR for a directory and ENODEV for anything else.
  virtual Status OpenFile(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) = 0;
  virtual Status CreateDir(const std::string& path) = 0;  // EEXIST if present
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status RemoveDir(const std::string& path) = 0;
  // kNoReplace fails with EEXIST when `to` exists (a file that took the
  // name is never clobbered).
  virtual Status RenameFile(const std::string& from, const std::string& to, RenameMode mode) = 0;
  // Names in dir, without "." and "..", unsorted.
  virtual Status ListDir(const std::string& dir, std::vector<std::string>* names) = 0;
  // fsync of the directory itself, so new or removed entries are durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // OK if path exists; NotFound otherwise.
  virtual Status Exists(const std::string& path) = 0;
  // Exclusive non-blocking lock (flock) on path, created if missing, and on
  // the directory holding it (so that removing or replacing the file does
  // not let a second process in). Returns errno EBUSY with a clear message
  // when another process holds either. On a read-only file system the file
  // is locked if it exists (not created), the directory in any case.
  virtual Status LockFile(const std::string& path, std::unique_ptr<FileLock>* out) = 0;
  // Bytes available to an unprivileged writer, and total bytes, of the
  // filesystem holding path (statvfs).
  virtual Status FreeSpace(const std::string& path, uint64_t* avail, uint64_t* total) = 0;
};

// Forwards every call to a target File it owns; override just what a test
// needs (the File twin of EnvWrapper). ReadV, ReadDirect and WriteDirect
// are deliberately not forwarded: their defaults go through Read and Write, so a
// wrapper that overrides those sees every read and write.
class FileWrapper : public File {
 public:
  explicit FileWrapper(std::unique_ptr<File> target) : target_(std::move(target)) {}
  File* target() const { return target_.get(); }

  Status Read(uint64_t off, size_t n, char* buf, size_t* got) override {
    return target_->Read(off, n, buf, got);
  }
  Status Write(uint64_t off, std::string_view data) override { return target_->Write(off, data); }
  Status Sync() override { return target_->Sync(); }
  Status Size(uint64_t* size) override { return target_->Size(size); }
  Status Truncate(uint64_t size) override { return target_->Truncate(size); }
  Status PunchHole(uint64_t off, uint64_t len) override { return target_->PunchHole(off, len); }
  void Advise(uint64_t off, uint64_t len, int advice) override {
    target_->Advise(off, len, advice);
  }
  const std::string& path() const override { return target_->path(); }

 private:
  std::unique_ptr<File> target_;
};

// Forwards every call to a target Env; override just what a test needs.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Status OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) override {
    return target_->OpenFile(p, m, out);
  }
  Status CreateDir(const std::string& p) override { return target_->CreateDir(p); }
  Status RemoveFile(const std::string& p) override { return target_->RemoveFile(p); }
  Status RemoveDir(const std::string& p) override { return target_->RemoveDir(p); }
  Status RenameFile(const std::string& f, const std::string& t, RenameMode m) override {
    return target_->RenameFile(f, t, m);
  }
  Status ListDir(const std::string& d, std::vector<std::string>* n) override {
    return target_->ListDir(d, n);
  }
  Status SyncDir(const std::string& d) override { return target_->SyncDir(d); }
  Status Exists(const std::string& p) override { return target_->Exists(p); }
  Status LockFile(const std::string& p, std::unique_ptr<FileLock>* out) override {
    return target_->LockFile(p, out);
  }
  Status FreeSpace(const std::string& p, uint64_t* a, uint64_t* t) override {
    return target_->FreeSpace(p, a, t);
  }

 private:
  Env* target_;
};

}  // namespace sepfs
