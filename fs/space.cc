// Filesystem free space: what the store may still take (the disk's free
// space less a reserve, the files of collected segments kept for reuse, a
// capacity limit), and the checks writes make before they add bytes.
#include <algorithm>
#include <chrono>

#include "fs/clock.h"
#include "fs/filesystem.h"

namespace sepfs::fs {

namespace {

// The part of the disk's free space that data writes leave alone: room for
// metadata, LevelDB's compactions and GC relocation.
uint64_t Reserve(uint64_t disk_total) { return std::min<uint64_t>(64ull << 20, disk_total / 16); }

}  // namespace

Status Filesystem::AvailableBytes(uint64_t* out) {
  uint64_t avail = 0, total = 0;
  SEPFS_RETURN_IF_ERROR(store_->env()->FreeSpace(store_->io_dir(), &avail, &total));
  *out = WritableBytes(avail, total);
  return Status::OK();
}

uint64_t Filesystem::WritableBytes(uint64_t disk_free, uint64_t disk_total) {
  // A reserve of the disk's free space keeps room for metadata, compaction
  // and GC relocation, so the collector can always make progress on a full
  // store. The files of collected segments kept for recycling are room too:
  // the next segments take them before the store grows. So is the unwritten
  // rest of a recycled file that the segment of a stream user data goes to
  // (hot or warm) has taken, but only for data of that stream, which is
  // chosen at the flush: a write counted against one stream's rest may go
  // to the other and grow the store by up to that rest (less than a
  // segment). It counts instead of the disk's free space when it is
  // larger, so that such writes take no more of the reserve than it, and
  // only on a nearly full disk.
  const uint64_t reserve = Reserve(disk_total);
  const uint64_t disk = disk_free > reserve ? disk_free - reserve : 0;
  const vlog::ReusableSpace r = vlog_->Reusable();
  const uint64_t tail = r.Tail(vlog::Stream::kHot) + r.Tail(vlog::Stream::kWarm);
  uint64_t out = r.kept + std::max(disk, tail);
  // Within a capacity: what the store may still grow by, plus the same
  // reusable room.
  if (store_->super().capacity) out = std::min(out, CapacityRoom(r, r.kept + tail));
  return out;
}

uint64_t Filesystem::CapacityRoom(const vlog::ReusableSpace& r, uint64_t reusable_room) const {
  // The disk space the store's files take: the segments' bytes, the files
  // kept for recycling and the unwritten rest of the recycled files open
  // segments took (all streams: GC's and cold data's too), and LevelDB's.
  // Writes that go into reusable space do not grow it.
  const uint64_t held = vlog_->TotalBytes() + r.Of(vlog::kAllStreams) + meta_->ApproximateBytes();
  const uint64_t limit = store_->super().capacity + reusable_room;
  return held < limit ? limit - held : 0;
}

bool Filesystem::SpaceLow() {
  uint64_t avail = 0;
  if (!AvailableBytes(&avail).ok()) return false;
  // Enough headroom that writers rarely wait for the collector: four
  // segments, or 5% of a capacity-limited store.
  const uint64_t low_water =
      std::max(4 * store_->super().segment_size, store_->super().capacity / 20);
  return avail < low_water;
}

uint64_t Filesystem::SpaceEpoch() {
  std::lock_guard<std::mutex> l(space_wait_mu_);
  return space_epoch_;
}

bool Filesystem::AwaitCollector(uint64_t bytes, uint64_t epoch, Deadline deadline) {
  const uint64_t collectable = vlog_->CollectableGarbage();
  // With gc=off nobody collects it unless sepfs gc runs: no wait (an fsync
  // on a full store took 10 s to fail).
  if (!gc_ || !gc_->frees_space() || collectable < bytes ||
      std::chrono::steady_clock::now() > deadline) {
    return false;
  }
  gc_->Kick();
  const uint64_t start = MonotonicMicros();
  {
    std::unique_lock<std::mutex> l(space_wait_mu_);
    space_cv_.wait_for(l, std::chrono::seconds(1), [&] { return space_epoch_ != epoch; });
  }
  stats_.space_waits++;
  stats_.space_wait_micros += MonotonicMicros() - start;
  return true;
}

Status Filesystem::HaveSpace(uint64_t bytes, SpaceGrant* grant) {
  last_write_us_ = MonotonicMicros();
  const uint64_t written = bytes_since_check_.fetch_add(bytes) + bytes;
  const Deadline deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (bool refresh = false;; refresh = true) {
    const uint64_t epoch = SpaceEpoch();
    uint64_t shortfall = bytes;
    {
      std::lock_guard<std::mutex> l(space_mu_);
      if (refresh || space_checked_at_ == 0 || written - space_checked_at_ > (16ull << 20) ||
          space_avail_ < (256ull << 20)) {
        SEPFS_RETURN_IF_ERROR(AvailableBytes(&space_avail_));
        // Bytes accepted earlier and still in the dirty-block cache, or on
        // their way there, take their room at their flush; the disk does
        // not show them yet.
        space_avail_ -= std::min(space_avail_,
                                 dirty_total_.load(std::memory_order_relaxed) +
                                     space_granted_.load(std::memory_order_relaxed));
        space_checked_at_ = written ? written : 1;
      }
      if (bytes <= space_avail_) {
        space_avail_ -= bytes;
        space_granted_.fetch_add(bytes, std::memory_order_relaxed);
        grant->granted_ = &space_granted_;
        grant->bytes_ = bytes;
        meta_disk_free_ -= std::min(bytes, meta_disk_free_);
        return Status::OK();
      }
      shortfall = bytes - space_avail_;
    }
    // Full. If sealed segments hold enough garbage, wait while the collector
    // frees it (bounded); otherwise the store is really full.
    if (!AwaitCollector(shortfall, epoch, deadline)) {
      return Status::NoSpace(store_->dir() + ": store is full");
    }
  }
}

Status Filesystem::ReadDiskLocked() {
  uint64_t total = 0;
  SEPFS_RETURN_IF_ERROR(store_->env()->FreeSpace(store_->io_dir(), &meta_disk_free_, &total));
  meta_reserve_ = Reserve(total);
  meta_checked_us_ = MonotonicMicros();
  return Status::OK();
}

uint64_t Filesystem::MetaRoomLocked(MetaUse use) {
  // Entries may take a quarter of the reserve; values stop where data
  // writes stop. Neither counts the files kept for recycling, which only
  // vLog segments can reuse: LevelDB grows the disk itself.
  const uint64_t floor = use == MetaUse::kEntry ? meta_reserve_ / 4 * 3 : meta_reserve_;
  uint64_t room = meta_disk_free_ > floor ? meta_disk_free_ - floor : 0;
  // LevelDB grows the store: reusable vLog space is no room for it.
  if (use == MetaUse::kValue && store_->super().capacity) {
    room = std::min(room, CapacityRoom(vlog_->Reusable(), 0));
  }
  return room;
}

void Filesystem::WaitForValueRoom(uint64_t bytes) {
  const Deadline deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const uint64_t epoch = SpaceEpoch();
    uint64_t shortfall = bytes;
    {
      std::lock_guard<std::mutex> l(space_mu_);
      if (meta_checked_us_ != 0 && MetaRoomLocked(MetaUse::kValue) >= bytes) return;
      if (!ReadDiskLocked().ok()) return;
      const uint64_t room = MetaRoomLocked(MetaUse::kValue);
      if (room >= bytes) return;
      shortfall = bytes - room;
    }
    if (!AwaitCollector(shortfall, epoch, deadline)) return;
  }
}

Status Filesystem::HaveMetaSpace(uint64_t bytes, MetaUse use) {
  std::lock_guard<std::mutex> l(space_mu_);
  // The disk is read once a second, or on every call when little is left;
  // data writes in between are charged by HaveSpace.
  uint64_t room = meta_checked_us_ == 0 ? 0 : MetaRoomLocked(use);
  if (meta_checked_us_ == 0 || MonotonicMicros() - meta_checked_us_ > 1'000'000 ||
      room < (16ull << 20)) {
    SEPFS_RETURN_IF_ERROR(ReadDiskLocked());
    room = MetaRoomLocked(use);
  }
  // The files of collected segments kept for the next ones are worth
  // more to the namespace now.
  if (room < bytes && vlog_->DropKeptFiles() > 0) {
    SEPFS_RETURN_IF_ERROR(ReadDiskLocked());
    room = MetaRoomLocked(use);
  }
  if (room < bytes) {
    return Status::NoSpace(store_->dir() + (use == MetaUse::kEntry
                                                ? ": disk full (what is left is kept for LevelDB)"
                                                : ": store is full"));
  }
  meta_disk_free_ -= bytes;
  return Status::OK();
}

Status Filesystem::HaveRoomFor(uint64_t bytes) {
  uint64_t avail = 0;
  SEPFS_RETURN_IF_ERROR(AvailableBytes(&avail));
  if (bytes > avail) {
    return Status::NoSpace(store_->dir() + ": " + std::to_string(bytes) + " bytes wanted, " +
                           std::to_string(avail) + " free");
  }
  return Status::OK();
}

}  // namespace sepfs::fs
