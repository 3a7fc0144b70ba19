// Store: the on-disk home of one sepfs filesystem, and how it is created and
// opened. A store directory holds
//   LOCK   flock'ed while the store is in use (mount, fsck, gc), and the
//          store directory with it (Env::LockFile)
//   meta/  the metadata LSM (LevelDB)
//   vlog/  value-log segments
//   superblock  a copy of the superblock record (fs/superblock_copy.h)
//   set-aside-segments/  segment files fsck --repair moved out of vlog/:
//          other stores', renamed ones whose own name is taken, damaged
//          ones no pointer names (only if there were any)
// Everything is created owner-only (0700 / 0600) whatever the umask.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kvstore/meta_store.h"
#include "vlog/env.h"
#include "vlog/value_log.h"

namespace sepfs::fs {

struct MkfsOptions {
  uint32_t block_size = 64 * 1024;
  uint64_t segment_size = 64ull << 20;
  uint64_t capacity = 0;  // 0: bounded by the free space below
  // Blocks of at most this many bytes keep their data inline in the LSM
  // (0: every block goes to the vLog; unset: kv::DefaultInlineMax). See
  // kv::ValidInlineMax.
  std::optional<uint32_t> inline_max;
  bool force = false;     // allow a non-empty directory / overwrite a store
};

// Creates a new store in dir (created if missing). Refuses an existing store
// or a non-empty directory unless options.force, and silly option values.
Status Mkfs(const std::string& dir, const MkfsOptions& options);

struct StoreOptions {
  Env* env = nullptr;                    // nullptr: Env::Default()
  leveldb::Env* leveldb_env = nullptr;   // nullptr: LevelDB's default Env
  size_t meta_cache_bytes = 64u << 20;   // LevelDB block cache
  size_t append_buffer_size = 1u << 20;  // per vLog stream
  // The vLog's Open changes nothing on disk (LevelDB's open still writes
  // its own log and manifest, except on a file system mounted read-only,
  // where it writes them to memory). A store on a read-only file system
  // opens only with this set (EROFS otherwise).
  bool read_only = false;
  // vLog flushes and record reads bypass the page cache
  // (vlog::Options::direct_writes, direct_reads).
  bool direct_io = true;
  // Files of deleted segments kept for new segments
  // (vlog::Options::recycle_segments).
  size_t recycle_segments = 2;
  // Seconds to wait for the store's lock while no mount serves the store:
  // umount returns before the daemon has written its dirty blocks and
  // exited, so a fsck or mount right after it finds the lock still held.
  // The wait ends at once when a mount of the store shows up in
  // /proc/self/mountinfo (then it is EBUSY naming the mount point). 0: no
  // wait (EBUSY at once). The command line tools wait kCommandLockWait.
  double lock_wait_sec = 0;
  // Reach the store's files through a descriptor of its directory
  // (/proc/self/fd/N/...) instead of its path: a store directory renamed
  // while open stays the one used, and whatever takes its old path is never
  // touched (the mount sets it; messages still name the path given).
  bool pin_directory = false;
  // Open a store whose vlog/ holds segment files the log set aside (another
  // store's, or renamed: vlog::ValueLog::SetAsideSegments), for fsck to
  // report them and repair to move or rename them. Otherwise Open refuses
  // it (Corruption naming them), unless read_only: then it says so on
  // stderr and serves the rest.
  bool allow_set_aside_segments = false;
};

constexpr double kCommandLockWait = 60;

// The mount point of a sepfs mount (type fuse.sepfs) whose source is the
// store directory dir (the same directory: device and inode), or "" if there
// is none this process can see (or /proc/self/mountinfo cannot be read).
std::string StoreMountPoint(const std::string& dir);

// An open store: the lock, the metadata and the value log. The lock is
// released last, after both are closed.
class Store {
 public:
  // Opens an existing store. Errors name the directory and the reason: not a
  // store (ENOENT/EINVAL), newer format (EPROTONOSUPPORT), in use (EBUSY);
  // a directory that cannot be checked keeps its errno (EACCES, ENOTDIR, ...).
  static Status Open(const std::string& dir, const StoreOptions& options,
                     std::unique_ptr<Store>* out);
  ~Store();

  const std::string& dir() const { return dir_; }
  // Where its files are reached: dir(), or the pinned directory
  // (StoreOptions::pin_directory).
  const std::string& io_dir() const { return io_dir_; }
  // st as text for the log, naming dir() where it names io_dir().
  std::string Shown(const Status& st) const { return st.Replacing(io_dir_, dir_).ToString(); }
  const kv::Superblock& super() const { return super_; }
  kv::MetaStore* meta() const { return meta_.get(); }
  vlog::ValueLog* vlog() const { return vlog_.get(); }
  Env* env() const { return env_; }
  // Open wrote STORE/superblock: it was missing, damaged or out of date.
  bool superblock_copy_written() const { return superblock_copy_written_; }
  // The store's file system is mounted read-only: it was opened read-only
  // with LevelDB's writes kept in memory (kv::MetaOptions::writes_in_memory).
  bool on_read_only_media() const { return on_read_only_media_; }
  // Writes into the store's lock file that this process serves the store at
  // mountpoint, for a second mount to name it even where /proc/self/mountinfo
  // cannot tell (the store moved since it was mounted). Every open clears
  // it (on writable media).
  Status NoteMount(const std::string& mountpoint);

 private:
  Store() = default;
  // Open's steps once the store is locked and its directory pinned: the
  // metadata, the superblock (and its copy), the vLog.
  Status OpenParts(const StoreOptions& options);
  // Corruption naming the vLog's foreign segments, if it has any.
  Status RefuseSetAsideSegments() const;
  // Some segment file has a recycled (version 2) header.
  bool HoldsRecycledSegments() const;
  // Writes the superblock with format `version`, durably, and logs it.
  Status RaiseFormat(uint32_t version);
  // Writes STORE/superblock unless it already holds super_; a failure is
  // logged, not returned (the record is what opens the store).
  void KeepSuperblockCopy();
  // Closes the pinned directory's descriptor after everything else.
  struct DirFd {
    int fd = -1;
    DirFd() = default;
    DirFd(const DirFd&) = delete;
    DirFd& operator=(const DirFd&) = delete;
    ~DirFd();
  };
  std::string dir_;
  std::string io_dir_;
  Env* env_ = nullptr;
  kv::Superblock super_;
  bool superblock_copy_written_ = false;
  bool on_read_only_media_ = false;
  DirFd dir_fd_;                    // declared first: closed last
  std::unique_ptr<FileLock> lock_;  // released after the stores close
  std::unique_ptr<kv::MetaStore> meta_;
  std::unique_ptr<vlog::ValueLog> vlog_;
};

std::string MetaDir(const std::string& store);
std::string VlogDir(const std::string& store);
std::string LockPath(const std::string& store);
// 16 random bytes in hex: the uuid of a new store.
std::string NewStoreUuid();
// The id a store's uuid gives its segments (vlog::Options::store_id);
// unknown if the uuid is not 16 bytes in hex.
vlog::StoreId StoreIdOf(const kv::Superblock& sb);
// Where repair puts segments of other stores found in vlog/.
inline constexpr char kSetAsideDirName[] = "set-aside-segments";
std::string SetAsideDir(const std::string& store);
// Why segment file s is set aside, for messages: "belongs to another sepfs
// store (...)", "carries the header of segment N ...". uuid: this store's.
std::string DescribeSetAside(const vlog::SetAsideSegment& s, const std::string& uuid);
// True when dir looks like a store (has meta/CURRENT).
bool LooksLikeStore(Env* env, const std::string& dir);
// True when dir has no meta/CURRENT but a meta/ and a superblock copy or a
// vlog/: a store whose metadata index was lost, for fsck --repair.
bool LooksLikeDamagedStore(Env* env, const std::string& dir);

}  // namespace sepfs::fs
