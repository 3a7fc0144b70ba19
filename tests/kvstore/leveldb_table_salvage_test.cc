// kv::MendDamagedTable and its parts on tables LevelDB itself wrote
// (Snappy-compressed blocks) and on tables built here: a table whose end
// past its data blocks is cut or damaged gives back the entries of its
// data blocks, with their sequence numbers and deletions, and
// leveldb::RepairDB then serves them as before the damage; one cut inside
// its data blocks is left to RepairDB.
#include "kvstore/leveldb_table_salvage.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "kvstore/leveldb_repair.h"
#include "kvstore/snappy_raw.h"
#include "leveldb/db.h"
#include "tests/kvstore/leveldb_test_util.h"
#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// user key + fixed64 (seq << 8 | type), as LevelDB stores it.
std::string InternalKey(const std::string& user, uint64_t seq, bool deletion = false) {
  std::string k = user;
  const uint64_t tag = (seq << 8) | (deletion ? 0 : 1);
  for (int i = 0; i < 8; i++) k.push_back(static_cast<char>(tag >> (8 * i)));
  return k;
}

TEST(SnappyRaw, LiteralsAndOverlappingCopies) {
  std::string out;
  // 11 bytes: literal "abc", then a 1-byte-offset copy of 8 bytes from 3 back.
  ASSERT_TRUE(SnappyUncompress("\x0b\x08" "abc\x11\x03", &out));
  EXPECT_EQ(out, "abcabcabcab");
  // 2-byte offset copy: 5 bytes from 2 back; 4-byte offset copy: 2 from 7 back.
  ASSERT_TRUE(SnappyUncompress(std::string("\x09\x04xy\x12\x02\x00\x07\x07\x00\x00\x00", 12), &out));
  EXPECT_EQ(out, "xyxyxyxxy");
  // A literal whose length is in the next byte (tag 60): 61 bytes.
  ASSERT_TRUE(SnappyUncompress(std::string("\x3d\xf0\x3c", 3) + std::string(61, 'q'), &out));
  EXPECT_EQ(out, std::string(61, 'q'));
}

TEST(SnappyRaw, MalformedInputIsRefused) {
  std::string out;
  EXPECT_FALSE(SnappyUncompress("", &out));
  EXPECT_FALSE(SnappyUncompress(std::string("\x05\x08" "ab", 4), &out));  // literal cut
  EXPECT_FALSE(SnappyUncompress(std::string("\x06\x08" "abc\x01\x00", 6), &out));  // offset 0
  EXPECT_FALSE(SnappyUncompress(std::string("\x08\x08" "abc\x05\x04", 6), &out));  // before start
  EXPECT_FALSE(SnappyUncompress(std::string("\x04\x08" "abc", 5), &out));  // 3 of 4 bytes
  EXPECT_FALSE(SnappyUncompress(std::string("\x02\x08" "abc", 5), &out));  // more than said
}

// A LevelDB with 4 000 keys compacted into tables; the largest is the one
// the tests damage.
class TableSalvageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_dir_ = tmp_.path() + "/db";
    std::unique_ptr<leveldb::DB> owned = testing::OpenLevelDb(db_dir_, /*create=*/true);
    ASSERT_TRUE(owned);
    for (int i = 0; i < 4000; i++) {
      ASSERT_TRUE(owned->Put(leveldb::WriteOptions(), Key(i), Value(i)).ok());
      want_[Key(i)] = Value(i);
    }
    owned->CompactRange(nullptr, nullptr);
    for (const auto& e : std::filesystem::directory_iterator(db_dir_)) {
      if (e.path().extension() == ".ldb" && e.file_size() > table_size_) {
        table_ = e.path().string();
        table_size_ = e.file_size();
      }
    }
  }

  static std::string Key(int i) { return "key" + std::to_string(100000 + i); }
  // Compressible: Snappy blocks.
  static std::string Value(int i) { return std::string(100 + i % 50, static_cast<char>('a' + i % 26)); }

  // The entries of the intact table, in order, checked against what was put.
  Entries IntactEntries() {
    const std::string bytes = testing::FileBytes(table_);
    EXPECT_TRUE(TableOpens(bytes));
    SalvagedBlocks all = SalvageTableBlocks(bytes);
    EXPECT_GT(all.blocks, 10u);
    for (const auto& [key, value] : all.entries) {
      const std::string user = key.substr(0, key.size() - 8);
      EXPECT_TRUE(want_.count(user) && want_[user] == value) << user;
      EXPECT_EQ(key[key.size() - 8], 1) << "a value, not a deletion";
    }
    return all.entries;
  }

  void ExpectAllServedAfterRepairDb() {
    ASSERT_TRUE(leveldb::RepairDB(db_dir_, leveldb::Options()).ok());
    std::unique_ptr<leveldb::DB> owned = testing::OpenLevelDb(db_dir_);
    ASSERT_TRUE(owned);
    int missing = 0;
    for (const auto& [key, value] : want_) {
      std::string got;
      if (!owned->Get(leveldb::ReadOptions(), key, &got).ok()) {
        missing++;
      } else {
        EXPECT_TRUE(got == value) << key;
      }
    }
    EXPECT_EQ(missing, 0);
  }

  sepfs::testing::TempDir tmp_;
  std::string db_dir_, table_;
  uint64_t table_size_ = 0;
  std::map<std::string, std::string> want_;
};

TEST_F(TableSalvageTest, IntactTableGivesEveryEntryAndIsLeftAlone) {
  ASSERT_GT(table_size_, 32u * 1024);
  // Compressed: the values alone are over 400 KB.
  EXPECT_LT(table_size_, 300u * 1024);
  const Entries all = IntactEntries();
  EXPECT_GT(all.size(), 1000u);
  TableMend mend;
  ASSERT_TRUE(MendDamagedTable(Env::Default(), table_, &mend).ok());
  EXPECT_FALSE(mend.damaged);
  EXPECT_FALSE(std::filesystem::exists(db_dir_ + "/lost"));
}

TEST_F(TableSalvageTest, CutOrDamagedEndLosesNoEntry) {
  const Entries all = IntactEntries();
  const std::string bytes = testing::FileBytes(table_);
  std::string cut = bytes.substr(0, bytes.size() - 1);
  EXPECT_FALSE(TableOpens(cut));
  const SalvagedBlocks from_cut = SalvageTableBlocks(cut);
  EXPECT_TRUE(from_cut.entries == all);
  EXPECT_TRUE(from_cut.complete);
  std::string magic = bytes;
  magic[magic.size() - 3] ^= 1;
  EXPECT_FALSE(TableOpens(magic));
  EXPECT_TRUE(SalvageTableBlocks(magic).entries == all);
  EXPECT_TRUE(SalvageTableBlocks(magic).complete);
}

TEST_F(TableSalvageTest, CutInTheMiddleKeepsTheBlocksBefore) {
  const Entries all = IntactEntries();
  const std::string bytes = testing::FileBytes(table_);
  for (size_t at : {bytes.size() / 3, bytes.size() / 2}) {
    const SalvagedBlocks half = SalvageTableBlocks(bytes.substr(0, at));
    EXPECT_GT(half.entries.size(), all.size() / 5) << at;
    EXPECT_LT(half.entries.size(), all.size()) << at;
    EXPECT_TRUE(std::equal(half.entries.begin(), half.entries.end(), all.begin())) << at;
    EXPECT_FALSE(half.complete) << at;
  }
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x40;
  const SalvagedBlocks before = SalvageTableBlocks(flipped);
  EXPECT_GT(before.entries.size(), all.size() / 3);
  EXPECT_LT(before.entries.size(), all.size());
  EXPECT_TRUE(std::equal(before.entries.begin(), before.entries.end(), all.begin()));
  EXPECT_FALSE(before.complete);
}

// Only part of its key range would come back: the table is left for
// RepairDB, which drops it whole.
TEST_F(TableSalvageTest, TableCutInItsDataBlocksIsNotMended) {
  const std::string bytes = testing::FileBytes(table_);
  WriteAll(table_, bytes.substr(0, bytes.size() / 2));
  TableMend mend;
  ASSERT_TRUE(MendDamagedTable(Env::Default(), table_, &mend).ok());
  EXPECT_TRUE(mend.damaged);
  EXPECT_EQ(mend.entries, 0u);
  EXPECT_EQ(testing::FileBytes(table_).size(), bytes.size() / 2);
  EXPECT_FALSE(std::filesystem::exists(db_dir_ + "/lost"));
}

TEST_F(TableSalvageTest, TableCutByOneByteIsMendedAndRepairDbServesIt) {
  const std::string bytes = testing::FileBytes(table_);
  WriteAll(table_, bytes.substr(0, bytes.size() - 1));
  TableMend mend;
  ASSERT_TRUE(MendDamagedTable(Env::Default(), table_, &mend).ok());
  EXPECT_TRUE(mend.damaged);
  EXPECT_GT(mend.blocks, 10u);
  EXPECT_GT(mend.entries, 1000u);
  const std::string name = std::filesystem::path(table_).filename().string();
  EXPECT_TRUE(testing::FileBytes(db_dir_ + "/lost/" + name) == bytes.substr(0, bytes.size() - 1))
      << "the damaged bytes are kept";
  EXPECT_TRUE(TableOpens(testing::FileBytes(table_)));
  EXPECT_FALSE(std::filesystem::exists(db_dir_ + "/" + name.substr(0, name.size() - 4) + ".dbtmp"));
  ExpectAllServedAfterRepairDb();
}

// The rebuilt table keeps each entry's sequence number and type: a deletion
// in it still hides the older value of another table.
TEST(TableMendOrder, DeletionsAndSequencesSurvive) {
  sepfs::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/db";
  std::filesystem::create_directories(dir);
  WriteAll(dir + "/000005.ldb", BuildTable({{InternalKey("a", 5), "old a"},
                                            {InternalKey("b", 6), "old b"},
                                            {InternalKey("d", 7), "d"}}));
  const std::string newer = BuildTable({{InternalKey("a", 9, /*deletion=*/true), ""},
                                        {InternalKey("b", 8), "new b"},
                                        {InternalKey("c", 10), "c"}});
  WriteAll(dir + "/000007.ldb", newer.substr(0, newer.size() - 1));
  TableMend mend;
  ASSERT_TRUE(MendDamagedTable(Env::Default(), dir + "/000007.ldb", &mend).ok());
  EXPECT_TRUE(mend.damaged);
  EXPECT_EQ(mend.entries, 3u);
  ASSERT_TRUE(leveldb::RepairDB(dir, leveldb::Options()).ok());
  std::unique_ptr<leveldb::DB> owned = testing::OpenLevelDb(dir);
  ASSERT_TRUE(owned);
  std::string got;
  EXPECT_TRUE(owned->Get(leveldb::ReadOptions(), "a", &got).IsNotFound()) << got;
  ASSERT_TRUE(owned->Get(leveldb::ReadOptions(), "b", &got).ok());
  EXPECT_EQ(got, "new b");
  ASSERT_TRUE(owned->Get(leveldb::ReadOptions(), "c", &got).ok());
  EXPECT_EQ(got, "c");
  ASSERT_TRUE(owned->Get(leveldb::ReadOptions(), "d", &got).ok());
  EXPECT_EQ(got, "d");
}

TEST(TableMendOrder, TableWithNothingIntactIsLeftForRepairDb) {
  sepfs::testing::TempDir tmp;
  const std::string path = tmp.path() + "/000009.ldb";
  std::string value;
  for (uint32_t x = 1; value.size() < 3000;) {
    x = x * 1103515245u + 12345u;  // not compressible
    value.push_back(static_cast<char>(x >> 24));
  }
  const std::string table = BuildTable({{InternalKey("a", 5), value}});
  ASSERT_GT(table.size(), 2000u);
  WriteAll(path, table.substr(0, 1000));
  TableMend mend;
  ASSERT_TRUE(MendDamagedTable(Env::Default(), path, &mend).ok());
  EXPECT_TRUE(mend.damaged);
  EXPECT_EQ(mend.entries, 0u);
  EXPECT_EQ(testing::FileBytes(path).size(), 1000u);
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/lost"));
}

// RepairDB puts every table at level 0, where a read takes the table with
// the highest file number: here the older versions. RepairDbInOrder
// compacts after it, and reads see the newest version of each key.
TEST(RepairDbInOrder, NewestVersionWinsOverTheHigherFileNumber) {
  sepfs::testing::TempDir tmp;
  for (const bool in_order : {false, true}) {
    const std::string dir = tmp.path() + (in_order ? "/in-order" : "/repairdb");
    std::filesystem::create_directories(dir);
    WriteAll(dir + "/000007.ldb", BuildTable({{InternalKey("d", 31, /*deletion=*/true), ""},
                                              {InternalKey("k", 30), "new"}}));
    WriteAll(dir + "/000009.ldb", BuildTable({{InternalKey("d", 6), "deleted"},
                                              {InternalKey("k", 5), "old"}}));
    const leveldb::Status s = in_order ? RepairDbInOrder(dir, leveldb::Options())
                                       : leveldb::RepairDB(dir, leveldb::Options());
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<leveldb::DB> db = testing::OpenLevelDb(dir);
    ASSERT_TRUE(db);
    std::string k, d;
    ASSERT_TRUE(db->Get(leveldb::ReadOptions(), "k", &k).ok());
    const leveldb::Status d_status = db->Get(leveldb::ReadOptions(), "d", &d);
    if (in_order) {
      EXPECT_EQ(k, "new");
      EXPECT_TRUE(d_status.IsNotFound()) << d;
    } else {  // what the compaction is for
      EXPECT_EQ(k, "old") << "RepairDB alone now reads the newest version";
      EXPECT_TRUE(d_status.ok());
    }
  }
}

}  // namespace
}  // namespace sepfs::kv
