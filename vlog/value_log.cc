// ValueLog implementation.
//
// Lock order: a stream's mutex, then segs_mu_ (which also guards the free
// files kept for recycling). Readers look a segment up
// under segs_mu_ (shared) and release it before taking a stream mutex.
// seal_error_mu_ is a leaf.
// sync_mu_ is taken before any stream mutex. File reads of flushed bytes are
// done without any lock.
#include "vlog/value_log.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include "vlog/aligned_buffer.h"
#include "vlog/atomic_bound.h"
#include "vlog/segment.h"

namespace sepfs::vlog {

using internal::CheckRecord;
using internal::Segment;
using internal::SegmentReader;

namespace {

constexpr uint64_t kMaxMergedRead = 8u << 20;
// Direct reads: a run is read in pieces of at most this many bytes (a larger
// record alone), each through one of at most kDirectBuffers pool buffers
// (or, read in place, one of kSharedReadBuffers); a reader that finds none
// free reads through the page cache.
constexpr uint64_t kDirectChunk = 1u << 20;
constexpr size_t kDirectBuffers = 8;

void LogLine(const std::string& msg) { std::fprintf(stderr, "sepfs vlog: %s\n", msg.c_str()); }

std::string SegName(uint32_t id) { return "vlog segment " + std::to_string(id); }

// A read at off of a record (or a run of them) found the file `missing`
// bytes short.
Status FileEndsEarly(uint32_t seg, uint64_t off, uint64_t missing) {
  return Status::Corruption(SegName(seg) + " offset " + std::to_string(off) + ": file ends " +
                            std::to_string(missing) + " bytes before the record does");
}

// live -= n, clamped at zero (an underflow is a caller bug: log it).
void SubtractLive(Segment& seg, uint64_t n) {
  uint64_t cur = seg.live.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t next = cur >= n ? cur - n : 0;
    if (seg.live.compare_exchange_weak(cur, next, std::memory_order_relaxed)) break;
  }
  if (cur < n) {
    LogLine(SegName(seg.id) + ": live bytes would go below zero (had " + std::to_string(cur) +
        ", released " + std::to_string(n) + "); clamped");
  } else if (cur > 0 && cur == n) {
    seg.emptied.store(true, std::memory_order_relaxed);
  }
}

// Encodes into raw (kSegmentHeaderSize bytes) the header of segment `id` of
// store `store`, created now (base_seq: format.h); *create_time gets the
// time it names.
void MakeSegmentHeader(const StoreId& store, uint32_t id, Stream stream, uint8_t flags,
                       uint64_t base_seq, uint64_t* create_time, char* raw) {
  SegmentHeader h;
  h.store_id = store;
  h.stream = static_cast<uint8_t>(stream);
  h.flags = flags;
  h.segment_id = id;
  h.base_seq = base_seq;
  h.create_time = static_cast<uint64_t>(std::time(nullptr));
  EncodeSegmentHeader(h, raw);
  *create_time = h.create_time;
}

// The options, with no file recycled where the format forbids it.
Options Normalized(Options o) {
  if (!o.version2_headers) o.recycle_segments = 0;
  return o;
}

}  // namespace

class ValueLog::Impl {
 public:
  Impl(const Options& options, std::string dir)
      : opt_(Normalized(options)),
        env_(options.env ? options.env : Env::Default()),
        dir_(std::move(dir)),
        shown_dir_(options.dir_in_messages.empty() ? dir_ : options.dir_in_messages) {}
  ~Impl() {
    // Sealing writes each buffer out, and cuts an open recycled segment
    // where its records end, so the next open need not search the earlier
    // life's bytes for its end (and, should a crash follow that open before
    // it seals a newer segment of the stream, no recovery has to cut a
    // segment no longer the newest).
    for (StreamState& s : streams_) {
      std::lock_guard lk(s.mu);
      if (s.seg == nullptr) continue;
      const uint32_t id = s.seg->id;
      Status st = SealLocked(s);
      if (!st.ok()) Log(SegName(id) + ": sealing at close failed: " + st.ToString());
    }
  }

  Status Load();
  Status Append(Stream stream, uint64_t inode, uint64_t block, std::string_view data,
                BlockPtr* ptr, uint8_t flags);
  Status Read(const BlockPtr& ptr, uint64_t inode, uint64_t block, char* buf);
  Status ReadMany(std::span<ReadRequest> reqs);
  Status Probe(const BlockPtr& ptr, uint64_t inode, uint64_t block);
  void Discard(const BlockPtr& ptr, uint64_t inode, uint64_t block);
  Status Flush(StreamMask streams);
  Status Sync(StreamMask streams, std::vector<StreamHead>* heads = nullptr);
  Status LatchSyncError(Status st);  // sync_mu_ held
  Status SyncAll();
  void Release(const BlockPtr& ptr);
  void AddLive(const BlockPtr& ptr);
  void ResetLive();
  bool RestoreLive(uint32_t id, uint64_t live_bytes, uint64_t max_seq);
  std::vector<SegmentInfo> Segments() const;
  Stats stats() const;
  uint64_t TotalBytes() const;
  ReusableSpace Reusable() const;
  // Removes every free file (a full disk needs their space); returns how
  // many.
  size_t DropFreeFiles();
  uint64_t LiveBytes() const;
  uint64_t CollectableGarbage() const;
  Status ScanSegment(uint32_t id, const ScanFn& fn, uint64_t from);
  std::vector<StreamHead> Heads() const;
  uint32_t MaxSegmentId() const;
  void ReserveSegmentIds(uint32_t max_used);
  Status CutTornTailAt(uint32_t id, uint64_t offset, bool since_checkpoint);
  Status DeleteSegment(uint32_t id);
  Status RewriteHeader(uint32_t id);
  std::vector<SetAsideSegment> SetAsideSegments() const;
  Status MoveOut(uint32_t id, const std::string& to);
  // NameBack (renumber false: to the name its header gives) and
  // RenumberMisnamed (to a new id, kept set aside).
  Status MoveMisnamed(uint32_t id, bool renumber, uint32_t* to);
  Status Adopt(uint32_t id);
  Status SealStream(Stream stream);
  uint64_t LastSeq() const { return next_seq_.load() - 1; }
  void EnsureSeqAbove(uint64_t seq);
  const std::string& dir() const { return dir_; }

  uint64_t DropCount(StreamMask streams) const {
    uint64_t n = 0;
    for (int i = 0; i < kNumStreams; ++i) {
      if (streams & (1u << i)) n += drops_[i].load(std::memory_order_acquire);
    }
    return n;
  }

 private:
  struct StreamState {
    std::mutex mu;
    std::shared_ptr<Segment> seg;  // open segment; null until the first Append
    // buf[lead, size) are the records not yet written, starting at
    // seg->flushed; buf[0, lead) are the bytes already in the file of the
    // block that seg->flushed falls in (lead = seg->flushed mod
    // File::kDirectAlign). So buf[0] is at a block boundary of the file and
    // at an aligned address: a flush can write whole blocks from there with
    // File::WriteDirect, the partly written one included.
    AlignedBuffer buf;
    size_t lead = 0;
    size_t pending() const { return buf.size() - lead; }
    // Bytes of pending records discarded (Discard) while still in buf: they
    // become garbage when buf is written, and go with it when a failed write
    // drops buf (whose bytes all stop counting then), never both.
    uint64_t discarded = 0;
    // After a write up to `end`: keeps the bytes of end's block.
    void KeepLastBlock(uint64_t end) {
      const size_t keep = end % File::kDirectAlign;
      buf.erase_front(buf.size() - keep);
      lead = keep;
    }
  };

  std::string PathOf(uint32_t id) const { return dir_ + "/" + SegmentFileName(id); }
  // PathOf as log lines name it.
  std::string ShownPathOf(uint32_t id) const { return shown_dir_ + "/" + SegmentFileName(id); }
  // Logs msg, naming the directory as shown_dir_.
  void Log(const std::string& msg) const {
    LogLine(ReplacedAll(msg, dir_, shown_dir_));
  }
  std::string FreePathOf(uint32_t id) const { return dir_ + "/" + FreeFileName(id); }
  std::shared_ptr<Segment> Find(uint32_t id) const;
  std::vector<std::shared_ptr<Segment>> Snapshot() const;
  // *aside is set (and *out null) for a file set aside (see Open).
  Status OpenExisting(uint32_t id, std::shared_ptr<Segment>* out,
                      std::optional<SetAsideSegment>* aside);
  // A header that names store `id` is another store's.
  bool Foreign(const StoreId& id) const {
    return KnownStoreId(opt_.store_id) && KnownStoreId(id) && id != opt_.store_id;
  }
  Status LearnMaxSeq();
  // Truncates seg at offset, where a record torn by a crash starts.
  Status CutTornTail(Segment& seg, uint64_t offset);
  Status CreateSegment(Stream stream, std::shared_ptr<Segment>* out);
  // Gives segment `id` of `stream` the file of a deleted segment, if one is
  // kept; false (and a log line on an error) if none could be used. raw
  // receives the header written, *taken_bytes the file's length.
  bool Recycle(uint32_t id, Stream stream, std::unique_ptr<File>* file, uint64_t* base_seq,
               uint64_t* taken_bytes, uint64_t* create_time, char* raw);
  Status FlushLocked(StreamState& s);
  // Flushes s's open segment and closes it (s.mu held). A recycled file is
  // cut where this life's records end and synced, so that every sealed
  // segment ends where its file does, after a crash too (recovery checks
  // pointers against file sizes, and scans a sealed segment to its end).
  Status SealLocked(StreamState& s);
  // Bytes of the free files (segs_mu_ held).
  uint64_t FreeFileBytesLocked() const;
  // Segment and bounds checks of a pointer that a read is about to follow.
  Status Locate(const BlockPtr& ptr, std::shared_ptr<Segment>* seg) const;
  Status ReadFile(Segment& seg, uint64_t off, uint64_t n, char* dst);
  // The bytes of the record at ptr if they are all in s's append buffer
  // (s.mu held), else null.
  static const char* Buffered(const StreamState& s, const Segment& seg, const BlockPtr& ptr);
  // The raw record bytes at ptr, from the file or the append buffer.
  Status Fetch(Segment& seg, const BlockPtr& ptr, char* raw);
  Status ReadOne(Segment& seg, const BlockPtr& ptr, uint64_t inode, uint64_t block, char* buf,
                 bool quiet = false);
  // Reads a run of records back to back, wholly in seg's file, and sets
  // each request's status: ReadRunDirect for runs of kMinDirectRead bytes
  // or more when opt_.direct_reads, in pieces of about kDirectChunk at most;
  // else ReadRunBuffered, one scatter read.
  void ReadRun(Segment& seg, std::span<ReadRequest*> run);
  void ReadRunBuffered(Segment& seg, std::span<ReadRequest*> run);
  void ReadRunDirect(Segment& seg, std::span<ReadRequest*> run);
  // Sets r.status: st if the read failed, else the check of the record
  // (header, and its data: at data, or already in r.buf when data is null);
  // counts and reports it.
  void Settle(ReadRequest& r, const Status& st, const char* header,
              const char* data = nullptr);
  void CountRead(uint64_t bytes) {
    preads_.fetch_add(1, std::memory_order_relaxed);
    bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
  }
  // Logs and counts a failed verification; returns st.
  Status Report(Status st);

  const Options opt_;
  Env* const env_;
  const std::string dir_;
  const std::string shown_dir_;  // dir_ as log lines name it

  std::atomic<uint64_t> drops_[kNumStreams] = {};  // per stream: buffers dropped after a failed write
  mutable std::shared_mutex segs_mu_;
  std::map<uint32_t, std::shared_ptr<Segment>> segs_;  // guarded by segs_mu_
  uint64_t next_id_ = 1;                                // guarded by segs_mu_

  std::atomic<uint64_t> next_seq_{1};
  std::atomic<bool> dir_dirty_{false};
  std::mutex sync_mu_;
  // The first failed fdatasync (or directory fsync), returned by every later
  // Sync: the kernel reports a write-back error once, so a retry that
  // succeeds would declare durable the bytes that failed to reach the disk.
  // Cleared only by opening the log again. Guarded by sync_mu_.
  Status sync_error_;
  std::atomic<bool> sync_failed_{false};
  mutable StreamState streams_[kNumStreams];  // mutable: Heads() locks them
  // A failed fdatasync of SealLocked, which runs under a stream lock and so
  // cannot take sync_mu_: the next Sync latches it.
  std::mutex seal_error_mu_;
  Status seal_error_;  // guarded by seal_error_mu_
  // The free files (FreeFileName) kept for recycling; guarded by segs_mu_.
  struct FreeFile {
    uint32_t id;
    uint64_t bytes;  // its length
  };
  std::vector<FreeFile> free_files_;
  std::map<uint32_t, SetAsideSegment> set_aside_;  // guarded by segs_mu_

  // Buffers for direct reads: kDirectBuffers at most, whatever the number
  // of reading threads; one that grew past 2 x kDirectChunk (a huge
  // record) is freed when returned. Their memory: about 8 x 1 MiB.
  AlignedBufferPool direct_buffers_{kDirectBuffers, 2 * kDirectChunk};
  // Buffers of runs read in place: at most kSharedReadBuffers of up to
  // 2 x kDirectChunk (capacity grows by half on reuse), kDirectBuffers of
  // them kept idle.
  AlignedBufferPool shared_buffers_{kSharedReadBuffers, 2 * kDirectChunk, kDirectBuffers};

  std::atomic<uint64_t> records_appended_{0}, bytes_appended_{0}, records_read_{0},
      records_in_place_{0}, bytes_read_{0}, preads_{0}, checksum_errors_{0},
      segments_deleted_{0}, bytes_freed_{0}, unfinished_removed_{0}, unfinished_kept_{0},
      segments_recycled_{0};
};

// ---- Open -------------------------------------------------------------------

Status ValueLog::Impl::Load() {
  if (opt_.segment_size < kSegmentHeaderSize + kRecordHeaderSize ||
      opt_.segment_size > UINT32_MAX) {
    return Status::InvalidArgument("vlog: segment_size " + std::to_string(opt_.segment_size) +
                                   " out of range");
  }
  if (opt_.append_buffer_size == 0) {
    return Status::InvalidArgument("vlog: append_buffer_size must be positive");
  }
  Status st = opt_.read_only ? env_->Exists(dir_) : env_->CreateDir(dir_);
  if (!st.ok() && st.err() != EEXIST) return st;
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env_->ListDir(dir_, &names));
  for (const std::string& name : names) {
    uint32_t id;
    if (ParseFreeFileName(name, &id)) {
      // Not kept across opens: its records' seqs may be above the highest
      // this open learns (the segments holding them are gone), and a
      // recycled file's base_seq must be above every one of them.
      if (opt_.read_only) continue;
      Status rm = env_->RemoveFile(FreePathOf(id));
      if (!rm.ok()) Log("removing free file " + name + ": " + rm.ToString());
      dir_dirty_ = true;
      continue;
    }
    if (!ParseSegmentFileName(name, &id)) continue;
    // Even a removed unfinished segment's id is never handed out again, nor
    // the id of something else that took a segment's name.
    next_id_ = std::max<uint64_t>(next_id_, uint64_t{id} + 1);
    std::shared_ptr<Segment> seg;
    std::optional<SetAsideSegment> aside;
    Status st = OpenExisting(id, &seg, &aside);
    if (st.err() == EISDIR || st.err() == ENODEV) {
      Log(name + " ignored: " + st.ToString());
      continue;
    }
    SEPFS_RETURN_IF_ERROR(st);
    if (aside.has_value()) {
      Log(SegName(id) + " (" + ShownPathOf(id) + ") " +
          (aside->why == SetAsideSegment::Why::kMisnamed
               ? "carries the header of segment " + std::to_string(aside->header_id)
               : "belongs to store " + StoreIdHex(aside->store_id) + ", not to this one (" +
                     StoreIdHex(opt_.store_id) + ")" +
                     (aside->why == SetAsideSegment::Why::kForeignDamaged
                          ? " by the id in its damaged header"
                          : "")) +
          ": left alone, never read");
      set_aside_[id] = *aside;
      continue;
    }
    if (seg != nullptr) segs_[id] = std::move(seg);
  }
  for (auto& s : streams_) s.buf.reserve(opt_.append_buffer_size + File::kDirectAlign);
  return LearnMaxSeq();
}

Status ValueLog::Impl::OpenExisting(uint32_t id, std::shared_ptr<Segment>* out,
                                    std::optional<SetAsideSegment>* aside) {
  auto seg = std::make_shared<Segment>();
  seg->id = id;
  const std::string path = PathOf(id);
  SEPFS_RETURN_IF_ERROR(env_->OpenFile(path, OpenMode::kRead, &seg->file));
  uint64_t size;
  SEPFS_RETURN_IF_ERROR(seg->file->Size(&size));
  seg->size = size;
  seg->flushed = size;
  if (size < kSegmentHeaderSize) {
    // A crash between creating the file and writing its header. Nothing in
    // it was ever durable (records follow the header and are synced before
    // any pointer names them), so it is removed, not kept as damage.
    if (opt_.read_only) {
      Log(SegName(id) + ": unfinished segment (" + std::to_string(size) +
          " bytes, no header) skipped; a read-write open removes it");
      unfinished_kept_.fetch_add(1, std::memory_order_relaxed);
      out->reset();
      return Status::OK();
    }
    Status rm = env_->RemoveFile(path);
    if (rm.ok()) {
      Log(SegName(id) + ": removed an unfinished segment (" + std::to_string(size) +
          " bytes, no header)");
      unfinished_removed_.fetch_add(1, std::memory_order_relaxed);
      out->reset();
      return Status::OK();
    }
    Log(SegName(id) + ": cannot remove unfinished segment: " + rm.ToString());
  }
  *out = seg;

  char raw[kSegmentHeaderSize];
  size_t got = 0;
  Status st = size < kSegmentHeaderSize
                  ? Status::Corruption("file too short for a segment header")
                  : seg->file->Read(0, kSegmentHeaderSize, raw, &got);
  if (st.ok() && got < kSegmentHeaderSize) st = Status::Corruption("short segment header");
  SegmentHeader h;
  const bool whole = st.ok();
  if (st.ok()) st = DecodeSegmentHeader(raw, &h);
  // Whose it is counts first: another store's segment under another id is
  // still another store's, not a damaged one of this store. A damaged
  // header names another store only when its id is far from this one's
  // (damage to this store's id flips few of its bits).
  using Why = SetAsideSegment::Why;
  const StoreId claimed = st.ok() ? h.store_id : whole ? UncheckedStoreId(raw) : StoreId{};
  const bool foreign = st.ok() ? Foreign(claimed) : FarApart(claimed, opt_.store_id);
  if (foreign || (st.ok() && h.segment_id != id)) {
    *aside = SetAsideSegment{id, !foreign ? Why::kMisnamed
                                 : st.ok() ? Why::kForeign
                                           : Why::kForeignDamaged,
                             claimed, st.ok() ? h.segment_id : 0, size};
    out->reset();
    return Status::OK();
  }
  if (st.ok()) seg->store_id = h.store_id;
  if (!st.ok()) {
    seg->damage =
        Status::Corruption(SegName(id) + " (" + ShownPathOf(id) + ") is damaged: " + st.ToString());
    Log(std::string(seg->damage.message()));
    return Status::OK();
  }
  seg->stream = static_cast<Stream>(h.stream);
  seg->create_time = h.create_time;
  seg->rewritten = (h.flags & kSegmentRewritten) != 0;
  seg->base_seq = h.base_seq;
  return Status::OK();
}

Status ValueLog::Impl::CutTornTail(Segment& seg, uint64_t offset) {
  std::unique_ptr<File> rw;
  SEPFS_RETURN_IF_ERROR(env_->OpenFile(PathOf(seg.id), OpenMode::kReadWrite, &rw));
  SEPFS_RETURN_IF_ERROR(rw->Truncate(offset));
  SEPFS_RETURN_IF_ERROR(rw->Sync());
  Log(SegName(seg.id) + ": cut a torn record at offset " + std::to_string(offset) + " (" +
      std::to_string(seg.size.load() - offset) + " bytes)");
  seg.size.store(offset);
  seg.flushed.store(offset, std::memory_order_release);
  return Status::OK();
}

// The highest seq is in the newest segment of some stream that has records.
// Damaged segments (stream unknown) and segments whose header repair
// rewrote (stream guessed) are scanned too, and stand for no stream.
Status ValueLog::Impl::LearnMaxSeq() {
  uint64_t max_seq = 0;
  bool stream_done[kNumStreams] = {};
  for (auto it = segs_.rbegin(); it != segs_.rend(); ++it) {
    Segment& seg = *it->second;
    const bool damaged = seg.damaged();
    const bool streamless = damaged || seg.rewritten;
    // A recycled file's header: every seq its earlier lives used is lower.
    if (seg.recycled()) max_seq = std::max(max_seq, seg.base_seq - 1);
    if (!streamless && stream_done[static_cast<int>(seg.stream)]) continue;
    if (seg.file == nullptr) continue;
    SegmentReader reader(seg.file.get(), seg.id, seg.base_seq, seg.flushed.load());
    bool found = false;
    for (;;) {
      RecordHeader h;
      std::string_view data;
      bool at_end;
      Status st = reader.Next(&h, &data, &at_end);
      if (st.IsCorruption()) {
        if (reader.torn() && !damaged && opt_.read_only) {
          Log(SegName(seg.id) + ": torn tail at offset " + std::to_string(reader.offset()) +
              " left in place; a read-write open cuts it");
        } else if (reader.torn() && !damaged) {
          // A crash tore the last append: cut it off, so the segment scans
          // cleanly (GC, fsck) and nothing can ever point into the tear.
          SEPFS_RETURN_IF_ERROR(CutTornTail(seg, reader.offset()));
        } else if (!reader.torn()) {
          // Records behind the damage may hold the highest seq: go on.
          Log(SegName(seg.id) + ": passing over damaged bytes: " + st.ToString());
          SEPFS_RETURN_IF_ERROR(reader.SkipDamage());
          continue;
        } else {
          Log(SegName(seg.id) + ": ignoring a torn tail: " + st.ToString());
        }
        break;
      }
      SEPFS_RETURN_IF_ERROR(st);
      if (at_end) break;
      found = true;
      max_seq = std::max(max_seq, h.seq);
      seg.NoteSeq(h.seq);
    }
    if (found && !streamless) stream_done[static_cast<int>(seg.stream)] = true;
  }
  next_seq_ = max_seq + 1;
  return Status::OK();
}

// ---- Append, flush, sync --------------------------------------------------

Status ValueLog::Impl::CreateSegment(Stream stream, std::shared_ptr<Segment>* out) {
  uint32_t id;
  for (;;) {
    {
      std::unique_lock lk(segs_mu_);
      if (next_id_ > UINT32_MAX) return Status::NoSpace("vlog: segment ids exhausted");
      id = static_cast<uint32_t>(next_id_++);
    }
    // A file put in the directory since Open keeps its name: the id is
    // skipped (creating and renaming never replace a file either).
    if (!env_->Exists(PathOf(id)).ok()) break;
    Log(ShownPathOf(id) + " appeared while the log was open: left alone, " + SegName(id) +
        " skipped");
  }
  auto seg = std::make_shared<Segment>();
  seg->id = id;
  seg->stream = stream;
  const std::string path = PathOf(id);
  StreamState& s = streams_[static_cast<int>(stream)];
  char raw[kSegmentHeaderSize];
  uint64_t taken = 0;
  const bool recycled =
      Recycle(id, stream, &seg->file, &seg->base_seq, &taken, &seg->create_time, raw);
  seg->taken_bytes.store(taken);
  if (!recycled) {
    SEPFS_RETURN_IF_ERROR(env_->OpenFile(path, OpenMode::kCreateExclusive, &seg->file));
    dir_dirty_ = true;
    MakeSegmentHeader(opt_.store_id, id, stream, 0, 0, &seg->create_time, raw);
  }
  // The header starts the stream's buffer: the bytes of the block the next
  // flush starts in (nothing pending, also if the write below fails). A
  // recycled file has it already.
  s.buf.resize(kSegmentHeaderSize);
  s.lead = kSegmentHeaderSize;
  std::memcpy(s.buf.data(), raw, kSegmentHeaderSize);
  const Status st =
      recycled ? Status::OK() : seg->file->Write(0, std::string_view(raw, kSegmentHeaderSize));
  if (!st.ok()) {
    seg->file.reset();
    Status rm = env_->RemoveFile(path);
    if (!rm.ok()) Log("removing half-created segment: " + rm.ToString());
    return st.WithContext("creating " + SegName(id));
  }
  seg->size = kSegmentHeaderSize;
  seg->flushed = kSegmentHeaderSize;
  seg->needs_sync = true;
  seg->open = true;
  {
    std::unique_lock lk(segs_mu_);
    segs_[id] = seg;
  }
  *out = std::move(seg);
  return Status::OK();
}

bool ValueLog::Impl::Recycle(uint32_t id, Stream stream, std::unique_ptr<File>* file,
                             uint64_t* base_seq, uint64_t* taken_bytes, uint64_t* create_time,
                             char* raw) {
  uint32_t free_id;
  {
    std::unique_lock lk(segs_mu_);
    if (free_files_.empty()) return false;
    free_id = free_files_.back().id;
    *taken_bytes = free_files_.back().bytes;
    free_files_.pop_back();
  }
  const std::string from = FreePathOf(free_id);
  const std::string to = PathOf(id);
  // Every seq handed out so far is lower, those of the file's earlier lives
  // included; every record appended to this segment gets a higher one.
  *base_seq = next_seq_.load();
  MakeSegmentHeader(opt_.store_id, id, stream, 0, *base_seq, create_time, raw);
  // The file's rename away from its old segment's name is durable before
  // the header changes (else a crash could bring that name back with this
  // header), and the header is durable before the file takes the new
  // segment's name: a segment file never carries another segment's header.
  Status st = env_->SyncDir(dir_);
  if (st.ok()) {
    std::unique_ptr<File> f;
    st = env_->OpenFile(from, OpenMode::kReadWrite, &f);
    if (st.ok()) st = f->Write(0, std::string_view(raw, kSegmentHeaderSize));
    if (st.ok()) st = f->Sync();
  }
  bool renamed = false;
  if (st.ok()) {
    st = env_->RenameFile(from, to, RenameMode::kNoReplace);
    renamed = st.ok();
  }
  if (st.ok()) st = env_->OpenFile(to, OpenMode::kReadWrite, file);
  dir_dirty_ = true;
  if (st.ok()) {
    segments_recycled_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  file->reset();
  *base_seq = 0;
  *taken_bytes = 0;
  Log(SegName(id) + ": could not recycle " + FreeFileName(free_id) + ", creating a new file: " +
      st.ToString());
  Status rm = env_->RemoveFile(renamed ? to : from);
  if (!rm.ok()) Log("removing " + (renamed ? to : from) + ": " + rm.ToString());
  return false;
}

size_t ValueLog::Impl::DropFreeFiles() {
  std::vector<FreeFile> files;
  {
    std::unique_lock lk(segs_mu_);
    files.swap(free_files_);
  }
  for (const FreeFile& f : files) {
    Status st = env_->RemoveFile(FreePathOf(f.id));
    if (!st.ok()) Log("removing " + FreeFileName(f.id) + ": " + st.ToString());
  }
  if (!files.empty()) dir_dirty_ = true;
  return files.size();
}

Status ValueLog::Impl::FlushLocked(StreamState& s) {
  const size_t pending = s.pending();
  if (pending == 0) return Status::OK();
  Segment& seg = *s.seg;
  const uint64_t off = seg.flushed.load(std::memory_order_relaxed);
  const uint64_t end = off + pending;
  const uint64_t base = off - s.lead;  // file offset of buf[0], a block boundary
  auto bytes = [&](uint64_t from, uint64_t to) {
    return std::string_view(s.buf.data() + (from - base), to - from);
  };
  // A large flush writes its whole blocks around the page cache, from the
  // start of the partly written one (its first bytes again, unchanged), so
  // no block is written by both paths; the partial last block goes through
  // the page cache, and so does a small flush.
  const uint64_t hi = end / File::kDirectAlign * File::kDirectAlign;
  // A recycled file holds an earlier life's bytes past `end`: a write of
  // part of a block would make the kernel read that block in first. So
  // every block is written whole, from base and with zeros after `end`.
  const bool whole = seg.recycled();
  const uint64_t stop = whole && end > hi ? hi + File::kDirectAlign : end;
  if (stop > end) {
    s.buf.resize(stop - base);
    std::memset(s.buf.data() + (end - base), 0, stop - end);
  }
  Status st;
  if (opt_.direct_writes && hi > base && hi - base >= kMinDirectWrite) {
    st = seg.file->WriteDirect(base, bytes(base, hi));
    if (st.ok() && stop > hi) st = seg.file->Write(hi, bytes(hi, stop));
  } else {
    const uint64_t from = whole ? base : off;
    st = seg.file->Write(from, bytes(from, stop));
  }
  if (stop > end) s.buf.resize(end - base);
  if (st.ok()) {
    seg.flushed.store(end, std::memory_order_release);
    seg.needs_sync = true;
    s.KeepLastBlock(end);
    SubtractLive(seg, s.discarded);
    s.discarded = 0;
  } else {
    s.discarded = 0;  // counted in pending below
    // Drop the unwritten records: nothing durable points at them yet (callers
    // flush before writing metadata), and the segment must stay appendable.
    seg.NoteCut(off);
    Status tr = seg.file->Truncate(off);
    if (!tr.ok()) Log("truncate after a failed flush: " + tr.ToString());
    seg.size.store(off, std::memory_order_release);
    SubtractLive(seg, pending);
    drops_[static_cast<int>(seg.stream)].fetch_add(1, std::memory_order_acq_rel);
    Log(SegName(seg.id) + ": dropped " + std::to_string(pending) +
        " buffered bytes after a failed write: " + st.ToString());
    s.buf.resize(s.lead);  // the records go, the bytes of the block in the file stay
    if (st.err() == ENOSPC) DropFreeFiles();  // their space is worth more now
  }
  s.buf.shrink(2 * opt_.append_buffer_size, opt_.append_buffer_size + File::kDirectAlign);
  return st.ok() ? st : st.WithContext("vlog flush of " + SegName(seg.id));
}

Status ValueLog::Impl::Append(Stream stream, uint64_t inode, uint64_t block,
                              std::string_view data, BlockPtr* ptr, uint8_t flags) {
  const int si = static_cast<int>(stream);
  if (si < 0 || si >= kNumStreams) return Status::InvalidArgument("vlog: bad stream");
  if (data.size() > kMaxRecordData) {
    return Status::InvalidArgument("vlog: record of " + std::to_string(data.size()) +
                                   " bytes exceeds the maximum");
  }
  const uint64_t rec = kRecordHeaderSize + data.size();
  StreamState& s = streams_[si];
  std::lock_guard lk(s.mu);
  if (s.seg != nullptr && s.seg->size.load() > kSegmentHeaderSize &&
      s.seg->size.load() + rec > opt_.segment_size) {
    SEPFS_RETURN_IF_ERROR(SealLocked(s));
  }
  if (s.seg == nullptr) SEPFS_RETURN_IF_ERROR(CreateSegment(stream, &s.seg));
  if (s.pending() > 0 && s.pending() + rec > opt_.append_buffer_size) {
    SEPFS_RETURN_IF_ERROR(FlushLocked(s));
  }
  Segment& seg = *s.seg;
  RecordHeader h;
  h.flags = flags;
  h.data_len = static_cast<uint32_t>(data.size());
  h.inode = inode;
  h.block = block;
  h.seq = next_seq_.fetch_add(1);
  const size_t pos = s.buf.size();
  s.buf.resize(pos + rec);
  EncodeRecordHeader(&h, data, s.buf.data() + pos);
  if (!data.empty()) std::memcpy(s.buf.data() + pos + kRecordHeaderSize, data.data(), data.size());
  const uint64_t offset = seg.size.load(std::memory_order_relaxed);
  seg.size.store(offset + rec, std::memory_order_release);
  seg.live.fetch_add(rec, std::memory_order_relaxed);
  seg.NoteSeq(h.seq);
  records_appended_.fetch_add(1, std::memory_order_relaxed);
  bytes_appended_.fetch_add(rec, std::memory_order_relaxed);
  *ptr = BlockPtr{seg.id, static_cast<uint32_t>(offset), h.data_len, h.seq};
  return Status::OK();
}

Status ValueLog::Impl::Flush(StreamMask streams) {
  Status first;
  for (int i = 0; i < kNumStreams; ++i) {
    if (!(streams & (1u << i))) continue;
    StreamState& s = streams_[i];
    std::lock_guard lk(s.mu);
    Status st = FlushLocked(s);
    if (first.ok()) first = std::move(st);
  }
  return first;
}

Status ValueLog::Impl::Sync(StreamMask streams, std::vector<StreamHead>* heads) {
  std::lock_guard lk(sync_mu_);
  if (!sync_error_.ok()) return sync_error_;
  {
    std::lock_guard l(seal_error_mu_);
    if (!seal_error_.ok()) return LatchSyncError(seal_error_);
  }
  if (heads == nullptr) {
    SEPFS_RETURN_IF_ERROR(Flush(streams));
  } else {
    heads->clear();
    for (StreamState& s : streams_) {
      std::lock_guard sl(s.mu);
      SEPFS_RETURN_IF_ERROR(FlushLocked(s));
      if (s.seg != nullptr) heads->push_back({s.seg->id, s.seg->size.load()});
    }
  }
  for (const auto& seg : Snapshot()) {
    if (seg->file == nullptr || !seg->needs_sync.exchange(false)) continue;
    Status st = seg->file->Sync();
    if (!st.ok()) return LatchSyncError(std::move(st));
  }
  if (dir_dirty_.exchange(false)) {
    Status st = env_->SyncDir(dir_);
    if (!st.ok()) return LatchSyncError(std::move(st));
  }
  return Status::OK();
}

Status ValueLog::Impl::LatchSyncError(Status st) {
  sync_error_ = st.WithContext(
      "vLog sync failed; every later sync fails until the store is mounted again");
  sync_failed_.store(true);
  Log(sync_error_.ToString());
  return sync_error_;
}

// ---- Read -------------------------------------------------------------------

std::shared_ptr<Segment> ValueLog::Impl::Find(uint32_t id) const {
  std::shared_lock lk(segs_mu_);
  auto it = segs_.find(id);
  return it == segs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Segment>> ValueLog::Impl::Snapshot() const {
  std::shared_lock lk(segs_mu_);
  std::vector<std::shared_ptr<Segment>> out;
  out.reserve(segs_.size());
  for (const auto& [id, seg] : segs_) out.push_back(seg);
  return out;
}

Status ValueLog::Impl::Report(Status st) {
  if (st.IsCorruption()) {
    checksum_errors_.fetch_add(1, std::memory_order_relaxed);
    Log(st.ToString());
  }
  return st;
}

Status ValueLog::Impl::Locate(const BlockPtr& ptr, std::shared_ptr<Segment>* out) const {
  std::shared_ptr<Segment> seg = Find(ptr.segment);
  // Formatted only on failure: this runs for every record read.
  auto where = [&] { return SegName(ptr.segment) + " offset " + std::to_string(ptr.offset); };
  if (seg == nullptr) return Status::Corruption(where() + ": no such segment");
  // A damaged segment header does not stop a read: the record is checked
  // on its own (CheckRecord).
  if (ptr.length > kMaxRecordData) return Status::Corruption(where() + ": length too large");
  const uint64_t end = uint64_t{ptr.offset} + ptr.record_size();
  if (ptr.offset < kSegmentHeaderSize || end > seg->size.load(std::memory_order_acquire)) {
    return Status::Corruption(where() + ": record of " + std::to_string(ptr.record_size()) +
                              " bytes lies outside the segment (" +
                              std::to_string(seg->size.load()) + " bytes)");
  }
  *out = std::move(seg);
  return Status::OK();
}

Status ValueLog::Impl::ReadFile(Segment& seg, uint64_t off, uint64_t n, char* dst) {
  size_t got = 0;
  CountRead(n);
  SEPFS_RETURN_IF_ERROR(seg.file->Read(off, n, dst, &got));
  if (got < n) return FileEndsEarly(seg.id, off, n - got);
  return Status::OK();
}

const char* ValueLog::Impl::Buffered(const StreamState& s, const Segment& seg,
                                     const BlockPtr& ptr) {
  const uint64_t flushed = seg.flushed.load(std::memory_order_acquire);
  const uint64_t end = uint64_t{ptr.offset} + ptr.record_size();
  if (s.seg.get() != &seg || ptr.offset < flushed || end > flushed + s.pending()) return nullptr;
  return s.buf.data() + s.lead + (ptr.offset - flushed);
}

Status ValueLog::Impl::Fetch(Segment& seg, const BlockPtr& ptr, char* raw) {
  const uint64_t n = ptr.record_size();
  const uint64_t end = uint64_t{ptr.offset} + n;
  if (end <= seg.flushed.load(std::memory_order_acquire)) return ReadFile(seg, ptr.offset, n, raw);
  StreamState& s = streams_[static_cast<int>(seg.stream)];
  std::unique_lock lk(s.mu);
  const uint64_t flushed = seg.flushed.load(std::memory_order_acquire);
  if (end <= flushed) {
    lk.unlock();
    return ReadFile(seg, ptr.offset, n, raw);
  }
  if (const char* buffered = Buffered(s, seg, ptr)) {
    std::memcpy(raw, buffered, n);
    return Status::OK();
  }
  return Status::Corruption(SegName(seg.id) + " offset " + std::to_string(ptr.offset) +
                            ": record is not in the segment (dropped after a failed write?)");
}

Status ValueLog::Impl::ReadOne(Segment& seg, const BlockPtr& ptr, uint64_t inode,
                               uint64_t block, char* buf, bool quiet) {
  auto raw = std::make_unique_for_overwrite<char[]>(ptr.record_size());
  Status st = Fetch(seg, ptr, raw.get());
  if (st.ok()) st = CheckRecord(ptr, inode, block, raw.get(), raw.get() + kRecordHeaderSize);
  if (st.ok()) {
    if (ptr.length > 0) std::memcpy(buf, raw.get() + kRecordHeaderSize, ptr.length);
    records_read_.fetch_add(1, std::memory_order_relaxed);
  }
  return quiet ? st : Report(std::move(st));
}

Status ValueLog::Impl::Read(const BlockPtr& ptr, uint64_t inode, uint64_t block, char* buf) {
  std::shared_ptr<Segment> seg;
  Status st = Locate(ptr, &seg);
  if (!st.ok()) return Report(std::move(st));
  return ReadOne(*seg, ptr, inode, block, buf);
}

Status ValueLog::Impl::Probe(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  std::shared_ptr<Segment> seg;
  SEPFS_RETURN_IF_ERROR(Locate(ptr, &seg));
  auto raw = std::make_unique_for_overwrite<char[]>(ptr.record_size());
  SEPFS_RETURN_IF_ERROR(Fetch(*seg, ptr, raw.get()));
  return CheckRecord(ptr, inode, block, raw.get(), raw.get() + kRecordHeaderSize);
}

void ValueLog::Impl::Discard(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  std::shared_ptr<Segment> seg;
  if (!Locate(ptr, &seg).ok()) return;  // e.g. dropped with its segment's tail
  const uint64_t end = uint64_t{ptr.offset} + ptr.record_size();
  {
    // A failed write drops the stream's buffer under its lock: whether the
    // record is still buffered, and what becomes of its bytes, is decided
    // under the same lock.
    StreamState& s = streams_[static_cast<int>(seg->stream)];
    std::lock_guard lk(s.mu);
    if (end > seg->flushed.load(std::memory_order_acquire)) {
      const char* raw = Buffered(s, *seg, ptr);
      if (raw != nullptr && CheckRecord(ptr, inode, block, raw, raw + kRecordHeaderSize).ok()) {
        s.discarded += ptr.record_size();
      }
      return;  // not in the buffer: a drop took it back already
    }
  }
  // In the file: no drop can take it back any more.
  if (Probe(ptr, inode, block).ok()) SubtractLive(*seg, ptr.record_size());
}

void ValueLog::Impl::ReadRun(Segment& seg, std::span<ReadRequest*> run) {
  const uint64_t start = run.front()->ptr.offset;
  const uint64_t end = uint64_t{run.back()->ptr.offset} + run.back()->ptr.record_size();
  if (!opt_.direct_reads || end - start < kMinDirectRead) return ReadRunBuffered(seg, run);
  // Pieces of about equal size, each about kDirectChunk bytes at most, so a
  // pool buffer holds them (a 1 MiB read of 17 blocks is two pieces of 8 and
  // 9 blocks, not 16 blocks and a short piece that would go buffered).
  const uint64_t total = end - start;
  const uint64_t pieces = (total + kDirectChunk - 1) / kDirectChunk;
  // Record k starts the next piece when its middle lies past that piece's
  // share of the run.
  size_t first = 0;
  uint64_t piece = 1;
  for (size_t k = 1; k < run.size(); ++k) {
    const uint64_t middle = run[k]->ptr.offset - start + run[k]->ptr.record_size() / 2;
    if (middle > piece * total / pieces) {
      ReadRunDirect(seg, run.subspan(first, k - first));
      first = k;
      piece++;
    }
  }
  ReadRunDirect(seg, run.subspan(first));
}

void ValueLog::Impl::ReadRunBuffered(Segment& seg, std::span<ReadRequest*> run) {
  // One scatter read: each header into hdrs, each record's data straight
  // into its request's buffer (no bounce buffer, no copy).
  const uint64_t start = run.front()->ptr.offset;
  const uint64_t end = uint64_t{run.back()->ptr.offset} + run.back()->ptr.record_size();
  auto hdrs = std::make_unique_for_overwrite<char[]>(run.size() * kRecordHeaderSize);
  std::vector<iovec> iov;
  iov.reserve(2 * run.size());
  for (size_t k = 0; k < run.size(); ++k) {
    iov.push_back({hdrs.get() + k * kRecordHeaderSize, kRecordHeaderSize});
    if (run[k]->ptr.length > 0) iov.push_back({run[k]->buf, run[k]->ptr.length});
  }
  size_t got = 0;
  CountRead(end - start);
  Status st = seg.file->ReadV(start, iov, &got);
  if (st.ok() && got < end - start) st = FileEndsEarly(seg.id, start, end - start - got);
  for (size_t k = 0; k < run.size(); ++k) Settle(*run[k], st, hdrs.get() + k * kRecordHeaderSize);
}

void ValueLog::Impl::ReadRunDirect(Segment& seg, std::span<ReadRequest*> run) {
  // The run's aligned cover lands in a pool buffer; each record's data is
  // copied out of it into its request's buffer and checked there, or, when
  // every request takes its data in place and a shared buffer is free,
  // checked and left where it is.
  constexpr uint64_t kAlign = File::kDirectAlign;
  const uint64_t start = run.front()->ptr.offset;
  const uint64_t end = uint64_t{run.back()->ptr.offset} + run.back()->ptr.record_size();
  const uint64_t lo = start & ~(kAlign - 1);
  const uint64_t hi = (end + kAlign - 1) & ~(kAlign - 1);
  // The block the flushed bytes end in may be a buffered tail of the open
  // segment, dirty in the page cache: a direct read would first wait for
  // its write-back. It is read buffered.
  const uint64_t direct_hi =
      std::min(hi, seg.flushed.load(std::memory_order_acquire) & ~(kAlign - 1));
  if (end - start < kMinDirectRead || direct_hi <= lo) return ReadRunBuffered(seg, run);
  const bool in_place = std::all_of(run.begin(), run.end(),
                                    [](const ReadRequest* r) { return r->in_place != nullptr; });
  AlignedBufferPool::Lease lease = in_place ? shared_buffers_.Take() : AlignedBufferPool::Lease();
  const bool shared = static_cast<bool>(lease);
  // Shared by the records handed out in place; released with the last.
  auto cover = std::make_shared<AlignedBufferPool::Lease>(shared ? std::move(lease)
                                                                 : direct_buffers_.Take());
  if (!*cover) return ReadRunBuffered(seg, run);  // every buffer is in use
  AlignedBuffer& buf = **cover;
  Status st;
  size_t got = 0;
  try {
    buf.resize(hi - lo);
  } catch (const std::bad_alloc&) {
    return ReadRunBuffered(seg, run);
  }
  CountRead(end - start);
  st = seg.file->ReadDirect(lo, direct_hi - lo, buf.data(), &got);
  if (st.ok() && got == direct_hi - lo && end > direct_hi) {
    size_t tail = 0;
    st = seg.file->Read(direct_hi, end - direct_hi, buf.data() + (direct_hi - lo), &tail);
    got += tail;
  }
  if (st.ok() && got < end - lo) st = FileEndsEarly(seg.id, start, end - lo - got);
  for (ReadRequest* r : run) {
    const char* header = buf.data() + (r->ptr.offset - lo);
    const char* data = header + kRecordHeaderSize;
    if (!shared) {
      if (st.ok() && r->ptr.length > 0) std::memcpy(r->buf, data, r->ptr.length);
      Settle(*r, st, header);
      continue;
    }
    Settle(*r, st, header, data);
    if (r->status.ok()) {
      records_in_place_.fetch_add(1, std::memory_order_relaxed);
      *r->in_place = RefInto(cover, data, r->ptr.length);
      // The buffer's bytes, shared out by record size.
      r->in_place_share = std::max<uint64_t>(
          r->ptr.length, buf.capacity() * r->ptr.record_size() / (end - start));
    }
  }
}

void ValueLog::Impl::Settle(ReadRequest& r, const Status& st, const char* header,
                            const char* data) {
  r.status = st.ok() ? CheckRecord(r.ptr, r.inode, r.block, header, data ? data : r.buf) : st;
  if (r.status.ok()) records_read_.fetch_add(1, std::memory_order_relaxed);
  if (!r.quiet) r.status = Report(std::move(r.status));
}

Status ValueLog::Impl::ReadMany(std::span<ReadRequest> reqs) {
  std::vector<std::shared_ptr<Segment>> segs(reqs.size());
  std::vector<size_t> order;
  order.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].status = Locate(reqs[i].ptr, &segs[i]);
    if (reqs[i].status.ok()) {
      order.push_back(i);
    } else if (!reqs[i].quiet) {
      reqs[i].status = Report(std::move(reqs[i].status));
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BlockPtr& pa = reqs[a].ptr;
    const BlockPtr& pb = reqs[b].ptr;
    return pa.segment != pb.segment ? pa.segment < pb.segment : pa.offset < pb.offset;
  });
  std::vector<ReadRequest*> run;
  for (size_t i = 0; i < order.size();) {
    // A run: records back to back in one segment, all in the file (the
    // append buffer is read under the stream lock, record by record).
    Segment& seg = *segs[order[i]];
    const uint64_t flushed = seg.flushed.load(std::memory_order_acquire);
    const BlockPtr& first = reqs[order[i]].ptr;
    const uint64_t start = first.offset;
    uint64_t end = start + first.record_size();
    size_t j = i + 1;
    for (; j < order.size(); ++j) {
      const BlockPtr& p = reqs[order[j]].ptr;
      const uint64_t next_end = end + p.record_size();
      if (p.segment != first.segment || p.offset != end || next_end > flushed ||
          next_end - start > kMaxMergedRead) {
        break;
      }
      end = next_end;
    }
    if (end > flushed) {  // a lone record not (wholly) in the file yet
      ReadRequest& r = reqs[order[i]];
      r.status = ReadOne(seg, r.ptr, r.inode, r.block, r.buf, r.quiet);
    } else {
      run.clear();
      for (size_t k = i; k < j; ++k) run.push_back(&reqs[order[k]]);
      ReadRun(seg, run);
    }
    i = j;
  }
  for (const ReadRequest& r : reqs) {
    if (!r.status.ok()) return r.status;
  }
  return Status::OK();
}

// ---- Liveness and introspection ---------------------------------------------

void ValueLog::Impl::Release(const BlockPtr& ptr) {
  // The segment may be gone: a flush releases the records its batch
  // replaced only once that batch is synced, and the collector, finding
  // them dead already, may have deleted their segment in between (its
  // Quiesce syncs the same batch first). Nothing is left to count then.
  std::shared_ptr<Segment> seg = Find(ptr.segment);
  if (seg == nullptr) return;
  SubtractLive(*seg, ptr.record_size());
}

void ValueLog::Impl::AddLive(const BlockPtr& ptr) {
  std::shared_ptr<Segment> seg = Find(ptr.segment);
  if (seg == nullptr) {
    Log("AddLive of a record in unknown " + SegName(ptr.segment));
    return;
  }
  seg->live.fetch_add(ptr.record_size(), std::memory_order_relaxed);
  seg->NoteSeq(ptr.seq);
}

void ValueLog::Impl::ResetLive() {
  for (const auto& seg : Snapshot()) {
    seg->live = 0;
    seg->emptied = false;
  }
}

bool ValueLog::Impl::RestoreLive(uint32_t id, uint64_t live_bytes, uint64_t max_seq) {
  std::shared_ptr<Segment> seg = Find(id);
  if (seg == nullptr) return false;
  const uint64_t size = seg->size.load();
  if (size < kSegmentHeaderSize || live_bytes > size - kSegmentHeaderSize) return false;
  seg->live.store(live_bytes, std::memory_order_relaxed);
  seg->emptied.store(false, std::memory_order_relaxed);
  seg->NoteSeq(max_seq);
  return true;
}

std::vector<SegmentInfo> ValueLog::Impl::Segments() const {
  std::vector<SegmentInfo> out;
  for (const auto& seg : Snapshot()) {
    SegmentInfo info;
    info.id = seg->id;
    info.stream = seg->stream;
    info.open = seg->open.load();
    info.size = seg->size.load();
    info.live_bytes = seg->live.load();
    info.emptied = seg->emptied.load(std::memory_order_relaxed);
    const uint64_t payload = info.size > kSegmentHeaderSize ? info.size - kSegmentHeaderSize : 0;
    info.garbage_bytes = payload > info.live_bytes ? payload - info.live_bytes : 0;
    info.damaged = seg->damaged();
    info.create_time = seg->create_time;
    info.max_seq = seg->max_seq.load(std::memory_order_relaxed);
    info.recycled = seg->recycled();
    info.store_id = seg->store_id;
    out.push_back(info);
  }
  return out;
}

Stats ValueLog::Impl::stats() const {
  Stats s;
  s.records_appended = records_appended_.load();
  s.bytes_appended = bytes_appended_.load();
  s.records_read = records_read_.load();
  s.records_in_place = records_in_place_.load();
  s.shared_buffers = shared_buffers_.lent();
  s.bytes_read = bytes_read_.load();
  s.preads = preads_.load();
  s.checksum_errors = checksum_errors_.load();
  s.sync_failed = sync_failed_.load();
  s.segments_deleted = segments_deleted_.load();
  s.bytes_freed = bytes_freed_.load();
  s.unfinished_removed = unfinished_removed_.load();
  s.unfinished_kept = unfinished_kept_.load();
  s.segments_recycled = segments_recycled_.load();
  std::shared_lock lk(segs_mu_);
  s.free_files = free_files_.size();
  s.free_file_bytes = FreeFileBytesLocked();
  return s;
}

uint64_t ValueLog::Impl::FreeFileBytesLocked() const {
  uint64_t total = 0;
  for (const FreeFile& f : free_files_) total += f.bytes;
  return total;
}

ReusableSpace ValueLog::Impl::Reusable() const {
  std::shared_lock lk(segs_mu_);
  ReusableSpace r;
  r.kept = FreeFileBytesLocked();
  // Without the stream locks, which a flush may hold for a while: a segment
  // lowers taken_bytes before its file is cut.
  for (const auto& [id, seg] : segs_) {
    const uint64_t taken = seg->taken_bytes.load();
    if (taken == 0 || !seg->open.load()) continue;
    const uint64_t size = seg->size.load();
    if (taken > size) r.tails[static_cast<int>(seg->stream)] += taken - size;
  }
  return r;
}

uint64_t ValueLog::Impl::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& seg : Snapshot()) total += seg->size.load();
  return total;
}

uint64_t ValueLog::Impl::LiveBytes() const {
  uint64_t total = 0;
  for (const auto& seg : Snapshot()) total += seg->live.load(std::memory_order_relaxed);
  return total;
}

uint64_t ValueLog::Impl::CollectableGarbage() const {
  uint64_t total = 0;
  for (const auto& seg : Snapshot()) {
    if (seg->open.load() || seg->damaged()) continue;
    const uint64_t size = seg->size.load();
    const uint64_t payload = size > kSegmentHeaderSize ? size - kSegmentHeaderSize : 0;
    total += payload - std::min(payload, seg->live.load(std::memory_order_relaxed));
  }
  return total;
}

void ValueLog::Impl::EnsureSeqAbove(uint64_t seq) { RaiseAtLeast(next_seq_, seq + 1); }

Status ValueLog::Impl::ScanSegment(uint32_t id, const ScanFn& fn, uint64_t from) {
  std::shared_ptr<Segment> seg = Find(id);
  if (seg == nullptr) return Status::NotFound(SegName(id) + ": no such segment");
  if (seg->damaged()) return seg->damage;
  if (seg->open.load()) {
    StreamState& s = streams_[static_cast<int>(seg->stream)];
    std::lock_guard lk(s.mu);
    if (s.seg == seg) SEPFS_RETURN_IF_ERROR(FlushLocked(s));
  }
  const uint64_t limit = seg->flushed.load(std::memory_order_acquire);
  if (from >= limit) return Status::OK();
  seg->file->Advise(from, limit - from, POSIX_FADV_SEQUENTIAL);
  SegmentReader reader(seg->file.get(), id, seg->base_seq, limit, 1u << 20, from);
  for (;;) {
    RecordHeader h;
    std::string_view data;
    bool at_end;
    Status st = reader.Next(&h, &data, &at_end);
    if (at_end) return Status::OK();
    if (!st.ok() && !st.IsCorruption()) return st;
    const BlockPtr ptr{id, static_cast<uint32_t>(reader.offset()), h.data_len, h.seq};
    if (!st.ok()) {
      if (!fn(ptr, h, {}, st) || reader.torn()) return Status::OK();
      SEPFS_RETURN_IF_ERROR(reader.SkipDamage());
      continue;
    }
    seg->NoteSeq(h.seq);
    if (!fn(ptr, h, data, st)) return Status::OK();
  }
}

Status ValueLog::Impl::CutTornTailAt(uint32_t id, uint64_t offset, bool since_checkpoint) {
  std::shared_ptr<Segment> seg = Find(id);
  if (seg == nullptr) return Status::NotFound(SegName(id) + ": no such segment");
  if (seg->open.load() || seg->damaged() || seg->file == nullptr) return Status::OK();
  const uint64_t limit = seg->flushed.load(std::memory_order_acquire);
  if (offset < kSegmentHeaderSize || offset >= limit) return Status::OK();
  SegmentReader reader(seg->file.get(), id, seg->base_seq, limit, 1u << 20, offset);
  RecordHeader h;
  std::string_view data;
  bool at_end = false;
  Status st = reader.Next(&h, &data, &at_end);
  if (st.ok()) return Status::OK();          // a whole record: no tear here
  if (!st.IsCorruption()) return st;         // an I/O error
  // Damaged bytes: fsck reports them.
  if (!reader.torn() && !(since_checkpoint && seg->recycled())) return Status::OK();
  return CutTornTail(*seg, offset);
}

std::vector<StreamHead> ValueLog::Impl::Heads() const {
  std::vector<StreamHead> out;
  for (auto& s : streams_) {
    std::lock_guard lk(s.mu);
    if (s.seg != nullptr) out.push_back({s.seg->id, s.seg->size.load()});
  }
  return out;
}

void ValueLog::Impl::ReserveSegmentIds(uint32_t max_used) {
  std::unique_lock lk(segs_mu_);
  next_id_ = std::max<uint64_t>(next_id_, uint64_t{max_used} + 1);
}

uint32_t ValueLog::Impl::MaxSegmentId() const {
  std::shared_lock lk(segs_mu_);
  return static_cast<uint32_t>(next_id_ - 1);
}

// ---- Deleting and sealing -----------------------------------------------------

Status ValueLog::Impl::DeleteSegment(uint32_t id) {
  std::shared_ptr<Segment> seg;
  bool keep;  // the file, for a new segment to recycle
  {
    // A segment is published open and is only ever closed, so a segment seen
    // sealed here can no longer be appended to.
    std::unique_lock lk(segs_mu_);
    auto it = segs_.find(id);
    if (it == segs_.end()) return Status::NotFound(SegName(id) + ": no such segment");
    if (it->second->open.load()) {
      return Status::FromErrno(EBUSY, SegName(id) + " is still open for appends; seal it first");
    }
    seg = std::move(it->second);
    segs_.erase(it);
    keep = free_files_.size() < opt_.recycle_segments && !seg->damaged() &&
           seg->size.load() <= opt_.segment_size;
  }
  const std::string path = PathOf(id);
  Status st;
  if (keep) {
    st = env_->RenameFile(path, FreePathOf(id), RenameMode::kNoReplace);
    if (st.ok()) {
      std::unique_lock lk(segs_mu_);
      free_files_.push_back({id, seg->size.load()});
    }
  }
  // Keeping the file is optional: a file system that renames without
  // replacing neither way (no RENAME_NOREPLACE, no links) just deletes.
  if (!keep || (!st.ok() && !st.IsNotFound())) st = env_->RemoveFile(path);
  if (!st.ok() && !st.IsNotFound()) {
    std::unique_lock lk(segs_mu_);
    segs_.emplace(id, std::move(seg));
    return st.WithContext("deleting " + SegName(id));
  }
  if (!st.ok()) Log(SegName(id) + ": file was already gone: " + st.ToString());
  dir_dirty_ = true;
  segments_deleted_.fetch_add(1, std::memory_order_relaxed);
  bytes_freed_.fetch_add(seg->size.load(), std::memory_order_relaxed);
  return Status::OK();
}

Status ValueLog::Impl::SyncAll() {
  SEPFS_RETURN_IF_ERROR(Sync(kAllStreams));
  for (const auto& seg : Snapshot()) {
    // Segments loaded at open are read-only here; fsync through a writable
    // descriptor of the same file (any descriptor would do for the kernel).
    std::unique_ptr<File> rw;
    Status st = env_->OpenFile(PathOf(seg->id), OpenMode::kReadWrite, &rw);
    if (st.IsNotFound()) continue;  // deleted meanwhile
    SEPFS_RETURN_IF_ERROR(st);
    SEPFS_RETURN_IF_ERROR(rw->Sync().WithContext("syncing " + SegName(seg->id)));
  }
  return env_->SyncDir(dir_);
}

Status ValueLog::Impl::RewriteHeader(uint32_t id) {
  std::shared_ptr<Segment> seg = Find(id);
  if (seg == nullptr) return Status::NotFound(SegName(id) + ": no such segment");
  if (!seg->damaged()) return Status::OK();
  if (seg->open.load()) return Status::FromErrno(EBUSY, SegName(id) + " is open for appends");
  {
    std::unique_ptr<File> rw;
    SEPFS_RETURN_IF_ERROR(env_->OpenFile(PathOf(id), OpenMode::kReadWrite, &rw));
    uint64_t base_seq = 0;
    if (opt_.version2_headers) {
      uint64_t size = 0;
      SEPFS_RETURN_IF_ERROR(rw->Size(&size));
      SegmentReader reader(rw.get(), id, /*base_seq=*/0, size);
      RecordHeader h;
      std::string_view data;
      bool at_end = false;
      if (reader.Next(&h, &data, &at_end).ok() && !at_end) base_seq = h.seq;
    }
    char raw[kSegmentHeaderSize];
    uint64_t create_time;
    MakeSegmentHeader(opt_.store_id, id, Stream::kCold, kSegmentRewritten, base_seq,
                      &create_time, raw);
    SEPFS_RETURN_IF_ERROR(rw->Write(0, std::string_view(raw, sizeof(raw))));
    SEPFS_RETURN_IF_ERROR(rw->Sync());
  }
  // A fresh Segment (its fixed fields are never changed once published),
  // with the counters of the old one.
  std::shared_ptr<Segment> fresh;
  std::optional<SetAsideSegment> aside;
  SEPFS_RETURN_IF_ERROR(OpenExisting(id, &fresh, &aside));
  if (fresh == nullptr || fresh->damaged()) {
    return Status::Corruption(SegName(id) + ": header still damaged after rewriting it");
  }
  fresh->live.store(seg->live.load());
  fresh->max_seq.store(seg->max_seq.load());
  const uint64_t base_seq = fresh->base_seq;
  {
    std::unique_lock lk(segs_mu_);
    segs_[id] = std::move(fresh);
  }
  Log(SegName(id) + ": rewrote its damaged header (stream cold" +
      (base_seq != 0 ? ", records from seq " + std::to_string(base_seq) : "") + ")");
  return Status::OK();
}

std::vector<SetAsideSegment> ValueLog::Impl::SetAsideSegments() const {
  std::shared_lock lk(segs_mu_);
  std::vector<SetAsideSegment> out;
  for (const auto& [id, f] : set_aside_) out.push_back(f);
  return out;
}

Status ValueLog::Impl::MoveOut(uint32_t id, const std::string& to) {
  std::shared_ptr<Segment> damaged;
  {
    std::unique_lock lk(segs_mu_);
    auto it = segs_.find(id);
    if (it != segs_.end() && it->second->damaged()) damaged = it->second;
    if (damaged == nullptr && set_aside_.count(id) == 0) {
      return Status::NotFound(SegName(id) + ": neither set aside nor damaged");
    }
    SEPFS_RETURN_IF_ERROR(env_->RenameFile(PathOf(id), to, RenameMode::kNoReplace));
    set_aside_.erase(id);
    if (damaged != nullptr) segs_.erase(id);
  }
  const size_t slash = to.rfind('/');
  if (slash != std::string::npos) SEPFS_RETURN_IF_ERROR(env_->SyncDir(to.substr(0, slash)));
  return env_->SyncDir(dir_);
}

Status ValueLog::Impl::MoveMisnamed(uint32_t id, bool renumber, uint32_t* to) {
  {
    std::unique_lock lk(segs_mu_);
    auto it = set_aside_.find(id);
    if (it == set_aside_.end() || it->second.why != SetAsideSegment::Why::kMisnamed) {
      return Status::NotFound(SegName(id) + ": not a misnamed segment");
    }
    if (renumber && next_id_ > UINT32_MAX) return Status::NoSpace("vlog: segment ids exhausted");
    *to = renumber ? static_cast<uint32_t>(next_id_++) : it->second.header_id;
    SEPFS_RETURN_IF_ERROR(env_->RenameFile(PathOf(id), PathOf(*to), RenameMode::kNoReplace));
    SetAsideSegment moved = it->second;
    set_aside_.erase(it);
    moved.id = *to;
    if (renumber) set_aside_[*to] = moved;
  }
  return env_->SyncDir(dir_);
}

Status ValueLog::Impl::Adopt(uint32_t id) {
  {
    std::unique_lock lk(segs_mu_);
    auto it = set_aside_.find(id);
    if (it == set_aside_.end() || it->second.why != SetAsideSegment::Why::kForeignDamaged) {
      return Status::NotFound(SegName(id) + ": not set aside for a damaged header");
    }
    auto seg = std::make_shared<Segment>();
    seg->id = id;
    SEPFS_RETURN_IF_ERROR(env_->OpenFile(PathOf(id), OpenMode::kRead, &seg->file));
    uint64_t size = 0;
    SEPFS_RETURN_IF_ERROR(seg->file->Size(&size));
    seg->size = size;
    seg->flushed = size;
    seg->damage = Status::Corruption(SegName(id) + " (" + ShownPathOf(id) +
                                     ") is damaged: its header fails its checksum");
    segs_[id] = std::move(seg);
    set_aside_.erase(it);
  }
  return RewriteHeader(id);
}

Status ValueLog::Impl::SealStream(Stream stream) {
  const int si = static_cast<int>(stream);
  if (si < 0 || si >= kNumStreams) return Status::InvalidArgument("vlog: bad stream");
  StreamState& s = streams_[si];
  std::lock_guard lk(s.mu);
  if (s.seg == nullptr) return Status::OK();
  return SealLocked(s);
}

Status ValueLog::Impl::SealLocked(StreamState& s) {
  SEPFS_RETURN_IF_ERROR(FlushLocked(s));
  Segment& seg = *s.seg;
  if (seg.recycled()) {
    const uint64_t end = seg.flushed.load();
    seg.NoteCut(end);
    Status st = seg.file->Truncate(end);
    if (!st.ok()) return st.WithContext("sealing " + SegName(seg.id));
    // Through a descriptor of its own: the kernel reports a write-back
    // error once per open file, and a Sync racing with this one must see it
    // on seg.file too.
    std::unique_ptr<File> rw;
    st = env_->OpenFile(PathOf(seg.id), OpenMode::kReadWrite, &rw);
    if (st.ok()) st = rw->Sync();
    if (!st.ok()) {
      st = st.WithContext("syncing " + SegName(seg.id) + " at its seal");
      std::lock_guard l(seal_error_mu_);
      if (seal_error_.ok()) seal_error_ = st;
      return st;
    }
  }
  seg.open = false;
  s.seg.reset();
  return Status::OK();
}

// ---- ValueLog -------------------------------------------------------------

ValueLog::ValueLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ValueLog::~ValueLog() = default;

Status ValueLog::Open(const Options& options, const std::string& dir,
                      std::unique_ptr<ValueLog>* out) {
  auto impl = std::make_unique<Impl>(options, dir);
  SEPFS_RETURN_IF_ERROR(impl->Load());
  out->reset(new ValueLog(std::move(impl)));
  return Status::OK();
}

Status ValueLog::Append(Stream stream, uint64_t inode, uint64_t block, std::string_view data,
                        BlockPtr* ptr, uint8_t flags) {
  return impl_->Append(stream, inode, block, data, ptr, flags);
}
Status ValueLog::Read(const BlockPtr& ptr, uint64_t inode, uint64_t block, char* buf) {
  return impl_->Read(ptr, inode, block, buf);
}
Status ValueLog::ReadMany(std::span<ReadRequest> reqs) { return impl_->ReadMany(reqs); }
Status ValueLog::Probe(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  return impl_->Probe(ptr, inode, block);
}
Status ValueLog::Flush(StreamMask streams) { return impl_->Flush(streams); }
Status ValueLog::Sync(StreamMask streams) { return impl_->Sync(streams); }
Status ValueLog::SyncHeads(std::vector<StreamHead>* heads) {
  return impl_->Sync(kAllStreams, heads);
}
Status ValueLog::SyncAll() { return impl_->SyncAll(); }
void ValueLog::Release(const BlockPtr& ptr) { impl_->Release(ptr); }
void ValueLog::Discard(const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  impl_->Discard(ptr, inode, block);
}
void ValueLog::AddLive(const BlockPtr& ptr) { impl_->AddLive(ptr); }
void ValueLog::ResetLive() { impl_->ResetLive(); }
bool ValueLog::RestoreLive(uint32_t id, uint64_t live_bytes, uint64_t max_seq) {
  return impl_->RestoreLive(id, live_bytes, max_seq);
}
std::vector<SegmentInfo> ValueLog::Segments() const { return impl_->Segments(); }
uint64_t ValueLog::DropCount(StreamMask streams) const { return impl_->DropCount(streams); }

Stats ValueLog::stats() const { return impl_->stats(); }
uint64_t ValueLog::TotalBytes() const { return impl_->TotalBytes(); }
ReusableSpace ValueLog::Reusable() const { return impl_->Reusable(); }
size_t ValueLog::DropKeptFiles() { return impl_->DropFreeFiles(); }
uint64_t ValueLog::LiveBytes() const { return impl_->LiveBytes(); }
uint64_t ValueLog::CollectableGarbage() const { return impl_->CollectableGarbage(); }
Status ValueLog::ScanSegment(uint32_t id, const ScanFn& fn, uint64_t from) {
  return impl_->ScanSegment(id, fn, from);
}
std::vector<StreamHead> ValueLog::Heads() const { return impl_->Heads(); }
Status ValueLog::CutTornTail(uint32_t id, uint64_t offset, bool since_checkpoint) {
  return impl_->CutTornTailAt(id, offset, since_checkpoint);
}
uint32_t ValueLog::MaxSegmentId() const { return impl_->MaxSegmentId(); }
void ValueLog::ReserveSegmentIds(uint32_t max_used) { impl_->ReserveSegmentIds(max_used); }
Status ValueLog::DeleteSegment(uint32_t id) { return impl_->DeleteSegment(id); }
Status ValueLog::RewriteHeader(uint32_t id) { return impl_->RewriteHeader(id); }
std::vector<SetAsideSegment> ValueLog::SetAsideSegments() const {
  return impl_->SetAsideSegments();
}
Status ValueLog::MoveOut(uint32_t id, const std::string& to) {
  return impl_->MoveOut(id, to);
}
Status ValueLog::Adopt(uint32_t id) { return impl_->Adopt(id); }
Status ValueLog::RenumberMisnamed(uint32_t id, uint32_t* to) {
  return impl_->MoveMisnamed(id, /*renumber=*/true, to);
}
Status ValueLog::NameBack(uint32_t id) {
  uint32_t to = 0;
  return impl_->MoveMisnamed(id, /*renumber=*/false, &to);
}
Status ValueLog::SealStream(Stream stream) { return impl_->SealStream(stream); }
uint64_t ValueLog::LastSeq() const { return impl_->LastSeq(); }
void ValueLog::EnsureSeqAbove(uint64_t seq) { impl_->EnsureSeqAbove(seq); }
const std::string& ValueLog::dir() const { return impl_->dir(); }

}  // namespace sepfs::vlog
