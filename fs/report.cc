#include "fs/report.h"

#include <cinttypes>
#include <cstdio>

namespace sepfs::fs {

namespace {

void Line(std::string* out, const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  *out += buf;
}

}  // namespace

std::string StoreReport(Store* store) {
  std::string out;
  const auto& sb = store->super();
  Line(&out,
       "store %s\n  format %u, block size %u, segment size %" PRIu64
       ", capacity %s, inline max %u\n",
       store->dir().c_str(), sb.version, sb.block_size, sb.segment_size,
       sb.capacity ? std::to_string(sb.capacity).c_str() : "free space below", sb.inline_max);
  uint64_t size[vlog::kNumStreams] = {}, live[vlog::kNumStreams] = {},
           garbage[vlog::kNumStreams] = {}, count[vlog::kNumStreams] = {};
  const auto segs = store->vlog()->Segments();
  for (const auto& s : segs) {
    const int k = static_cast<int>(s.stream) % vlog::kNumStreams;
    size[k] += s.size;
    live[k] += s.live_bytes;
    garbage[k] += s.garbage_bytes;
    count[k]++;
  }
  out += "space:\n";
  Line(&out, "  vlog bytes           %" PRIu64 "\n", store->vlog()->TotalBytes());
  Line(&out, "  metadata bytes       %" PRIu64 "\n", store->meta()->ApproximateBytes());
  out += "segments by class:\n";
  for (int k = 0; k < vlog::kNumStreams; k++) {
    const double ratio = size[k] ? 100.0 * garbage[k] / size[k] : 0.0;
    Line(&out,
         "  %-6s %6" PRIu64 " segments  %12" PRIu64 " bytes  live %12" PRIu64
         "  garbage %12" PRIu64 " (%.1f%%)\n",
         vlog::StreamName(static_cast<vlog::Stream>(k)), count[k], size[k], live[k], garbage[k],
         ratio);
  }
  const auto vs = store->vlog()->stats();
  out += "vlog:\n";
  Line(&out, "  records appended     %" PRIu64 " (%" PRIu64 " bytes)\n", vs.records_appended,
       vs.bytes_appended);
  Line(&out,
       "  records read         %" PRIu64 " (%" PRIu64 " bytes, %" PRIu64 " preads; %" PRIu64
       " left in place, %" PRIu64 " shared buffers in use)\n",
       vs.records_read, vs.bytes_read, vs.preads, vs.records_in_place, vs.shared_buffers);
  Line(&out, "  checksum errors      %" PRIu64 "\n", vs.checksum_errors);
  Line(&out,
       "  segments recycled    %" PRIu64 " (%" PRIu64 " free files kept, %" PRIu64 " bytes)\n",
       vs.segments_recycled, vs.free_files, vs.free_file_bytes);
  if (vs.sync_failed) {
    out += "  sync FAILED          every fsync fails until the store is mounted again\n";
  }
  const auto ms = store->meta()->stats();
  out += "metadata:\n";
  Line(&out, "  gets %" PRIu64 "  writes %" PRIu64 " (%" PRIu64 " synced)  scans %" PRIu64
             "  seeks %" PRIu64 "\n",
       ms.gets, ms.writes, ms.synced_writes, ms.scans, ms.seeks);
  return out;
}

}  // namespace sepfs::fs
