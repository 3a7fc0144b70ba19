#include "fs/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "fs/clock.h"
#include "fs/lifetime.h"
#include "fs/live_journal.h"
#include "fs/mountinfo.h"
#include "fs/old_store.h"
#include "fs/superblock_copy.h"
#include "vlog/whole_file.h"

namespace sepfs::fs {

std::string MetaDir(const std::string& store) { return store + "/meta"; }
std::string VlogDir(const std::string& store) { return store + "/vlog"; }
std::string LockPath(const std::string& store) { return store + "/LOCK"; }

bool LooksLikeStore(Env* env, const std::string& dir) {
  return env->Exists(MetaDir(dir) + "/CURRENT").ok();
}

bool LooksLikeDamagedStore(Env* env, const std::string& dir) {
  return !LooksLikeStore(env, dir) && env->Exists(MetaDir(dir)).ok() &&
         (env->Exists(SuperblockCopyPath(dir)).ok() || env->Exists(VlogDir(dir)).ok());
}

std::string StoreMountPoint(const std::string& dir) {
  struct stat want;
  if (::stat(dir.c_str(), &want) != 0) return "";
  std::vector<MountInfo> mounts;
  if (!ReadMountInfo(&mounts).ok()) return "";
  std::string point;
  for (const MountInfo& m : mounts) {
    // The daemon names its mount after the store's absolute path (fsname);
    // the same directory reached by another path (a bind mount, a rename
    // since) is still found by its identity.
    // Only sepfs mounts' sources are looked at: another file system's
    // source may lie on a mount that does not answer.
    struct stat st;
    if (m.fstype == "fuse.sepfs" && ::stat(m.source.c_str(), &st) == 0 &&
        st.st_dev == want.st_dev && st.st_ino == want.st_ino) {
      point = m.point;
    }
  }
  return point;
}

namespace {

// What NoteMount writes into the lock file (NotedMountPoint reads it back).
std::string MountNote(pid_t pid, const std::string& mountpoint) {
  return "pid " + std::to_string(pid) + "\nmount " + mountpoint + "\n";
}

// Replaces what the lock file of dir holds (the lock is on its inode, so it
// is rewritten in place, not replaced).
Status WriteLockNote(Env* env, const std::string& dir, const std::string& note) {
  std::unique_ptr<File> f;
  SEPFS_RETURN_IF_ERROR(env->OpenFile(LockPath(dir), OpenMode::kReadWrite, &f));
  uint64_t size = 0;
  SEPFS_RETURN_IF_ERROR(f->Size(&size));
  if (size == 0 && note.empty()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(f->Truncate(0));
  return note.empty() ? Status::OK() : f->Write(0, note);
}

// The mount point a live holder of dir's lock wrote there, if it is still a
// sepfs mount; "" otherwise (no note, a dead process, a stale mount point).
std::string NotedMountPoint(Env* env, const std::string& dir, std::string* source) {
  std::string note;
  if (!ReadWholeFile(env, LockPath(dir), &note, 8192).ok()) return "";
  long pid = 0;
  std::string point;
  size_t at = 0;
  while (at < note.size()) {
    size_t end = note.find('\n', at);
    if (end == std::string::npos) return "";  // cut short: being written
    const std::string line = note.substr(at, end - at);
    if (line.rfind("pid ", 0) == 0) pid = std::strtol(line.c_str() + 4, nullptr, 10);
    if (line.rfind("mount ", 0) == 0) point = line.substr(6);
    at = end + 1;
  }
  if (pid <= 0 || point.empty() || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) {
    return "";
  }
  std::vector<MountInfo> mounts;
  if (!ReadMountInfo(&mounts).ok()) return "";
  for (const MountInfo& m : mounts) {
    if (m.fstype == "fuse.sepfs" && m.point == point) {
      *source = m.source;
      return point;
    }
  }
  return "";
}

// Takes the store's lock. A lock held while no mount serves the store is
// most likely a daemon still writing after umount; that is waited for, up
// to wait_sec (see StoreOptions::lock_wait_sec).
Status LockStore(Env* env, const std::string& dir, double wait_sec,
                 std::unique_ptr<FileLock>* lock) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point next_mount_check = start;
  bool told = false;
  for (;;) {
    Status st = env->LockFile(LockPath(dir), lock);
    if (st.ok() && !(*lock)->Caveat().empty()) {
      std::fprintf(stderr, "sepfs: %s\n", (*lock)->Caveat().c_str());
    }
    if (st.err() != EBUSY) return st;
    const Clock::time_point now = Clock::now();
    if (now >= next_mount_check) {  // mountinfo may be long: a few looks a second
      const std::string point = StoreMountPoint(dir);
      if (!point.empty()) {
        return Status::FromErrno(EBUSY, dir + ": store is mounted at " + point);
      }
      std::string source;
      const std::string noted = NotedMountPoint(env, dir, &source);
      if (!noted.empty()) {
        return Status::FromErrno(EBUSY, dir + ": store is mounted at " + noted + " (from " +
                                            source + ", its path when it was mounted)");
      }
      next_mount_check = now + std::chrono::milliseconds(250);
    }
    const double waited = std::chrono::duration<double>(now - start).count();
    if (waited >= wait_sec) {
      char why[96];
      std::snprintf(why, sizeof(why), " (still after %.1f s; it is not mounted here)", wait_sec);
      return Status::FromErrno(EBUSY, dir + ": store is in use by another sepfs process" +
                                          (wait_sec > 0 ? why : " (already mounted?)"));
    }
    if (!told && waited >= 1) {
      std::fprintf(stderr,
                   "sepfs: %s is not mounted but still locked: waiting up to %.0f s for the "
                   "process holding it (a daemon still writing after umount?)\n",
                   dir.c_str(), wait_sec);
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// dir lies on a file system mounted read-only (false if that cannot be told).
bool OnReadOnlyFs(const std::string& dir) {
  struct statvfs sv;
  return ::statvfs(dir.c_str(), &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
}

}  // namespace

vlog::StoreId StoreIdOf(const kv::Superblock& sb) {
  vlog::StoreId id{};
  vlog::ParseStoreIdHex(sb.uuid, &id);
  return id;
}

std::string SetAsideDir(const std::string& store) { return store + "/" + kSetAsideDirName; }

std::string NewStoreUuid() {
  std::random_device rd;
  vlog::StoreId id;
  for (uint8_t& b : id) b = static_cast<uint8_t>(rd());
  return vlog::StoreIdHex(id);
}

namespace {

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

}  // namespace

Status Mkfs(const std::string& dir, const MkfsOptions& options) {
  SEPFS_RETURN_IF_ERROR(CheckMkfsOptions(dir, options));
  Env* env = Env::Default();
  Status st = env->CreateDir(dir);
  if (!st.ok() && st.err() != EEXIST) return st;
  std::unique_ptr<OldStore> old;
  SEPFS_RETURN_IF_ERROR(OldStore::Find(dir, &old));
  if (!old->empty()) {
    if (!options.force) {
      return Status::FromErrno(EEXIST, dir + (LooksLikeStore(env, dir)
                                                  ? ": already a sepfs store (use --force to "
                                                    "overwrite it)"
                                                  : ": holds part of a sepfs store (use --force "
                                                    "to overwrite it)"));
    }
    std::unique_ptr<FileLock> lock;
    SEPFS_RETURN_IF_ERROR(env->LockFile(LockPath(dir), &lock));
    SEPFS_RETURN_IF_ERROR(old->Remove());
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
  sb.uuid = NewStoreUuid();

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
  LifetimeCounts lifetime;
  lifetime.since_unix = static_cast<uint64_t>(::time(nullptr));
  b.Put(kv::CounterKey(kLifetimeCounter), EncodeLifetime(lifetime));
  SEPFS_RETURN_IF_ERROR(meta->Write(&b, /*sync=*/true));
  SEPFS_RETURN_IF_ERROR(WriteSuperblockCopy(env, dir, sb));
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
    if (LooksLikeDamagedStore(s->env_, dir)) {
      return Status::Corruption(dir + ": meta/CURRENT is missing while the rest of a store is "
                                      "there: sepfs fsck --repair rebuilds the metadata index");
    }
    return Status::FromErrno(EINVAL, dir + ": not a sepfs store (no meta/CURRENT; run sepfs mkfs)");
  }
  s->on_read_only_media_ = OnReadOnlyFs(dir);
  if (s->on_read_only_media_ && !options.read_only) {
    return Status::FromErrno(EROFS, dir + ": the store is on a read-only file system: mount it "
                                          "with -o ro (sepfs fsck without --repair and sepfs "
                                          "stats work too; nothing is written)");
  }
  SEPFS_RETURN_IF_ERROR(LockStore(s->env_, dir, options.lock_wait_sec, &s->lock_));
  // An earlier holder's note is stale now (a failure leaves it: a dead
  // process's note is never believed).
  if (!s->on_read_only_media_) (void)WriteLockNote(s->env_, dir, "");
  s->io_dir_ = dir;
  if (options.pin_directory) {
    s->dir_fd_.fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd_.fd < 0) return Status::FromErrno(errno, dir + ": open");
    s->io_dir_ = "/proc/self/fd/" + std::to_string(s->dir_fd_.fd);
    if (!LooksLikeStore(s->env_, s->io_dir_)) s->io_dir_ = dir;  // no /proc: by path
  }
  st = s->OpenParts(options);
  if (st.ok()) {
    *out = std::move(s);
    return Status::OK();
  }
  // Messages name the store by the path given, not /proc/self/fd/N.
  if (s->io_dir_ != dir) st = st.Replacing(s->io_dir_, dir);
  if (st.err() == ENOSPC) {
    st = st.WithContext(dir + ": the disk holding the store is full, and opening it needs "
                              "room (LevelDB writes its log out as a table): free some "
                              "space there and retry; nothing was lost");
  }
  return st;
}

Status Store::OpenParts(const StoreOptions& options) {
  kv::MetaOptions mo;
  mo.block_cache_bytes = options.meta_cache_bytes;
  mo.env = options.leveldb_env;
  mo.writes_in_memory = on_read_only_media_;
  SEPFS_RETURN_IF_ERROR(kv::MetaStore::Open(MetaDir(io_dir_), mo, &meta_));
  std::string raw;
  Status st = meta_->Get(kv::SuperKey(), &raw);
  if (st.IsNotFound()) {
    return Status::Corruption(dir_ + ": superblock missing (if this is a sepfs store, sepfs "
                                     "fsck --repair restores it)");
  }
  SEPFS_RETURN_IF_ERROR(st);
  st = kv::DecodeSuperblock(raw, &super_);
  if (st.IsCorruption()) {
    return st.WithContext(dir_ + " (sepfs fsck --repair restores the superblock)");
  }
  SEPFS_RETURN_IF_ERROR(st.WithContext(dir_));
  if (!options.read_only) KeepSuperblockCopy();

  if (env_->Exists(VlogDir(io_dir_)).IsNotFound()) {
    return Status::NotFound(VlogDir(dir_) +
                            ": the segment directory is missing, so the store is incomplete "
                            "(restore it; if its data is lost for good, create it empty and run "
                            "sepfs fsck --repair)");
  }
  vlog::Options vo;
  vo.env = env_;
  vo.segment_size = super_.segment_size;
  vo.append_buffer_size = options.append_buffer_size;
  vo.read_only = options.read_only;
  vo.direct_writes = options.direct_io;
  vo.direct_reads = options.direct_io;
  vo.recycle_segments = options.recycle_segments;
  // Binaries of an older format would take a recycled segment's header for
  // damage, so their stores never get one.
  vo.version2_headers = super_.version >= kv::kMetaFormatRecycledSegments;
  vo.store_id = StoreIdOf(super_);
  vo.dir_in_messages = VlogDir(dir_);
  SEPFS_RETURN_IF_ERROR(vlog::ValueLog::Open(vo, VlogDir(io_dir_), &vlog_));
  if (!options.allow_set_aside_segments) {
    // A read-only mount changes nothing, so it serves what it can: a user
    // copying data out should not have to repair first.
    const Status refused = RefuseSetAsideSegments();
    if (!refused.ok() && !options.read_only) return refused;
    if (!refused.ok()) {
      std::fprintf(stderr, "sepfs: %s: opened read-only all the same; reads of data in them "
                           "fail with EIO\n", refused.ToString().c_str());
    }
  }
  if (!vo.version2_headers && !options.read_only && HoldsRecycledSegments()) {
    // Written by the binaries of 2026-11-24, which recycled files in stores
    // of format 3: such a store is of format 4 already, so say so (and let
    // repair keep the segments' ends).
    SEPFS_RETURN_IF_ERROR(RaiseFormat(kv::kMetaFormatRecycledSegments));
    vlog_.reset();
    vo.version2_headers = true;
    SEPFS_RETURN_IF_ERROR(vlog::ValueLog::Open(vo, VlogDir(io_dir_), &vlog_));
  }
  return Status::OK();
}

Store::DirFd::~DirFd() {
  if (fd >= 0) ::close(fd);
}

std::string DescribeSetAside(const vlog::SetAsideSegment& s, const std::string& uuid) {
  using Why = vlog::SetAsideSegment::Why;
  if (s.why == Why::kMisnamed) {
    return "carries the header of segment " + std::to_string(s.header_id) +
           " (renamed?), so it is read as neither";
  }
  return "belongs to another sepfs store (" + vlog::StoreIdHex(s.store_id) +
         (s.why == Why::kForeignDamaged ? ", by the store id in its damaged header" : "") +
         "; this store is " + uuid + "), so its records are not this store's data";
}

Status Store::RefuseSetAsideSegments() const {
  const std::vector<vlog::SetAsideSegment> aside = vlog_->SetAsideSegments();
  if (aside.empty()) return Status::OK();
  const std::string first =
      VlogDir(dir_) + "/" + vlog::SegmentFileName(aside.front().id) + " " +
      DescribeSetAside(aside.front(), super_.uuid);
  const bool one = aside.size() == 1;
  return Status::Corruption(
      (one ? first : std::to_string(aside.size()) + " segment files are not served (the first: " +
                         first + ")") +
      ": run sepfs fsck --repair " + dir_ + ", which gives renamed segments their names back " +
      "and moves other stores' to " + SetAsideDir(dir_) + " (or move " + (one ? "it" : "them") +
      " out of " + VlogDir(dir_) + " yourself)");
}

bool Store::HoldsRecycledSegments() const {
  for (const auto& seg : vlog_->Segments()) {
    if (seg.recycled) return true;
  }
  return false;
}

Status Store::NoteMount(const std::string& mountpoint) {
  if (on_read_only_media_) return Status::OK();
  return WriteLockNote(env_, io_dir_, MountNote(::getpid(), mountpoint));
}

Status Store::RaiseFormat(uint32_t version) {
  kv::Superblock sb = super_;
  const uint32_t from = sb.version;
  sb.version = version;
  kv::Batch b;
  b.Put(kv::SuperKey(), kv::EncodeSuperblock(sb));
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, /*sync=*/true).WithContext(dir_ + ": raising the format"));
  super_ = sb;
  KeepSuperblockCopy();
  std::fprintf(stderr,
               "sepfs: %s: store format raised from %u to %u: it holds recycled vLog segment "
               "files, which sepfs binaries of format %u would take for damaged ones\n",
               dir_.c_str(), from, version, from);
  return Status::OK();
}

void Store::KeepSuperblockCopy() {
  kv::Superblock copy;
  if (ReadSuperblockCopy(env_, io_dir_, &copy).ok() && copy == super_) return;
  Status st = WriteSuperblockCopy(env_, io_dir_, super_);
  if (st.ok()) {
    superblock_copy_written_ = true;
  } else {  // the record still holds it: the store works, repair just has no copy
    std::fprintf(stderr, "sepfs: %s: cannot write the superblock copy: %s\n", dir_.c_str(),
                 Shown(st).c_str());
  }
}

Store::~Store() {
  vlog_.reset();
  meta_.reset();
}

}  // namespace sepfs::fs
