// Internal to vlog/: one segment file's in-memory state, record checking,
// and a sequential record reader. Not part of the public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "vlog/env.h"
#include "vlog/atomic_bound.h"
#include "vlog/format.h"
#include "vlog/status.h"

namespace sepfs::vlog::internal {

// A segment file. id, stream, file and damage are fixed once the segment is
// published in the ValueLog's segment map; the counters are atomics.
struct Segment {
  uint32_t id = 0;
  Stream stream = Stream::kHot;
  std::unique_ptr<File> file;  // null if the file could not be opened
  // Non-OK: the header is bad. Never appended to, scanned or collected;
  // reads still verify each record on its own.
  Status damage;
  uint64_t create_time = 0;    // from the header
  StoreId store_id{};          // from the header (zeros: unknown)
  bool rewritten = false;      // header flag kSegmentRewritten
  // From the header: nonzero if the file was recycled (format.h); records
  // with a lower seq are an earlier life's and end the segment.
  uint64_t base_seq = 0;
  // Length of the recycled file when this segment took it (0: a new file),
  // for the space accounting (ValueLog::ReusableBytes); lowered before any
  // cut of the file.
  std::atomic<uint64_t> taken_bytes{0};

  // The file is about to be cut to `len` bytes.
  void NoteCut(uint64_t len) { LowerAtMost(taken_bytes, len, std::memory_order_relaxed); }
  // Bytes of the segment, header and append buffer included. Only grows,
  // except when a failed flush drops the buffered tail.
  std::atomic<uint64_t> size{0};
  // Bytes known to be in the file; a record ending at or before this offset
  // can be pread without the stream lock. Stored with release ordering after
  // the write completed.
  std::atomic<uint64_t> flushed{0};
  std::atomic<uint64_t> live{0};
  // live fell from above zero to zero by releases since the counts were
  // installed (Open, ResetLive, RestoreLive): nothing in the segment is
  // referenced. A zero installed from a checkpoint an older binary left
  // stale proves nothing, so GC reads such a segment (vlog/gc_job.h).
  std::atomic<bool> emptied{false};
  std::atomic<bool> open{false};        // the stream currently appends here
  std::atomic<bool> needs_sync{false};  // written since the last fdatasync
  // Highest seq known to be in the segment (0: unknown); a hint for GC.
  std::atomic<uint64_t> max_seq{0};

  // Raises max_seq to at least seq.
  void NoteSeq(uint64_t seq) { RaiseAtLeast(max_seq, seq, std::memory_order_relaxed); }

  bool damaged() const { return !damage.ok(); }
  bool recycled() const { return base_seq != 0; }
};

// Checks a record's raw header (kRecordHeaderSize bytes) and its data
// (ptr.length bytes, which need not follow the header in memory) against
// everything the pointer and the caller expect: magic, version, length,
// inode, block, seq and checksum. Corruption names segment and offset.
Status CheckRecord(const BlockPtr& ptr, uint64_t inode, uint64_t block, const char* header,
                   const char* data);

// Reads the records of a segment file front to back, in large chunks.
class SegmentReader {
 public:
  // Reads the records in [start, limit) of file (start is a record boundary,
  // at least kSegmentHeaderSize); chunk is the read size. base_seq: the
  // segment's (nonzero if its file was recycled).
  SegmentReader(File* file, uint32_t segment_id, uint64_t base_seq, uint64_t limit,
                size_t chunk = 1u << 20, uint64_t start = kSegmentHeaderSize);

  // The next record. OK with *at_end == false: h and data are filled (data
  // stays valid until the next call). OK with *at_end: no bytes left.
  // Corruption: the record at offset() is torn or damaged; h holds whatever
  // header fields could be decoded. Other errors are I/O errors.
  Status Next(RecordHeader* h, std::string_view* data, bool* at_end);
  // Offset of the record the last Next() returned or failed on.
  uint64_t offset() const { return record_off_; }
  // The last Corruption was a record cut short by the end of the file (a
  // write torn by a crash), not damaged bytes. In a recycled segment, where
  // an earlier life's bytes may follow the last record, a record that is
  // not whole and of this life (seq >= base_seq) is torn when no whole
  // record of this life follows it; otherwise it is damage.
  bool torn() const { return torn_; }
  // After a Corruption: moves on to the next whole, verified record (of
  // this life) after the damaged one, or to the end if there is none; the
  // next Next() returns it. Non-OK only for an I/O error (then at the end).
  Status SkipDamage();

 private:
  Status Fill(uint64_t need);
  std::string Where() const;
  // A whole, verified record (of this life, in a recycled segment) starts
  // somewhere in [from, limit_).
  bool WholeRecordAfter(uint64_t from);
  // *at: the offset of the first whole, verified record (of this life)
  // starting in [from, limit_), else limit_. Non-OK when the file cannot
  // be read (an I/O error, or Corruption: it ends before limit_). Searches
  // chunk by chunk for the record magic. Moves pos_.
  Status FindWholeRecord(uint64_t from, uint64_t* at);
  // *whole: a whole record of this life that verifies starts at `at`.
  // Non-OK as FindWholeRecord. Moves pos_.
  Status WholeRecordAt(uint64_t at, bool* whole);
  // st, a Corruption of the record at pos_; in a recycled segment, marked
  // torn when it ends this life's records (see torn()).
  Status EndOfLife(Status st);

  File* const file_;
  const uint32_t id_;
  const uint64_t base_seq_;
  const uint64_t limit_;
  const size_t chunk_;
  std::string window_;      // file bytes starting at window_off_
  uint64_t window_off_ = 0;
  uint64_t pos_ = kSegmentHeaderSize;
  uint64_t record_off_ = kSegmentHeaderSize;
  bool torn_ = false;
};

}  // namespace sepfs::vlog::internal
