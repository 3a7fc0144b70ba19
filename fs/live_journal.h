// LiveJournal: per-segment live byte counts that stay exact across crashes,
// and the vLog head checkpoint that bounds crash recovery.
//
// The ValueLog keeps the live counts in memory; they must equal a recount of
// the block pointers in the LSM (fsck compares). On disk they are
//
//   base (counter "segment_live", written by the last checkpoint)
//   + the sum of the journal entries 'J' n written since.
//
// Every batch that adds or removes block pointers carries one entry with its
// per-segment deltas (Note, then Commit once the batch is written). The entry
// commits atomically with the pointers, so base + entries equals the recount
// after any crash, and a mount after a crash reads the entries written since
// the last checkpoint instead of every pointer.
//
// An entry also records, per segment, the end of the furthest record its new
// pointers reach. Recovery compares that with what survived of the segment: a
// pointer written after the last checkpoint may name a record that a power
// loss took away (only then is the slow full recount needed).
//
// A checkpoint (PutCheckpoint) folds the committed entries into a new base
// and deletes them, and stores the vLog heads: every record appended after
// the checkpoint lies past a head, or in a segment newer than max_segment.
// The caller syncs the vLog before writing it (see Filesystem::Checkpoint).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvstore/meta_store.h"
#include "vlog/value_log.h"

namespace sepfs::fs {

// Persisted per-segment fields (version byte 1, then per segment its id as 4
// bytes LE and the field as 8 bytes LE): live bytes and age hints (highest
// record sequence number).
std::string EncodeSegmentUsage(const std::vector<vlog::SegmentInfo>& segs);
Status DecodeSegmentUsage(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out);
// The same encoding of live bytes from a map segment -> bytes.
std::string EncodeLiveCounts(const std::map<uint32_t, uint64_t>& live);
std::string EncodeSegmentAges(const std::vector<vlog::SegmentInfo>& segs);
Status DecodeSegmentAges(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out);
// Counter keys of the checkpoint. ("segment_usage", the clean-unmount-only
// counter of earlier versions, is deleted by every checkpoint; found beside
// one, it tells that an earlier binary used the store since: LoadCounts
// then reports no checkpoint, and the mount recounts.)
constexpr std::string_view kSegmentUsageCounter = "segment_live";
constexpr std::string_view kSegmentAgeCounter = "segment_age";
constexpr std::string_view kVlogHeadsCounter = "vlog_heads";
constexpr std::string_view kOldSegmentUsageCounter = "segment_usage";

// One segment's change in a journal entry.
struct SegmentDelta {
  uint32_t segment = 0;
  int64_t bytes = 0;     // live bytes added (negative: released)
  uint64_t max_end = 0;  // end of the furthest record a new pointer names; 0 if none
  bool operator==(const SegmentDelta&) const = default;
};
// Version byte 1, the number of deltas (4 LE), per segment: id (4 LE),
// bytes (8 LE), max_end (8 LE); then the owners: the inodes whose new
// pointers the entry counts (8 LE each), so that recovery can find those
// pointers without scanning all of them.
std::string EncodeJournalEntry(const std::vector<SegmentDelta>& deltas,
                               const std::vector<uint64_t>& owners = {});
Status DecodeJournalEntry(std::string_view src, std::vector<SegmentDelta>* out,
                          std::vector<uint64_t>* owners = nullptr);

struct VlogHeads {
  uint32_t max_segment = 0;  // highest segment id at the checkpoint
  std::vector<vlog::StreamHead> heads;
  bool operator==(const VlogHeads&) const = default;
  // Whether the checkpoint declared the record at p durable: it lies in a
  // segment up to max_segment, before its stream's head if it is one. A
  // crash can take only records it did not (none, without a checkpoint:
  // max_segment 0); one of the others that is gone was damaged or removed.
  bool Durable(const vlog::BlockPtr& p) const;
};
// Version byte 1, max_segment (4 LE), then per head: segment (4 LE), offset (8 LE).
std::string EncodeVlogHeads(const VlogHeads& h);
Status DecodeVlogHeads(std::string_view src, VlogHeads* out);

// What the store holds: the last checkpoint plus the entries since.
struct LoadedCounts {
  // false: an old or repaired store, or one an old binary used since; recount
  bool have_checkpoint = false;
  bool consistent = true;        // false: a bad record or a negative sum; recount
  std::map<uint32_t, uint64_t> live;     // base + entries, by segment (nonzero only)
  std::map<uint32_t, uint64_t> ages;     // age hints of the checkpoint
  std::map<uint32_t, uint64_t> max_end;  // from the entries since the checkpoint
  // Per segment, the owners of the entries that name records in it.
  std::map<uint32_t, std::set<uint64_t>> owners;
  VlogHeads heads;
  std::vector<uint64_t> entry_numbers;  // of the entries read
};
Status LoadCounts(kv::MetaStore* meta, LoadedCounts* out);

class LiveJournal {
 public:
  // One batch's changes; Note fills it, Commit applies it.
  struct Entry {
    uint64_t n = 0;  // 0: nothing to record
    std::vector<SegmentDelta> deltas;
    std::vector<uint64_t> owners;
  };

  // Starts from persisted counts: `live` as in LoadedCounts, `entries` the
  // numbers of entries already on disk (deleted by the next checkpoint).
  LiveJournal(std::map<uint32_t, uint64_t> live, std::vector<uint64_t> entries);

  // Adds to b the entry for the pointers a batch adds and removes; owners:
  // the inodes the added pointers belong to (duplicates allowed).
  Entry Note(kv::Batch* b, std::span<const vlog::BlockPtr> added,
             std::span<const vlog::BlockPtr> removed, std::span<const uint64_t> owners);
  // The batch carrying e was written.
  void Commit(const Entry& e);

  // Puts into b a checkpoint: the committed counts as the new base, the age
  // hints of segs, heads, and the deletion of the committed entries. Returns
  // how many entries it folds in (pass it to CheckpointWritten).
  size_t PutCheckpoint(kv::Batch* b, const std::vector<vlog::SegmentInfo>& segs,
                       const VlogHeads& heads);
  void CheckpointWritten(size_t folded);

  // Replaces the counts (after a full recount); the entries stay listed.
  void Rebase(std::map<uint32_t, uint64_t> live);
  std::map<uint32_t, uint64_t> live() const;
  size_t entries_since_checkpoint() const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, uint64_t> live_;  // committed counts, nonzero only
  std::vector<uint64_t> entries_;      // committed since the checkpoint, in commit order
  uint64_t next_ = 1;
};

}  // namespace sepfs::fs
