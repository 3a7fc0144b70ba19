#include "fs/live_journal.h"

#include <algorithm>

#include "kvstore/schema.h"

namespace sepfs::fs {

namespace {

constexpr char kVersion = 1;

void PutLE(std::string* s, uint64_t v, int n) {
  for (int i = 0; i < n; i++) s->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLE(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::string EncodeSegmentField(const std::vector<vlog::SegmentInfo>& segs,
                               uint64_t vlog::SegmentInfo::*field) {
  std::string s(1, kVersion);
  for (const auto& seg : segs) {
    PutLE(&s, seg.id, 4);
    PutLE(&s, seg.*field, 8);
  }
  return s;
}

Status DecodeSegmentField(std::string_view src, const char* what,
                          std::vector<std::pair<uint32_t, uint64_t>>* out) {
  out->clear();
  if (src.empty() || src[0] != kVersion || (src.size() - 1) % 12 != 0) {
    return Status::Corruption(std::string("bad segment ") + what + " record");
  }
  for (size_t i = 1; i < src.size(); i += 12) {
    out->emplace_back(static_cast<uint32_t>(GetLE(src.data() + i, 4)),
                      GetLE(src.data() + i + 4, 8));
  }
  return Status::OK();
}

void AddDelta(std::map<uint32_t, SegmentDelta>* m, const vlog::BlockPtr& p, int64_t sign) {
  SegmentDelta& d = (*m)[p.segment];
  d.segment = p.segment;
  d.bytes += sign * static_cast<int64_t>(p.record_size());
  if (sign > 0) d.max_end = std::max<uint64_t>(d.max_end, p.offset + p.record_size());
}

}  // namespace

std::string EncodeSegmentUsage(const std::vector<vlog::SegmentInfo>& segs) {
  return EncodeSegmentField(segs, &vlog::SegmentInfo::live_bytes);
}

Status DecodeSegmentUsage(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out) {
  return DecodeSegmentField(src, "usage", out);
}

std::string EncodeLiveCounts(const std::map<uint32_t, uint64_t>& live) {
  std::vector<vlog::SegmentInfo> segs;
  for (const auto& [id, bytes] : live) {
    vlog::SegmentInfo s;
    s.id = id;
    s.live_bytes = bytes;
    segs.push_back(s);
  }
  return EncodeSegmentUsage(segs);
}

std::string EncodeSegmentAges(const std::vector<vlog::SegmentInfo>& segs) {
  return EncodeSegmentField(segs, &vlog::SegmentInfo::max_seq);
}

Status DecodeSegmentAges(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out) {
  return DecodeSegmentField(src, "age", out);
}

std::string EncodeJournalEntry(const std::vector<SegmentDelta>& deltas,
                               const std::vector<uint64_t>& owners) {
  std::string s(1, kVersion);
  PutLE(&s, deltas.size(), 4);
  for (const auto& d : deltas) {
    PutLE(&s, d.segment, 4);
    PutLE(&s, static_cast<uint64_t>(d.bytes), 8);
    PutLE(&s, d.max_end, 8);
  }
  for (uint64_t ino : owners) PutLE(&s, ino, 8);
  return s;
}

Status DecodeJournalEntry(std::string_view src, std::vector<SegmentDelta>* out,
                          std::vector<uint64_t>* owners) {
  out->clear();
  if (owners != nullptr) owners->clear();
  const Status bad = Status::Corruption("bad live-count journal entry");
  if (src.size() < 5 || src[0] != kVersion) return bad;
  const uint64_t n = GetLE(src.data() + 1, 4);
  if (n > (src.size() - 5) / 20 || (src.size() - 5 - n * 20) % 8 != 0) return bad;
  size_t i = 5;
  for (uint64_t k = 0; k < n; k++, i += 20) {
    SegmentDelta d;
    d.segment = static_cast<uint32_t>(GetLE(src.data() + i, 4));
    d.bytes = static_cast<int64_t>(GetLE(src.data() + i + 4, 8));
    d.max_end = GetLE(src.data() + i + 12, 8);
    out->push_back(d);
  }
  for (; owners != nullptr && i < src.size(); i += 8) owners->push_back(GetLE(src.data() + i, 8));
  return Status::OK();
}

std::string EncodeVlogHeads(const VlogHeads& h) {
  std::string s(1, kVersion);
  PutLE(&s, h.max_segment, 4);
  for (const auto& head : h.heads) {
    PutLE(&s, head.segment, 4);
    PutLE(&s, head.offset, 8);
  }
  return s;
}

bool VlogHeads::Durable(const vlog::BlockPtr& p) const {
  if (p.segment == 0 || p.segment > max_segment) return false;
  for (const vlog::StreamHead& h : heads) {
    if (h.segment == p.segment && p.offset >= h.offset) return false;
  }
  return true;
}

Status DecodeVlogHeads(std::string_view src, VlogHeads* out) {
  *out = VlogHeads{};
  if (src.size() < 5 || src[0] != kVersion || (src.size() - 5) % 12 != 0) {
    return Status::Corruption("bad vlog heads record");
  }
  out->max_segment = static_cast<uint32_t>(GetLE(src.data() + 1, 4));
  for (size_t i = 5; i < src.size(); i += 12) {
    out->heads.push_back({static_cast<uint32_t>(GetLE(src.data() + i, 4)),
                          GetLE(src.data() + i + 4, 8)});
  }
  return Status::OK();
}

Status LoadCounts(kv::MetaStore* meta, LoadedCounts* out) {
  *out = LoadedCounts{};
  std::string base, ages, heads;
  Status st = meta->Get(kv::CounterKey(kSegmentUsageCounter), &base);
  if (st.IsNotFound()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(st);
  st = meta->Get(kv::CounterKey(kVlogHeadsCounter), &heads);
  if (st.IsNotFound()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(st);
  // Binaries from before the checkpoint keep their counts under the old
  // key, which every checkpoint deletes: both present means one of them
  // used the store since, and the checkpoint knows nothing of the segments
  // it wrote. Recounted, as a store without a checkpoint.
  std::string old;
  st = meta->Get(kv::CounterKey(kOldSegmentUsageCounter), &old);
  if (st.ok()) return Status::OK();
  if (!st.IsNotFound()) return st;
  out->have_checkpoint = true;
  st = meta->Get(kv::CounterKey(kSegmentAgeCounter), &ages);
  if (!st.ok() && !st.IsNotFound()) return st;
  std::vector<std::pair<uint32_t, uint64_t>> fields;
  if (st.ok() && DecodeSegmentAges(ages, &fields).ok()) {
    out->ages.insert(fields.begin(), fields.end());
  }
  std::map<uint32_t, int64_t> sum;
  if (!DecodeSegmentUsage(base, &fields).ok() || !DecodeVlogHeads(heads, &out->heads).ok()) {
    out->consistent = false;
  }
  for (const auto& [id, bytes] : fields) sum[id] += static_cast<int64_t>(bytes);
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(
      std::string(1, kv::kTagJournal), [&](std::string_view key, std::string_view value) {
        uint64_t n = 0;
        std::vector<SegmentDelta> deltas;
        std::vector<uint64_t> owners;
        if (!kv::ParseJournalKey(key, &n) || !DecodeJournalEntry(value, &deltas, &owners).ok()) {
          out->consistent = false;
          return true;
        }
        out->entry_numbers.push_back(n);
        for (const auto& d : deltas) {
          sum[d.segment] += d.bytes;
          if (d.max_end == 0) continue;
          out->max_end[d.segment] = std::max(out->max_end[d.segment], d.max_end);
          out->owners[d.segment].insert(owners.begin(), owners.end());
        }
        return true;
      }));
  for (const auto& [id, bytes] : sum) {
    if (bytes < 0) out->consistent = false;
    if (bytes > 0) out->live[id] = static_cast<uint64_t>(bytes);
  }
  return Status::OK();
}

LiveJournal::LiveJournal(std::map<uint32_t, uint64_t> live, std::vector<uint64_t> entries)
    : live_(std::move(live)), entries_(std::move(entries)) {
  for (uint64_t n : entries_) next_ = std::max(next_, n + 1);
}

LiveJournal::Entry LiveJournal::Note(kv::Batch* b, std::span<const vlog::BlockPtr> added,
                                     std::span<const vlog::BlockPtr> removed,
                                     std::span<const uint64_t> owners) {
  Entry e;
  if (added.empty() && removed.empty()) return e;
  std::map<uint32_t, SegmentDelta> m;
  for (const auto& p : added) AddDelta(&m, p, +1);
  for (const auto& p : removed) AddDelta(&m, p, -1);
  for (const auto& [id, d] : m) {
    if (d.bytes != 0 || d.max_end != 0) e.deltas.push_back(d);
  }
  if (e.deltas.empty()) return e;
  if (!added.empty()) {
    e.owners.assign(owners.begin(), owners.end());
    std::sort(e.owners.begin(), e.owners.end());
    e.owners.erase(std::unique(e.owners.begin(), e.owners.end()), e.owners.end());
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    e.n = next_++;
  }
  b->Put(kv::JournalKey(e.n), EncodeJournalEntry(e.deltas, e.owners));
  return e;
}

void LiveJournal::Commit(const Entry& e) {
  if (e.n == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& d : e.deltas) {
    const int64_t v = static_cast<int64_t>(live_[d.segment]) + d.bytes;
    if (v > 0) {
      live_[d.segment] = static_cast<uint64_t>(v);
    } else {
      live_.erase(d.segment);  // a negative sum would be a bug; fsck reports the counts
    }
  }
  entries_.push_back(e.n);
}

size_t LiveJournal::PutCheckpoint(kv::Batch* b, const std::vector<vlog::SegmentInfo>& segs,
                                  const VlogHeads& heads) {
  std::lock_guard<std::mutex> l(mu_);
  b->Put(kv::CounterKey(kSegmentUsageCounter), EncodeLiveCounts(live_));
  b->Put(kv::CounterKey(kSegmentAgeCounter), EncodeSegmentAges(segs));
  b->Put(kv::CounterKey(kVlogHeadsCounter), EncodeVlogHeads(heads));
  b->Delete(kv::CounterKey(kOldSegmentUsageCounter));
  for (uint64_t n : entries_) b->Delete(kv::JournalKey(n));
  return entries_.size();
}

void LiveJournal::CheckpointWritten(size_t folded) {
  std::lock_guard<std::mutex> l(mu_);
  entries_.erase(entries_.begin(), entries_.begin() + std::min(folded, entries_.size()));
}

void LiveJournal::Rebase(std::map<uint32_t, uint64_t> live) {
  std::lock_guard<std::mutex> l(mu_);
  live_ = std::move(live);
}

std::map<uint32_t, uint64_t> LiveJournal::live() const {
  std::lock_guard<std::mutex> l(mu_);
  return live_;
}

size_t LiveJournal::entries_since_checkpoint() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.size();
}

}  // namespace sepfs::fs
