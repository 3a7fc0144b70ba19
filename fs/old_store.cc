#include "fs/old_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <vector>

#include "fs/store.h"
#include "vlog/format.h"

namespace sepfs::fs {

namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A name LevelDB gives a file of its directory.
bool IsLevelDbFileName(std::string_view n) {
  if (n == "CURRENT" || n == "LOCK" || n == "LOG" || n == "LOG.old") return true;
  if (n.starts_with("MANIFEST-")) return AllDigits(n.substr(9));
  for (std::string_view ext : {".log", ".ldb", ".sst", ".dbtmp"}) {
    if (n.ends_with(ext)) return AllDigits(n.substr(0, n.size() - ext.size()));
  }
  return false;
}

bool IsVlogFileName(std::string_view n) {
  uint32_t id;
  return vlog::ParseSegmentFileName(n, &id) || vlog::ParseFreeFileName(n, &id);
}

bool IsTopFileName(std::string_view n) {
  return n == "LOCK" || n == "sepfs.log" || n == "superblock" || n == "superblock.tmp";
}

Status NotAStore(const std::string& dir, const std::string& what) {
  return Status::FromErrno(EEXIST, dir + ": directory is not empty ('" + what +
                                       "' is not part of a sepfs store; mkfs --force "
                                       "replaces only a store): choose an empty directory");
}

}  // namespace

// A directory opened by descriptor (never through a link below the store
// directory), with the names checked in it.
struct OldStore::Dir {
  int fd = -1;
  std::string rel;                                   // "" for the store directory
  std::vector<std::string> files;                    // regular files, checked
  std::vector<std::pair<std::string, std::unique_ptr<Dir>>> subdirs;

  ~Dir() {
    if (fd >= 0) ::close(fd);
  }

  // Opens name below parent (or `path` when parent is null) as a directory.
  static Status Open(const Dir* parent, const std::string& path, const std::string& name,
                     std::unique_ptr<Dir>* out) {
    auto d = std::make_unique<Dir>();
    d->rel = parent == nullptr ? "" : (parent->rel.empty() ? name : parent->rel + "/" + name);
    const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    d->fd = parent == nullptr ? ::open(path.c_str(), flags)
                              : ::openat(parent->fd, name.c_str(), flags | O_NOFOLLOW);
    if (d->fd < 0) {
      const int err = errno;
      if (parent != nullptr && (err == ENOTDIR || err == ELOOP)) return NotAStore(path, d->rel);
      return Status::FromErrno(err, path + (d->rel.empty() ? "" : "/" + d->rel) + ": open");
    }
    *out = std::move(d);
    return Status::OK();
  }

  Status List(const std::string& path, std::vector<std::string>* names) const {
    const int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) return Status::FromErrno(errno, path + ": dup");
    DIR* d = ::fdopendir(dup_fd);
    if (d == nullptr) {
      const int err = errno;
      ::close(dup_fd);
      return Status::FromErrno(err, path + ": fdopendir");
    }
    std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
    for (;;) {
      errno = 0;
      const dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) return Status::FromErrno(errno, path + ": readdir");
        return Status::OK();
      }
      const std::string_view n = e->d_name;
      if (n != "." && n != "..") names->emplace_back(n);
    }
  }

  bool IsRegular(const std::string& name) const {
    struct stat st {};
    return ::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
  }

  // Checks the files of this directory by `named`; lost_ok: a subdirectory
  // lost/ of such files may be there too.
  Status Check(const std::string& path, bool (*named)(std::string_view), bool lost_ok) {
    std::vector<std::string> names;
    SEPFS_RETURN_IF_ERROR(List(path, &names));
    for (const auto& n : names) {
      if (lost_ok && n == "lost") {
        std::unique_ptr<Dir> lost;
        SEPFS_RETURN_IF_ERROR(Open(this, path, n, &lost));
        SEPFS_RETURN_IF_ERROR(lost->Check(path, named, false));
        subdirs.emplace_back(n, std::move(lost));
        continue;
      }
      if (!named(n) || !IsRegular(n)) return NotAStore(path, rel + "/" + n);
      files.push_back(n);
    }
    return Status::OK();
  }

  // Unlinks the files, then empties and removes the subdirectories; `keep`
  // is left in place.
  Status RemoveContents(const std::string& path, std::string_view keep) {
    for (const auto& n : files) {
      if (n == keep) continue;
      if (::unlinkat(fd, n.c_str(), 0) != 0 && errno != ENOENT) {
        return Status::FromErrno(errno, path + "/" + (rel.empty() ? n : rel + "/" + n) +
                                            ": cannot remove");
      }
    }
    for (auto& [n, sub] : subdirs) {
      SEPFS_RETURN_IF_ERROR(sub->RemoveContents(path, {}));
      if (::unlinkat(fd, n.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return Status::FromErrno(errno, path + "/" + sub->rel + ": cannot remove");
      }
    }
    return Status::OK();
  }
};

OldStore::~OldStore() = default;

Status OldStore::Find(const std::string& dir, std::unique_ptr<OldStore>* out) {
  std::unique_ptr<OldStore> s(new OldStore());
  s->path_ = dir;
  SEPFS_RETURN_IF_ERROR(Dir::Open(nullptr, dir, "", &s->root_));
  Dir& root = *s->root_;
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(root.List(dir, &names));
  for (const auto& n : names) {
    if (n == "lost+found" || n == kSetAsideDirName) continue;
    if (IsTopFileName(n)) {
      if (!root.IsRegular(n)) return NotAStore(dir, n);
      root.files.push_back(n);
      continue;
    }
    const bool meta = n == "meta";
    if (!meta && n != "vlog") return NotAStore(dir, n);
    std::unique_ptr<Dir> sub;
    SEPFS_RETURN_IF_ERROR(Dir::Open(&root, dir, n, &sub));
    SEPFS_RETURN_IF_ERROR(sub->Check(dir, meta ? IsLevelDbFileName : IsVlogFileName, meta));
    root.subdirs.emplace_back(n, std::move(sub));
  }
  *out = std::move(s);
  return Status::OK();
}

bool OldStore::empty() const { return root_->files.empty() && root_->subdirs.empty(); }

Status OldStore::Remove() { return root_->RemoveContents(path_, "LOCK"); }

}  // namespace sepfs::fs
