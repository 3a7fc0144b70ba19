// Filesystem extended attributes: one LSM key per (inode, name), so an
// inode's xattrs are one range. The name "sepfs.stats" on the root is
// virtual: reading it returns the live statistics (sepfs stats MOUNTPOINT).
#include <linux/limits.h>
#include <sys/xattr.h>

#include "fs/clock.h"
#include "fs/filesystem.h"

namespace sepfs::fs {

namespace {

constexpr std::string_view kStatsXattr = "sepfs.stats";
// Writing runs a garbage-collection pass (sepfs gc); the value is the least
// garbage share, in percent, of a segment to collect ("" for the default).
constexpr std::string_view kGcXattr = "sepfs.gc";

Status CheckXattrName(std::string_view name) {
  if (name.empty() || name.size() > Filesystem::kXattrNameMax) {
    return Status::FromErrno(ERANGE, "bad xattr name length");
  }
  return Status::OK();
}

// Whether sepfs stores name on inode ino: the namespaces ext4 stores, and
// sepfs's two names on the root. Not system.*: the kernel leaves every
// permission check on those names to the file system, which must know what
// each one means, so anyone could set or remove them on any file; POSIX
// ACLs would also be shown by getfacl but never enforced (sepfs does not
// negotiate FUSE_POSIX_ACL). Names an older sepfs stored outside these can
// still be read and removed.
Status CheckNamespace(uint64_t ino, std::string_view name) {
  if (name == kStatsXattr || name == kGcXattr) {
    if (ino == Filesystem::kRootIno) return Status::OK();
    return Status::FromErrno(EOPNOTSUPP, "sepfs.* xattrs are the root's");
  }
  for (std::string_view ns : {"user.", "trusted.", "security."}) {
    if (name.starts_with(ns)) {
      if (name.size() == ns.size()) return Status::InvalidArgument("xattr name without a suffix");
      return Status::OK();
    }
  }
  return Status::FromErrno(EOPNOTSUPP, "xattr namespace not supported (user, trusted, security)");
}

// The error for a name ino does not have: ENODATA, or the namespace's
// refusal when sepfs would not store that name.
Status Missing(uint64_t ino, std::string_view name) {
  Status ns = CheckNamespace(ino, name);
  return ns.ok() ? Status::FromErrno(ENODATA, "no such xattr") : ns;
}

}  // namespace

Status Filesystem::SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                            int flags) {
  SEPFS_RETURN_IF_ERROR(CheckXattrName(name));
  SEPFS_RETURN_IF_ERROR(CheckNamespace(ino, name));
  if (value.size() > kXattrValueMax) return Status::FromErrno(E2BIG, "xattr value too large");
  if (name == kStatsXattr) return Status::FromErrno(EPERM, "sepfs.stats is read-only");
  if (ino == kRootIno && name == kGcXattr) {
    double ratio = kOnDemandMinGarbageRatio;
    if (!value.empty() && !ParseGarbagePercent(value, &ratio)) {
      return Status::InvalidArgument("sepfs.gc takes the least garbage share to collect, 0-100");
    }
    return RunGc(ratio, nullptr, nullptr);
  }
  const bool temperature = name == kTemperatureXattr;
  if (temperature && value != "hot" && value != "cold") {
    return Status::InvalidArgument("user.sepfs.temperature must be hot or cold");
  }
  // On a full store, give the collector the time a data write gets.
  WaitForValueRoom(name.size() + value.size() + kEntryBytes);
  std::shared_lock<std::shared_mutex> ns(ns_mu_);
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::lock_guard<std::mutex> il(in->mu);
  std::string old;
  Status st = meta_->Get(kv::XattrKey(ino, name), &old);
  if (!st.ok() && !st.IsNotFound()) return st;
  if (st.ok() && (flags & XATTR_CREATE)) return Status::FromErrno(EEXIST, "xattr exists");
  if (st.IsNotFound() && (flags & XATTR_REPLACE)) return Status::FromErrno(ENODATA, "no xattr");
  if (st.IsNotFound()) {
    // listxattr(2) returns at most XATTR_LIST_MAX bytes of names: a name
    // that would not fit in the list is refused, as ext4 refuses one that
    // does not fit its xattr block.
    uint64_t listed = in->rec.xattr_list_bytes;
    if (!in->rec.xattrs_known()) {
      listed = 0;
      SEPFS_RETURN_IF_ERROR(ScanXattrs(ino, kv::kXattrsUnknown,
                                       [&](std::string_view, std::string_view n) {
                                         listed += n.empty() ? 0 : n.size() + 1;
                                       }));
    }
    if (listed + name.size() + 1 > XATTR_LIST_MAX) {
      return Status::NoSpace("the file's xattr names would not fit a listxattr reply");
    }
  }
  // A value that grows the LSM takes space as file data does, so a full
  // store refuses it; one that does not may use the entries' part of the
  // reserve. Either way the whole value is charged: LevelDB appends every
  // version to its log and its tables until a compaction drops the old one.
  const bool grows = st.IsNotFound() || value.size() > old.size();
  SEPFS_RETURN_IF_ERROR(HaveMetaSpace(name.size() + value.size() + kEntryBytes,
                                      grows ? MetaUse::kValue : MetaUse::kEntry));
  kv::InodeRecord r = in->rec;
  r.ctime = Now();
  if (st.IsNotFound() && r.xattrs_known()) r.xattr_list_bytes += name.size() + 1;
  kv::Batch b;
  b.Put(kv::XattrKey(ino, name), value);
  b.PutInode(in->Stored(r));
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, false));
  in->rec.ctime = r.ctime;
  in->rec.xattr_list_bytes = r.xattr_list_bytes;
  if (temperature) in->temperature = value == "cold" ? 1 : 0;
  return Status::OK();
}

Status Filesystem::GetXattr(uint64_t ino, std::string_view name, std::string* value) {
  SEPFS_RETURN_IF_ERROR(CheckXattrName(name));
  if (ino == kRootIno && name == kStatsXattr) {
    *value = StatsText();
    return Status::OK();
  }
  Status st = meta_->Get(kv::XattrKey(ino, name), value);
  if (st.IsNotFound()) return Missing(ino, name);
  return st;
}

Status Filesystem::ListXattr(uint64_t ino, std::string* names) {
  names->clear();
  auto append = [&](std::string_view, std::string_view name) {
    if (name.empty()) return;
    names->append(name);
    names->push_back('\0');
  };
  std::shared_lock<std::shared_mutex> ns(ns_mu_);
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::unique_lock<std::mutex> il(in->mu);
  // A count bounds the scan only if no name changes meanwhile; without
  // one, the whole range is read without the locks, as it always was.
  const uint32_t list_bytes = in->rec.xattr_list_bytes;
  if (list_bytes == kv::kXattrsUnknown) {
    il.unlock();
    ns.unlock();
  }
  return ScanXattrs(ino, list_bytes, append);
}

Status Filesystem::ScanXattrs(
    uint64_t ino, uint32_t list_bytes,
    const std::function<void(std::string_view key, std::string_view name)>& fn) {
  if (list_bytes == 0) return Status::OK();
  const bool known = list_bytes != kv::kXattrsUnknown;
  uint64_t seen = 0;
  return meta_->ScanPrefix(kv::XattrPrefix(ino), [&](std::string_view key, std::string_view) {
    uint64_t i;
    std::string_view name;
    if (!kv::ParseXattrKey(key, &i, &name)) name = {};
    fn(key, name);
    seen += name.empty() ? 0 : name.size() + 1;
    return !known || seen < list_bytes;
  });
}

Status Filesystem::RemoveXattr(uint64_t ino, std::string_view name) {
  SEPFS_RETURN_IF_ERROR(CheckXattrName(name));
  std::shared_lock<std::shared_mutex> ns(ns_mu_);
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::lock_guard<std::mutex> il(in->mu);
  std::string old;
  Status st = meta_->Get(kv::XattrKey(ino, name), &old);
  if (st.IsNotFound()) return Missing(ino, name);
  SEPFS_RETURN_IF_ERROR(st);
  kv::InodeRecord r = in->rec;
  r.ctime = Now();
  if (r.xattrs_known()) {
    // A count too low to hold the name is damage: unknown is always safe.
    r.xattr_list_bytes = r.xattr_list_bytes > name.size() ? r.xattr_list_bytes - (name.size() + 1)
                                                          : kv::kXattrsUnknown;
  }
  kv::Batch b;
  b.Delete(kv::XattrKey(ino, name));
  b.PutInode(in->Stored(r));
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, false));
  in->rec.ctime = r.ctime;
  in->rec.xattr_list_bytes = r.xattr_list_bytes;
  if (name == kTemperatureXattr) in->temperature = 0;
  return Status::OK();
}

}  // namespace sepfs::fs
