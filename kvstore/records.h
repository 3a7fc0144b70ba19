// Value codecs of the metadata LSM. Each encoding starts with a version byte;
// decoders reject short, long or unknown-version input with Corruption.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "vlog/format.h"
#include "vlog/status.h"

namespace sepfs::kv {

struct Timespec {
  int64_t sec = 0;
  uint32_t nsec = 0;
  bool operator==(const Timespec&) const = default;
};

// InodeRecord::xattr_list_bytes when not recorded.
constexpr uint32_t kXattrsUnknown = UINT32_MAX;

struct InodeRecord {
  uint64_t ino = 0;
  uint32_t mode = 0;   // type and permission bits, as st_mode
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  uint64_t blocks = 0;  // 512-byte units allocated (st_blocks)
  Timespec atime, mtime, ctime;
  // What listxattr(2) of the inode returns, in bytes: each stored xattr
  // name with its NUL. Changed in the batch that adds or removes a name,
  // so a scan of the inode's xattrs can stop at its last one instead of
  // walking the deletion markers behind it. kXattrsUnknown in stores
  // before format 5 and in records repair made: then only a scan to the
  // end of the range knows. Encoded as record version 2 when known (a
  // version-2 record holding kXattrsUnknown decodes as unknown).
  uint32_t xattr_list_bytes = kXattrsUnknown;
  bool xattrs_known() const { return xattr_list_bytes != kXattrsUnknown; }
  bool operator==(const InodeRecord&) const = default;
};
std::string EncodeInode(const InodeRecord& r);
sepfs::Status DecodeInode(std::string_view src, InodeRecord* r);

struct DirEntry {
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits of the child's mode
  bool operator==(const DirEntry&) const = default;
};
std::string EncodeDirEntry(const DirEntry& e);
sepfs::Status DecodeDirEntry(std::string_view src, DirEntry* e);

// Value of a block key: a pointer into the vLog, or, for a block no longer
// than the store's inline limit (Superblock::inline_max), the block's bytes
// themselves (HashKV's selective separation: tiny values stay in the LSM).
struct BlockValue {
  bool inlined = false;
  vlog::BlockPtr ptr;      // when !inlined
  std::string_view bytes;  // when inlined: a view into the decoded source
  uint64_t length() const { return inlined ? bytes.size() : ptr.length; }
};
std::string EncodeBlockValue(const vlog::BlockPtr& p);
std::string EncodeInlineBlock(std::string_view bytes);
// Either kind; an unknown tag or a malformed pointer is Corruption.
sepfs::Status DecodeBlock(std::string_view src, BlockValue* v);
// A vLog pointer only: inline data (which names no record) is
// InvalidArgument, so walks over records skip it with the corrupt values.
sepfs::Status DecodeBlockValue(std::string_view src, vlog::BlockPtr* p);

constexpr uint64_t kSuperMagic = 0x3153465350455359ull;  // "YEPSFS1"-ish tag
// Format versions: 1, the first; 2, vLog segments may also be of the warm
// and frozen streams (vlog/format.h), which version-1 binaries cannot read;
// 3, block values may hold inline data, and the superblock its limit;
// 4, vLog segment files may be recycled (version-2 segment headers,
// vlog/format.h), which binaries of version 3 would take for damage and
// repair away; 5, inode records may be of version 2 (with
// xattr_list_bytes), which binaries of version 4 cannot decode, and their
// xattr changes would leave the count wrong. Older stores are still mounted: version 1 keeps to the hot
// and cold streams, versions 1 and 2 never inline data, versions 1 to 3
// never recycle a segment file (a store of an older format that holds a
// recycled segment, from the binaries of 2026-11-24, is raised to 4 when
// opened for writing: fs::Store::Open).
constexpr uint32_t kMetaFormatVersion = 5;
constexpr uint32_t kMetaFormatLifetimeStreams = 2;
constexpr uint32_t kMetaFormatInlineData = 3;
constexpr uint32_t kMetaFormatRecycledSegments = 4;
constexpr uint32_t kMetaFormatXattrCounts = 5;

// Bounds of the store geometry: mkfs refuses values outside them, and so
// does DecodeSuperblock (with Corruption), so no crafted superblock reaches
// a division by block_size or a segment too small for one block.
constexpr uint32_t kMinBlockSize = 4096;
constexpr uint32_t kMaxBlockSize = 4u << 20;
constexpr uint64_t kMinSegmentSize = 1ull << 20;
constexpr uint64_t kMaxSegmentSize = 1ull << 31;
constexpr uint64_t kMinBlocksPerSegment = 4;
// A power of two from kMinBlockSize to kMaxBlockSize.
bool ValidBlockSize(uint32_t block_size);
// From kMinSegmentSize to kMaxSegmentSize and at least kMinBlocksPerSegment
// blocks of block_size.
bool ValidSegmentSize(uint64_t segment_size, uint32_t block_size);
// A store limited in size holds at least this many segments.
constexpr uint64_t kMinCapacitySegments = 16;
// 0 (no limit: the free space below) or at least kMinCapacitySegments
// segments of segment_size.
bool ValidCapacity(uint64_t capacity, uint64_t segment_size);
// Blocks of at most this many bytes may be stored inline: a bound that
// keeps the LSM's values small (WiscKey) while sparing tiny files a vLog
// record, its read and its sync.
constexpr uint32_t kMaxInlineBytes = 64 * 1024;
// From 0 (never inline) to kMaxInlineBytes, and no more than half a block
// (full blocks always go to the vLog).
bool ValidInlineMax(uint32_t inline_max, uint32_t block_size);
// The limit mkfs sets unless told: 4 KiB, or a quarter of a smaller block.
uint32_t DefaultInlineMax(uint32_t block_size);

// Fixed at mkfs.
struct Superblock {
  uint64_t magic = kSuperMagic;
  uint32_t version = kMetaFormatVersion;
  uint32_t block_size = 64 * 1024;   // logical block size of files, bytes
  uint64_t segment_size = 64ull << 20;
  uint64_t capacity = 0;             // byte limit of the store; 0 = free space below
  int64_t created = 0;               // seconds since the epoch
  std::string uuid;                  // 16 random bytes, hex
  uint32_t inline_max = 0;           // blocks up to this size are stored inline (version 3+)
  bool operator==(const Superblock&) const = default;
};
std::string EncodeSuperblock(const Superblock& s);
// Rejects a wrong magic with Corruption and a newer version with
// errno EPROTONOSUPPORT ("store format version N is newer than M"); a
// block_size, segment_size, capacity or inline_max out of bounds is
// Corruption naming the field. Versions before 3 decode with inline_max 0.
sepfs::Status DecodeSuperblock(std::string_view src, Superblock* s);

}  // namespace sepfs::kv
