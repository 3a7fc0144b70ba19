// What a store has done since it was made, kept across mounts: bytes users
// wrote, bytes appended to the vLog, and the collector's work. sepfs stats
// shows them beside the counts of the current mount, which start at zero.
//
// Each checkpoint (and the clean unmount's) writes the totals loaded at
// mount plus the mount's counts so far, in the checkpoint's batch; a crash
// loses what was counted since the last one. Stores made before these
// counts existed start counting at their first mount, and say so.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvstore/meta_store.h"
#include "vlog/status.h"

namespace sepfs::fs {

constexpr std::string_view kLifetimeCounter = "lifetime";

struct LifetimeCounts {
  uint64_t since_unix = 0;  // when counting began: mkfs, or an older store's first mount
  uint64_t user_bytes_written = 0;
  uint64_t vlog_bytes_appended = 0;
  uint64_t gc_segments_collected = 0;
  uint64_t gc_bytes_moved = 0;
  uint64_t gc_bytes_freed = 0;

  // These counts plus a mount's (whose since_unix is ignored).
  LifetimeCounts Plus(const LifetimeCounts& mount) const;
};

// Version byte 1, then the six fields as 8-byte big-endian numbers; a
// longer value (fields a later version added) decodes to its first six.
std::string EncodeLifetime(const LifetimeCounts& c);
Status DecodeLifetime(std::string_view src, LifetimeCounts* out);

// The store's counts. A store without them, or with a record that does not
// decode (it is only statistics: the mount goes on, with a message), starts
// at zero from now_unix.
Status LoadLifetime(kv::MetaStore* meta, uint64_t now_unix, LifetimeCounts* out);

// The "since mkfs" section of sepfs stats.
std::string LifetimeText(const LifetimeCounts& c);

}  // namespace sepfs::fs
