#include "fs/gc.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "vlog/atomic_bound.h"

namespace sepfs::fs {

bool ParseGarbagePercent(std::string_view text, double* ratio) {
  // Digits with at most one '.', nothing else: no sign, blank or exponent.
  if (text.empty() || text.size() > 16 || text.front() == '.' || text.back() == '.') return false;
  if (std::count(text.begin(), text.end(), '.') > 1) return false;
  const auto digit_or_dot = [](char c) { return c == '.' || (c >= '0' && c <= '9'); };
  if (!std::all_of(text.begin(), text.end(), digit_or_dot)) return false;
  double pct = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pct);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (!(pct >= 0 && pct <= 100)) return false;
  *ratio = pct / 100;
  return true;
}

Status GarbageCollector::Create(vlog::ValueLog* vlog, vlog::GcIndex* index, const GcOptions& o,
                                Hooks hooks, std::unique_ptr<GarbageCollector>* out) {
  if (o.mode != "hotcold" && o.mode != "wisckey" && o.mode != "off") {
    return Status::InvalidArgument("unknown gc mode '" + o.mode + "'");
  }
  vlog::GcPolicy policy =
      o.mode == "wisckey" ? vlog::GcPolicy::kOldest : vlog::GcPolicy::kCostBenefit;
  if (!o.picker.empty() && !vlog::ParseGcPolicy(o.picker, &policy)) {
    return Status::InvalidArgument("unknown gc picker '" + o.picker + "'");
  }
  if (o.streams != 2 && o.streams != 4) {
    return Status::InvalidArgument("gc streams must be 2 or 4, not " + std::to_string(o.streams));
  }
  out->reset(new GarbageCollector(vlog, index, o, std::move(hooks), policy));
  return Status::OK();
}

GarbageCollector::GarbageCollector(vlog::ValueLog* vlog, vlog::GcIndex* index,
                                   const GcOptions& o, Hooks hooks, vlog::GcPolicy policy)
    : vlog_(vlog), index_(index), options_(o), hooks_(std::move(hooks)), policy_(policy) {}

GarbageCollector::~GarbageCollector() { Stop(); }

void GarbageCollector::Start() {
  if (options_.mode == "off" || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void GarbageCollector::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GarbageCollector::Kick() {
  {
    std::lock_guard<std::mutex> l(mu_);
    kicked_ = true;
  }
  cv_.notify_all();
}

vlog::Stream GarbageCollector::UserStream(bool cold_hint, uint64_t prev_seq) const {
  if (options_.mode == "wisckey") return vlog::Stream::kHot;
  if (cold_hint) return vlog::Stream::kCold;
  if (options_.streams == 2) return vlog::Stream::kHot;
  // The lifetime of the version being replaced predicts the new one's.
  const uint64_t now = vlog_->LastSeq();
  if (prev_seq == 0 || prev_seq > now) return vlog::Stream::kWarm;
  return now - prev_seq < LifetimeScale() / 4 ? vlog::Stream::kHot : vlog::Stream::kWarm;
}

uint64_t GarbageCollector::LifetimeScale() const {
  const uint64_t now = vlog_->LastSeq();
  if (now >= scale_refresh_seq_.load(std::memory_order_relaxed)) {
    // Racing refreshes store nearly the same value; any of them will do.
    const auto vs = vlog_->stats();
    const uint64_t record_bytes =
        vs.records_appended ? vs.bytes_appended / vs.records_appended : options_.record_bytes;
    const uint64_t scale = vlog_->LiveBytes() / std::max<uint64_t>(1, record_bytes);
    scale_.store(scale, std::memory_order_relaxed);
    scale_refresh_seq_.store(now + 1 + scale / 16, std::memory_order_relaxed);
  }
  return scale_.load(std::memory_order_relaxed);
}

Status GarbageCollector::CollectOne(double min_ratio, bool every_policy, bool* done,
                                    std::string* what, vlog::GcJobStats* job) {
  std::lock_guard<std::mutex> l(run_mu_);
  vlog::PickOptions po;
  po.policy = policy_;
  po.min_garbage_ratio = min_ratio;
  po.max_victims = 1;
  po.now_seq = vlog_->LastSeq();
  po.exclude = failed_;
  const auto segs = vlog_->Segments();
  auto candidates = segs;
  if (every_policy) {
    // The oldest-first picker ignores the ratio; a pass on demand does not.
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const vlog::SegmentInfo& s) {
                                      return vlog::GarbageRatio(s) < min_ratio;
                                    }),
                     candidates.end());
  }
  const auto victims = vlog::PickVictims(candidates, po);
  *done = victims.empty();
  if (*done) return Status::OK();
  const uint32_t victim = victims[0];
  vlog::GcJobOptions jo;
  const bool wisckey = options_.mode == "wisckey";
  jo.dest = wisckey ? vlog::Stream::kHot : vlog::Stream::kCold;
  if (!wisckey && options_.streams == 4) {
    // A copy gets a new seq, so age counts from the last move; survivors of
    // a frozen victim are older than that and stay frozen.
    const bool frozen = std::any_of(segs.begin(), segs.end(), [&](const vlog::SegmentInfo& s) {
      return s.id == victim && s.stream == vlog::Stream::kFrozen;
    });
    jo.old_dest = vlog::Stream::kFrozen;
    if (frozen) jo.dest = vlog::Stream::kFrozen;
    jo.old_after_seqs = std::max<uint64_t>(1, LifetimeScale());
  }
  jo.max_bytes_per_sec = options_.max_bytes_per_sec;
  vlog::GcJobStats& js = *job;
  Status st = vlog::CollectSegment(vlog_, index_, victim, jo, &js);
  totals_.records_relocated += js.records_relocated;
  totals_.records_lost_race += js.records_lost_race;
  totals_.bytes_moved += js.bytes_moved;
  totals_.bytes_read += js.bytes_scanned;
  const uint64_t us = static_cast<uint64_t>(js.seconds * 1e6);
  totals_.micros += us;
  RaiseAtLeast(totals_.max_job_micros, us);
  if (!st.ok()) {
    totals_.failures++;
    // Damage is permanent until repaired; anything else is retried later.
    if (st.IsCorruption()) failed_.push_back(victim);
    std::fprintf(stderr, "sepfs: gc of segment %u failed (segment kept): %s\n", victim,
                 st.ToString().c_str());
    return st;
  }
  totals_.segments_collected++;
  totals_.collected_unread += js.collected_unread;
  totals_.bytes_freed += js.bytes_freed;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "segment %u: %" PRIu64 " live records moved, %" PRIu64 " bytes freed, %.2f s",
                victim, js.records_relocated, js.bytes_freed, js.seconds);
  *what = buf;
  if (hooks_.space_changed) hooks_.space_changed();
  return Status::OK();
}

Status GarbageCollector::RunPass(double min_garbage_ratio, const Progress& progress,
                                 uint64_t* collected) {
  on_demand_++;
  struct Done {
    std::atomic<int>& n;
    ~Done() { n--; }
  } done_guard{on_demand_};
  totals_.passes++;
  for (const auto& s : vlog_->Segments()) {
    if (s.open && s.garbage_bytes > 0 && vlog::GarbageRatio(s) >= min_garbage_ratio) {
      SEPFS_RETURN_IF_ERROR(vlog_->SealStream(s.stream));
    }
  }
  uint64_t n = 0, moved = 0, freed = 0;
  Status result;
  for (;;) {
    bool done = false;
    std::string what;
    vlog::GcJobStats js;
    Status st = CollectOne(min_garbage_ratio, /*every_policy=*/true, &done, &what, &js);
    moved += js.bytes_moved;
    if (!st.ok()) {
      result = st;
      if (st.IsCorruption()) continue;  // that victim is excluded; try the others
      break;
    }
    if (done) break;
    n++;
    freed += js.bytes_freed;
    if (progress) progress(what);
  }
  uint64_t left = 0, left_garbage = 0;
  for (const auto& s : vlog_->Segments()) {
    if (s.garbage_bytes == 0) continue;
    left++;
    left_garbage += s.garbage_bytes;
  }
  char rule[64] = "holding any garbage";
  if (min_garbage_ratio > 0) {
    std::snprintf(rule, sizeof(rule), "of at least %g%% garbage", min_garbage_ratio * 100);
  }
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%" PRIu64 " segments collected (%.1f MiB copied, %.1f MiB of segments"
                " deleted); %.1f MiB of garbage left in %" PRIu64 " segments (collects"
                " segments %s)",
                n, moved / 1048576.0, freed / 1048576.0, left_garbage / 1048576.0, left, rule);
  {
    std::lock_guard<std::mutex> l(last_mu_);
    last_pass_ = buf;
  }
  if (collected) *collected = n;
  return result;
}

std::string GarbageCollector::LastPassText() const {
  std::lock_guard<std::mutex> l(last_mu_);
  return last_pass_;
}

void GarbageCollector::Loop() {
  const auto interval = std::chrono::duration<double>(options_.interval_sec);
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, interval, [&] { return stop_ || kicked_; });
    if (stop_) break;
    kicked_ = false;
    l.unlock();
    // Keep collecting while a trigger holds; re-check after every segment so
    // user I/O (which never waits for a whole pass) keeps its share.
    for (;;) {
      const bool low = hooks_.space_low && hooks_.space_low();
      uint64_t sealed = 0, garbage = 0;
      for (const auto& s : vlog_->Segments()) {
        if (s.open) continue;
        sealed += s.size;
        garbage += s.garbage_bytes;
      }
      const bool ratio = sealed && garbage > options_.trigger_garbage_ratio * sealed;
      const bool idle = hooks_.idle_micros &&
                        hooks_.idle_micros() > options_.idle_sec * 1e6 && garbage > 0;
      if (!low && !ratio && !idle) break;
      bool done = false;
      std::string what;
      vlog::GcJobStats js;
      totals_.passes++;
      Status st = CollectOne(low ? 0.0 : options_.min_segment_garbage_ratio,
                             /*every_policy=*/false, &done, &what, &js);
      if (done || !st.ok()) break;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_) break;
      }
    }
    l.lock();
  }
}

std::string GarbageCollector::StatsText() const {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "gc:\n"
                "  mode                 %s (picker %s, %d streams)\n"
                "  lifetime scale       %" PRIu64 " records\n"
                "  segments collected   %" PRIu64 " (%" PRIu64 " failed)\n"
                "  segments unread      %" PRIu64 " (of those collected: nothing live, not read)\n"
                "  records relocated    %" PRIu64 " (%" PRIu64 " lost to user writes)\n"
                "  gc bytes read        %" PRIu64 "\n"
                "  gc bytes moved       %" PRIu64 "\n"
                "  gc bytes freed       %" PRIu64 "\n"
                "  gc seconds           %.3f (longest job %.3f)\n",
                options_.mode.c_str(), vlog::GcPolicyName(policy_),
                options_.mode == "wisckey" ? 1 : options_.streams, LifetimeScale(),
                totals_.segments_collected.load(), totals_.failures.load(),
                totals_.collected_unread.load(), totals_.records_relocated.load(),
                totals_.records_lost_race.load(), totals_.bytes_read.load(),
                totals_.bytes_moved.load(), totals_.bytes_freed.load(),
                totals_.micros.load() / 1e6, totals_.max_job_micros.load() / 1e6);
  return buf;
}

}  // namespace sepfs::fs
