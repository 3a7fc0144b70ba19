#include "fs/store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "fs/clock.h"
#include "fs/live_journal.h"
#include "vlog/format.h"

namespace sepfs::fs {

std::string MetaDir(const std::string& store) { return store + "/meta"; }
std::string VlogDir(const std::string& store) { return store + "/vlog"; }
std::string LockPath(const std::string& store) { return store + "/LOCK"; }

bool LooksLikeStore(Env* env, const std::string& dir) {
  return env->Exists(MetaDir(dir) + "/CURRENT").ok();
}

namespace {

std::string RandomUuid() {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    unsigned v = rd() & 0xff;
    out += hex[v >> 4];
    out += hex[v & 15];
  }
  return out;
}

Status CheckMkfsOptions(const std::string& dir, const MkfsOptions& o) {
  if (!kv::ValidBlockSize(o.block_size)) {
    return Status::InvalidArgument(dir + ": block size must be a power of two from 4096 to 4 MiB");
  }
  if (!kv::ValidSegmentSize(o.segment_size, o.block_size)) {
    return Status::InvalidArgument(
        dir + ": segment size must be from 1 MiB to 2 GiB and at least 4 blocks");
  }
  if (!kv::ValidCapacity(o.capacity, o.segment_size)) {
    return Status::InvalidArgument(dir + ": capacity must be at least 16 segments");
  }
  if (o.inline_max && !kv::ValidInlineMax(*o.inline_max, o.block_size)) {
    return Status::InvalidArgument(dir +
                                   ": inline limit must be at most 64 KiB and half a block");
  }
  return Status::OK();
}

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

// lstat: a symbolic link is neither.
bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Status NotAStore(const std::string& dir, const std::string& what) {
  return Status::FromErrno(EEXIST, dir + ": directory is not empty ('" + what +
                                       "' is not part of a sepfs store; mkfs --force "
                                       "replaces only a store): choose an empty directory");
}

// Appends the files of dir/sub, all named as `named` allows, then dir/sub
// itself. lost_ok: a subdirectory lost/ of such files may be there too
// (leveldb::RepairDB moves what it cannot use there).
Status StoreDirFiles(Env* env, const std::string& dir, const std::string& sub,
                     bool (*named)(std::string_view), bool lost_ok,
                     std::vector<std::string>* out) {
  const std::string path = dir + "/" + sub;
  if (!IsDirectory(path)) return NotAStore(dir, sub);
  std::vector<std::string> files;
  SEPFS_RETURN_IF_ERROR(env->ListDir(path, &files));
  for (const auto& f : files) {
    if (lost_ok && f == "lost") {
      SEPFS_RETURN_IF_ERROR(StoreDirFiles(env, dir, sub + "/lost", named, false, out));
      continue;
    }
    if (!named(f) || !IsRegularFile(path + "/" + f)) return NotAStore(dir, sub + "/" + f);
    out->push_back(path + "/" + f);
  }
  out->push_back(path);
  return Status::OK();
}

// The paths of what an earlier store (or an interrupted mkfs) left in
// `dir`, each directory after its files; EEXIST naming the first thing
// that is not a store's: a name sepfs or LevelDB never makes, a
// subdirectory, or a link. lost+found (a disk's root) stays and does not
// count. mkfs checks all before it removes any, so it never deletes what
// is not a store's, --force or not.
Status OldStoreFiles(Env* env, const std::string& dir, std::vector<std::string>* out) {
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env->ListDir(dir, &names));
  for (const auto& n : names) {
    const std::string path = dir + "/" + n;
    if (n == "lost+found") continue;
    if (n == "LOCK" || n == "sepfs.log") {
      if (!IsRegularFile(path)) return NotAStore(dir, n);
      out->push_back(path);
      continue;
    }
    const bool meta = n == "meta";
    if (!meta && n != "vlog") return NotAStore(dir, n);
    SEPFS_RETURN_IF_ERROR(StoreDirFiles(env, dir, n, meta ? IsLevelDbFileName : IsVlogFileName,
                                        /*lost_ok=*/meta, out));
  }
  return Status::OK();
}

}  // namespace

Status Mkfs(const std::string& dir, const MkfsOptions& options) {
  SEPFS_RETURN_IF_ERROR(CheckMkfsOptions(dir, options));
  Env* env = Env::Default();
  Status st = env->CreateDir(dir);
  if (!st.ok() && st.err() != EEXIST) return st;
  std::vector<std::string> doomed;  // files of an old store, parents after children
  SEPFS_RETURN_IF_ERROR(OldStoreFiles(env, dir, &doomed));
  if (!doomed.empty()) {
    if (!options.force) {
      return Status::FromErrno(EEXIST, dir + (LooksLikeStore(env, dir)
                                                  ? ": already a sepfs store (use --force to "
                                                    "overwrite it)"
                                                  : ": holds part of a sepfs store (use --force "
                                                    "to overwrite it)"));
    }
    std::unique_ptr<FileLock> lock;
    SEPFS_RETURN_IF_ERROR(env->LockFile(LockPath(dir), &lock));
    for (const auto& path : doomed) {
      if (path == LockPath(dir)) continue;
      Status st = IsDirectory(path) ? env->RemoveDir(path) : env->RemoveFile(path);
      if (!st.ok() && st.err() != ENOENT) return st;
    }
  }
  if (::chmod(dir.c_str(), 0700) != 0) return Status::FromErrno(errno, dir + ": chmod");

  std::unique_ptr<FileLock> lock;
  SEPFS_RETURN_IF_ERROR(env->LockFile(LockPath(dir), &lock));
  SEPFS_RETURN_IF_ERROR(env->CreateDir(MetaDir(dir)));
  SEPFS_RETURN_IF_ERROR(env->CreateDir(VlogDir(dir)));

  kv::MetaOptions mo;
  mo.create_if_missing = true;
  mo.error_if_exists = true;
  std::unique_ptr<kv::MetaStore> meta;
  SEPFS_RETURN_IF_ERROR(kv::MetaStore::Open(MetaDir(dir), mo, &meta));

  kv::Superblock sb;
  sb.block_size = options.block_size;
  sb.segment_size = options.segment_size;
  sb.capacity = options.capacity;
  sb.inline_max = options.inline_max.value_or(kv::DefaultInlineMax(options.block_size));
  sb.created = Now().sec;
  sb.uuid = RandomUuid();

  kv::InodeRecord root;
  root.ino = 1;
  root.mode = S_IFDIR | 0755;
  root.uid = ::geteuid();
  root.gid = ::getegid();
  root.nlink = 2;
  root.atime = root.mtime = root.ctime = Now();
  root.xattr_list_bytes = 0;  // format 5 (kv::kMetaFormatXattrCounts)

  kv::Batch b;
  b.Put(kv::SuperKey(), kv::EncodeSuperblock(sb));
  b.PutInode(root);
  b.Put(kv::CounterKey("clean"), kv::EncodeCounter(1));
  // The first checkpoint: no segment, no live byte (fs/live_journal.h).
  b.Put(kv::CounterKey(kSegmentUsageCounter), EncodeSegmentUsage({}));
  b.Put(kv::CounterKey(kVlogHeadsCounter), EncodeVlogHeads(VlogHeads{}));
  SEPFS_RETURN_IF_ERROR(meta->Write(&b, /*sync=*/true));
  return env->SyncDir(dir);
}

Status Store::Open(const std::string& dir, const StoreOptions& options,
                   std::unique_ptr<Store>* out) {
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  s->env_ = options.env ? options.env : Env::Default();
  Status st = s->env_->Exists(dir);
  if (st.err() == ENOENT) {
    return Status::FromErrno(ENOENT, dir + ": store directory does not exist");
  }
  if (st.ok()) {
    st = s->env_->Exists(dir + "/.");  // ENOTDIR when dir itself is a file
    if (st.err() == ENOTDIR) {
      return Status::FromErrno(ENOTDIR, dir + ": not a directory (a store is the directory "
                                              "that sepfs mkfs made)");
    }
  }
  if (!st.ok()) return Status::FromErrno(st.err(), dir + ": cannot reach the store directory");
  if (!LooksLikeStore(s->env_, dir)) {
    return Status::FromErrno(EINVAL, dir + ": not a sepfs store (no meta/CURRENT; run sepfs mkfs)");
  }
  st = s->env_->LockFile(LockPath(dir), &s->lock_);
  if (!st.ok()) {
    if (st.err() == EBUSY) {
      return Status::FromErrno(EBUSY, dir + ": store is already mounted or in use by another "
                                            "sepfs process");
    }
    return st;
  }
  kv::MetaOptions mo;
  mo.block_cache_bytes = options.meta_cache_bytes;
  mo.env = options.leveldb_env;
  SEPFS_RETURN_IF_ERROR(kv::MetaStore::Open(MetaDir(dir), mo, &s->meta_));
  std::string raw;
  st = s->meta_->Get(kv::SuperKey(), &raw);
  if (st.IsNotFound()) return Status::Corruption(dir + ": superblock missing (not a sepfs store?)");
  SEPFS_RETURN_IF_ERROR(st);
  SEPFS_RETURN_IF_ERROR(kv::DecodeSuperblock(raw, &s->super_).WithContext(dir + ": superblock"));

  vlog::Options vo;
  vo.env = s->env_;
  vo.segment_size = s->super_.segment_size;
  vo.append_buffer_size = options.append_buffer_size;
  vo.read_only = options.read_only;
  vo.direct_writes = options.direct_io;
  vo.direct_reads = options.direct_io;
  vo.recycle_segments = options.recycle_segments;
  // Binaries of an older format would take a recycled segment's header for
  // damage, so their stores never get one.
  vo.version2_headers = s->super_.version >= kv::kMetaFormatRecycledSegments;
  SEPFS_RETURN_IF_ERROR(vlog::ValueLog::Open(vo, VlogDir(dir), &s->vlog_));
  if (!vo.version2_headers && !options.read_only && s->HoldsRecycledSegments()) {
    // Written by the binaries of 2026-11-24, which recycled files in stores
    // of format 3: such a store is of format 4 already, so say so (and let
    // repair keep the segments' ends).
    SEPFS_RETURN_IF_ERROR(s->RaiseFormat(kv::kMetaFormatRecycledSegments));
    s->vlog_.reset();
    vo.version2_headers = true;
    SEPFS_RETURN_IF_ERROR(vlog::ValueLog::Open(vo, VlogDir(dir), &s->vlog_));
  }
  *out = std::move(s);
  return Status::OK();
}

bool Store::HoldsRecycledSegments() const {
  for (const auto& seg : vlog_->Segments()) {
    if (seg.recycled) return true;
  }
  return false;
}

Status Store::RaiseFormat(uint32_t version) {
  kv::Superblock sb = super_;
  const uint32_t from = sb.version;
  sb.version = version;
  kv::Batch b;
  b.Put(kv::SuperKey(), kv::EncodeSuperblock(sb));
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, /*sync=*/true).WithContext(dir_ + ": raising the format"));
  super_ = sb;
  std::fprintf(stderr,
               "sepfs: %s: store format raised from %u to %u: it holds recycled vLog segment "
               "files, which sepfs binaries of format %u would take for damaged ones\n",
               dir_.c_str(), from, version, from);
  return Status::OK();
}

Store::~Store() {
  vlog_.reset();
  meta_.reset();
}

}  // namespace sepfs::fs
