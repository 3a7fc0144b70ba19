#include "kvstore/leveldb_status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace sepfs::kv {
namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// errnos LevelDB's POSIX Env may report through strerror() text.
constexpr int kKnownErrnos[] = {ENOSPC, EDQUOT, EROFS,   EACCES, EPERM, EMFILE, ENFILE,
                                ENOMEM, ENOENT, ENOTDIR, EISDIR, EFBIG, EAGAIN, EIO};

bool IsLockFailure(std::string_view msg) {
  if (!Contains(msg, "lock ")) return false;
  return Contains(msg, "already held by process") || Contains(msg, std::strerror(EAGAIN)) ||
         Contains(msg, std::strerror(EACCES));
}

int ErrnoFromMessage(std::string_view msg) {
  for (int e : kKnownErrnos) {
    if (Contains(msg, std::strerror(e))) return e;
  }
  return EIO;
}

// LevelDB's mmap table reader reports a read past a table's end as EINVAL:
// the table is shorter than its MANIFEST entry says (truncated), which is
// damage like a bad checksum, for repair to act on.
bool IsTruncatedTable(std::string_view text) {
  return Contains(text, std::strerror(EINVAL)) &&
         (Contains(text, ".ldb") || Contains(text, ".sst"));
}

}  // namespace

Status FromLevelDb(const leveldb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  const std::string text = s.ToString();
  std::string msg(context);
  msg += ": ";
  msg += text;
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsIOError() && IsTruncatedTable(text)) return Status::Corruption(msg + " (truncated table)");
  if (s.IsNotSupportedError()) return Status::FromErrno(EOPNOTSUPP, msg);
  if (s.IsInvalidArgument()) {
    if (Contains(text, "does not exist")) return Status::FromErrno(ENOENT, msg);
    if (Contains(text, "exists")) return Status::FromErrno(EEXIST, msg);
    return Status::InvalidArgument(msg);
  }
  if (s.IsIOError() && IsLockFailure(text)) {
    return Status::FromErrno(
        EBUSY, msg + ": metadata is locked by another process (already mounted?)");
  }
  return Status::FromErrno(ErrnoFromMessage(text), msg);
}

}  // namespace sepfs::kv
