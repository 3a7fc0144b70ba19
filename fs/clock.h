// Wall-clock time as stored in inode records.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

#include "kvstore/records.h"

namespace sepfs::fs {

// The kernel's coarse clock, which it stamps FUSE inodes with itself (the
// mtime and ctime of writes under the writeback cache): with the precise
// clock, a file created here was stamped up to a tick later than a write
// the kernel stamped after it, and make-style comparisons went wrong.
inline kv::Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return kv::Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

// Monotonic microseconds, for durations and idle detection.
inline uint64_t MonotonicMicros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

inline struct timespec ToTimespec(const kv::Timespec& t) {
  struct timespec ts;
  ts.tv_sec = t.sec;
  ts.tv_nsec = t.nsec;
  return ts;
}

}  // namespace sepfs::fs
