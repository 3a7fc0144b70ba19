#include "vlog/format.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <string>

#include "vlog/env.h"

namespace sepfs::vlog {
namespace {

constexpr size_t kSegmentChecksumOffset = 56;
constexpr size_t kStoreIdOffset = 32;
constexpr size_t kRecordChecksumOffset = 40;

void Put8(char* p, uint8_t v) { p[0] = static_cast<char>(v); }
void Put16(char* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void Put64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint8_t Get8(const char* p) { return static_cast<uint8_t>(p[0]); }
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// XXH3-64 of header bytes [0, 40) followed by the data, as one stream.
uint64_t RecordChecksum(const char* raw_header, std::string_view data) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, raw_header, kRecordChecksumOffset);
  XXH3_64bits_update(&state, data.data(), data.size());
  return XXH3_64bits_digest(&state);
}

}  // namespace

void EncodeSegmentHeader(const SegmentHeader& h, char* dst) {
  std::memset(dst, 0, kSegmentHeaderSize);
  Put32(dst + 0, kSegmentMagic);
  Put8(dst + 4, h.base_seq != 0 ? kRecycledSegmentVersion : kFormatVersion);
  Put8(dst + 5, h.stream);
  Put8(dst + 6, h.flags);
  Put32(dst + 8, h.segment_id);
  Put64(dst + 16, h.create_time);
  Put64(dst + 24, h.base_seq);
  std::memcpy(dst + kStoreIdOffset, h.store_id.data(), kStoreIdSize);
  Put64(dst + kSegmentChecksumOffset, XXH3_64bits(dst, kSegmentChecksumOffset));
}

const char* StreamName(Stream s) {
  switch (s) {
    case Stream::kHot:
      return "hot";
    case Stream::kCold:
      return "cold";
    case Stream::kWarm:
      return "warm";
    case Stream::kFrozen:
      return "frozen";
  }
  return "unknown";
}

Status DecodeSegmentHeader(const char* src, SegmentHeader* h) {
  if (Get32(src + 0) != kSegmentMagic) return Status::Corruption("segment header: bad magic");
  const uint8_t version = Get8(src + 4);
  if (version != kFormatVersion && version != kRecycledSegmentVersion) {
    return Status::Corruption("segment header: unsupported version " + std::to_string(version));
  }
  if (Get64(src + kSegmentChecksumOffset) != XXH3_64bits(src, kSegmentChecksumOffset)) {
    return Status::Corruption("segment header: checksum mismatch");
  }
  const uint64_t base_seq = Get64(src + 24);
  if ((version == kRecycledSegmentVersion) != (base_seq != 0)) {
    return Status::Corruption("segment header: version " + std::to_string(version) +
                              " with base_seq " + std::to_string(base_seq));
  }
  const uint8_t stream = Get8(src + 5);
  if (stream >= kNumStreams) {
    return Status::Corruption("segment header: unknown stream " + std::to_string(stream));
  }
  h->stream = stream;
  h->flags = Get8(src + 6);
  h->segment_id = Get32(src + 8);
  h->create_time = Get64(src + 16);
  h->base_seq = base_seq;
  std::memcpy(h->store_id.data(), src + kStoreIdOffset, kStoreIdSize);
  return Status::OK();
}

StoreId UncheckedStoreId(const char* header) {
  StoreId id{};
  if (Get32(header) == kSegmentMagic) std::memcpy(id.data(), header + kStoreIdOffset, kStoreIdSize);
  return id;
}

bool FarApart(const StoreId& a, const StoreId& b) {
  int bits = 0;
  for (size_t i = 0; i < kStoreIdSize; ++i) {
    bits += std::popcount(static_cast<unsigned>(a[i] ^ b[i]));
  }
  return KnownStoreId(a) && KnownStoreId(b) && bits > static_cast<int>(kStoreIdSize * 8 / 4);
}

std::string StoreIdHex(const StoreId& id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool ParseStoreIdHex(std::string_view hex, StoreId* id) {
  if (hex.size() != 2 * kStoreIdSize) return false;
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  StoreId out;
  for (size_t i = 0; i < kStoreIdSize; ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *id = out;
  return true;
}

uint64_t EncodeRecordHeader(RecordHeader* h, std::string_view data, char* dst) {
  std::memset(dst, 0, kRecordHeaderSize);
  Put32(dst + 0, kRecordMagic);
  Put8(dst + 4, kFormatVersion);
  Put8(dst + 5, h->flags);
  Put16(dst + 6, 0);
  Put32(dst + 8, h->data_len);
  Put64(dst + 16, h->inode);
  Put64(dst + 24, h->block);
  Put64(dst + 32, h->seq);
  h->checksum = RecordChecksum(dst, data);
  Put64(dst + kRecordChecksumOffset, h->checksum);
  return h->checksum;
}

Status DecodeRecordHeader(const char* src, RecordHeader* h) {
  if (Get32(src + 0) != kRecordMagic) return Status::Corruption("record header: bad magic");
  if (Get8(src + 4) != kFormatVersion) {
    return Status::Corruption("record header: unsupported version " +
                              std::to_string(Get8(src + 4)));
  }
  const uint32_t data_len = Get32(src + 8);
  if (data_len > kMaxRecordData) {
    return Status::Corruption("record header: data length " + std::to_string(data_len) +
                              " exceeds the maximum");
  }
  h->flags = Get8(src + 5);
  h->data_len = data_len;
  h->inode = Get64(src + 16);
  h->block = Get64(src + 24);
  h->seq = Get64(src + 32);
  h->checksum = Get64(src + kRecordChecksumOffset);
  return Status::OK();
}

Status VerifyRecord(const char* raw_header, const RecordHeader& h, std::string_view data) {
  if (data.size() != h.data_len) {
    return Status::Corruption("record: have " + std::to_string(data.size()) +
                              " data bytes, header says " + std::to_string(h.data_len));
  }
  if (Get64(raw_header + kRecordChecksumOffset) != h.checksum ||
      RecordChecksum(raw_header, data) != h.checksum) {
    return Status::Corruption("record: checksum mismatch");
  }
  return Status::OK();
}

namespace {

// PREFIX, id as at least 8 decimal digits, ".vlog".
std::string NumberedName(std::string_view prefix, uint32_t id) {
  char digits[16];
  std::snprintf(digits, sizeof(digits), "%08u", id);
  return std::string(prefix) + digits + ".vlog";
}

bool ParseNumberedName(std::string_view prefix, std::string_view name, uint32_t* id) {
  constexpr std::string_view kSuffix = ".vlog";
  if (name.size() < prefix.size() + 8 + kSuffix.size()) return false;
  if (!name.starts_with(prefix) || !name.ends_with(kSuffix)) return false;
  std::string_view digits =
      name.substr(prefix.size(), name.size() - prefix.size() - kSuffix.size());
  if (digits.size() > 10) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  // Only the canonical spelling names a file ("seg-000000001.vlog" does not).
  if (NumberedName(prefix, static_cast<uint32_t>(v)) != name) return false;
  *id = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

std::string SegmentFileName(uint32_t id) { return NumberedName("seg-", id); }

bool ParseSegmentFileName(std::string_view name, uint32_t* id) {
  return ParseNumberedName("seg-", name, id);
}

std::string FreeFileName(uint32_t id) { return NumberedName("free-", id); }

bool ParseFreeFileName(std::string_view name, uint32_t* id) {
  return ParseNumberedName("free-", name, id);
}

void EncodeBlockPtr(const BlockPtr& p, char* dst) {
  Put32(dst + 0, p.segment);
  Put32(dst + 4, p.offset);
  Put32(dst + 8, p.length);
  Put64(dst + 12, p.seq);
}

bool DecodeBlockPtr(std::string_view src, BlockPtr* p) {
  if (src.size() != kBlockPtrEncodedSize) return false;
  p->segment = Get32(src.data() + 0);
  p->offset = Get32(src.data() + 4);
  p->length = Get32(src.data() + 8);
  p->seq = Get64(src.data() + 12);
  return p->length <= kMaxRecordData && p->offset >= kSegmentHeaderSize;
}

bool RecordVerifiesAt(File* f, const BlockPtr& p, uint64_t inode, uint64_t block) {
  std::string raw(p.record_size(), '\0');
  size_t got = 0;
  RecordHeader h;
  return f->Read(p.offset, raw.size(), raw.data(), &got).ok() && got == raw.size() &&
         DecodeRecordHeader(raw.data(), &h).ok() && h.inode == inode && h.block == block &&
         h.data_len == p.length && h.seq == p.seq &&
         VerifyRecord(raw.data(), h, std::string_view(raw).substr(kRecordHeaderSize)).ok();
}

}  // namespace sepfs::vlog
