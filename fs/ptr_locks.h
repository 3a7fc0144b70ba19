// PtrLocks: the locks under which block pointers change, one per stripe of
// inodes. A change of one inode's pointers (flush, truncate, punch, reclaim)
// holds its inode's stripe from reading the old pointers to writing the new
// ones, so that a read-modify-write is atomic and the GC's liveness check of
// a record (which takes the record's inode's stripe) waits for a flush that
// appended the record but has not yet installed its pointer. Flushes of
// different files run at once (concurrent fsyncs share their syncs). The
// GC's pointer swap and the checkpoint, which touch any inode, hold every
// stripe (All), taken in index order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace sepfs::fs {

class PtrLocks {
 public:
  static constexpr size_t kStripes = 64;

  std::mutex& For(uint64_t ino) { return stripes_[Mix(ino) % kStripes]; }

  // Holds every stripe while in scope.
  class All {
   public:
    explicit All(PtrLocks* locks) : locks_(locks) {
      for (std::mutex& m : locks_->stripes_) m.lock();
    }
    ~All() {
      for (size_t i = kStripes; i-- > 0;) locks_->stripes_[i].unlock();
    }
    All(const All&) = delete;
    All& operator=(const All&) = delete;

   private:
    PtrLocks* const locks_;
  };

 private:
  // Neighbouring inode numbers (one directory's files) land on different
  // stripes.
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }

  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace sepfs::fs
