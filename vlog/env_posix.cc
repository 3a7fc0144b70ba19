// PosixEnv: the Env of real syscalls.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>  // renameat2
#include <cstring>
#include <string>

#include "vlog/env.h"
#include "vlog/fd.h"

namespace sepfs {
namespace {

constexpr mode_t kFileMode = 0600;
constexpr mode_t kDirMode = 0700;

Status PosixError(int err, const std::string& path, std::string_view op) {
  std::string msg = path;
  msg += ": ";
  msg += op;
  return Status::FromErrno(err, msg);
}

int OpenRetry(const char* path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }

  Status Read(uint64_t off, size_t n, char* buf, size_t* got) override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, buf + done, n - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *got = done;
        return PosixError(errno, path_, "pread at offset " + std::to_string(off + done));
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    *got = done;
    return Status::OK();
  }

  Status ReadV(uint64_t off, std::span<const iovec> iov, size_t* got) override {
    // preadv takes at most IOV_MAX pieces and may stop short; the copy of the
    // piece being read is trimmed to what is left of it.
    std::vector<iovec> rest(iov.begin(), iov.end());
    size_t first = 0, done = 0;
    while (first < rest.size()) {
      if (rest[first].iov_len == 0) {
        first++;
        continue;
      }
      const int count = static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
      ssize_t r = ::preadv(fd_, rest.data() + first, count, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *got = done;
        return PosixError(errno, path_, "preadv at offset " + std::to_string(off + done));
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
      for (size_t left = static_cast<size_t>(r); left > 0;) {
        iovec& v = rest[first];
        const size_t take = std::min(left, v.iov_len);
        v.iov_base = static_cast<char*>(v.iov_base) + take;
        v.iov_len -= take;
        left -= take;
        if (v.iov_len == 0) first++;
      }
    }
    *got = done;
    return Status::OK();
  }

  Status ReadDirect(uint64_t off, size_t n, char* buf, size_t* got) override {
    Fd dfd = OpenDirect(O_RDONLY);
    size_t done = 0;
    while (dfd.get() >= 0 && done < n) {
      ssize_t r = ::pread(dfd.get(), buf + done, n - done, static_cast<off_t>(off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EINVAL) {  // alignment the file system rejects: buffered from now
        direct_refused_.store(true, std::memory_order_relaxed);
        break;
      }
      if (r < 0) {
        *got = done;
        return PosixError(errno, path_, "direct pread at offset " + std::to_string(off + done));
      }
      if (r == 0) break;  // end of file (the buffered read below confirms it)
      done += static_cast<size_t>(r);
      if (r % kDirectAlign != 0) break;  // short: the rest buffered
    }
    size_t rest = 0;
    Status st = done < n ? Read(off + done, n - done, buf + done, &rest) : Status::OK();
    *got = done + rest;
    return st;
  }

  Status WriteDirect(uint64_t off, std::string_view data) override {
    Fd dfd = OpenDirect(O_WRONLY);
    size_t done = 0;
    while (dfd.get() >= 0 && done < data.size()) {
      ssize_t r = ::pwrite(dfd.get(), data.data() + done, data.size() - done,
                           static_cast<off_t>(off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EINVAL) {  // alignment the file system rejects: buffered from now
        direct_refused_.store(true, std::memory_order_relaxed);
        break;
      }
      if (r < 0) {
        return PosixError(errno, path_, "direct pwrite at offset " + std::to_string(off + done));
      }
      if (r == 0 || r % kDirectAlign != 0) break;  // finish buffered
      done += static_cast<size_t>(r);
    }
    return Write(off + done, data.substr(done));
  }

  Status Write(uint64_t off, std::string_view data) override {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t r = ::pwrite(fd_, data.data() + done, data.size() - done,
                           static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return PosixError(errno, path_, "pwrite at offset " + std::to_string(off + done));
      }
      if (r == 0) {
        return PosixError(EIO, path_, "pwrite wrote nothing at offset " +
                                          std::to_string(off + done));
      }
      done += static_cast<size_t>(r);
    }
    return Status::OK();
  }

  Status Sync() override {
    if (::fdatasync(fd_) != 0) return PosixError(errno, path_, "fdatasync");
    return Status::OK();
  }

  Status Size(uint64_t* size) override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return PosixError(errno, path_, "fstat");
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }

  Status Truncate(uint64_t size) override {
    int r;
    do {
      r = ::ftruncate(fd_, static_cast<off_t>(size));
    } while (r != 0 && errno == EINTR);
    if (r != 0) return PosixError(errno, path_, "ftruncate to " + std::to_string(size));
    return Status::OK();
  }

  Status PunchHole(uint64_t off, uint64_t len) override {
    if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off),
                    static_cast<off_t>(len)) != 0) {
      return PosixError(errno, path_,
                        "punch hole [" + std::to_string(off) + ", +" + std::to_string(len) + ")");
    }
    return Status::OK();
  }

  void Advise(uint64_t off, uint64_t len, int advice) override {
    (void)::posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(len), advice);
  }

  const std::string& path() const override { return path_; }

 private:
  // The file opened again with O_DIRECT for `access`, or -1 (the caller
  // then goes buffered). A descriptor per call: files are read and written
  // direct only in large pieces, where an open costs little, and none stays
  // open beside fd_. A file system that refuses O_DIRECT (tmpfs) is not
  // asked again.
  Fd OpenDirect(int access) {
    if (direct_refused_.load(std::memory_order_relaxed)) return Fd();
    Fd fd(OpenRetry(path_.c_str(), access | O_DIRECT, 0));
    if (fd.get() < 0 && errno == EINVAL) direct_refused_.store(true, std::memory_order_relaxed);
    return fd;
  }

  const std::string path_;
  const int fd_;
  // The file system refused O_DIRECT: WriteDirect is Write, ReadDirect Read.
  std::atomic<bool> direct_refused_{false};
};

// Holds flocks on a lock file and on its directory; closing the
// descriptors releases them, the directory's first: whoever waits for the
// file's lock (`flock STORE/LOCK true` after an unmount) finds both free.
class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(Fd file, Fd dir, std::string caveat)
      : file_(std::move(file)), dir_(std::move(dir)), caveat_(std::move(caveat)) {}
  std::string Caveat() const override { return caveat_; }

 private:
  Fd file_;
  Fd dir_;  // declared last: closed first
  std::string caveat_;
};

// flock(fd, LOCK_EX | LOCK_NB), retried on EINTR; 0 or -1 with errno.
int TryFlock(int fd) {
  int r;
  do {
    r = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  return r;
}

class PosixEnv final : public Env {
 public:
  Status OpenFile(const std::string& path, OpenMode mode, std::unique_ptr<File>* out) override {
    int fd = -1;
    bool created = false;
    switch (mode) {
      case OpenMode::kRead:
        // Non-blocking: a FIFO in the file's place must not hang the open.
        fd = OpenRetry(path.c_str(), O_RDONLY | O_NONBLOCK, 0);
        break;
      case OpenMode::kReadWrite:
        fd = OpenRetry(path.c_str(), O_RDWR | O_NONBLOCK, 0);
        break;
      case OpenMode::kCreateExclusive:
        fd = OpenRetry(path.c_str(), O_RDWR | O_CREAT | O_EXCL, kFileMode);
        created = fd >= 0;
        break;
      case OpenMode::kCreate:
        // O_EXCL first, so that we know whether to fix the mode of a new file.
        for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
          fd = OpenRetry(path.c_str(), O_RDWR | O_CREAT | O_EXCL, kFileMode);
          if (fd >= 0) {
            created = true;
          } else if (errno == EEXIST) {
            fd = OpenRetry(path.c_str(), O_RDWR, 0);
            if (fd < 0 && errno != ENOENT) break;  // ENOENT: removed meanwhile, retry
          } else {
            break;
          }
        }
        break;
    }
    if (fd < 0) return PosixError(errno, path, "open");
    Fd guard(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) return PosixError(errno, path, "fstat");
    if (!S_ISREG(st.st_mode)) {
      return Status::FromErrno(S_ISDIR(st.st_mode) ? EISDIR : ENODEV,
                               path + ": not a regular file");
    }
    if ((mode == OpenMode::kRead || mode == OpenMode::kReadWrite) &&
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
      return PosixError(errno, path, "fcntl");
    }
    // The umask may have taken bits away from the mode passed to open().
    if (created && ::fchmod(fd, kFileMode) != 0) return PosixError(errno, path, "fchmod");
    *out = std::make_unique<PosixFile>(path, guard.release());
    return Status::OK();
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), kDirMode) != 0) return PosixError(errno, path, "mkdir");
    // By path: with a umask of 0777 the new directory cannot even be opened.
    if (::chmod(path.c_str(), kDirMode) != 0) return PosixError(errno, path, "chmod");
    return Status::OK();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError(errno, path, "unlink");
    return Status::OK();
  }

  Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return PosixError(errno, path, "rmdir");
    return Status::OK();
  }

  Status RenameFile(const std::string& from, const std::string& to, RenameMode mode) override {
    if (mode == RenameMode::kReplace) {
      if (::rename(from.c_str(), to.c_str()) != 0) {
        return PosixError(errno, from, "rename to " + to);
      }
      return Status::OK();
    }
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
      return Status::OK();
    }
    if (errno != EINVAL && errno != ENOSYS) return PosixError(errno, from, "rename to " + to);
    // A file system without RENAME_NOREPLACE: link(2) refuses an existing
    // name too.
    if (::link(from.c_str(), to.c_str()) != 0) return PosixError(errno, from, "link to " + to);
    if (::unlink(from.c_str()) != 0) {
      return PosixError(errno, from, "unlink after linking to " + to);
    }
    return Status::OK();
  }

  Status ListDir(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError(errno, dir, "opendir");
    std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
    for (;;) {
      errno = 0;
      struct dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) return PosixError(errno, dir, "readdir");
        break;
      }
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      names->emplace_back(name);
    }
    return Status::OK();
  }

  Status SyncDir(const std::string& dir) override {
    Fd fd(OpenRetry(dir.c_str(), O_RDONLY | O_DIRECTORY, 0));
    if (fd.get() < 0) return PosixError(errno, dir, "open directory for fsync");
    if (::fsync(fd.get()) != 0) return PosixError(errno, dir, "fsync directory");
    return Status::OK();
  }

  Status Exists(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::NotFound(path + ": does not exist");
      return PosixError(errno, path, "stat");
    }
    return Status::OK();
  }

  Status LockFile(const std::string& path, std::unique_ptr<FileLock>* out) override {
    // Never through a link: the file gets fchmod'ed, and a store directory
    // that others could write to (before mkfs makes it 0700) could point it
    // anywhere.
    int raw = OpenRetry(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, kFileMode);
    // On a read-only file system the file is locked as it is, if it is
    // there (flock needs no write access), and the directory in any case.
    const bool read_only_fs = raw < 0 && errno == EROFS;
    if (read_only_fs) raw = OpenRetry(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    Fd fd(raw);
    if (fd.get() < 0 && !(read_only_fs && errno == ENOENT)) {
      if (errno == ELOOP) return PosixError(ELOOP, path, "lock file is a symbolic link");
      return PosixError(errno, path, "open lock file");
    }
    struct stat st;
    if (fd.get() >= 0 && ::fstat(fd.get(), &st) != 0) {
      return PosixError(errno, path, "fstat lock file");
    }
    if (fd.get() >= 0 && !S_ISREG(st.st_mode)) {
      return PosixError(EINVAL, path, "lock file is not a regular file");
    }
    if (!read_only_fs && (st.st_mode & 07777) != kFileMode && ::fchmod(fd.get(), kFileMode) != 0) {
      return PosixError(errno, path, "fchmod lock file");
    }
    if (fd.get() >= 0 && TryFlock(fd.get()) != 0) {
      if (errno == EWOULDBLOCK) {
        return Status::FromErrno(EBUSY, path + ": store is already in use (already mounted?)");
      }
      return PosixError(errno, path, "flock");
    }
    // The directory too: a lock file removed or replaced while its holder
    // runs leaves the holder's lock on a file nobody else opens, but the
    // directory is the same one.
    const size_t slash = path.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    Fd dfd(OpenRetry(dir.c_str(), O_RDONLY | O_DIRECTORY, 0));
    std::string caveat;
    if (dfd.get() < 0) return PosixError(errno, dir, "open the lock file's directory");
    if (TryFlock(dfd.get()) != 0) {
      if (errno == EWOULDBLOCK) {
        return Status::FromErrno(EBUSY, path + ": store is already in use, by a process that "
                                               "locked it before this lock file was removed "
                                               "or replaced");
      }
      // NFS emulates flock with byte-range locks, which a descriptor open
      // for reading cannot take exclusively (EBADF); others lack it. The
      // file's lock, if there is one, is then all there is.
      const bool unsupported =
          errno == EBADF || errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL;
      if (!unsupported || fd.get() < 0) return PosixError(errno, dir, "flock");
      caveat = dir + ": cannot lock the directory (" + std::strerror(errno) +
               "): only " + path + " keeps a second sepfs out, so do not remove it";
      Fd unlocked(std::move(dfd));  // closed here
    }
    *out = std::make_unique<PosixFileLock>(std::move(fd), std::move(dfd), std::move(caveat));
    return Status::OK();
  }

  Status FreeSpace(const std::string& path, uint64_t* avail, uint64_t* total) override {
    struct statvfs sv;
    if (::statvfs(path.c_str(), &sv) != 0) return PosixError(errno, path, "statvfs");
    *avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
    *total = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
    return Status::OK();
  }
};

}  // namespace

Status File::ReadV(uint64_t off, std::span<const iovec> iov, size_t* got) {
  *got = 0;
  for (const iovec& v : iov) {
    size_t n = 0;
    SEPFS_RETURN_IF_ERROR(Read(off + *got, v.iov_len, static_cast<char*>(v.iov_base), &n));
    *got += n;
    if (n < v.iov_len) break;  // end of file
  }
  return Status::OK();
}

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();
  return env;
}

}  // namespace sepfs
