// On-disk format of vLog segments and records. All integers little-endian.
//
// A segment is an append-only file STORE/vlog/seg-NNNNNNNN.vlog:
//
//   +----------------+----------+----------+-----+
//   | segment header | record 0 | record 1 | ... |
//   +----------------+----------+----------+-----+
//
// Segment header (kSegmentHeaderSize = 64 bytes):
//   off size field
//     0    4 magic        kSegmentMagic
//     4    1 version      kFormatVersion
//     5    1 stream       Stream the segment was opened for
//     6    1 flags        kSegmentRewritten, else 0
//     7    1 reserved     0
//     8    4 segment_id
//    12    4 reserved     0
//    16    8 create_time  seconds since the epoch
//    24    8 base_seq     version 2 only (else 0): the file is recycled,
//                         records with a lower seq are an earlier life's
//    32   16 store_id     the store the segment belongs to (Options::store_id);
//                         zeros: unknown (written before store ids, or by a
//                         log opened without one)
//    48    8 reserved     0
//    56    8 checksum     XXH3-64 of bytes [0, 56)
//
// Record (kRecordHeaderSize = 48 bytes of header, then data_len bytes):
//   off size field
//     0    4 magic        kRecordMagic
//     4    1 version      kFormatVersion
//     5    1 flags        kRecordRelocated for a GC copy, kRecordShortened for
//                         a truncation's cut last block, else 0
//     6    2 reserved     0
//     8    4 data_len     <= kMaxRecordData
//    12    4 reserved     0
//    16    8 inode        owning inode ("the key stored with the value")
//    24    8 block        logical block number within the inode
//    32    8 seq          vLog-wide sequence number, strictly increasing
//    40    8 checksum     XXH3-64 of header bytes [0, 40) followed by the data
//
// Every field a reader trusts is covered by the checksum; a reader never
// returns data whose checksum, magic, version, length, inode or block
// disagree with what it expected (it returns Status::Corruption, errno EIO).
// See docs/vlog-format.md for the prose specification.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "vlog/status.h"

namespace sepfs {
class File;
}  // namespace sepfs

namespace sepfs::vlog {

constexpr uint32_t kSegmentMagic = 0x47455356;  // "VSEG"
constexpr uint32_t kRecordMagic = 0x43455256;   // "VREC"
constexpr uint8_t kFormatVersion = 1;
// Version of the header of a segment whose file was recycled (base_seq set);
// its records keep kFormatVersion. Binaries that know only version 1 take
// such a segment for a damaged one: they still read its records (each is
// verified on its own) but never scan or collect it.
constexpr uint8_t kRecycledSegmentVersion = 2;
constexpr size_t kSegmentHeaderSize = 64;
constexpr size_t kRecordHeaderSize = 48;
constexpr uint32_t kMaxRecordData = 16u << 20;
// Record flag: a copy made by GC of a record that was live when read. Crash
// recovery never replays such a record (it may be a stale copy that lost its
// compare-and-set to a newer user write); see docs/durability.md.
constexpr uint8_t kRecordRelocated = 1;
// Record flag: the last block of a truncation, rewritten shortened. Its batch
// also sets the size and drops the blocks past it; replayed without that
// batch it would turn bytes the old size still covers into zeros, so crash
// recovery never replays it either.
constexpr uint8_t kRecordShortened = 2;
// The records crash recovery never replays.
constexpr uint8_t kRecordNeverReplayed = kRecordRelocated | kRecordShortened;

// Open segments ("streams") a record can be appended to. The vLog only
// keeps them apart; which data goes where is the caller's policy (for the
// filesystem: docs/gc.md, "Streams"). Roughly, by expected lifetime:
// kHot shortest, then kWarm, kCold, kFrozen longest. Stores written before
// kWarm and kFrozen existed use only kHot and kCold.
enum class Stream : uint8_t { kHot = 0, kCold = 1, kWarm = 2, kFrozen = 3 };
constexpr int kNumStreams = 4;
// "hot", "cold", "warm", "frozen".
const char* StreamName(Stream s);

// Segment header flag: the header was rewritten by repair (the original
// was damaged), so `stream` is a guess and the segment's records are not
// ordered with the stream's other segments.
constexpr uint8_t kSegmentRewritten = 1;

// The id of the store a segment belongs to (random, made by mkfs); all
// zeros means unknown. A segment of another store is never taken for this
// one's: its records may carry the same inode, block and seq numbers.
constexpr size_t kStoreIdSize = 16;
using StoreId = std::array<uint8_t, kStoreIdSize>;
inline bool KnownStoreId(const StoreId& id) { return id != StoreId{}; }
// The store id at its place in a segment header whose checksum may have
// failed, when the magic at least is intact; else unknown (zeros). Damage
// may have changed it: see FarApart.
StoreId UncheckedStoreId(const char* header);
// Whether two known ids differ in more than a quarter of their bits. Two
// stores' random ids differ in about half (64 +- 6 of 128); damage to one
// id that left the header's magic intact flips few.
bool FarApart(const StoreId& a, const StoreId& b);
// Lowercase hex, as in the superblock's uuid.
std::string StoreIdHex(const StoreId& id);
// Parses 2 x kStoreIdSize hex digits; false (and *id unchanged) otherwise.
bool ParseStoreIdHex(std::string_view hex, StoreId* id);

struct SegmentHeader {
  uint8_t stream = 0;
  uint8_t flags = 0;
  uint32_t segment_id = 0;
  uint64_t create_time = 0;
  // Nonzero: the file held an earlier segment, whose records (all with
  // lower seqs) may follow this life's; the first such record ends the
  // segment. Encoded with kRecycledSegmentVersion.
  uint64_t base_seq = 0;
  StoreId store_id{};  // zeros: unknown
};

struct RecordHeader {
  uint8_t flags = 0;
  uint32_t data_len = 0;
  uint64_t inode = 0;
  uint64_t block = 0;
  uint64_t seq = 0;
  uint64_t checksum = 0;  // filled by EncodeRecord, checked by VerifyRecord
};

// Writes the 64-byte header (checksum included) to dst.
void EncodeSegmentHeader(const SegmentHeader& h, char* dst);
// Checks magic, version and checksum of the 64 bytes at src.
Status DecodeSegmentHeader(const char* src, SegmentHeader* h);

// Writes the 48-byte header for h and data to dst, computing the checksum
// over the header and data. Returns the checksum (also stored in h->checksum).
uint64_t EncodeRecordHeader(RecordHeader* h, std::string_view data, char* dst);
// Parses the 48 bytes at src: magic, version, data_len bound. Does not check
// the checksum (the data is needed for that).
Status DecodeRecordHeader(const char* src, RecordHeader* h);
// Checks h->checksum against the raw header bytes and data.
Status VerifyRecord(const char* raw_header, const RecordHeader& h, std::string_view data);

// Name of segment `id` inside the vlog directory: "seg-%08u.vlog".
std::string SegmentFileName(uint32_t id);
// Parses a segment file name; false if name is not one.
bool ParseSegmentFileName(std::string_view name, uint32_t* id);
// Name of the file of deleted segment `id` kept for recycling:
// "free-%08u.vlog". Its contents mean nothing.
std::string FreeFileName(uint32_t id);
bool ParseFreeFileName(std::string_view name, uint32_t* id);

// Where a block's record lives. Stored in the metadata LSM as the value of a
// block key: segment(4) offset(4) length(4) seq(8) = kBlockPtrEncodedSize.
struct BlockPtr {
  uint32_t segment = 0;
  uint32_t offset = 0;  // of the record header within the segment file
  uint32_t length = 0;  // data bytes (record size = kRecordHeaderSize + length)
  uint64_t seq = 0;

  uint64_t record_size() const { return kRecordHeaderSize + uint64_t{length}; }
  bool operator==(const BlockPtr&) const = default;
};
constexpr size_t kBlockPtrEncodedSize = 20;
void EncodeBlockPtr(const BlockPtr& p, char* dst);
// False if src is not exactly kBlockPtrEncodedSize bytes, or the decoded
// pointer cannot name a record (length > kMaxRecordData, or an offset inside
// the segment header).
bool DecodeBlockPtr(std::string_view src, BlockPtr* p);

// Whether the record pointer p of (inode, block) names is in file f, whole
// and verified: for telling whose a file is that the log does not serve
// (a segment file set aside, or one before the store is open).
bool RecordVerifiesAt(File* f, const BlockPtr& p, uint64_t inode, uint64_t block);

}  // namespace sepfs::vlog
