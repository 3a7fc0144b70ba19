// Wall-clock time as stored in inode records.
#pragma once

#include <time.h>

#include "kvstore/records.h"

namespace sepfs::fs {

inline kv::Timespec Now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return kv::Timespec{ts.tv_sec, static_cast<uint32_t>(ts.tv_nsec)};
}

inline struct timespec ToTimespec(const kv::Timespec& t) {
  struct timespec ts;
  ts.tv_sec = t.sec;
  ts.tv_nsec = t.nsec;
  return ts;
}

}  // namespace sepfs::fs
