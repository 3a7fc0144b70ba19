// ValueLog: append-only segments holding file data blocks.
//
// Records are appended to one open segment per Stream through an in-memory
// append buffer; an appended record is readable at once (from the buffer)
// and reaches the segment file on Flush() or when the buffer fills. A
// segment is sealed when the next record would exceed segment_size; a new
// one is created for that stream. Segments that existed when the ValueLog
// was opened are never appended to again (a torn tail stays unreferenced).
//
// Liveness accounting: each segment has a live byte count. Append() counts
// the new record live; Release() moves a record to garbage; AddLive() is for
// rebuilding counts from the metadata at mount. garbage = bytes written to
// the segment (header excluded) - live.
//
// Durability order: callers Flush() before writing metadata that points to
// new records (survives a process kill), and Sync() before making such
// metadata durable (survives power loss; also syncs the vlog directory when
// segments were created).
//
// Write failures: when writing an append buffer fails (e.g. ENOSPC), the
// call that flushed (Append, Flush, Sync) returns the error, the segment file
// is truncated back to its last good size and the buffered records that had
// not reached the file are dropped (their live bytes are taken back). Nothing
// durable can point at them (see the durability order), reads of their
// pointers return Corruption, and the log stays appendable: later appends go
// to the same segment at the last good size.
//
// Garbage collection (docs/gc.md): a sealed segment is freed only as a
// whole, by DeleteSegment, after GC (vlog/gc_job.h) moved its live records;
// victims are chosen from Segments() by vlog/gc_picker.h.
//
// Segment ids start at 1 and a new segment takes max existing id + 1.
// Sequence numbers start at 1 and are strictly increasing across the whole
// log, also across reopen (gaps are possible).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vlog/env.h"
#include "vlog/format.h"
#include "vlog/record_ref.h"
#include "vlog/status.h"

namespace sepfs::vlog {

// Flushes smaller than this stay in the page cache even with direct writes:
// a direct write waits for the device, a buffered one does not.
constexpr size_t kMinDirectWrite = 128u << 10;
// Runs of records this long or longer are read with O_DIRECT (see
// Options::direct_reads).
constexpr size_t kMinDirectRead = 512u << 10;
// Runs read direct whose every request takes its data in place
// (ReadRequest::in_place) land in one of at most this many buffers of about
// 1 MiB (2 MiB at most), each allocated while any record in it is
// referenced: a sequential reader's prefetch window (an eighth of the data
// cache, 32 MiB by default) and the reads in flight. When none is free,
// such a run is read as the others are, into the requests' buffers.
constexpr size_t kSharedReadBuffers = 64;

struct Options {
  Env* env = nullptr;                       // nullptr: Env::Default()
  uint64_t segment_size = 64ull << 20;      // seal a segment past this size
  size_t append_buffer_size = 1u << 20;     // per stream; written out when full
  bool read_only = false;                   // Open changes nothing on disk (see Open)
  // A flush of at least kMinDirectWrite bytes writes its whole
  // File::kDirectAlign blocks with File::WriteDirect, bypassing the page
  // cache (no page allocated, no copy into the kernel), from the start of
  // the block the previous flush ended in; its partial last block and
  // smaller flushes go through the page cache. The file holds the same
  // bytes either way.
  bool direct_writes = true;
  // Runs of at least kMinDirectRead bytes are read with File::ReadDirect,
  // bypassing the page cache. Such runs are sequential reads of large files,
  // whose bytes the callers keep (the prefetcher's block cache, the kernel's
  // cache of the FUSE file): a second copy in the page cache of the segment
  // files cost a page allocation, readahead and a copy per byte for nothing
  // (bench/RESULTS.md). Smaller reads stay buffered: there the page cache
  // is the cache of last resort for records re-read at random, and its
  // readahead brings in the neighbouring small files written along with
  // them (all reads direct cut 4 KiB random reads to a seventh). Scans (GC,
  // recovery, fsck) stay buffered.
  bool direct_reads = true;
  // How many files of deleted segments to keep for new segments, at most
  // (0: DeleteSegment removes the file). A new segment then overwrites one
  // instead of growing a new file: an fdatasync of a file that does not
  // grow skips the inode write (bench/RESULTS.md, "Segment files
  // recycled"). The kept files hold disk space until they are reused.
  size_t recycle_segments = 0;
  // The store's format admits version-2 segment headers (format.h), which
  // binaries of an older format take for damage. When false, no file is
  // recycled whatever recycle_segments says, and RewriteHeader writes
  // version 1.
  bool version2_headers = true;
  // The store the log belongs to: written into every segment header this
  // log writes, and checked in every header Open reads (format.h). A
  // segment whose header names another store is foreign (see Open).
  // Unknown (zeros): nothing is written or checked.
  StoreId store_id{};
  // The segment directory as log lines name it ("": as Open was given it),
  // for a directory reached through another path (/proc/self/fd/N/...).
  std::string dir_in_messages;
};

// A segment file Open set aside instead of serving it (see Open).
struct SetAsideSegment {
  enum class Why {
    kForeign,         // its header names another store
    kForeignDamaged,  // its header fails its checksum, and the store id in
                      // it is far from this store's (format.h: FarApart)
    kMisnamed,        // its header is this store's, for another segment id
  };
  uint32_t id = 0;  // in its file name
  Why why = Why::kForeign;
  StoreId store_id{};      // the store its header names
  uint32_t header_id = 0;  // the segment its header names (kMisnamed)
  uint64_t size = 0;       // of the file
};

struct SegmentInfo {
  uint32_t id = 0;
  Stream stream = Stream::kHot;
  bool open = false;           // currently appended to
  uint64_t size = 0;           // bytes in the segment, header and buffer included
  uint64_t live_bytes = 0;     // bytes of records still referenced
  uint64_t garbage_bytes = 0;  // size - header - live
  // live_bytes fell to zero by releases since the counts were installed (a
  // zero installed at open or from a checkpoint does not count).
  bool emptied = false;
  bool damaged = false;        // the header is bad: never scanned or collected
  uint64_t create_time = 0;    // from the segment header (seconds since the epoch); 0 if damaged
  // Highest seq known to be in the segment, 0 if unknown. A hint for the
  // segment's age only: learned from Append, from the records Open scans
  // (the newest segment of each stream), from ScanSegment and from AddLive.
  uint64_t max_seq = 0;
  bool recycled = false;       // its file held an earlier segment (format.h: base_seq)
  StoreId store_id{};          // from the header (zeros: unknown, or damaged)
};

struct Stats {
  uint64_t records_appended = 0;
  uint64_t bytes_appended = 0;     // record bytes, headers included
  uint64_t records_read = 0;
  uint64_t records_in_place = 0;   // ... of which left in a shared read buffer (in_place)
  uint64_t shared_buffers = 0;     // shared read buffers referenced now (kSharedReadBuffers)
  uint64_t bytes_read = 0;         // bytes requested from segment files
  uint64_t preads = 0;             // file reads by Read/ReadMany (one per run of adjacent records)
  uint64_t checksum_errors = 0;    // records that failed verification
  bool sync_failed = false;        // a sync failed; every later Sync fails (Sync())
  uint64_t segments_deleted = 0;   // by DeleteSegment
  uint64_t bytes_freed = 0;        // sizes of the deleted segment files
  uint64_t unfinished_removed = 0;  // segment files shorter than a header, removed by Open
  uint64_t unfinished_kept = 0;     // ... left in place and skipped by a read-only Open
  uint64_t segments_recycled = 0;   // new segments that reused a deleted one's file
  uint64_t free_files = 0;          // deleted segments' files kept for that now
  uint64_t free_file_bytes = 0;     // ... and their bytes
};

struct StreamHead {
  uint32_t segment = 0;
  uint64_t offset = 0;
  bool operator==(const StreamHead&) const = default;
};

// One request of ReadMany.
struct ReadRequest {
  BlockPtr ptr;
  uint64_t inode = 0;  // expected owner
  uint64_t block = 0;  // expected block number
  char* buf = nullptr; // receives ptr.length bytes (garbage if the read fails)
  Status status;       // per-request result
  // A hint's read (prefetch), whose pointer may have gone stale since it was
  // looked up: a failure is returned but neither logged nor counted.
  bool quiet = false;
  // Prefetcher::Read only (ReadMany ignores it): when set, the data is
  // handed over instead of copied: on success *ref holds exactly ptr.length
  // bytes (shared with the cache) and buf, which may be null, is not used.
  RecordRef* ref = nullptr;
  // ReadMany only: when set, ReadMany may leave the data where a direct read
  // put it instead of copying it into buf: on success *in_place then holds
  // exactly ptr.length bytes, buf is untouched, and in_place_share is this
  // record's part of the shared read buffer (at least ptr.length bytes),
  // which stays allocated while any record in it is referenced. Otherwise
  // *in_place stays null and the data is in buf.
  RecordRef* in_place = nullptr;
  uint64_t in_place_share = 0;
  // Prefetcher::Read only: the record, if read from the log, is not kept in
  // the cache (the caller takes all of it and keeps it: the kernel's page
  // cache holds a FUSE file's bytes once a READ has returned them).
  bool once = false;
};

// Callback of ScanSegment: a record at `ptr` with its header and data. A
// record that fails verification is reported with a non-OK status (data
// may be empty). Return false to stop; after a damaged record, true goes on
// at the next whole record (see ScanSegment).
using ScanFn = std::function<bool(const BlockPtr& ptr, const RecordHeader& h,
                                  std::string_view data, const Status& st)>;

// A set of streams: bit i is Stream i.
using StreamMask = uint32_t;
constexpr StreamMask kAllStreams = (1u << kNumStreams) - 1;
// Sync(kNoStreams) makes durable what was already written (every record a
// metadata batch can point to) without writing any append buffer.
constexpr StreamMask kNoStreams = 0;
constexpr StreamMask MaskOf(Stream s) { return 1u << static_cast<int>(s); }

// Disk space the vLog holds for records not yet written (ValueLog::Reusable):
// the files kept for recycling, which any stream's next segment takes, and
// per stream the unwritten rest of the recycled file its open segment took,
// which only that stream's records fill.
struct ReusableSpace {
  uint64_t kept = 0;
  uint64_t tails[kNumStreams] = {};
  // kept plus the tails of `streams`.
  uint64_t Of(StreamMask streams) const {
    uint64_t n = kept;
    for (int i = 0; i < kNumStreams; i++) {
      if (streams & (1u << i)) n += tails[i];
    }
    return n;
  }
  uint64_t Tail(Stream s) const { return tails[static_cast<int>(s)]; }
};

class ValueLog {
 public:
  // Opens (creating if missing, mode 0700) the segment directory `dir`.
  // Reads every segment header, learns the highest sequence number by
  // scanning the newest segment of each stream, and starts new segments for
  // appends. All live counts start at zero (see AddLive). A segment whose
  // header is bad is logged and kept as damaged: never appended to, scanned
  // or collected, while reads still verify each record on its own (see
  // RewriteHeader). A file shorter than a header (a crash while creating
  // it) is removed, or with options.read_only left in place and skipped;
  // likewise a torn last record of a stream's newest segment is cut off
  // (CutTornTail), or with read_only left in place. A segment whose header
  // names a store other than options.store_id (both known) is foreign, and
  // one whose header is this store's but names another segment id is
  // misnamed (renamed by hand: a segment file never carries another
  // segment's header otherwise). Either is set aside: left alone and not
  // opened as a segment (its records are never read, scanned or collected,
  // its id never handed out), only listed by SetAsideSegments(); a pointer
  // into it reads as a missing segment.
  // Errors opening a segment file fail Open.
  static Status Open(const Options& options, const std::string& dir,
                     std::unique_ptr<ValueLog>* out);
  ~ValueLog();  // Flushes buffers (errors are logged).

  // Appends a record for (inode, block) with `data` to `stream` and returns
  // where it lives. data.size() <= kMaxRecordData (else InvalidArgument).
  // A record that does not fit the open segment's remaining room goes to a
  // fresh segment; a record larger than segment_size gets a segment alone.
  // flags: record flags (format.h), e.g. kRecordRelocated for GC copies.
  Status Append(Stream stream, uint64_t inode, uint64_t block, std::string_view data,
                BlockPtr* ptr, uint8_t flags = 0);

  // Reads the record at ptr into buf (ptr.length bytes), checking magic,
  // checksum, length, inode, block and seq. Mismatch: Corruption (EIO), the
  // location is logged and counted. Unknown segment or offset past the end:
  // Corruption too.
  Status Read(const BlockPtr& ptr, uint64_t inode, uint64_t block, char* buf);

  // Like Read, but the data is discarded and a mismatch is neither logged
  // nor counted: for callers asking whether a record they appended is still
  // there (GC, after a failed write may have dropped it).
  Status Probe(const BlockPtr& ptr, uint64_t inode, uint64_t block);

  // Reads several records; requests whose records are physically adjacent
  // in the same segment are served by one pread. Returns the first error;
  // each request's own status says which failed.
  Status ReadMany(std::span<ReadRequest> reqs);

  // Writes the append buffers of `streams` (a StreamMask; default all) to
  // their segment files. A caller flushes the streams it appended to, so a
  // failed write of another stream's buffer (e.g. the collector's copies on
  // a full disk) neither fails nor drops its records.
  Status Flush(StreamMask streams = kAllStreams);
  // Flush(streams), then fdatasync every segment written since the last
  // Sync and fsync the directory if segments were created. A failed
  // fdatasync or directory fsync is latched: this and every later Sync
  // return it until the log is opened again.
  Status Sync(StreamMask streams = kAllStreams);
  // Sync() that also returns the heads (see Heads()) as each stream's
  // flush left them, taken under the stream's lock: every record before a
  // head is durable on success. Heads() then Sync() is not the same: a
  // failed flush in between (another thread's, e.g. the collector's on a
  // full disk) drops records and their offsets are written again, so a
  // head taken before could lie past records written after it.
  Status SyncHeads(std::vector<StreamHead>* heads);
  // Sync(), then fdatasync every segment file and fsync the directory,
  // whatever this process wrote: after a crash of an earlier process, what
  // it wrote may still be only in the page cache. Crash recovery calls it
  // before a checkpoint declares those segments durable.
  Status SyncAll();

  // The record at ptr is no longer referenced: its bytes become garbage
  // (nothing to do when its segment was deleted meanwhile).
  void Release(const BlockPtr& ptr);
  // A record this caller appended but will never reference (its write or
  // its metadata failed): released, unless a failed buffer write already
  // dropped it, which took it back (so it is never released twice). A
  // record still in the append buffer is released when the buffer is
  // written, or goes with it if that write fails. Once per record.
  void Discard(const BlockPtr& ptr, uint64_t inode, uint64_t block);
  // Counts the record at ptr as live (rebuilding counts at mount).
  void AddLive(const BlockPtr& ptr);
  // Zeroes every live count (before a rebuild with AddLive).
  void ResetLive();
  // Sets one segment's live count and age hint to values persisted at a
  // clean shutdown (instead of a rebuild). False if the segment is unknown
  // or live_bytes exceeds its payload: the caller then rebuilds.
  bool RestoreLive(uint32_t id, uint64_t live_bytes, uint64_t max_seq);

  // How many append buffers of `streams` were dropped after a failed
  // write. A Flush or Sync that returns OK does not prove that records
  // appended earlier by this caller reached the file: another thread's
  // failed flush of the same stream may have dropped them. Callers compare
  // the count taken before their first Append with the value after their
  // Flush/Sync, for the streams they appended to; a change means failure.
  uint64_t DropCount(StreamMask streams = kAllStreams) const;

  std::vector<SegmentInfo> Segments() const;
  Stats stats() const;
  // Total bytes of all segment files (buffers included).
  uint64_t TotalBytes() const;
  // Disk space the vLog holds for data not yet written, which TotalBytes
  // does not count: the files kept for recycling (Options::recycle_segments),
  // which any stream's next segment takes, and the unwritten rest of the
  // recycled files that the open segments of `tails` took, which only
  // records of that stream fill. New records go there before the store
  // grows, so to whoever accounts for the store's space it is free.
  uint64_t ReusableBytes(StreamMask tails = kAllStreams) const { return Reusable().Of(tails); }
  // The same, by stream, in one pass.
  ReusableSpace Reusable() const;
  // Removes the files kept for recycling, giving their space back to the
  // disk (for whoever needs it more than the next segment: the metadata
  // store on a nearly full disk). Returns how many were removed; the
  // removals become durable at the next Sync().
  size_t DropKeptFiles();
  // Sum of the segments' live bytes.
  uint64_t LiveBytes() const;
  // Garbage bytes of the sealed, undamaged segments: what GC can reclaim.
  uint64_t CollectableGarbage() const;

  // Reads segment `id` front to back (sequentially, fadvise SEQUENTIAL),
  // calling fn for each record; for fsck and GC. An open segment's append
  // buffer is flushed first. A torn or damaged record is reported through fn
  // (ptr.offset: where it starts) and ends the scan with OK, unless fn
  // returns true for a damaged one: then the scan goes on at the next whole
  // record that verifies (found by its magic), whose offset tells where the
  // damage ends, or ends if there is none. The return value is non-OK only
  // for an unknown segment (NotFound), a damaged segment header
  // (Corruption) or an I/O error.
  // `from` (a record boundary, e.g. a StreamHead offset) skips the records
  // before it.
  Status ScanSegment(uint32_t id, const ScanFn& fn, uint64_t from = 0);

  // If the record at `offset` of sealed segment `id` is torn (the file
  // ends inside it: a crash cut the last append), truncates the segment
  // there so that GC and fsck scan it cleanly. A complete record, damaged
  // bytes, an open or damaged segment: nothing happens. For crash recovery,
  // before any reader or GC runs. since_checkpoint: offset is at or past a
  // checkpoint head (recovery's replay scan); then, in a recycled segment,
  // a record there that is not whole and of this life is cut even when
  // whole records of this life follow them: pages written after the last
  // sync reach the disk in any order. (Damage to records a later fsync
  // synced looks the same and is cut too; pointers into what was cut then
  // fail their reads, and fsck reports them.)
  Status CutTornTail(uint32_t id, uint64_t offset, bool since_checkpoint = false);

  // Where each stream appends next: the open segment and its size (append
  // buffer included). With MaxSegmentId() this is a vLog head checkpoint:
  // after a crash, the records appended since are those at or past a head
  // offset of its segment, plus every record of a segment with a larger id.
  std::vector<StreamHead> Heads() const;
  uint32_t MaxSegmentId() const;  // 0 if no segment was ever created
  // New segments get ids above max_used: a checkpoint's MaxSegmentId may
  // name a segment whose file is gone (an unfinished one Open removed).
  void ReserveSegmentIds(uint32_t max_used);

  // Deletes sealed segment `id`: it leaves the segment map (later reads of
  // pointers into it return Corruption, its id is never handed out again by
  // this ValueLog) and its file is removed through the Env. Readers that
  // already located the segment finish normally (the descriptor stays valid
  // until they drop it). The removal becomes durable at the next Sync(),
  // which syncs the directory. The caller guarantees that nothing durable
  // points into the segment and that no reader can still follow such a
  // pointer (GC: after the pointer swap and GcIndex::Quiesce). Damaged
  // segments may be deleted too. With Options::recycle_segments the file
  // may instead be renamed to a free file (format.h: FreeFileName), which a
  // later segment overwrites: a reader that still followed an old pointer
  // then fails its record check, it never gets another record's bytes.
  // Errors: NotFound for an unknown id; errno EBUSY for a segment a stream
  // still appends to (see SealStream); an I/O error removing the file keeps
  // the segment as it was.
  Status DeleteSegment(uint32_t id);

  // Gives a sealed segment whose header is damaged a new, durable header
  // (stream cold, this id, created now); its records, each verified by its
  // own checksum, were readable before and stay so, and the segment becomes
  // collectable again. The header carries kSegmentRewritten, so the next
  // Open does not take the segment for its stream's newest. The file may
  // have been recycled, with an earlier life's records after this one's:
  // with Options::version2_headers the header's base_seq is the seq of the
  // first record (a segment's seqs rise from its first record on, and an
  // earlier life's are all lower), so scans still end where this life does
  // (unless the first record itself is the earlier life's, when this life's
  // first block never reached the disk: never too high a base, which would
  // hide live records; docs/vlog-format.md); if the first record does not
  // verify, the header is version 1. Offline
  // repair only: live counts or deletes racing with it may be lost. OK if
  // the header is fine.
  // Errors: NotFound, EBUSY for an open segment, I/O errors.
  Status RewriteHeader(uint32_t id);

  // The segments Open set aside (see Open), by id.
  std::vector<SetAsideSegment> SetAsideSegments() const;
  // Renames the file of set-aside or damaged segment `id` to `to` (outside
  // the segment directory, on the same file system; never over an existing
  // file), durably (both directories are synced), and forgets it. Offline
  // repair only, for a damaged segment no pointer names. Errors: NotFound
  // for an id that is neither, EEXIST, I/O errors (then nothing changed).
  Status MoveOut(uint32_t id, const std::string& to);
  // Takes set-aside segment `id`, whose damaged header names another store
  // (kForeignDamaged), for this log's after all, when the caller found
  // this store's records in it: writes it a header of this store, as
  // RewriteHeader does. The log serves it once opened again. Offline
  // repair only. Errors: NotFound for another id, I/O errors.
  Status Adopt(uint32_t id);
  // Gives misnamed segment `id` back the name its header gives it, durably,
  // and forgets it: the log serves it once opened again. Errors: NotFound
  // for an id that is not misnamed, EEXIST when a file has that name (then
  // nothing changed), I/O errors.
  Status NameBack(uint32_t id);
  // Renames misnamed segment `id` to a new id no file has, keeping it set
  // aside (for a cycle of renamed files: each name taken by another);
  // *to: the new id. Errors as NameBack's.
  Status RenumberMisnamed(uint32_t id, uint32_t* to);

  // Writes out the append buffer of `stream` and closes its open segment
  // (it becomes sealed and collectable); the next Append to the stream
  // starts a new segment. OK and nothing happens if the stream has no open
  // segment. On a write error the segment stays open (see Write failures).
  Status SealStream(Stream stream);

  // Highest sequence number handed out (or learned at Open); 0 if none.
  uint64_t LastSeq() const;
  // Makes the next sequence number greater than seq (e.g. a seq recorded in
  // the metadata whose segment has since been deleted).
  void EnsureSeqAbove(uint64_t seq);

  const std::string& dir() const;

  class Impl;

 private:
  explicit ValueLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sepfs::vlog
