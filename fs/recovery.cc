// Filesystem: segment live counts at mount, crash recovery from the last
// vLog head checkpoint, and writing checkpoints (docs/durability.md).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "fs/clock.h"
#include "fs/filesystem.h"

namespace sepfs::fs {

// Pointers that name records a power loss took: the record lies past the
// end of what survived of its segment, or its segment is gone, and the
// last checkpoint did not declare it durable (VlogHeads::Durable). Each is
// dropped (the block becomes a hole), logged, and taken off its inode's
// st_blocks; Commit writes it all in one synced batch.
class Filesystem::LostPointers {
 public:
  LostPointers(kv::MetaStore* meta, const std::vector<vlog::SegmentInfo>& segs) : meta_(meta) {
    for (const auto& seg : segs) size_[seg.id] = seg.size;
  }

  // Whether `segment` survived up to byte `end`.
  bool Reaches(uint32_t segment, uint64_t end) const {
    auto it = size_.find(segment);
    return it != size_.end() && end <= it->second;
  }
  bool Intact(const vlog::BlockPtr& p) const {
    return Reaches(p.segment, p.offset + p.record_size());
  }

  // Whether `segment` is there at all.
  bool Knows(uint32_t segment) const { return size_.count(segment) != 0; }

  void Drop(std::string_view key, const vlog::BlockPtr& p) {
    uint64_t ino = 0, block = 0;
    (void)kv::ParseBlockKey(key, &ino, &block);
    if (dropped_.size() < kNamed) {
      std::fprintf(stderr,
                   "sepfs: recovery: inode %llu block %llu was never written to segment %u "
                   "(lost in a crash before fsync); it reads as zeros now%s\n",
                   static_cast<unsigned long long>(ino), static_cast<unsigned long long>(block),
                   p.segment, dropped_.size() + 1 == kNamed ? " (further ones not named)" : "");
    }
    b_.Delete(key);
    dropped_.push_back(p);
    sectors_[ino] += SectorsOf(p.length);
  }

  // journal: records the drops (nullptr when a checkpoint of a recount follows).
  Status Commit(LiveJournal* journal) {
    if (dropped_.empty()) return Status::OK();
    for (const auto& [ino, sectors] : sectors_) {
      kv::InodeRecord r;
      Status st = meta_->GetInode(ino, &r);
      if (st.IsNotFound()) continue;  // fsck reports the stray pointers' owner
      SEPFS_RETURN_IF_ERROR(st);
      r.blocks -= std::min(r.blocks, sectors);
      b_.PutInode(r);
    }
    LiveJournal::Entry e;
    if (journal != nullptr) e = journal->Note(&b_, {}, dropped_, {});
    SEPFS_RETURN_IF_ERROR(meta_->Write(&b_, /*sync=*/true));
    if (journal != nullptr) journal->Commit(e);
    std::fprintf(stderr, "sepfs: recovery: dropped %zu block pointers to lost records\n",
                 dropped_.size());
    return Status::OK();
  }

  uint64_t dropped() const { return dropped_.size(); }

 private:
  static constexpr size_t kNamed = 20;  // drops named one by one in the log
  kv::MetaStore* const meta_;
  std::unordered_map<uint32_t, uint64_t> size_;
  kv::Batch b_;
  std::vector<vlog::BlockPtr> dropped_;
  std::unordered_map<uint64_t, uint64_t> sectors_;  // ino -> st_blocks to subtract
};

Status Filesystem::StartCounts(bool clean, const std::string& store_dir) {
  const uint64_t t0 = MonotonicMicros();
  const bool recover = !clean && !options_.read_only;
  RecoveryReport& rep = recovery_;
  rep.unclean = !clean;
  LoadedCounts lc;
  SEPFS_RETURN_IF_ERROR(LoadCounts(meta_, &lc));
  // Checkpoint ids stay taken even if the file is gone, so replay's "every
  // id up to max_segment is older than the checkpoint" holds.
  if (lc.have_checkpoint) vlog_->ReserveSegmentIds(lc.heads.max_segment);
  rep.journal_entries = lc.entry_numbers.size();
  const bool have = lc.have_checkpoint && lc.consistent;
  journal_ = std::make_unique<LiveJournal>(have ? lc.live : std::map<uint32_t, uint64_t>{},
                                           lc.entry_numbers);
  // The records appended since the checkpoint, read before any pointer is
  // checked: the scan cuts the segments' torn tails, and the sizes it
  // leaves are what the pointer checks compare with.
  std::vector<ReplayCandidate> cands;
  if (recover && have) SEPFS_RETURN_IF_ERROR(ScanSinceHeads(lc.heads, &cands));
  // After a crash a pointer written since the checkpoint may name a record
  // that never reached its segment; the journal says which inodes to check.
  if (have && recover) SEPFS_RETURN_IF_ERROR(DropLostPointers(lc));
  if (!have || !InstallCounts(journal_->live(), lc.ages)) {
    rep.full_recount = true;
    std::map<uint32_t, uint64_t> live;
    SEPFS_RETURN_IF_ERROR(RebuildLiveCounts(recover, lc.heads, &rep.pointers_checked,
                                            &rep.pointers_dropped, &live));
    for (const auto& seg : vlog_->Segments()) {
      if (seg.live_bytes > 0) live[seg.id] = seg.live_bytes;
    }
    journal_->Rebase(std::move(live));
  }
  if (recover && have) SEPFS_RETURN_IF_ERROR(Replay(std::move(cands)));
  if (!options_.read_only && (recover || rep.full_recount)) {
    // The checkpoint declares every segment up to its highest id durable
    // (replay skips them after the next crash); a killed process may have
    // left their bytes in the page cache only.
    if (recover) SEPFS_RETURN_IF_ERROR(vlog_->SyncAll());
    SEPFS_RETURN_IF_ERROR(WriteCheckpoint(/*clean=*/false));
  }
  rep.micros = MonotonicMicros() - t0;
  if (recover || rep.full_recount) {
    std::fprintf(stderr,
                 "sepfs: %s: %s: %llu journal entries, %llu vLog records (%llu KiB) past the "
                 "checkpoint, %llu pointers replayed, %llu dropped, %s%llu block pointers "
                 "checked, in %.1f ms\n",
                 store_dir.c_str(), recover ? "recovery" : "counting segments",
                 static_cast<unsigned long long>(rep.journal_entries),
                 static_cast<unsigned long long>(rep.records_scanned),
                 static_cast<unsigned long long>(rep.bytes_scanned >> 10),
                 static_cast<unsigned long long>(rep.pointers_replayed),
                 static_cast<unsigned long long>(rep.pointers_dropped),
                 rep.full_recount ? "full recount: " : "",
                 static_cast<unsigned long long>(rep.pointers_checked), rep.micros / 1000.0);
  }
  return Status::OK();
}

bool Filesystem::InstallCounts(const std::map<uint32_t, uint64_t>& live,
                               const std::map<uint32_t, uint64_t>& ages) {
  const std::vector<vlog::SegmentInfo> segs = vlog_->Segments();
  std::set<uint32_t> exists;
  for (const auto& seg : segs) exists.insert(seg.id);
  // Live bytes in a segment the store lacks: the counts do not describe it.
  for (const auto& [id, bytes] : live) {
    if (!exists.count(id)) return false;
  }
  vlog_->ResetLive();
  for (const auto& seg : segs) {
    auto l = live.find(seg.id);
    auto a = ages.find(seg.id);
    if (!vlog_->RestoreLive(seg.id, l == live.end() ? 0 : l->second,
                            a == ages.end() ? 0 : a->second)) {
      vlog_->ResetLive();
      return false;
    }
  }
  return true;
}

// Only segments that an entry since the checkpoint names past what survived
// of them (or that are gone) can hold such records, and only the entries'
// owners can point there: their pointers are checked, nobody else's.
Status Filesystem::DropLostPointers(const LoadedCounts& lc) {
  LostPointers lost(meta_, vlog_->Segments());
  std::set<uint64_t> suspects;
  for (const auto& [id, end] : lc.max_end) {
    if (lost.Reaches(id, end)) continue;
    auto o = lc.owners.find(id);
    if (o != lc.owners.end()) suspects.insert(o->second.begin(), o->second.end());
  }
  for (uint64_t ino : suspects) {
    SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(
        kv::BlockPrefix(ino), [&](std::string_view key, std::string_view value) {
          vlog::BlockPtr p;
          recovery_.pointers_checked++;
          if (kv::DecodeBlockValue(value, &p).ok() && !lost.Intact(p) &&
              !lc.heads.Durable(p)) {
            lost.Drop(key, p);
          }
          return true;
        }));
  }
  recovery_.pointers_dropped += lost.dropped();
  return lost.Commit(journal_.get());
}

Status Filesystem::RebuildLiveCounts(bool unclean, const VlogHeads& checkpoint,
                                     uint64_t* checked, uint64_t* dropped,
                                     std::map<uint32_t, uint64_t>* missing) {
  vlog_->ResetLive();
  // After an unclean shutdown, pointers to records a power loss took are
  // dropped (see LostPointers); intact pointers are counted live.
  LostPointers lost(meta_, vlog_->Segments());
  std::map<uint32_t, uint64_t> pointers;  // missing segment -> pointers into it
  SEPFS_RETURN_IF_ERROR(meta_->ScanAllBlocks(
      [&](std::string_view key, uint64_t, uint64_t, const kv::BlockValue& v) {
        ++*checked;
        if (v.inlined) return true;
        const vlog::BlockPtr& p = v.ptr;
        if (unclean && !lost.Intact(p) && !checkpoint.Durable(p)) {
          lost.Drop(key, p);
        } else if (lost.Knows(p.segment)) {
          vlog_->AddLive(p);
        } else {
          pointers[p.segment]++;
          (*missing)[p.segment] += p.record_size();
        }
        return true;
      }));
  // A segment the checkpoint declared durable that is gone now was taken
  // from the store, not lost in a crash: its pointers stay for fsck to
  // report, and read as errors, not zeros (a restored file serves them
  // again, and the checkpoint's counts include it).
  for (const auto& [id, n] : pointers) {
    std::fprintf(stderr,
                 "sepfs: %s: %llu block pointers name segment %u, whose file is missing: "
                 "their blocks fail with EIO (sepfs fsck --repair makes them holes)\n",
                 store_->dir().c_str(), static_cast<unsigned long long>(n), id);
  }
  *dropped += lost.dropped();
  // Not journaled: the checkpoint of this recount follows; a crash before it
  // leaves the old entries, which send the next mount here again.
  return lost.Commit(nullptr);
}

// Records appended after the checkpoint whose pointer batch was lost (the
// LevelDB log tail did not survive a power loss, or the daemon died between
// the vLog write and the batch) are installed again when that is safe:
//   - GC copies never are (a copy may have lost its compare-and-set), nor
//     a truncation's shortened last block (without its batch, which may
//     also have failed, it would zero bytes the old size covers);
//   - the block must still have a pointer, to an older record: a pointer
//     that is absent was never written (the block's data was not durable)
//     or was removed by a truncate, hole punch or unlink that survived,
//     and must stay removed;
//   - the inode must be a regular file whose size covers the record.
// Among several records of one block the highest sequence number wins.
// ScanSinceHeads reads them (and cuts torn tails); Replay installs them.
Status Filesystem::ScanSinceHeads(const VlogHeads& heads, std::vector<ReplayCandidate>* cands) {
  std::vector<std::pair<uint32_t, uint64_t>> tails;  // (segment, offset) where a scan failed
  RecoveryReport& rep = recovery_;
  for (const auto& seg : vlog_->Segments()) {
    if (seg.damaged) continue;
    uint64_t from = 0;
    if (seg.id <= heads.max_segment) {
      auto h = std::find_if(heads.heads.begin(), heads.heads.end(),
                            [&](const vlog::StreamHead& x) { return x.segment == seg.id; });
      if (h == heads.heads.end()) continue;  // sealed and synced before the checkpoint
      from = h->offset;
    }
    SEPFS_RETURN_IF_ERROR(vlog_->ScanSegment(
        seg.id,
        [&](const vlog::BlockPtr& p, const vlog::RecordHeader& h, std::string_view,
            const Status& st) {
          if (!st.ok()) {  // a torn or damaged tail ends the segment
            tails.push_back({p.segment, p.offset});
            return false;
          }
          rep.records_scanned++;
          rep.bytes_scanned += p.record_size();
          if (!(h.flags & vlog::kRecordNeverReplayed)) cands->push_back({h.inode, h.block, p});
          return true;
        },
        from));
  }
  // A segment sealed since the checkpoint may end in an append a power loss
  // tore (ValueLog::Open cuts only each stream's newest segment); cut it, or
  // GC could never scan the segment to the end and collect it. Pointers
  // into the tear are dropped next (DropLostPointers compares them with the
  // sizes left here).
  for (const auto& [id, offset] : tails) {
    SEPFS_RETURN_IF_ERROR(vlog_->CutTornTail(id, offset, /*since_checkpoint=*/true));
  }
  return Status::OK();
}

Status Filesystem::Replay(std::vector<ReplayCandidate> cands) {
  RecoveryReport& rep = recovery_;
  std::sort(cands.begin(), cands.end(), [](const ReplayCandidate& a, const ReplayCandidate& b) {
    return a.ptr.seq < b.ptr.seq;
  });
  std::map<std::pair<uint64_t, uint64_t>, vlog::BlockPtr> current;  // installed here
  std::map<uint64_t, kv::InodeRecord> inodes;                        // changed here
  std::vector<vlog::BlockPtr> added, removed;
  kv::Batch b;
  for (const ReplayCandidate& c : cands) {
    const auto key = std::make_pair(c.ino, c.block);
    vlog::BlockPtr cur;
    auto it = current.find(key);
    if (it != current.end()) {
      cur = it->second;
    } else {
      std::string raw;
      Status st = meta_->Get(kv::BlockKey(c.ino, c.block), &raw);
      if (st.IsNotFound()) continue;
      SEPFS_RETURN_IF_ERROR(st);
      // Inline data (not a pointer) is never replaced: it cannot be ordered
      // against the record, and keeping it loses only data never fsync'd.
      // An undecodable value is fsck's to report.
      if (!kv::DecodeBlockValue(raw, &cur).ok()) continue;
    }
    if (cur.seq >= c.ptr.seq) continue;  // the same record, or a newer one
    auto in = inodes.find(c.ino);
    if (in == inodes.end()) {
      kv::InodeRecord r;
      Status st = meta_->GetInode(c.ino, &r);
      if (st.IsNotFound()) continue;
      SEPFS_RETURN_IF_ERROR(st);
      in = inodes.emplace(c.ino, r).first;
    }
    kv::InodeRecord& r = in->second;
    if (!S_ISREG(r.mode) || c.block * block_size_ + c.ptr.length > r.size) continue;
    b.PutBlock(c.ino, c.block, c.ptr);
    added.push_back(c.ptr);
    removed.push_back(cur);
    r.blocks = r.blocks - std::min(r.blocks, SectorsOf(cur.length)) + SectorsOf(c.ptr.length);
    current[key] = c.ptr;
  }
  if (added.empty()) return Status::OK();
  for (const auto& [ino, r] : inodes) b.PutInode(r);
  std::vector<uint64_t> owners;
  for (const auto& [ino, r] : inodes) owners.push_back(ino);
  const LiveJournal::Entry e = journal_->Note(&b, added, removed, owners);
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, /*sync=*/true));
  journal_->Commit(e);
  for (const auto& p : added) vlog_->AddLive(p);
  for (const auto& p : removed) vlog_->Release(p);
  rep.pointers_replayed = added.size();
  std::fprintf(stderr,
               "sepfs: recovery: replayed %zu block pointers lost with the metadata log tail "
               "(their records survived in the vLog)\n",
               added.size());
  return Status::OK();
}

Status Filesystem::WriteCheckpoint(bool clean) {
  std::lock_guard<std::mutex> cl(checkpoint_mu_);
  // Most of the data first, without holding up writers; then, with pointer
  // changes held off, the heads and whatever was appended before them.
  SEPFS_RETURN_IF_ERROR(vlog_->Sync());
  PtrLocks::All pl(&ptr_locks_);
  VlogHeads heads;
  // The highest id first: a segment created after it is replayed whole.
  heads.max_segment = vlog_->MaxSegmentId();
  SEPFS_RETURN_IF_ERROR(vlog_->SyncHeads(&heads.heads));
  kv::Batch b;
  const size_t folded = journal_->PutCheckpoint(&b, vlog_->Segments(), heads);
  b.Put(kv::CounterKey(kLifetimeCounter), EncodeLifetime(Lifetime()));
  if (clean) b.Put(kv::CounterKey("clean"), kv::EncodeCounter(1));
  SEPFS_RETURN_IF_ERROR(meta_->Write(&b, /*sync=*/true));
  journal_->CheckpointWritten(folded);
  checkpoint_appended_ = vlog_->stats().bytes_appended;
  checkpoints_++;
  return Status::OK();
}

Status Filesystem::Checkpoint() { return WriteCheckpoint(/*clean=*/false); }

bool Filesystem::CheckpointDue() {
  std::lock_guard<std::mutex> cl(checkpoint_mu_);
  return vlog_->stats().bytes_appended - checkpoint_appended_ >= options_.checkpoint_bytes ||
         journal_->entries_since_checkpoint() >= options_.checkpoint_entries;
}

}  // namespace sepfs::fs
