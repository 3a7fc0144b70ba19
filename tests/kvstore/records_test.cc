#include "kvstore/records.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace sepfs::kv {
namespace {

InodeRecord SampleInode() {
  InodeRecord r;
  r.ino = 0x0102030405060708ull;
  r.mode = 0100644;
  r.uid = 1000;
  r.gid = 4294967294u;
  r.nlink = 3;
  r.size = (1ull << 40) + 17;
  r.rdev = 0x0801;
  r.blocks = 123456789;
  r.atime = {-5, 999999999};
  r.mtime = {1700000000, 1};
  r.ctime = {INT64_MAX, 0};
  return r;
}

// Every strict prefix and every one-byte extension must be rejected.
template <typename T, typename Decode>
void ExpectRejectsTruncatedAndExtended(const std::string& enc, Decode decode) {
  for (size_t n = 0; n < enc.size(); ++n) {
    T out;
    Status s = decode(std::string_view(enc).substr(0, n), &out);
    EXPECT_TRUE(s.IsCorruption()) << "prefix of " << n << " bytes: " << s.ToString();
    EXPECT_EQ(s.err(), EIO);
  }
  T out;
  Status s = decode(enc + "x", &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

TEST(Records, InodeRoundTrip) {
  const InodeRecord r = SampleInode();
  const std::string enc = EncodeInode(r);
  EXPECT_EQ(enc[0], 1);  // version
  InodeRecord back;
  ASSERT_TRUE(DecodeInode(enc, &back).ok());
  EXPECT_EQ(back, r);

  InodeRecord zero;
  ASSERT_TRUE(DecodeInode(EncodeInode(InodeRecord{}), &back).ok());
  EXPECT_EQ(back, zero);
}

TEST(Records, InodeFieldsAreLittleEndian) {
  InodeRecord r;
  r.ino = 0x0102;
  const std::string enc = EncodeInode(r);
  EXPECT_EQ(static_cast<unsigned char>(enc[1]), 0x02);
  EXPECT_EQ(static_cast<unsigned char>(enc[2]), 0x01);
}

TEST(Records, InodeRejectsBadInput) {
  const std::string enc = EncodeInode(SampleInode());
  ExpectRejectsTruncatedAndExtended<InodeRecord>(
      enc, [](std::string_view s, InodeRecord* r) { return DecodeInode(s, r); });
  for (char v : {'\0', '\x02', '\xff'}) {
    std::string bad = enc;
    bad[0] = v;
    InodeRecord out;
    EXPECT_TRUE(DecodeInode(bad, &out).IsCorruption());
  }
}

// A record that knows its xattr names' bytes is version 2: version 1 with
// the count after it. One that does not stays version 1, which binaries of
// store format 4 read.
TEST(Records, InodeWithXattrCountIsVersion2) {
  InodeRecord r = SampleInode();
  EXPECT_FALSE(r.xattrs_known());
  EXPECT_EQ(EncodeInode(r).size(), 85u);
  for (uint32_t bytes : {0u, 7u, 65536u}) {
    r.xattr_list_bytes = bytes;
    const std::string enc = EncodeInode(r);
    EXPECT_EQ(enc[0], 2);
    EXPECT_EQ(enc.size(), 89u);
    InodeRecord back;
    ASSERT_TRUE(DecodeInode(enc, &back).ok());
    EXPECT_EQ(back, r);
    EXPECT_TRUE(back.xattrs_known());
    ExpectRejectsTruncatedAndExtended<InodeRecord>(
        enc, [](std::string_view s, InodeRecord* out) { return DecodeInode(s, out); });
  }
  // The "unknown" value is never written as a version-2 count; read, it
  // means unknown, and the rest of the record stays readable.
  std::string odd = EncodeInode(r);
  odd.replace(85, 4, "\xff\xff\xff\xff");
  InodeRecord out;
  ASSERT_TRUE(DecodeInode(odd, &out).ok());
  EXPECT_FALSE(out.xattrs_known());
  EXPECT_EQ(out.ino, r.ino);
}

TEST(Records, InodeDecodeFailureLeavesOutputAlone) {
  InodeRecord out = SampleInode();
  EXPECT_FALSE(DecodeInode("\x01short", &out).ok());
  EXPECT_EQ(out, SampleInode());
}

TEST(Records, DirEntryRoundTrip) {
  const DirEntry e{0xfedcba9876543210ull, 0040000};
  const std::string enc = EncodeDirEntry(e);
  EXPECT_EQ(enc[0], 1);
  DirEntry back;
  ASSERT_TRUE(DecodeDirEntry(enc, &back).ok());
  EXPECT_EQ(back, e);
  ExpectRejectsTruncatedAndExtended<DirEntry>(
      enc, [](std::string_view s, DirEntry* d) { return DecodeDirEntry(s, d); });
  std::string bad = enc;
  bad[0] = 2;
  EXPECT_TRUE(DecodeDirEntry(bad, &back).IsCorruption());
}

TEST(Records, BlockValueRoundTrip) {
  const vlog::BlockPtr p{0x01020304u, 0xfffffff0u, 65536, 0x1122334455667788ull};
  const std::string enc = EncodeBlockValue(p);
  ASSERT_EQ(enc.size(), 1 + vlog::kBlockPtrEncodedSize);
  EXPECT_EQ(enc[0], 'P');
  vlog::BlockPtr back;
  ASSERT_TRUE(DecodeBlockValue(enc, &back).ok());
  EXPECT_EQ(back, p);
  ExpectRejectsTruncatedAndExtended<vlog::BlockPtr>(
      enc, [](std::string_view s, vlog::BlockPtr* b) { return DecodeBlockValue(s, b); });
  for (char tag : {'\0', '\x01', 'p'}) {
    std::string bad = enc;
    bad[0] = tag;
    EXPECT_TRUE(DecodeBlockValue(bad, &back).IsCorruption());
    BlockValue v;
    EXPECT_TRUE(DecodeBlock(bad, &v).IsCorruption());
  }
  BlockValue v;
  ASSERT_TRUE(DecodeBlock(enc, &v).ok());
  EXPECT_FALSE(v.inlined);
  EXPECT_EQ(v.ptr, p);
  EXPECT_EQ(v.length(), 65536u);
}

// Inline data: the tag, then the bytes (any length, including none).
TEST(Records, InlineBlockRoundTrip) {
  for (const std::string& data : {std::string(), std::string("x"), std::string(4096, '\0'),
                                 std::string("P\x01\xff tail")}) {
    const std::string enc = EncodeInlineBlock(data);
    ASSERT_EQ(enc.size(), 1 + data.size());
    EXPECT_EQ(enc[0], 'D');
    BlockValue v;
    ASSERT_TRUE(DecodeBlock(enc, &v).ok());
    EXPECT_TRUE(v.inlined);
    EXPECT_EQ(v.bytes, data);
    EXPECT_EQ(v.length(), data.size());
    // Not a pointer: walks over records skip it, and it is not corruption.
    vlog::BlockPtr p;
    Status st = DecodeBlockValue(enc, &p);
    EXPECT_FALSE(st.ok());
    EXPECT_FALSE(st.IsCorruption()) << st.ToString();
  }
  BlockValue v;
  EXPECT_TRUE(DecodeBlock("", &v).IsCorruption());
}

Superblock SampleSuper() {
  Superblock s;
  s.block_size = 4096;
  s.segment_size = 256ull << 20;
  s.capacity = 10ull << 30;
  s.created = 1700000000;
  s.uuid = "0123456789abcdef0123456789abcdef";
  s.inline_max = 1024;
  return s;
}

void ExpectSuperEq(const Superblock& a, const Superblock& b) {
  EXPECT_EQ(a.magic, b.magic);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.segment_size, b.segment_size);
  EXPECT_EQ(a.capacity, b.capacity);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.uuid, b.uuid);
  EXPECT_EQ(a.inline_max, b.inline_max);
}

TEST(Records, SuperblockRoundTrip) {
  const Superblock s = SampleSuper();
  Superblock back;
  back.uuid = "stale";
  ASSERT_TRUE(DecodeSuperblock(EncodeSuperblock(s), &back).ok());
  ExpectSuperEq(back, s);

  Superblock empty_uuid = SampleSuper();
  empty_uuid.uuid.clear();
  ASSERT_TRUE(DecodeSuperblock(EncodeSuperblock(empty_uuid), &back).ok());
  ExpectSuperEq(back, empty_uuid);

  // Every older format version is still read; before version 3 there is
  // no inline limit to encode, and the store never inlines. Version 4 adds
  // no field (it allows recycled vLog segment files).
  for (uint32_t v = 1; v < kMetaFormatVersion; v++) {
    Superblock old = SampleSuper();
    old.version = v;
    const std::string enc = EncodeSuperblock(old);
    EXPECT_EQ(enc.size(), EncodeSuperblock(SampleSuper()).size() -
                              (v < kMetaFormatInlineData ? 4 : 0))
        << v;
    ASSERT_TRUE(DecodeSuperblock(enc, &back).ok()) << v;
    EXPECT_EQ(back.version, v);
    EXPECT_EQ(back.inline_max, v < kMetaFormatInlineData ? 0u : 1024u);
  }
}

TEST(Records, SuperblockRejectsTruncatedAndExtended) {
  ExpectRejectsTruncatedAndExtended<Superblock>(
      EncodeSuperblock(SampleSuper()),
      [](std::string_view src, Superblock* s) { return DecodeSuperblock(src, s); });
}

TEST(Records, SuperblockWrongMagicIsNotASepfsStore) {
  Superblock s = SampleSuper();
  s.magic ^= 1;
  Superblock back;
  Status st = DecodeSuperblock(EncodeSuperblock(s), &back);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_EQ(st.err(), EIO);
  EXPECT_NE(st.ToString().find("not a sepfs store"), std::string::npos) << st.ToString();
  EXPECT_TRUE(DecodeSuperblock("leveldb junk that is long enough", &back).IsCorruption());
}

TEST(Records, SuperblockNewerVersionIsNotSupported) {
  Superblock s = SampleSuper();
  s.version = kMetaFormatVersion + 1;
  Superblock back;
  Status st = DecodeSuperblock(EncodeSuperblock(s), &back);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(st.IsCorruption());
  EXPECT_EQ(st.err(), EPROTONOSUPPORT);
  const std::string want = "store format version " + std::to_string(kMetaFormatVersion + 1) +
                           " is newer than this sepfs (" + std::to_string(kMetaFormatVersion) +
                           ")";
  EXPECT_NE(st.ToString().find(want), std::string::npos) << st.ToString();

  // A newer store whose layout grew is still reported as newer, not corrupt.
  st = DecodeSuperblock(EncodeSuperblock(s) + "future fields", &back);
  EXPECT_EQ(st.err(), EPROTONOSUPPORT) << st.ToString();
}

TEST(Records, SuperblockFlippedRecordVersionIsCorruption) {
  std::string enc = EncodeSuperblock(SampleSuper());
  enc[0] = 7;
  Superblock back;
  EXPECT_TRUE(DecodeSuperblock(enc, &back).IsCorruption());
  Superblock zero = SampleSuper();
  zero.version = 0;
  EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(zero), &back).IsCorruption());
}

// A crafted superblock with a geometry mkfs never writes is refused, naming
// the field, rather than reaching a division by zero.
TEST(Records, SuperblockOutOfRangeGeometryIsCorruption) {
  struct Case {
    uint32_t block_size;
    uint64_t segment_size;
    const char* field;
  };
  const Case cases[] = {
      {0, 64ull << 20, "block_size"},
      {1000, 64ull << 20, "block_size"},       // not a power of two
      {2048, 64ull << 20, "block_size"},       // too small
      {8u << 20, 64ull << 20, "block_size"},   // too large
      {1u << 31, 64ull << 20, "block_size"},
      {4096, 0, "segment_size"},
      {4096, (1ull << 20) - 1, "segment_size"},
      {4096, (1ull << 31) + 1, "segment_size"},
      {4096, UINT64_MAX, "segment_size"},
      {4u << 20, 8ull << 20, "segment_size"},  // fewer than 4 blocks
  };
  for (const Case& c : cases) {
    Superblock s = SampleSuper();
    s.block_size = c.block_size;
    s.segment_size = c.segment_size;
    Superblock back;
    back.uuid = "untouched";
    Status st = DecodeSuperblock(EncodeSuperblock(s), &back);
    EXPECT_TRUE(st.IsCorruption()) << c.block_size << "/" << c.segment_size << ": "
                                   << st.ToString();
    EXPECT_NE(st.ToString().find(c.field), std::string::npos) << st.ToString();
    EXPECT_EQ(back.uuid, "untouched");
  }
  // An inline limit above half a block or 64 KiB: mkfs never writes one.
  for (const auto& [bs, limit] : {std::pair<uint32_t, uint32_t>{4096, 2049},
                                  {1u << 20, 64 * 1024 + 1}, {4096, UINT32_MAX}}) {
    Superblock s = SampleSuper();
    s.block_size = bs;
    s.inline_max = limit;
    Superblock back;
    Status st = DecodeSuperblock(EncodeSuperblock(s), &back);
    EXPECT_TRUE(st.IsCorruption()) << bs << "/" << limit;
    EXPECT_NE(st.ToString().find("inline_max"), std::string::npos) << st.ToString();
  }
  // A size limit below 16 segments: the store would be full from the start.
  for (uint64_t cap : {uint64_t{1}, uint64_t{(16ull << 26) - 1}}) {
    Superblock s = SampleSuper();
    s.segment_size = 64ull << 20;
    s.capacity = cap;
    Superblock back;
    Status st = DecodeSuperblock(EncodeSuperblock(s), &back);
    EXPECT_TRUE(st.IsCorruption()) << cap;
    EXPECT_NE(st.ToString().find("capacity"), std::string::npos) << st.ToString();
  }
  for (uint64_t cap : {uint64_t{0}, uint64_t{16ull << 26}, uint64_t{UINT64_MAX}}) {
    Superblock s = SampleSuper();
    s.segment_size = 64ull << 20;
    s.capacity = cap;
    Superblock back;
    EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(s), &back).ok()) << cap;
  }
  // The bounds themselves are fine.
  for (const Case& c : {Case{4096, 1ull << 20, ""}, Case{4u << 20, 1ull << 31, ""},
                        Case{4u << 20, 16ull << 20, ""}}) {
    Superblock s = SampleSuper();
    s.block_size = c.block_size;
    s.segment_size = c.segment_size;
    s.capacity = 0;  // no limit: 2 GiB segments would need a 32 GiB one
    Superblock back;
    EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(s), &back).ok())
        << c.block_size << "/" << c.segment_size;
  }
}

}  // namespace
}  // namespace sepfs::kv
