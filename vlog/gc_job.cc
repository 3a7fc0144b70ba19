#include "vlog/gc_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>

namespace sepfs::vlog {
namespace {

// Without a batch boundary, the rate limit is checked after this much I/O.
constexpr uint64_t kThrottleStep = 1u << 20;

void Log(const std::string& msg) { std::fprintf(stderr, "sepfs gc: %s\n", msg.c_str()); }

class SteadyClock : public GcClock {
 public:
  uint64_t NowMicros() override {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  void SleepMicros(uint64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
};

class Job {
 public:
  Job(ValueLog* vlog, GcIndex* index, uint32_t victim, const GcJobOptions& o, GcJobStats* stats)
      : vlog_(vlog),
        index_(index),
        victim_(victim),
        o_(o),
        clock_(o.clock ? o.clock : GcClock::Default()),
        stats_(stats),
        start_us_(clock_->NowMicros()),
        start_seq_(vlog->LastSeq()) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  Status Run();

 private:
  struct Pending {
    Relocation r;
    std::string data;
  };

  // *dead: releases brought the victim's live count to zero (nothing to
  // read; see SegmentInfo::emptied).
  Status Check(uint64_t* victim_size, bool* dead);
  // The victim as the vLog lists it now; false if it is not listed.
  bool FindVictim(SegmentInfo* out) const;
  // Handles one intact record of the victim.
  Status OnRecord(const BlockPtr& ptr, const RecordHeader& h, std::string_view data);
  // Step 3: deletes the victim, of victim_size bytes, once no reader can
  // still follow a pointer into it.
  Status Delete(uint64_t victim_size);
  // Relocates batch_ (steps 2a-2e) and empties it.
  Status RelocateBatch();
  // Sleeps if the I/O so far is ahead of max_bytes_per_sec; unless `force`,
  // only once per kThrottleStep bytes.
  void Throttle(bool force);
  std::string Name() const { return "gc of vlog segment " + std::to_string(victim_); }

  ValueLog* const vlog_;
  GcIndex* const index_;
  const uint32_t victim_;
  const GcJobOptions& o_;
  GcClock* const clock_;
  GcJobStats* const stats_;
  const uint64_t start_us_;
  const uint64_t start_seq_;
  uint64_t throttled_us_ = 0;
  uint64_t io_at_last_throttle_ = 0;
  std::vector<Pending> batch_;
  uint64_t batch_bytes_ = 0;
};

Status Job::Check(uint64_t* victim_size, bool* dead) {
  for (Stream s : {o_.dest, o_.old_dest}) {
    const int si = static_cast<int>(s);
    if (si < 0 || si >= kNumStreams) return Status::InvalidArgument(Name() + ": bad dest stream");
  }
  SegmentInfo s;
  if (!FindVictim(&s)) return Status::NotFound(Name() + ": no such segment");
  if (s.open) return Status::FromErrno(EBUSY, Name() + ": the segment is still open");
  *victim_size = s.size;
  // Releases took every byte this process counted (a zero installed from
  // a checkpoint is not trusted: an older binary may have written segments
  // since that the checkpoint does not know). A damaged header is left to
  // the scan, which reports it.
  *dead = s.live_bytes == 0 && s.emptied && !s.damaged;
  return Status::OK();
}

bool Job::FindVictim(SegmentInfo* out) const {
  for (const SegmentInfo& s : vlog_->Segments()) {
    if (s.id != victim_) continue;
    *out = s;
    return true;
  }
  return false;
}

Status Job::OnRecord(const BlockPtr& ptr, const RecordHeader& h, std::string_view data) {
  ++stats_->records_scanned;
  stats_->bytes_scanned += ptr.record_size();
  bool live = false;
  SEPFS_RETURN_IF_ERROR(index_->IsLive(h.inode, h.block, ptr, &live));
  if (live) {
    ++stats_->live_records;
    batch_.push_back({Relocation{h.inode, h.block, ptr, {}}, std::string(data)});
    batch_bytes_ += ptr.record_size();
    if (batch_bytes_ >= o_.batch_bytes) return RelocateBatch();
  }
  Throttle(false);
  return Status::OK();
}

Status Job::RelocateBatch() {
  if (batch_.empty()) return Status::OK();
  std::vector<Pending> batch;
  batch.swap(batch_);
  batch_bytes_ = 0;
  std::sort(batch.begin(), batch.end(), [](const Pending& a, const Pending& b) {
    return std::tie(a.r.inode, a.r.block, a.r.from.seq) <
           std::tie(b.r.inode, b.r.block, b.r.from.seq);
  });
  std::vector<Relocation> relocs;
  relocs.reserve(batch.size());
  // Copies that will never be referenced become garbage (error path only).
  auto release_copies = [&] {
    for (const Relocation& r : relocs) vlog_->Discard(r.to, r.inode, r.block);
  };
  const uint64_t drops = vlog_->DropCount();
  for (Pending& p : batch) {
    const bool old = o_.old_after_seqs != 0 && p.r.from.seq <= start_seq_ &&
                     start_seq_ - p.r.from.seq >= o_.old_after_seqs;
    Status st = vlog_->Append(old ? o_.old_dest : o_.dest, p.r.inode, p.r.block, p.data,
                              &p.r.to, kRecordRelocated);
    if (!st.ok()) {
      release_copies();
      return st.WithContext(Name());
    }
    stats_->bytes_moved += p.r.to.record_size();
    relocs.push_back(p.r);
    std::string().swap(p.data);
  }
  Status st = vlog_->Sync();
  if (st.ok() && vlog_->DropCount() != drops) {
    st = Status::IOError("a failed vlog write dropped buffered records");
  }
  if (!st.ok()) {
    release_copies();
    return st.WithContext(Name() + ": syncing the copies");
  }
  std::vector<bool> swapped;
  st = index_->SwapPointers(relocs, &swapped);
  ++stats_->batches;
  if (!st.ok()) {
    release_copies();
    return st.WithContext(Name() + ": swapping pointers");
  }
  if (swapped.size() != relocs.size()) {
    // Unknown which were installed: keep every copy counted live (a leak of
    // accounting only) and keep the victim.
    return Status::IOError(Name() + ": the index answered " + std::to_string(swapped.size()) +
                           " swap results for " + std::to_string(relocs.size()) +
                           " relocations");
  }
  for (size_t i = 0; i < relocs.size(); ++i) {
    if (swapped[i]) {
      vlog_->Release(relocs[i].from);
      ++stats_->records_relocated;
    } else {
      vlog_->Release(relocs[i].to);
      ++stats_->records_lost_race;
    }
  }
  Throttle(true);
  return Status::OK();
}

void Job::Throttle(bool force) {
  if (o_.max_bytes_per_sec == 0) return;
  const uint64_t io = stats_->bytes_scanned + stats_->bytes_moved;
  if (!force && io - io_at_last_throttle_ < kThrottleStep) return;
  io_at_last_throttle_ = io;
  const auto target_us = static_cast<uint64_t>(static_cast<double>(io) * 1e6 /
                                               static_cast<double>(o_.max_bytes_per_sec));
  const uint64_t elapsed_us = clock_->NowMicros() - start_us_;
  if (target_us <= elapsed_us) return;
  clock_->SleepMicros(target_us - elapsed_us);
  throttled_us_ += target_us - elapsed_us;
  stats_->seconds_throttled = static_cast<double>(throttled_us_) / 1e6;
}

Status Job::Run() {
  uint64_t victim_size = 0;
  bool dead = false;
  SEPFS_RETURN_IF_ERROR(Check(&victim_size, &dead));
  if (dead) {
    ++stats_->collected_unread;
    return Delete(victim_size);
  }
  Status job_st, damage;  // damage: the first damaged record (it names the segment and offset)
  Status st = vlog_->ScanSegment(
      victim_, [&](const BlockPtr& ptr, const RecordHeader& h, std::string_view data,
                   const Status& rec_st) {
        if (!rec_st.ok()) {
          if (damage.ok()) damage = rec_st;
          return true;  // on at the next whole record
        }
        job_st = OnRecord(ptr, h, data);
        return job_st.ok();
      });
  if (st.ok()) st = std::move(job_st);
  if (st.ok()) st = RelocateBatch();
  if (st.ok() && !damage.ok()) {
    // Every whole record was relocated; what the segment still counts live
    // is in damaged bytes (reads of it fail; fsck drops its pointers): kept.
    // If nothing is, the damage hit only garbage (records of deleted files,
    // bytes appended to a sealed file) and the segment goes as any other.
    SegmentInfo now;
    const uint64_t live = FindVictim(&now) ? now.live_bytes : 0;
    if (live > 0) {
      st = damage.WithContext(Name() + " aborted, segment kept: " + std::to_string(live) +
                              " live bytes are in damaged records");
    } else {
      Log(Name() + ": " + damage.ToString() +
          "; no live record is damaged, so the segment is collected");
      ++stats_->damaged_collected;
    }
  }
  if (st.ok()) Throttle(true);  // back-to-back jobs keep to the rate too
  if (!st.ok()) {
    Log(st.ToString());
    return st;
  }
  return Delete(victim_size);
}

Status Job::Delete(uint64_t victim_size) {
  Status st = index_->Quiesce([&] { return vlog_->DeleteSegment(victim_); });
  if (!st.ok()) {
    Log(Name() + ": nothing is left live in it, but it could not be deleted: " + st.ToString());
    return st;
  }
  stats_->bytes_freed = victim_size;
  return Status::OK();
}

}  // namespace

GcClock* GcClock::Default() {
  static SteadyClock* clock = new SteadyClock;
  return clock;
}

Status CollectSegment(ValueLog* vlog, GcIndex* index, uint32_t victim, const GcJobOptions& o,
                      GcJobStats* stats) {
  *stats = GcJobStats();
  GcClock* clock = o.clock ? o.clock : GcClock::Default();
  const uint64_t start = clock->NowMicros();
  Job job(vlog, index, victim, o, stats);
  Status st = job.Run();
  stats->seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
  return st;
}

}  // namespace sepfs::vlog
