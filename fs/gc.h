// GarbageCollector: when and what to collect in the vLog, for a mounted (or
// opened) store. The relocation itself is vlog/gc_job.h and the choice of
// victims vlog/gc_picker.h; this file holds the triggers, the background
// thread, the classification of data into streams, and the counters.
//
// Modes:
//   hotcold  data is grouped by expected lifetime (HashKV's hot/cold split,
//            refined by SepBIT's lifetime inference; docs/gc.md "Streams").
//            With streams = 4 (default), scale = live records in the log:
//              user overwrite of a block whose old record is younger than
//                scale/4 sequence numbers     -> hot
//              any other user write (older old record, first write of a
//                block)                       -> warm
//              GC survivor younger than scale -> cold
//              GC survivor at least that old, or of a frozen victim -> frozen
//            With streams = 2: user writes -> hot, survivors -> cold.
//            A file's xattr user.sepfs.temperature=cold sends its writes to
//            the cold stream. Picker: cost-benefit unless overridden.
//   wisckey  the baseline: one stream for everything, oldest segment first.
//   off      no background collection (RunPass on demand still works).
// Triggers of the background thread (checked every interval, or at once
// when Kick()ed): free space below the low-water mark (then any garbage is
// worth collecting), garbage above trigger_garbage_ratio of all sealed
// segment bytes, or the store idle for idle_sec with collectable garbage.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "vlog/gc_job.h"
#include "vlog/gc_picker.h"
#include "vlog/value_log.h"

namespace sepfs::fs {

struct GcOptions {
  std::string mode = "hotcold";  // hotcold | wisckey | off
  std::string picker;            // greedy | cost-benefit | oldest; "" = mode default
  int streams = 4;               // hotcold only: 4 (by lifetime) or 2 (hot/cold)
  // Bytes of a full-block record (block size + record header): the record
  // size assumed until records have been appended (then their average is).
  uint64_t record_bytes = (64u << 10) + vlog::kRecordHeaderSize;
  double interval_sec = 1.0;
  // Lazy on purpose: a hot segment collected early still holds blocks that
  // are about to die, and copying them is the write amplification hot/cold
  // separation is meant to avoid. Space pressure collects any garbage.
  double trigger_garbage_ratio = 0.5;      // of all sealed bytes
  double min_segment_garbage_ratio = 0.5;  // a victim's own garbage ratio
  double idle_sec = 10.0;
  uint64_t max_bytes_per_sec = 0;  // 0 = unlimited
};

// `sepfs gc` collects a segment when at least this share of it is garbage
// (so it copies at most 4 bytes per byte it frees), unless told otherwise.
constexpr double kOnDemandMinGarbageRatio = 0.2;

// Parses a garbage share in percent, "0" to "100" (decimals allowed, e.g.
// "12.5"), into a ratio in [0, 1]; false for anything else.
bool ParseGarbagePercent(std::string_view text, double* ratio);

struct GcTotals {
  std::atomic<uint64_t> passes{0};
  std::atomic<uint64_t> segments_collected{0};
  std::atomic<uint64_t> records_relocated{0};
  std::atomic<uint64_t> records_lost_race{0};
  std::atomic<uint64_t> bytes_moved{0};
  std::atomic<uint64_t> bytes_read{0};          // record bytes the jobs scanned
  std::atomic<uint64_t> collected_unread{0};    // of segments_collected: nothing live, not read
  std::atomic<uint64_t> bytes_freed{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> micros{0};
  std::atomic<uint64_t> max_job_micros{0};
};

class GarbageCollector {
 public:
  using Progress = std::function<void(const std::string&)>;
  struct Hooks {
    std::function<bool()> space_low;              // below the low-water mark
    std::function<uint64_t()> idle_micros;        // since the last user write
    std::function<void()> space_changed;          // after segments were freed
  };

  // Returns InvalidArgument for an unknown mode or picker.
  static Status Create(vlog::ValueLog* vlog, vlog::GcIndex* index, const GcOptions& o,
                       Hooks hooks, std::unique_ptr<GarbageCollector>* out);
  ~GarbageCollector();  // stops the thread

  void Start();  // the background thread (no-op in mode off)
  // Whether Start runs a background thread, which Kick wakes.
  bool collects_in_background() const { return options_.mode != "off"; }
  // Whether space is being freed or will be once kicked: a background
  // thread runs, or a RunPass is under way.
  bool frees_space() const { return collects_in_background() || on_demand_.load() > 0; }
  void Stop();
  void Kick();

  // A collection on demand (sepfs gc): seals each open segment whose
  // garbage ratio is at least min_garbage_ratio (so that garbage becomes
  // collectable), then collects segments until none with at least that
  // ratio is left. 0 collects every segment holding any garbage. Its
  // report is kept for LastPassText.
  Status RunPass(double min_garbage_ratio, const Progress& progress, uint64_t* collected);
  // What the last RunPass did and left behind, one line; "" before any.
  std::string LastPassText() const;

  // The stream for a user write of a block. prev_seq: seq of the record the
  // write replaces, 0 if the block had none.
  vlog::Stream UserStream(bool cold_hint, uint64_t prev_seq) const;
  // Live records in the log (the lifetime scale): live bytes over the
  // average appended record, refreshed whenever the log has grown by 1/16
  // of it since the last refresh.
  uint64_t LifetimeScale() const;
  const GcTotals& totals() const { return totals_; }
  std::string StatsText() const;

 private:
  GarbageCollector(vlog::ValueLog* vlog, vlog::GcIndex* index, const GcOptions& o, Hooks hooks,
                   vlog::GcPolicy policy);
  void Loop();
  // Picks and collects one victim with at least min_ratio garbage (under
  // every picker if every_policy, else as vlog::PickOptions says); *done =
  // nothing qualified. *job: what the collection did.
  Status CollectOne(double min_ratio, bool every_policy, bool* done, std::string* what,
                    vlog::GcJobStats* job);

  vlog::ValueLog* const vlog_;
  vlog::GcIndex* const index_;
  const GcOptions options_;
  const Hooks hooks_;
  const vlog::GcPolicy policy_;
  std::mutex run_mu_;  // one collection at a time
  std::atomic<int> on_demand_{0};  // RunPass calls under way
  std::vector<uint32_t> failed_;  // damaged victims, not picked again (run_mu_)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, kicked_ = false;
  std::thread thread_;
  mutable std::atomic<uint64_t> scale_{0};
  mutable std::atomic<uint64_t> scale_refresh_seq_{0};  // refresh when LastSeq() reaches it
  GcTotals totals_;
  mutable std::mutex last_mu_;
  std::string last_pass_;  // LastPassText (last_mu_)
};

}  // namespace sepfs::fs
