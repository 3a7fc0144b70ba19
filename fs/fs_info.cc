// Filesystem statfs and the statistics text of `sepfs stats`.
#include <sys/statvfs.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "fs/filesystem.h"
#include "fs/report.h"

namespace sepfs::fs {

Status Filesystem::StatFs(struct statvfs* out) {
  uint64_t avail = 0, total = 0;
  SEPFS_RETURN_IF_ERROR(store_->env()->FreeSpace(store_->io_dir(), &avail, &total));
  // Garbage in sealed segments is free to the user, as after an unlink on
  // any file system (f2fs counts its invalid blocks free too): once free
  // space runs low the collector takes any garbage, and writes wait for it.
  // Not with gc=off, where only sepfs gc reclaims it.
  const uint64_t garbage =
      gc_ && gc_->collects_in_background() ? vlog_->CollectableGarbage() : 0;
  // What a write may take: less the reserve kept for metadata and GC (as
  // ext4 keeps blocks for root), so that df promises no more than fits.
  const uint64_t writable = WritableBytes(avail, total) + garbage;
  // Files of collected segments kept for new ones hold space that new data
  // gets first: free to the user too.
  avail += vlog_->ReusableBytes() + garbage;
  const uint64_t held = vlog_->TotalBytes() + meta_->ApproximateBytes();
  const uint64_t used = held - std::min(held, garbage);
  const uint64_t cap = store_->super().capacity;
  if (cap) {
    total = cap;
    avail = std::min(avail, used < cap ? cap - used : 0);
  } else {
    total = std::max(total, used + avail);
  }
  constexpr uint64_t kFrag = 4096;
  *out = {};
  out->f_bsize = block_size_;
  out->f_frsize = kFrag;
  out->f_blocks = total / kFrag;
  out->f_bfree = std::min<uint64_t>(out->f_blocks, avail / kFrag);
  out->f_bavail = std::min<uint64_t>(out->f_bfree, writable / kFrag);
  out->f_files = UINT32_MAX;
  out->f_ffree = UINT32_MAX - std::min<uint64_t>(UINT32_MAX, alloc_->TEST_next());
  out->f_favail = out->f_ffree;
  out->f_namemax = kNameMax;
  return Status::OK();
}

std::string Filesystem::StatsText() {
  std::string s = StoreReport(store_.get());
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "filesystem:\n"
                "  user bytes written   %" PRIu64 "\n"
                "  user bytes read      %" PRIu64 "\n"
                "  flushes              %" PRIu64 " (%" PRIu64 " blocks)\n"
                "  dirty bytes          %" PRIu64 "\n"
                "  read errors (EIO)    %" PRIu64 "\n"
                "  orphans reclaimed    %" PRIu64 "\n"
                "  file handles opened  %" PRIu64 "\n"
                "  directory listings   %" PRIu64 "\n"
                "  waits for gc (full)  %" PRIu64 " (%.3f s)\n",
                stats_.user_bytes_written.load(), stats_.user_bytes_read.load(),
                stats_.flushes.load(), stats_.blocks_flushed.load(), dirty_total_.load(),
                stats_.read_eio.load(), stats_.orphans_reclaimed.load(),
                stats_.handles_opened.load(), stats_.dir_listings.load(),
                stats_.space_waits.load(), stats_.space_wait_micros.load() / 1e6);
  s += buf;
  if (Status w = meta_->WriteError(); !w.ok()) {
    s += "  metadata writes      refused: " + std::string(w.message()) + "\n";
  }
  const DentryCacheStats d = dentries_.stats();
  std::snprintf(buf, sizeof(buf),
                "  dentry cache         %" PRIu64 " dirs, %" PRIu64 " entries, %" PRIu64
                " bytes; %" PRIu64 " hits, %" PRIu64 " misses\n",
                d.dirs, d.entries, d.bytes, d.hits, d.misses);
  s += buf;
  const RecoveryReport& r = recovery_;
  std::snprintf(buf, sizeof(buf),
                "recovery:\n"
                "  checkpoints written  %" PRIu64 " (%zu journal entries since the last)\n"
                "  last mount           %s: %" PRIu64 " journal entries, %" PRIu64
                " vLog records past the checkpoint, %" PRIu64 " pointers replayed, %" PRIu64
                " pointers recounted, %.1f ms\n",
                checkpoints_.load(), journal_->entries_since_checkpoint(),
                r.unclean ? "after a crash" : "clean", r.journal_entries, r.records_scanned,
                r.pointers_replayed, r.pointers_checked, r.micros / 1e3);
  s += buf;
  const uint64_t user = stats_.user_bytes_written.load();
  const uint64_t device = vlog_->stats().bytes_appended;
  std::snprintf(buf, sizeof(buf),
                "write amplification (this mount):\n"
                "  user bytes written   %" PRIu64 "\n"
                "  device bytes written %" PRIu64 " (%.2fx)\n",
                user, device, user ? static_cast<double>(device) / user : 0.0);
  s += buf;
  if (gc_) {
    s += gc_->StatsText();
    std::snprintf(buf, sizeof(buf), "  longest gc lock hold %.3f ms\n",
                  gc_index_->max_hold_micros() / 1e3);
    s += buf;
    const std::string last = gc_->LastPassText();
    if (!last.empty()) s += "  last sepfs gc        " + last + "\n";
  }
  s += PrefetchStatsText();
  s += LifetimeText(Lifetime());
  return s;
}

LifetimeCounts Filesystem::Lifetime() const {
  LifetimeCounts m;
  m.user_bytes_written = stats_.user_bytes_written.load();
  m.vlog_bytes_appended = vlog_->stats().bytes_appended;
  if (gc_) {
    const GcTotals& t = gc_->totals();
    m.gc_segments_collected = t.segments_collected.load();
    m.gc_bytes_moved = t.bytes_moved.load();
    m.gc_bytes_freed = t.bytes_freed.load();
  }
  return lifetime_base_.Plus(m);
}

}  // namespace sepfs::fs
