#include "vlog/format.h"

#include <xxhash.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace sepfs::vlog {
namespace {

SegmentHeader SampleSegmentHeader() {
  SegmentHeader h;
  h.stream = 1;
  h.flags = kSegmentRewritten;
  h.segment_id = 0xA1B2C3D4;
  h.create_time = 1700000000;
  return h;
}

TEST(SegmentHeaderTest, RoundTrip) {
  char raw[kSegmentHeaderSize];
  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  SegmentHeader h;
  ASSERT_TRUE(DecodeSegmentHeader(raw, &h).ok());
  EXPECT_EQ(h.stream, 1);
  EXPECT_EQ(h.flags, kSegmentRewritten);
  EXPECT_EQ(h.segment_id, 0xA1B2C3D4u);
  EXPECT_EQ(h.create_time, 1700000000u);
}

TEST(SegmentHeaderTest, LayoutIsLittleEndianPerTable) {
  char raw[kSegmentHeaderSize];
  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  EXPECT_EQ(std::string(raw, 4), "VSEG");
  EXPECT_EQ(raw[4], kFormatVersion);
  EXPECT_EQ(raw[5], 1);
  EXPECT_EQ(raw[6], kSegmentRewritten);
  EXPECT_EQ(static_cast<uint8_t>(raw[8]), 0xD4);
  EXPECT_EQ(static_cast<uint8_t>(raw[11]), 0xA1);
  for (int i : {7, 12, 13, 14, 15}) EXPECT_EQ(raw[i], 0) << i;
  for (int i = 24; i < 56; ++i) EXPECT_EQ(raw[i], 0) << i;
  uint64_t sum;
  std::memcpy(&sum, raw + 56, 8);
  EXPECT_EQ(sum, XXH3_64bits(raw, 56));
}

TEST(SegmentHeaderTest, EveryFlippedByteIsRejected) {
  char good[kSegmentHeaderSize];
  EncodeSegmentHeader(SampleSegmentHeader(), good);
  for (size_t i = 0; i < kSegmentHeaderSize; ++i) {
    char raw[kSegmentHeaderSize];
    std::memcpy(raw, good, sizeof(raw));
    raw[i] ^= 0x10;
    SegmentHeader h;
    Status st = DecodeSegmentHeader(raw, &h);
    EXPECT_TRUE(st.IsCorruption()) << "byte " << i;
    EXPECT_EQ(st.err(), EIO);
  }
}

// Rewrites the checksum so that only the field under test is wrong.
void Reseal(char* raw) {
  uint64_t sum = XXH3_64bits(raw, 56);
  std::memcpy(raw + 56, &sum, 8);
}

TEST(SegmentHeaderTest, RejectsBadMagicVersionAndStream) {
  char raw[kSegmentHeaderSize];
  SegmentHeader h;
  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  raw[0] = 'X';
  Reseal(raw);
  EXPECT_NE(DecodeSegmentHeader(raw, &h).message().find("magic"), std::string::npos);

  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  raw[4] = kRecycledSegmentVersion + 1;
  Reseal(raw);
  Status st = DecodeSegmentHeader(raw, &h);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("version"), std::string::npos);

  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  raw[5] = kNumStreams;
  Reseal(raw);
  EXPECT_TRUE(DecodeSegmentHeader(raw, &h).IsCorruption());
}

TEST(SegmentHeaderTest, RecycledFileHeaderCarriesItsBaseSeq) {
  SegmentHeader in = SampleSegmentHeader();
  in.base_seq = 0x0102030405060708;
  char raw[kSegmentHeaderSize];
  EncodeSegmentHeader(in, raw);
  EXPECT_EQ(raw[4], kRecycledSegmentVersion);
  EXPECT_EQ(raw[24], 0x08);
  EXPECT_EQ(raw[31], 0x01);
  for (int i = 32; i < 56; ++i) EXPECT_EQ(raw[i], 0) << i;
  SegmentHeader h;
  ASSERT_TRUE(DecodeSegmentHeader(raw, &h).ok());
  EXPECT_EQ(h.base_seq, in.base_seq);
  EXPECT_EQ(h.segment_id, in.segment_id);
  // The version and base_seq agree, or the header is damaged.
  raw[4] = kFormatVersion;
  Reseal(raw);
  EXPECT_TRUE(DecodeSegmentHeader(raw, &h).IsCorruption());
  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  raw[4] = kRecycledSegmentVersion;
  Reseal(raw);
  EXPECT_TRUE(DecodeSegmentHeader(raw, &h).IsCorruption());
}

TEST(SegmentHeaderTest, StoreIdSitsInBytes32To47AndRoundTrips) {
  SegmentHeader in = SampleSegmentHeader();
  for (size_t i = 0; i < kStoreIdSize; ++i) in.store_id[i] = static_cast<uint8_t>(0xA0 + i);
  char raw[kSegmentHeaderSize];
  EncodeSegmentHeader(in, raw);
  for (int i = 32; i < 48; ++i) EXPECT_EQ(static_cast<uint8_t>(raw[i]), 0xA0 + i - 32) << i;
  for (int i = 48; i < 56; ++i) EXPECT_EQ(raw[i], 0) << i;
  SegmentHeader h;
  ASSERT_TRUE(DecodeSegmentHeader(raw, &h).ok());
  EXPECT_EQ(h.store_id, in.store_id);
  EXPECT_TRUE(KnownStoreId(h.store_id));
  // The checksum covers it: another store's id cannot be patched in.
  raw[40] ^= 1;
  EXPECT_TRUE(DecodeSegmentHeader(raw, &h).IsCorruption());
  // A header written before store ids decodes with the id unknown.
  EncodeSegmentHeader(SampleSegmentHeader(), raw);
  ASSERT_TRUE(DecodeSegmentHeader(raw, &h).ok());
  EXPECT_FALSE(KnownStoreId(h.store_id));
}

TEST(SegmentHeaderTest, StoreIdHexRoundTripsAndRejectsOtherText) {
  StoreId id;
  for (size_t i = 0; i < kStoreIdSize; ++i) id[i] = static_cast<uint8_t>(i * 17);
  const std::string hex = StoreIdHex(id);
  EXPECT_EQ(hex, "00112233445566778899aabbccddeeff");
  StoreId back{};
  ASSERT_TRUE(ParseStoreIdHex(hex, &back));
  EXPECT_EQ(back, id);
  ASSERT_TRUE(ParseStoreIdHex("00112233445566778899AABBCCDDEEFF", &back));
  EXPECT_EQ(back, id);
  StoreId untouched{};
  EXPECT_FALSE(ParseStoreIdHex("", &untouched));
  EXPECT_FALSE(ParseStoreIdHex(hex.substr(1), &untouched));
  EXPECT_FALSE(ParseStoreIdHex(hex + "0", &untouched));
  EXPECT_FALSE(ParseStoreIdHex("0011223344556677889 aabbccddeeff", &untouched));
  EXPECT_FALSE(ParseStoreIdHex("g0112233445566778899aabbccddeeff", &untouched));
  EXPECT_FALSE(KnownStoreId(untouched));
}

TEST(SegmentHeaderTest, EveryStreamRoundTrips) {
  for (int k = 0; k < kNumStreams; k++) {
    SegmentHeader in = SampleSegmentHeader(), out;
    in.stream = static_cast<uint8_t>(k);
    char raw[kSegmentHeaderSize];
    EncodeSegmentHeader(in, raw);
    ASSERT_TRUE(DecodeSegmentHeader(raw, &out).ok()) << k;
    EXPECT_EQ(out.stream, k);
  }
  EXPECT_STREQ(StreamName(Stream::kHot), "hot");
  EXPECT_STREQ(StreamName(Stream::kWarm), "warm");
  EXPECT_STREQ(StreamName(Stream::kCold), "cold");
  EXPECT_STREQ(StreamName(Stream::kFrozen), "frozen");
}

struct EncodedRecord {
  RecordHeader h;
  std::string bytes;  // header + data
};

EncodedRecord MakeRecord(std::string_view data) {
  EncodedRecord r;
  r.h.data_len = static_cast<uint32_t>(data.size());
  r.h.inode = 0x1122334455667788;
  r.h.block = 42;
  r.h.seq = 99;
  r.bytes.resize(kRecordHeaderSize);
  EncodeRecordHeader(&r.h, data, r.bytes.data());
  r.bytes.append(data);
  return r;
}

TEST(RecordHeaderTest, RoundTrip) {
  const std::string data = testing::Payload(1, 1000);
  EncodedRecord r = MakeRecord(data);
  RecordHeader h;
  ASSERT_TRUE(DecodeRecordHeader(r.bytes.data(), &h).ok());
  EXPECT_EQ(h.data_len, 1000u);
  EXPECT_EQ(h.inode, 0x1122334455667788u);
  EXPECT_EQ(h.block, 42u);
  EXPECT_EQ(h.seq, 99u);
  EXPECT_EQ(h.flags, 0);
  EXPECT_EQ(h.checksum, r.h.checksum);
  EXPECT_TRUE(VerifyRecord(r.bytes.data(), h, std::string_view(r.bytes).substr(48)).ok());
}

TEST(RecordHeaderTest, ChecksumIsXxh3OfHeaderPrefixThenData) {
  const std::string data = testing::Payload(2, 333);
  EncodedRecord r = MakeRecord(data);
  std::string covered = r.bytes.substr(0, 40) + data;
  EXPECT_EQ(r.h.checksum, XXH3_64bits(covered.data(), covered.size()));
  uint64_t stored;
  std::memcpy(&stored, r.bytes.data() + 40, 8);
  EXPECT_EQ(stored, r.h.checksum);
  EXPECT_EQ(std::string(r.bytes.data(), 4), "VREC");
}

TEST(RecordHeaderTest, EmptyRecord) {
  EncodedRecord r = MakeRecord("");
  RecordHeader h;
  ASSERT_TRUE(DecodeRecordHeader(r.bytes.data(), &h).ok());
  EXPECT_EQ(h.data_len, 0u);
  EXPECT_TRUE(VerifyRecord(r.bytes.data(), h, "").ok());
}

TEST(RecordHeaderTest, EveryFlippedByteIsRejected) {
  const std::string data = testing::Payload(3, 200);
  const EncodedRecord good = MakeRecord(data);
  for (size_t i = 0; i < good.bytes.size(); ++i) {
    std::string raw = good.bytes;
    raw[i] ^= 0x01;
    RecordHeader h;
    Status st = DecodeRecordHeader(raw.data(), &h);
    if (st.ok()) {
      std::string_view rest = std::string_view(raw).substr(48);
      st = VerifyRecord(raw.data(), h, rest.substr(0, std::min<size_t>(rest.size(), h.data_len)));
    }
    EXPECT_TRUE(st.IsCorruption()) << "byte " << i;
  }
}

TEST(RecordHeaderTest, RejectsBadMagicVersionAndLength) {
  RecordHeader h;
  EncodedRecord r = MakeRecord("abc");
  r.bytes[1] ^= 0x40;
  EXPECT_NE(DecodeRecordHeader(r.bytes.data(), &h).message().find("magic"), std::string::npos);

  r = MakeRecord("abc");
  r.bytes[4] = 7;
  Status st = DecodeRecordHeader(r.bytes.data(), &h);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("version"), std::string::npos);

  r = MakeRecord("abc");
  const uint32_t too_big = kMaxRecordData + 1;
  std::memcpy(r.bytes.data() + 8, &too_big, 4);
  st = DecodeRecordHeader(r.bytes.data(), &h);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("length"), std::string::npos);

  // A length that disagrees with the data handed to VerifyRecord.
  r = MakeRecord("abc");
  ASSERT_TRUE(DecodeRecordHeader(r.bytes.data(), &h).ok());
  EXPECT_TRUE(VerifyRecord(r.bytes.data(), h, "ab").IsCorruption());
}

TEST(BlockPtrTest, RoundTrip) {
  BlockPtr p{7, 4096, 65536, 0x0102030405060708};
  char raw[kBlockPtrEncodedSize];
  EncodeBlockPtr(p, raw);
  EXPECT_EQ(raw[0], 7);
  EXPECT_EQ(static_cast<uint8_t>(raw[12]), 0x08);
  BlockPtr q;
  ASSERT_TRUE(DecodeBlockPtr(std::string_view(raw, sizeof(raw)), &q));
  EXPECT_EQ(p, q);
  EXPECT_EQ(q.record_size(), kRecordHeaderSize + 65536);
}

TEST(BlockPtrTest, RejectsBadSizeAndImpossiblePointers) {
  char raw[kBlockPtrEncodedSize + 1] = {};
  BlockPtr p;
  EncodeBlockPtr(BlockPtr{1, 64, 10, 1}, raw);
  EXPECT_FALSE(DecodeBlockPtr(std::string_view(raw, kBlockPtrEncodedSize - 1), &p));
  EXPECT_FALSE(DecodeBlockPtr(std::string_view(raw, kBlockPtrEncodedSize + 1), &p));
  EXPECT_FALSE(DecodeBlockPtr("", &p));
  EncodeBlockPtr(BlockPtr{1, 64, kMaxRecordData + 1, 1}, raw);
  EXPECT_FALSE(DecodeBlockPtr(std::string_view(raw, kBlockPtrEncodedSize), &p));
  EncodeBlockPtr(BlockPtr{1, 10, 10, 1}, raw);
  EXPECT_FALSE(DecodeBlockPtr(std::string_view(raw, kBlockPtrEncodedSize), &p));
}

TEST(SegmentFileNameTest, RoundTrip) {
  EXPECT_EQ(SegmentFileName(0), "seg-00000000.vlog");
  EXPECT_EQ(SegmentFileName(123), "seg-00000123.vlog");
  for (uint32_t id : {0u, 1u, 99999999u, 100000000u, 4294967295u}) {
    uint32_t got = 7;
    ASSERT_TRUE(ParseSegmentFileName(SegmentFileName(id), &got)) << id;
    EXPECT_EQ(got, id);
  }
}

TEST(SegmentFileNameTest, FreeFilesHaveTheirOwnNames) {
  EXPECT_EQ(FreeFileName(123), "free-00000123.vlog");
  uint32_t id = 7;
  ASSERT_TRUE(ParseFreeFileName(FreeFileName(4294967295u), &id));
  EXPECT_EQ(id, 4294967295u);
  EXPECT_FALSE(ParseFreeFileName(SegmentFileName(5), &id));
  EXPECT_FALSE(ParseSegmentFileName(FreeFileName(5), &id));
  EXPECT_FALSE(ParseFreeFileName("free-000000001.vlog", &id));
}

TEST(SegmentFileNameTest, RejectsOtherNames) {
  uint32_t id;
  for (const char* name :
       {"", "seg-1.vlog", "seg-0000000a.vlog", "seg-00000001.vlo", "seg-00000001.vlog.tmp",
        "xseg-00000001.vlog", "seg-000000001.vlog", "seg-4294967296.vlog",
        "seg-99999999999.vlog", "seg--0000001.vlog", "LOCK", "seg-00000001"}) {
    EXPECT_FALSE(ParseSegmentFileName(name, &id)) << name;
  }
}

}  // namespace
}  // namespace sepfs::vlog
