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

// Value of a block key: a pointer into the vLog.
std::string EncodeBlockValue(const vlog::BlockPtr& p);
sepfs::Status DecodeBlockValue(std::string_view src, vlog::BlockPtr* p);

constexpr uint64_t kSuperMagic = 0x3153465350455359ull;  // "YEPSFS1"-ish tag
// Format versions: 1, the first; 2, vLog segments may also be of the warm
// and frozen streams (vlog/format.h), which version-1 binaries cannot read.
// Version-1 stores are still mounted, and keep to the hot and cold streams.
constexpr uint32_t kMetaFormatVersion = 2;
constexpr uint32_t kMetaFormatLifetimeStreams = 2;

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

// Fixed at mkfs.
struct Superblock {
  uint64_t magic = kSuperMagic;
  uint32_t version = kMetaFormatVersion;
  uint32_t block_size = 64 * 1024;   // logical block size of files, bytes
  uint64_t segment_size = 64ull << 20;
  uint64_t capacity = 0;             // byte limit of the store; 0 = free space below
  int64_t created = 0;               // seconds since the epoch
  std::string uuid;                  // 16 random bytes, hex
};
std::string EncodeSuperblock(const Superblock& s);
// Rejects a wrong magic with Corruption and a newer version with
// errno EPROTONOSUPPORT ("store format version N is newer than M"); a
// block_size or segment_size out of bounds is Corruption naming the field.
sepfs::Status DecodeSuperblock(std::string_view src, Superblock* s);

}  // namespace sepfs::kv
