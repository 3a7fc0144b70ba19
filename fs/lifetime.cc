#include "fs/lifetime.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "kvstore/schema.h"

namespace sepfs::fs {
namespace {

constexpr char kVersion = 1;
constexpr size_t kFields = 6;

}  // namespace

LifetimeCounts LifetimeCounts::Plus(const LifetimeCounts& m) const {
  LifetimeCounts r = *this;
  r.user_bytes_written += m.user_bytes_written;
  r.vlog_bytes_appended += m.vlog_bytes_appended;
  r.gc_segments_collected += m.gc_segments_collected;
  r.gc_bytes_moved += m.gc_bytes_moved;
  r.gc_bytes_freed += m.gc_bytes_freed;
  return r;
}

std::string EncodeLifetime(const LifetimeCounts& c) {
  std::string s(1, kVersion);
  for (uint64_t v : {c.since_unix, c.user_bytes_written, c.vlog_bytes_appended,
                     c.gc_segments_collected, c.gc_bytes_moved, c.gc_bytes_freed}) {
    kv::PutBE64(&s, v);
  }
  return s;
}

Status DecodeLifetime(std::string_view src, LifetimeCounts* out) {
  if (src.size() < 1 + 8 * kFields || src[0] != kVersion) {
    return Status::Corruption("bad lifetime counts record");
  }
  uint64_t v[kFields];
  for (size_t i = 0; i < kFields; i++) v[i] = kv::GetBE64(src.data() + 1 + 8 * i);
  *out = LifetimeCounts{v[0], v[1], v[2], v[3], v[4], v[5]};
  return Status::OK();
}

Status LoadLifetime(kv::MetaStore* meta, uint64_t now_unix, LifetimeCounts* out) {
  *out = LifetimeCounts{};
  out->since_unix = now_unix;
  std::string v;
  Status st = meta->Get(kv::CounterKey(kLifetimeCounter), &v);
  if (st.IsNotFound()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(st);
  LifetimeCounts c;
  st = DecodeLifetime(v, &c);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: %s; the store's lifetime counts start again from zero\n",
                 st.ToString().c_str());
    return Status::OK();
  }
  *out = c;
  return Status::OK();
}

std::string LifetimeText(const LifetimeCounts& c) {
  char since[64] = "?";
  const time_t t = static_cast<time_t>(c.since_unix);
  struct tm tm;
  if (gmtime_r(&t, &tm) != nullptr) std::strftime(since, sizeof(since), "%Y-%m-%d %H:%M UTC", &tm);
  const double amp =
      c.user_bytes_written ? static_cast<double>(c.vlog_bytes_appended) / c.user_bytes_written : 0;
  char buf[768];
  std::snprintf(buf, sizeof(buf),
                "all mounts since %s (a crash loses what its mount counted after its last "
                "checkpoint):\n"
                "  user bytes written   %" PRIu64 "\n"
                "  device bytes written %" PRIu64 " (%.2fx)\n"
                "  gc segments          %" PRIu64 " collected (%" PRIu64 " bytes copied, %" PRIu64
                " bytes of segments deleted)\n",
                since, c.user_bytes_written, c.vlog_bytes_appended, amp, c.gc_segments_collected,
                c.gc_bytes_moved, c.gc_bytes_freed);
  return buf;
}

}  // namespace sepfs::fs
