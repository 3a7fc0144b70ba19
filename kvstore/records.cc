#include "kvstore/records.h"

#include <algorithm>
#include <cerrno>

namespace sepfs::kv {
namespace {

constexpr uint8_t kRecordVersion = 1;
constexpr char kBlockValueVlogTag = 'P';
constexpr char kBlockValueInlineTag = 'D';

constexpr size_t kInodeEncodedSize = 1 + 8 + 4 * 4 + 8 * 3 + 3 * (8 + 4);
// Version 2: version 1 followed by xattr_list_bytes(4).
constexpr uint8_t kInodeVersionXattrs = 2;
constexpr size_t kInodeEncodedSizeXattrs = kInodeEncodedSize + 4;
constexpr size_t kDirEntryEncodedSize = 1 + 8 + 4;
// The superblock starts with a header every format version keeps:
// record version(1) magic(8) format version(4).
constexpr size_t kSuperHeaderSize = 1 + 8 + 4;
constexpr size_t kSuperFixedSize = kSuperHeaderSize + 4 + 8 + 8 + 8 + 4;

class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Fixed(v, 4); }
  void U64(uint64_t v) { Fixed(v, 8); }
  void Time(const Timespec& t) {
    U64(static_cast<uint64_t>(t.sec));
    U32(t.nsec);
  }
  void Bytes(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Fixed(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reads fixed-width little-endian fields; once a read runs past the end,
// ok() is false and every later read yields 0.
class Reader {
 public:
  explicit Reader(std::string_view src) : src_(src) {}
  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }
  Timespec Time() {
    Timespec t;
    t.sec = static_cast<int64_t>(U64());
    t.nsec = U32();
    return t;
  }
  std::string_view Bytes() {
    uint32_t n = U32();
    if (!ok_ || n > src_.size()) {
      ok_ = false;
      return {};
    }
    std::string_view s = src_.substr(0, n);
    src_.remove_prefix(n);
    return s;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && src_.empty(); }

 private:
  uint64_t Fixed(size_t n) {
    if (!ok_ || src_.size() < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(src_[i])} << (8 * i);
    src_.remove_prefix(n);
    return v;
  }
  std::string_view src_;
  bool ok_ = true;
};

Status CheckShape(std::string_view what, std::string_view src, size_t want,
                  uint8_t version = kRecordVersion) {
  if (src.size() != want) {
    return Status::Corruption(std::string(what) + " record has " + std::to_string(src.size()) +
                              " bytes, expected " + std::to_string(want));
  }
  if (static_cast<uint8_t>(src[0]) != version) {
    return Status::Corruption(std::string(what) + " record has unknown version " +
                              std::to_string(static_cast<uint8_t>(src[0])));
  }
  return Status::OK();
}

}  // namespace

std::string EncodeInode(const InodeRecord& r) {
  Writer w(kInodeEncodedSizeXattrs);
  w.U8(r.xattrs_known() ? kInodeVersionXattrs : kRecordVersion);
  w.U64(r.ino);
  w.U32(r.mode);
  w.U32(r.uid);
  w.U32(r.gid);
  w.U32(r.nlink);
  w.U64(r.size);
  w.U64(r.rdev);
  w.U64(r.blocks);
  w.Time(r.atime);
  w.Time(r.mtime);
  w.Time(r.ctime);
  if (r.xattrs_known()) w.U32(r.xattr_list_bytes);
  return w.Take();
}

Status DecodeInode(std::string_view src, InodeRecord* r) {
  const bool v2 = !src.empty() && static_cast<uint8_t>(src[0]) == kInodeVersionXattrs;
  SEPFS_RETURN_IF_ERROR(v2 ? CheckShape("inode", src, kInodeEncodedSizeXattrs, kInodeVersionXattrs)
                           : CheckShape("inode", src, kInodeEncodedSize));
  Reader in(src.substr(1));
  InodeRecord out;
  out.ino = in.U64();
  out.mode = in.U32();
  out.uid = in.U32();
  out.gid = in.U32();
  out.nlink = in.U32();
  out.size = in.U64();
  out.rdev = in.U64();
  out.blocks = in.U64();
  out.atime = in.Time();
  out.mtime = in.Time();
  out.ctime = in.Time();
  // A version-2 count of 0xffffffff (never written) reads as unknown: as
  // safe as any count, and the rest of the record stays readable.
  if (v2) out.xattr_list_bytes = in.U32();
  if (!in.done()) return Status::Corruption("inode record is malformed");
  *r = out;
  return Status::OK();
}

std::string EncodeDirEntry(const DirEntry& e) {
  Writer w(kDirEntryEncodedSize);
  w.U8(kRecordVersion);
  w.U64(e.ino);
  w.U32(e.type);
  return w.Take();
}

Status DecodeDirEntry(std::string_view src, DirEntry* e) {
  SEPFS_RETURN_IF_ERROR(CheckShape("dentry", src, kDirEntryEncodedSize));
  Reader in(src.substr(1));
  DirEntry out;
  out.ino = in.U64();
  out.type = in.U32();
  if (!in.done()) return Status::Corruption("dentry record is malformed");
  *e = out;
  return Status::OK();
}

std::string EncodeBlockValue(const vlog::BlockPtr& p) {
  std::string out(1 + vlog::kBlockPtrEncodedSize, '\0');
  out[0] = kBlockValueVlogTag;
  vlog::EncodeBlockPtr(p, out.data() + 1);
  return out;
}

std::string EncodeInlineBlock(std::string_view bytes) {
  std::string out;
  out.reserve(1 + bytes.size());
  out.push_back(kBlockValueInlineTag);
  out.append(bytes);
  return out;
}

Status DecodeBlock(std::string_view src, BlockValue* v) {
  if (!src.empty() && src[0] == kBlockValueInlineTag) {
    v->inlined = true;
    v->bytes = src.substr(1);
    return Status::OK();
  }
  if (src.empty() || src[0] != kBlockValueVlogTag) {
    return Status::Corruption("block value has unknown tag");
  }
  vlog::BlockPtr out;
  if (!vlog::DecodeBlockPtr(src.substr(1), &out)) {
    return Status::Corruption("block value has " + std::to_string(src.size()) +
                              " bytes, expected " +
                              std::to_string(1 + vlog::kBlockPtrEncodedSize));
  }
  v->inlined = false;
  v->ptr = out;
  v->bytes = {};
  return Status::OK();
}

Status DecodeBlockValue(std::string_view src, vlog::BlockPtr* p) {
  BlockValue v;
  SEPFS_RETURN_IF_ERROR(DecodeBlock(src, &v));
  if (v.inlined) return Status::InvalidArgument("block value is inline data, not a pointer");
  *p = v.ptr;
  return Status::OK();
}

bool ValidBlockSize(uint32_t block_size) {
  const bool pow2 = block_size != 0 && (block_size & (block_size - 1)) == 0;
  return pow2 && block_size >= kMinBlockSize && block_size <= kMaxBlockSize;
}

bool ValidCapacity(uint64_t capacity, uint64_t segment_size) {
  return capacity == 0 || capacity / kMinCapacitySegments >= segment_size;
}

bool ValidInlineMax(uint32_t inline_max, uint32_t block_size) {
  return inline_max <= kMaxInlineBytes && inline_max <= block_size / 2;
}

uint32_t DefaultInlineMax(uint32_t block_size) { return std::min(4096u, block_size / 4); }

bool ValidSegmentSize(uint64_t segment_size, uint32_t block_size) {
  return segment_size >= kMinSegmentSize && segment_size <= kMaxSegmentSize &&
         segment_size >= kMinBlocksPerSegment * block_size;
}

std::string EncodeSuperblock(const Superblock& s) {
  Writer w(kSuperFixedSize + 4 + s.uuid.size());
  w.U8(kRecordVersion);
  w.U64(s.magic);
  w.U32(s.version);
  w.U32(s.block_size);
  w.U64(s.segment_size);
  w.U64(s.capacity);
  w.U64(static_cast<uint64_t>(s.created));
  w.Bytes(s.uuid);
  if (s.version >= kMetaFormatInlineData) w.U32(s.inline_max);
  return w.Take();
}

Status DecodeSuperblock(std::string_view src, Superblock* s) {
  Reader in(src);
  uint8_t record_version = in.U8();
  uint64_t magic = in.U64();
  uint32_t version = in.U32();
  if (!in.ok() || magic != kSuperMagic) {
    return Status::Corruption("superblock: not a sepfs store (bad magic)");
  }
  // The format version decides first, so a newer layout is reported as such
  // rather than as corruption.
  if (version > kMetaFormatVersion) {
    return Status::FromErrno(EPROTONOSUPPORT, "store format version " + std::to_string(version) +
                                                  " is newer than this sepfs (" +
                                                  std::to_string(kMetaFormatVersion) + ")");
  }
  if (version == 0 || record_version != kRecordVersion) {
    return Status::Corruption("superblock: invalid version " + std::to_string(version) + "/" +
                              std::to_string(record_version));
  }
  Superblock out;
  out.magic = magic;
  out.version = version;
  out.block_size = in.U32();
  out.segment_size = in.U64();
  out.capacity = in.U64();
  out.created = static_cast<int64_t>(in.U64());
  out.uuid = std::string(in.Bytes());
  if (version >= kMetaFormatInlineData) out.inline_max = in.U32();
  if (!in.done()) return Status::Corruption("superblock: truncated or has trailing bytes");
  if (!ValidBlockSize(out.block_size)) {
    return Status::Corruption("superblock: block_size " + std::to_string(out.block_size) +
                              " is not a power of two from " + std::to_string(kMinBlockSize) +
                              " to " + std::to_string(kMaxBlockSize));
  }
  if (!ValidSegmentSize(out.segment_size, out.block_size)) {
    return Status::Corruption("superblock: segment_size " + std::to_string(out.segment_size) +
                              " is not from " + std::to_string(kMinSegmentSize) + " to " +
                              std::to_string(kMaxSegmentSize) + " bytes and at least " +
                              std::to_string(kMinBlocksPerSegment) + " blocks");
  }
  if (!ValidCapacity(out.capacity, out.segment_size)) {
    return Status::Corruption("superblock: capacity " + std::to_string(out.capacity) +
                              " is neither 0 (no limit) nor at least " +
                              std::to_string(kMinCapacitySegments) + " segments");
  }
  if (!ValidInlineMax(out.inline_max, out.block_size)) {
    return Status::Corruption("superblock: inline_max " + std::to_string(out.inline_max) +
                              " is more than " + std::to_string(kMaxInlineBytes) +
                              " bytes or half a block");
  }
  *s = std::move(out);
  return Status::OK();
}

}  // namespace sepfs::kv
