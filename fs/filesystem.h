// Filesystem: the sepfs core, independent of FUSE.
//
// Every operation takes inode numbers and names, returns a Status with the
// errno the kernel should see, and keeps the store consistent: each
// namespace change is one atomic LevelDB batch; file data goes to the vLog
// through a dirty-block cache that is flushed on fsync, release, memory
// pressure and a timer (see file_data.cc). Permission checks are the
// kernel's (default_permissions; -o nodefault_permissions drops them,
// fs/mount_options.h); this layer enforces the namespace rules
// (ENOTEMPTY, EEXIST, ENAMETOOLONG, ...).
//
// Lock order: ns_mu_ -> Inode::mu (ascending ino) -> checkpoint_mu_ ->
// ptr_locks_ (one stripe, or all in index order) -> append_mu_ -> seg_mu_ ->
// table_mu_ (leaf).
#pragma once

#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fs/dentry_cache.h"
#include "fs/gc.h"
#include "fs/gc_index.h"
#include "fs/inode.h"
#include "fs/lifetime.h"
#include "fs/live_journal.h"
#include "fs/ptr_locks.h"
#include "fs/readahead.h"
#include "fs/store.h"
#include "kvstore/ino_alloc.h"

namespace sepfs::fs {

struct FsOptions {
  StoreOptions store;
  double flush_interval_sec = 5.0;            // timer flush of dirty data
  uint64_t dirty_limit_bytes = 256ull << 20;  // all inodes: flush beyond this
  uint64_t inode_flush_bytes = 8ull << 20;    // one inode: flush beyond this
  bool read_only = false;
  // Prefetcher (issue: parallel value prefetcher).
  bool prefetch_seq = true;
  bool prefetch_dir = true;
  unsigned prefetch_threads = 8;
  uint64_t data_cache_bytes = 256ull << 20;
  // Garbage collection: "hotcold", "wisckey" (one stream, oldest first) or "off".
  std::string gc = "hotcold";
  std::string gc_picker;  // "" = the policy's default
  int gc_streams = 4;     // hotcold: 4 (by lifetime) or 2 (hot/cold); see fs/gc.h
  // A vLog head checkpoint is written after this many vLog bytes or journal
  // entries; recovery after a crash reads only what came after it.
  uint64_t checkpoint_bytes = 256ull << 20;
  uint64_t checkpoint_entries = 65536;
};

// What the last Open did to bring the segment counts up to date.
struct RecoveryReport {
  bool unclean = false;            // the store was not unmounted cleanly
  bool full_recount = false;       // every block pointer was read
  uint64_t pointers_checked = 0;   // by the full recount
  uint64_t pointers_dropped = 0;   // named records lost in a crash
  uint64_t journal_entries = 0;    // live-count journal entries since the checkpoint
  uint64_t records_scanned = 0;    // vLog records past the checkpoint heads
  uint64_t bytes_scanned = 0;
  uint64_t pointers_replayed = 0;  // lost pointers installed again
  uint64_t micros = 0;
};

struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct SetAttrRequest {
  bool set_mode = false, set_uid = false, set_gid = false, set_size = false;
  bool set_atime = false, set_atime_now = false, set_mtime = false, set_mtime_now = false;
  bool set_ctime = false;
  // Clear setuid/setgid of a non-directory (KillSuidSgid) after the other
  // changes: the kernel left that duty to us (FUSE_HANDLE_KILLPRIV_V2).
  bool kill_suidgid = false;
  SetidCaller setid;  // whose change it is, for kill_suidgid
  uint32_t mode = 0, uid = 0, gid = 0;
  uint64_t size = 0;
  kv::Timespec atime, mtime, ctime;
};

// Where the bytes of a read are, in file order (Filesystem::ReadInto with
// pieces): spans of the caller's buffer and of cached record data, which
// `holds` keeps alive until the pieces are cleared.
struct ReadPieces {
  std::vector<iovec> iov;
  std::vector<vlog::RecordRef> holds;
  // Set by the caller: the kernel keeps the file's pages across opens, so a
  // record the read takes whole need not stay in the data cache.
  bool kernel_keeps_pages = false;
  void clear() {
    iov.clear();
    holds.clear();
  }
};

struct FsStats {
  std::atomic<uint64_t> user_bytes_written{0};
  std::atomic<uint64_t> user_bytes_read{0};
  std::atomic<uint64_t> flushes{0};
  std::atomic<uint64_t> blocks_flushed{0};
  std::atomic<uint64_t> read_eio{0};
  std::atomic<uint64_t> orphans_reclaimed{0};
  std::atomic<uint64_t> handles_opened{0};  // OpenFile calls (FUSE OPEN and CREATE)
  std::atomic<uint64_t> dir_listings{0};    // ListDir calls: listings the daemon took
  // Waits (of at most a second each) of writers of data or xattr values on
  // a full store for the collector to free space, and their total time.
  std::atomic<uint64_t> space_waits{0};
  std::atomic<uint64_t> space_wait_micros{0};
};

// Budget of the directory entries kept in memory (fs/dentry_cache.h), and
// the largest directory kept. 32 MiB holds about 350 000 entries with names
// of up to 15 bytes, 250 000 of 20 (bonnie++'s 131 072 files did not fit in
// 8 MiB, and every unlink in a directory dropped for room read its entry
// from LevelDB).
constexpr size_t kDentryCacheBytes = 32u << 20;
constexpr size_t kDentryCacheDirEntries = 16384;

// What a write changes besides the data and the size.
struct WriteEffects {
  bool kill_suidgid = false;  // clear set-user/group-ID (FUSE_WRITE_KILL_SUIDGID)
  SetidCaller setid;          // the writer, for kill_suidgid
  // Leave mtime and ctime as they are. With the writeback cache the kernel
  // keeps a regular file's times and sends them in a SETATTR; pages may
  // reach us after that (an mmap's or a copy_file_range's, at close), and
  // the time of their arrival would replace the time the user saw.
  bool kernel_times = false;
  // The kernel writing back its page cache (FUSE_WRITE_CACHE), not a
  // caller waiting on the write: after a refusal for lack of space the
  // kernel goes on with the pages that follow (Inode::refused_from).
  bool from_cache = false;
};

class Filesystem {
 public:
  static constexpr uint64_t kRootIno = 1;
  static constexpr size_t kNameMax = 255;
  // Links an inode may have (st_nlink is 32 bits in FUSE); one more fails
  // with EMLINK instead of wrapping to 0, which would reclaim the inode.
  static constexpr uint32_t kLinkMax = UINT32_MAX;
  static constexpr size_t kXattrNameMax = 255;
  static constexpr size_t kXattrValueMax = 64 * 1024;
  static constexpr size_t kSymlinkMax = 4095;
  // Per-file stream hint: "hot" or "cold".
  static constexpr const char* kTemperatureXattr = "user.sepfs.temperature";

  // Opens the store (taking its lock), reclaims orphans left by a crash,
  // rebuilds segment liveness counts and starts the flush thread.
  static Status Open(const std::string& store_dir, const FsOptions& options,
                     std::unique_ptr<Filesystem>* out);
  ~Filesystem();  // Close() if not done.
  // Flushes everything, syncs, records a clean shutdown. Idempotent.
  Status Close();

  // Namespace. Functions returning an InodeRecord for a new or found entry
  // add one kernel reference (lookup count) to it.
  Status Lookup(uint64_t parent, std::string_view name, kv::InodeRecord* out);
  // Drops nlookup kernel references; whether the kernel holds none now.
  bool Forget(uint64_t ino, uint64_t nlookup);
  Status GetAttr(uint64_t ino, kv::InodeRecord* out);
  Status SetAttr(uint64_t ino, const SetAttrRequest& req, kv::InodeRecord* out);
  // Creates a regular file, device, fifo or socket (S_IFMT in mode); S_IFDIR
  // creates a directory.
  Status Mknod(const Caller& c, uint64_t parent, std::string_view name, uint32_t mode,
               uint64_t rdev, kv::InodeRecord* out);
  Status Symlink(const Caller& c, uint64_t parent, std::string_view name,
                 std::string_view target, kv::InodeRecord* out);
  Status Readlink(uint64_t ino, std::string* target);
  Status Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, kv::InodeRecord* out);
  Status Unlink(uint64_t parent, std::string_view name);
  Status Rmdir(uint64_t parent, std::string_view name);
  // flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE. *moved_dirs (optional)
  // gets the directories that moved to another parent (their ".." changed).
  Status Rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                std::string_view new_name, unsigned flags,
                std::vector<uint64_t>* moved_dirs = nullptr);

  // Directory listing: "." and ".." first, then entries in key order.
  // *gen (optional) receives the generation of the directory's entries the
  // listing belongs to (EntriesGen).
  Status ListDir(uint64_t ino, std::vector<DirListEntry>* out, uint64_t* gen = nullptr);
  // The generation of dir's entries now (ListDir's *gen): a listing of an
  // older one may be stale.
  uint64_t EntriesGen(uint64_t dir);
  // readdirplus: calls fill(entry, attributes) for entries[start...] in
  // order until it returns false. Every entry accepted by fill, except "."
  // and "..", gets one kernel reference. Attributes of entries not in
  // memory come from one forward scan over their clustered inode keys.
  // An entry removed meanwhile is passed with attributes whose ino is 0.
  using DirPlusFn = std::function<bool(const DirListEntry&, const kv::InodeRecord&)>;
  // An entry whose name no longer names its inode (the namespace changed
  // since the listing's generation; without one every name is checked) is
  // passed with ino 0 and gets no reference.
  Status ReadDirPlus(const std::vector<DirListEntry>& entries, size_t start,
                     const DirPlusFn& fill, std::optional<uint64_t> listed_gen = std::nullopt);

  // Files.
  Status OpenFile(uint64_t ino);
  // The inode's own handle (for reads without one), alive as long as *out.
  Status InodeHandle(uint64_t ino, std::shared_ptr<FileHandle>* out);
  Status Release(uint64_t ino);
  Status Read(uint64_t ino, uint64_t off, size_t size, std::string* out);
  // Same, through an open file handle: its sequential detector decides what
  // to prefetch ahead (fh may be null: no sequential prefetch).
  Status Read(uint64_t ino, uint64_t off, size_t size, std::string* out, FileHandle* fh);
  // Same, into out[0, size) (uninitialized memory is fine: every byte up to
  // *got is written, holes as zeros). The FUSE read path uses it to skip
  // zero-filling and reallocating a buffer per request.
  //
  // With pieces (and the data cache on), records the cache holds or that
  // are read now are not copied into out: pieces->iov lists all *got bytes
  // in order, pointing into out and into pieces->holds. Without, every
  // byte is in out.
  Status ReadInto(uint64_t ino, uint64_t off, size_t size, char* out, size_t* got,
                  FileHandle* fh, ReadPieces* pieces = nullptr);
  Status Write(uint64_t ino, uint64_t off, std::string_view data, WriteEffects fx = {});
  Status Flush(uint64_t ino);                 // dirty data of ino to the vLog + LSM
  Status Fsync(uint64_t ino, bool datasync);  // Flush + durable
  Status FsyncDir(uint64_t ino);
  // Modes: 0 and FALLOC_FL_KEEP_SIZE (the size only; nothing is reserved),
  // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE with
  // or without FALLOC_FL_KEEP_SIZE; EOPNOTSUPP for the others.
  // fx: kernel_times (leave mtime and ctime alone: the writeback cache,
  // where the kernel stamps them itself and sends them in a SETATTR; see
  // WriteEffects), and set-id bits to clear on success (kill_suidgid);
  // *setid_cleared: whether that changed the mode.
  Status Fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len,
                   const WriteEffects& fx = {}, bool* setid_cleared = nullptr);
  Status FlushAll(bool sync);
  // The regular files the kernel holds (looked up or open): the only ones
  // whose pages it may still cache dirty, unsent.
  std::vector<uint64_t> KernelHeldFiles();

  // Extended attributes. GetXattr with size 0 returns the size in *value_size.
  Status SetXattr(uint64_t ino, std::string_view name, std::string_view value, int flags);
  Status GetXattr(uint64_t ino, std::string_view name, std::string* value);
  Status ListXattr(uint64_t ino, std::string* names);  // NUL-separated
  Status RemoveXattr(uint64_t ino, std::string_view name);

  // Writes a vLog head checkpoint now (the flusher does it every
  // checkpoint_bytes); see fs/live_journal.h.
  Status Checkpoint();
  const RecoveryReport& recovery() const { return recovery_; }

  Status StatFs(struct statvfs* out);
  // One garbage-collection pass now (sepfs gc): every segment of which at
  // least min_garbage_ratio is garbage (0: any garbage) is collected.
  // progress gets a line per collected segment.
  Status RunGc(double min_garbage_ratio, const GarbageCollector::Progress& progress,
               uint64_t* collected);
  // What the last RunGc collected and left behind, one line ("" before any).
  std::string GcSummary() const { return gc_ ? gc_->LastPassText() : std::string(); }

  // Human-readable statistics (sepfs stats).
  std::string StatsText();
  // The store's counts since mkfs: those loaded at mount plus this mount's.
  LifetimeCounts Lifetime() const;

  // Readdir-triggered prefetch (file_read.cc): a listing of dir was taken
  // from its start, entries in name order. Prefetches the first blocks of
  // its regular files ahead of reads, and cancels the queued prefetches of
  // older listings nobody followed (DirStreams::OnListing).
  void DirListed(uint64_t dir, const std::vector<DirListEntry>& entries);
  // Prefetcher counters; all zero when prefetch is off.
  vlog::PrefetcherStats PrefetchStats();
  vlog::BlockCacheStats DataCacheStats();

  uint32_t block_size() const { return block_size_; }
  // Largest file size: the kernel's for every FUSE mount (MAX_LFS_FILESIZE,
  // 2^63 - 1). A lower one would fail, at writeback, writes the kernel's
  // writeback cache had already accepted (the caller saw them succeed).
  static uint64_t MaxFileSize() { return (1ull << 63) - 1; }
  Store* store() const { return store_.get(); }
  const FsStats& stats() const { return stats_; }
  DentryCacheStats DentryStats() const { return dentries_.stats(); }
  // While paused, the background flusher starts no flush (neither on its
  // timer nor when kicked; one under way finishes); writes over the dirty
  // limit still flush their own files.
  void TEST_PauseFlusher(bool paused);

 private:
  explicit Filesystem(const FsOptions& options);
  using InodeRef = std::shared_ptr<Inode>;

  // Inode table.
  Status GetInode(uint64_t ino, InodeRef* out);  // loads from the LSM if absent
  void Ref(const InodeRef& in, uint64_t lookups);
  // Attributes as reported: st_blocks includes not yet flushed blocks.
  kv::InodeRecord AttrLocked(const Inode* in) const;
  // Drops the table entry when unreferenced; reclaims it when also unlinked.
  void MaybeEvict(uint64_t ino);
  // Deletes inode, blocks, xattrs, symlink. `bounded`: the block scan stops
  // at the last pointer the stored record accounts for (see the .cc); the
  // reclaims at mount and unmount scan the whole prefix, so pointers a
  // damaged record does not account for go too.
  Status ReclaimInode(uint64_t ino, bool bounded);
  // Calls fn(key, name) for each key of the inode's xattr range, in order
  // (name empty for a key that does not parse). With list_bytes known (a
  // record's xattr_list_bytes) the scan stops once the names add up to it,
  // instead of walking the deletion markers of the xattrs of inodes deleted
  // after it; kv::kXattrsUnknown scans the whole range.
  Status ScanXattrs(uint64_t ino, uint32_t list_bytes,
                    const std::function<void(std::string_view key, std::string_view name)>& fn);
  Status ReclaimOrphans();
  // Segment live counts at mount: RestoreLiveCounts takes the ones persisted
  // at the last clean unmount (restored=false if there are none usable);
  // RebuildLiveCounts recounts every block pointer (and after an unclean
  // shutdown drops those whose record never reached its segment, if the
  // checkpoint did not declare it durable); the bytes of pointers into
  // segments whose files are missing otherwise go to *missing, for the
  // checkpoint: a restored file is counted again, and each mount without
  // it recounts and reports it.
  // Mount-time counts and recovery (recovery.cc).
  Status StartCounts(bool clean, const std::string& store_dir);
  class LostPointers;
  bool InstallCounts(const std::map<uint32_t, uint64_t>& live,
                     const std::map<uint32_t, uint64_t>& ages);
  Status DropLostPointers(const LoadedCounts& lc);
  Status RebuildLiveCounts(bool unclean, const VlogHeads& checkpoint, uint64_t* checked,
                           uint64_t* dropped, std::map<uint32_t, uint64_t>* missing);
  // A record appended after the checkpoint, found by ScanSinceHeads.
  struct ReplayCandidate {
    uint64_t ino, block;
    vlog::BlockPtr ptr;
  };
  Status ScanSinceHeads(const VlogHeads& heads, std::vector<ReplayCandidate>* cands);
  Status Replay(std::vector<ReplayCandidate> cands);
  Status WriteCheckpoint(bool clean);
  bool CheckpointDue();

  // Namespace helpers (ns_mu_ held).
  Status CheckName(std::string_view name) const;
  Status NewInode(const Caller& c, const InodeRef& parent, uint32_t mode, uint64_t rdev,
                  kv::InodeRecord* out);
  Status CreateEntry(const Caller& c, uint64_t parent, std::string_view name, uint32_t mode,
                     uint64_t rdev, std::string_view symlink, kv::InodeRecord* out);
  Status IsDirEmpty(uint64_t dir, bool* empty);
  void DropLink(kv::Batch* b, const Inode& victim, kv::InodeRecord* r, const kv::Timespec& now);
  Status RemoveEntry(uint64_t parent, std::string_view name, bool dir);

  // Data path (Inode::mu held).
  Status LoadBlock(Inode* in, uint64_t block, std::string* out);
  // For a block value being deleted: its record (if it names one) joins
  // *released and its bytes leave in's st_blocks.
  void ForgetBlock(Inode* in, std::string_view value, std::vector<vlog::BlockPtr>* released);
  Status FlushLocked(Inode* in, bool sync);
  // Before a size change to `size` is stored: flushes the dirty blocks when
  // that size keeps bytes still only in memory (above the stored size), so
  // that a crash never leaves the size ahead of its data.
  Status FlushBeforeSizeLocked(Inode* in, uint64_t size);
  // st, or else the inode's pending write error (cleared either way).
  Status TakeWriteError(Inode* in, Status st);
  // Adds the pointer changes of truncating to `size` to *b and sets the
  // size in in->rec; leaves in->dirty alone, so that a failure (here or in
  // the batch write) loses no written data: once *b is written, the caller
  // trims the dirty blocks with TrimDirtyLocked.
  Status TruncateLocked(Inode* in, uint64_t size, kv::Batch* b,
                        std::vector<vlog::BlockPtr>* added,
                        std::vector<vlog::BlockPtr>* released, bool* rewrote_last);
  // Drops dirty bytes past `size`; rewrote_last: the block holding `size`
  // was rewritten from its dirty copy, which is dropped whole.
  void TrimDirtyLocked(Inode* in, uint64_t size, bool rewrote_last);
  // Drops the dirty blocks [first, end), keeping the dirty byte counts.
  void EraseDirtyLocked(Inode* in, uint64_t first, uint64_t end);
  Status PunchLocked(Inode* in, uint64_t off, uint64_t len, bool kernel_times);
  // fallocate of mode 0 or FALLOC_FL_KEEP_SIZE.
  Status AllocateLocked(Inode* in, int mode, uint64_t off, uint64_t len, bool kernel_times);
  // ENOSPC unless the store has room for the bytes of [off, off + len)
  // past the file's size.
  Status RoomToExtendLocked(Inode* in, uint64_t off, uint64_t len);
  // Clears in's set-id bits as a change by c does (KillSuidSgid), with a new
  // ctime if they change (returns whether they did); stored with the next
  // flush, as a write's times.
  bool KillSetidLocked(Inode* in, const SetidCaller& c);
  // Bytes HaveSpace granted to a write that has not put them in the
  // dirty-block cache yet; given back when the grant is destroyed.
  class SpaceGrant {
   public:
    SpaceGrant() = default;
    SpaceGrant(const SpaceGrant&) = delete;
    SpaceGrant& operator=(const SpaceGrant&) = delete;
    ~SpaceGrant() {
      if (granted_ != nullptr) granted_->fetch_sub(bytes_, std::memory_order_relaxed);
    }

   private:
    friend class Filesystem;
    std::atomic<uint64_t>* granted_ = nullptr;
    uint64_t bytes_ = 0;
  };
  // Takes `bytes` of what the store may still take for data (waiting up to
  // 10 s for GC when sealed segments hold that much garbage); ENOSPC if
  // it cannot. The bytes stay counted in *grant until the caller has put
  // them in the dirty-block cache (which a new look at the free space
  // counts), so concurrent writes cannot take the same room twice. Called
  // before any lock of the namespace or an inode.
  Status HaveSpace(uint64_t bytes, SpaceGrant* grant);
  // What a metadata change may add to LevelDB, which grows the disk by
  // itself: a LevelDB write that finds the disk full fails every later one
  // until the next mount, deletes included.
  enum class MetaUse {
    // A new namespace entry (create, mkdir, symlink, link) or a change that
    // adds no bytes: may use a quarter of the reserve data writes leave, so
    // a full store can still be tidied up. The rest is for deleting what
    // they made (an LSM delete takes log space too) and for LevelDB's
    // memtable flushes and compactions. A capacity limit does not bound it.
    kEntry,
    // Bytes a user stores in the LSM (xattr values): refused where data
    // writes are, at the reserve or at the capacity limit.
    kValue,
  };
  static constexpr uint64_t kEntryBytes = 1024;  // an entry with its share of log and tables
  // ENOSPC unless `bytes` fit above use's floor of the disk's free space
  // (the files kept for recycling are dropped first if that makes room).
  // Never waits; may be called under the namespace and inode locks.
  Status HaveMetaSpace(uint64_t bytes, MetaUse use);
  // Before a change that may add `bytes` of MetaUse::kValue, and before any
  // lock: when they do not fit and sealed segments hold that much garbage,
  // waits (up to 10 s) while the collector frees it, as HaveSpace does for
  // data. Takes nothing and never fails: HaveMetaSpace decides.
  void WaitForValueRoom(uint64_t bytes);
  using Deadline = std::chrono::steady_clock::time_point;
  uint64_t SpaceEpoch();  // bumped whenever GC freed segments
  // With at least `bytes` (what a write lacks) of garbage in sealed
  // segments, kicks the collector and waits (at most a second) for a pass
  // after `epoch`; false when there is nothing to wait for, or deadline has
  // passed.
  bool AwaitCollector(uint64_t bytes, uint64_t epoch, Deadline deadline);
  // Under space_mu_: reads the disk's free space and reserve for
  // HaveMetaSpace, and what `use` may add according to that reading (less
  // what was granted since; kValue also within the capacity limit).
  Status ReadDiskLocked();
  uint64_t MetaRoomLocked(MetaUse use);
  // ENOSPC when a write at off would start past one refused for lack of
  // space (Inode::refused_from). Call with in->mu held.
  Status PastRefusalLocked(const Inode* in, uint64_t off) const;
  // ENOSPC unless `bytes` are free now; takes nothing (fallocate: the log
  // allocates on write, so this is a check, not a reservation).
  Status HaveRoomFor(uint64_t bytes);
  Status AvailableBytes(uint64_t* out);  // writable bytes, reserve excluded
  // The same, given the disk's free and total bytes.
  uint64_t WritableBytes(uint64_t disk_free, uint64_t disk_total);
  // With a capacity limit: how much more the store may take, given its
  // reusable space r (counted as taken) of which writes of the kind asked
  // about can fill reusable_room without growing the store.
  uint64_t CapacityRoom(const vlog::ReusableSpace& r, uint64_t reusable_room) const;
  bool SpaceLow();
  Status StartGc();
  // The stream for a user write of one of in's blocks; prev_seq: seq of the
  // record it replaces, 0 if none.
  vlog::Stream StreamFor(Inode* in, uint64_t prev_seq);
  // Whether a block of len bytes is stored inline in the LSM (selective
  // separation) rather than as a vLog record.
  bool Inlines(uint64_t len) const { return inline_max_ > 0 && len <= inline_max_; }
  void FlusherLoop();

  FsOptions options_;
  std::unique_ptr<Store> store_;
  kv::MetaStore* meta_ = nullptr;
  vlog::ValueLog* vlog_ = nullptr;
  std::unique_ptr<kv::InodeAllocator> alloc_;
  uint32_t block_size_ = 0;
  uint32_t inline_max_ = 0;  // blocks up to this size are stored inline; 0: none
  // Store format 5+: new inodes count their xattr names' bytes
  // (kv::InodeRecord::xattr_list_bytes); older stores keep them unknown.
  bool counts_xattrs_ = false;
  bool opened_ = false;  // Open() completed
  bool closed_ = false;

  std::shared_mutex ns_mu_;
  std::mutex table_mu_;
  // Every change of an inode's block pointers (flush, truncate, punch,
  // reclaim) holds its stripe, the GC's pointer swap all of them, so a
  // read-modify-write of pointers is atomic (fs/ptr_locks.h).
  PtrLocks ptr_locks_;
  // A flush appends its records under it: one file's records stay adjacent
  // in the log while flushes of several files run at once.
  std::mutex append_mu_;
  // Held shared while a pointer is looked up and its record read; GC frees a
  // segment only under it exclusively, so no reader follows a freed pointer.
  std::shared_mutex seg_mu_;
  std::unordered_map<uint64_t, InodeRef> table_;

  std::atomic<uint64_t> dirty_total_{0};
  // Set by the first write refused for lack of space (Inode::refused_from);
  // until then writes skip the check made before HaveSpace.
  std::atomic<bool> refused_any_{false};
  // Bumped (under ns_mu_ exclusive) by every change of directory entries.
  std::atomic<uint64_t> ns_gen_{0};
  // A change of dir's entries, ".." included (ns_mu_ held exclusively).
  void EntriesChanged(Inode* dir);
  // Directory entries from dentries_ when the directory is cached, else
  // from LevelDB (ns_mu_ held, shared or exclusive).
  Status GetDentry(uint64_t dir, std::string_view name, kv::DirEntry* e);
  DentryCache dentries_{kDentryCacheBytes, kDentryCacheDirEntries};
  // EntriesGen with ns_mu_ held.
  uint64_t EntriesGenLocked(uint64_t dir);
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool flusher_stop_ = false;
  bool flusher_kick_ = false;
  bool flusher_paused_ = false;  // TEST_PauseFlusher
  std::thread flusher_;

  // Taken after ns_mu_ and Inode::mu when held (HaveMetaSpace), never
  // before them; under it only the vLog's and MetaStore's own locks.
  std::mutex space_mu_;
  uint64_t space_checked_at_ = 0;  // bytes written when free space was last read
  uint64_t space_avail_ = 0;
  std::atomic<uint64_t> bytes_since_check_{0};
  std::atomic<uint64_t> space_granted_{0};  // held by SpaceGrants
  // HaveMetaSpace's last read of the disk (space_mu_): when, the free bytes
  // then less what it granted since, and the reserve.
  uint64_t meta_checked_us_ = 0;
  uint64_t meta_disk_free_ = 0;
  uint64_t meta_reserve_ = 0;

  FsStats stats_;

  std::unique_ptr<LiveJournal> journal_;
  RecoveryReport recovery_;
  std::mutex checkpoint_mu_;           // before ptr_locks_
  uint64_t checkpoint_appended_ = 0;   // vLog bytes appended at the last checkpoint
  std::atomic<uint64_t> checkpoints_{0};
  LifetimeCounts lifetime_base_;       // loaded at mount; checkpoints write Lifetime()

  std::unique_ptr<FsGcIndex> gc_index_;
  std::unique_ptr<GarbageCollector> gc_;
  std::atomic<uint64_t> last_write_us_{0};
  std::mutex space_wait_mu_;
  std::condition_variable space_cv_;
  uint64_t space_epoch_ = 0;  // bumped when GC freed segments (space_wait_mu_)

  // Prefetch (file_read.cc). Created on first use when enabled; declared
  // after store_, so its workers are joined before the vLog closes.
  PrefetchEngine* Prefetch();
  void PrefetchFirstBlocks(const DirPrefetch& p);
  std::string PrefetchStatsText();
  std::once_flag pf_once_;
  std::unique_ptr<PrefetchEngine> pf_;
};

}  // namespace sepfs::fs
