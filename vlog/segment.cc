#include "vlog/segment.h"

#include <algorithm>

namespace sepfs::vlog::internal {
namespace {

std::string Location(uint32_t segment, uint64_t offset) {
  return "vlog segment " + std::to_string(segment) + " offset " + std::to_string(offset);
}

}  // namespace

Status CheckRecord(const BlockPtr& ptr, uint64_t inode, uint64_t block, const char* header,
                   const char* data) {
  // The location is formatted only on failure: this runs for every record read.
  auto where = [&] { return Location(ptr.segment, ptr.offset); };
  RecordHeader h;
  Status st = DecodeRecordHeader(header, &h);
  if (!st.ok()) return st.WithContext(where());
  auto mismatch = [&](const char* field, uint64_t want, uint64_t have) {
    return Status::Corruption(where() + ": record " + field + " is " + std::to_string(have) +
                              ", expected " + std::to_string(want));
  };
  if (h.data_len != ptr.length) return mismatch("length", ptr.length, h.data_len);
  if (h.inode != inode) return mismatch("inode", inode, h.inode);
  if (h.block != block) return mismatch("block", block, h.block);
  if (h.seq != ptr.seq) return mismatch("seq", ptr.seq, h.seq);
  st = VerifyRecord(header, h, std::string_view(data, h.data_len));
  if (!st.ok()) return st.WithContext(where());
  return Status::OK();
}

SegmentReader::SegmentReader(File* file, uint32_t segment_id, uint64_t base_seq, uint64_t limit,
                             size_t chunk, uint64_t start)
    : file_(file),
      id_(segment_id),
      base_seq_(base_seq),
      limit_(limit),
      chunk_(std::max<size_t>(chunk, 4096)),
      pos_(std::max<uint64_t>(start, kSegmentHeaderSize)),
      record_off_(pos_) {}

std::string SegmentReader::Where() const { return Location(id_, record_off_); }

Status SegmentReader::Fill(uint64_t need) {
  if (pos_ >= window_off_ && pos_ + need <= window_off_ + window_.size()) return Status::OK();
  const uint64_t n = std::min<uint64_t>(std::max<uint64_t>(chunk_, need), limit_ - pos_);
  window_.resize(n);
  window_off_ = pos_;
  size_t got = 0;
  Status st = file_->Read(pos_, n, window_.data(), &got);
  window_.resize(got);
  if (!st.ok()) return st.WithContext("vlog segment " + std::to_string(id_) + " scan");
  if (got < need) return Status::Corruption(Where() + ": segment file ends inside the record");
  return Status::OK();
}

Status SegmentReader::EndOfLife(Status st) {
  if (base_seq_ != 0) torn_ = !WholeRecordAfter(pos_ + 1);
  return st;
}

bool SegmentReader::WholeRecordAfter(uint64_t from) {
  const uint64_t keep = pos_;
  uint64_t at = limit_;
  const Status st = FindWholeRecord(from, &at);
  pos_ = keep;
  if (!st.ok()) return true;  // unreadable: not provably a tear, so never cut
  return at < limit_;
}

Status SegmentReader::WholeRecordAt(uint64_t at, bool* whole) {
  *whole = false;
  if (limit_ - at < kRecordHeaderSize) return Status::OK();
  pos_ = at;
  SEPFS_RETURN_IF_ERROR(Fill(kRecordHeaderSize));
  RecordHeader h;
  if (!DecodeRecordHeader(window_.data() + (at - window_off_), &h).ok()) return Status::OK();
  const uint64_t size = kRecordHeaderSize + uint64_t{h.data_len};
  // Too long for what is left, or an earlier life's.
  if (limit_ - at < size || h.seq < base_seq_) return Status::OK();
  SEPFS_RETURN_IF_ERROR(Fill(size));
  const char* raw = window_.data() + (at - window_off_);
  *whole = VerifyRecord(raw, h, std::string_view(raw + kRecordHeaderSize, h.data_len)).ok();
  return Status::OK();
}

Status SegmentReader::FindWholeRecord(uint64_t from, uint64_t* at) {
  const char bytes[4] = {static_cast<char>(kRecordMagic & 0xff),
                         static_cast<char>((kRecordMagic >> 8) & 0xff),
                         static_cast<char>((kRecordMagic >> 16) & 0xff),
                         static_cast<char>(kRecordMagic >> 24)};
  const std::string_view magic(bytes, sizeof(bytes));
  *at = limit_;
  for (uint64_t off = from; off < limit_ && limit_ - off >= kRecordHeaderSize;) {
    pos_ = off;
    const uint64_t span = std::min<uint64_t>(chunk_, limit_ - off);
    SEPFS_RETURN_IF_ERROR(Fill(span));
    const std::string_view window(window_.data() + (off - window_off_), span);
    const size_t hit = window.find(magic);
    if (hit == std::string_view::npos) {
      off += std::max<uint64_t>(1, span - (magic.size() - 1));  // a magic may straddle
      continue;
    }
    bool whole = false;
    SEPFS_RETURN_IF_ERROR(WholeRecordAt(off + hit, &whole));
    if (whole) {
      *at = off + hit;
      return Status::OK();
    }
    off += hit + 1;
  }
  return Status::OK();
}

Status SegmentReader::SkipDamage() {
  uint64_t at = limit_;
  const Status st = FindWholeRecord(record_off_ + 1, &at);
  pos_ = st.ok() ? at : limit_;
  torn_ = false;
  // Corruption: the file ends before limit_, so nothing whole follows.
  return st.IsCorruption() ? Status::OK() : st;
}

Status SegmentReader::Next(RecordHeader* h, std::string_view* data, bool* at_end) {
  record_off_ = pos_;
  *at_end = false;
  *h = RecordHeader();
  *data = {};
  if (pos_ >= limit_) {
    *at_end = true;
    return Status::OK();
  }
  if (limit_ - pos_ < kRecordHeaderSize) {
    torn_ = true;
    return Status::Corruption(Where() + ": torn record header (" +
                              std::to_string(limit_ - pos_) + " bytes left)");
  }
  SEPFS_RETURN_IF_ERROR(Fill(kRecordHeaderSize));
  const char* raw = window_.data() + (pos_ - window_off_);
  Status st = DecodeRecordHeader(raw, h);
  if (!st.ok()) return EndOfLife(st.WithContext(Where()));
  const uint64_t size = kRecordHeaderSize + uint64_t{h->data_len};
  if (limit_ - pos_ < size) {
    // The length is not verified yet (the checksum needs the whole record):
    // a crash tears only the last append, so a whole record behind this one
    // means a damaged length, which must never be cut off as a tear.
    torn_ = !WholeRecordAfter(pos_ + 1);
    return Status::Corruption(Where() + (torn_ ? ": torn record (" : ": damaged record length (") +
                              std::to_string(size) + " bytes, " +
                              std::to_string(limit_ - pos_) + " left)");
  }
  SEPFS_RETURN_IF_ERROR(Fill(size));
  raw = window_.data() + (pos_ - window_off_);
  std::string_view payload(raw + kRecordHeaderSize, h->data_len);
  st = VerifyRecord(raw, *h, payload);
  if (!st.ok()) return EndOfLife(st.WithContext(Where()));
  if (h->seq < base_seq_) {
    return EndOfLife(Status::Corruption(Where() + ": record of the file's earlier life (seq " +
                                        std::to_string(h->seq) + ")"));
  }
  *data = payload;
  pos_ += size;
  return Status::OK();
}

}  // namespace sepfs::vlog::internal
