// kv::BlankDamagedLogRecords on logs LevelDB itself wrote: intact logs are
// left alone, a damaged record is blanked with the rest of its block, and
// leveldb::RepairDB then keeps the records before it and never the damaged
// one.
#include "kvstore/leveldb_log_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "leveldb/db.h"
#include "tests/kvstore/leveldb_test_util.h"
#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);  // the standard check value
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  EXPECT_NE(MaskCrc(1), 1u);
}

class LogCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_dir_ = tmp_.path() + "/db";
    std::unique_ptr<leveldb::DB> owned = testing::OpenLevelDb(db_dir_, /*create=*/true);
    ASSERT_TRUE(owned);
    // Values of 10 KiB: three to a 32 KiB block, so a later block is intact.
    for (int i = 0; i < 12; i++) {
      ASSERT_TRUE(owned->Put(leveldb::WriteOptions(), Key(i), Value(i)).ok());
    }
  }  // closed without a compaction: everything is in the log

  static std::string Key(int i) { return "key" + std::to_string(100 + i); }
  static std::string Value(int i) { return std::string(10 * 1024, static_cast<char>('a' + i)); }

  std::string LogPath() {
    for (const auto& e : std::filesystem::directory_iterator(db_dir_)) {
      if (e.path().extension() == ".log") return e.path().string();
    }
    ADD_FAILURE() << "no log in " << db_dir_;
    return "";
  }

  sepfs::testing::TempDir tmp_;
  std::string db_dir_;
};

TEST_F(LogCheckTest, IntactLogIsLeftAlone) {
  std::string log = testing::FileBytes(LogPath());
  ASSERT_GT(log.size(), 3u * 32768);
  const std::string before = log;
  EXPECT_EQ(BlankDamagedLogRecords(&log), 0u);
  EXPECT_TRUE(log == before);
  uint64_t blanked = 1;
  ASSERT_TRUE(BlankDamagedLogRecordsInFile(Env::Default(), LogPath(), &blanked).ok());
  EXPECT_EQ(blanked, 0u);
}

TEST_F(LogCheckTest, DamagedRecordIsBlankedAndRepairDbNeverServesIt) {
  const std::string path = LogPath();
  std::string log = testing::FileBytes(path);
  const size_t at = log.find(Value(4).substr(0, 64));  // key 4's value
  ASSERT_NE(at, std::string::npos);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + 100));
    f.put('#');
  }
  uint64_t blanked = 0;
  ASSERT_TRUE(BlankDamagedLogRecordsInFile(Env::Default(), path, &blanked).ok());
  EXPECT_EQ(blanked, 1u);
  const std::string after = testing::FileBytes(path);
  ASSERT_EQ(after.size(), log.size());
  // From the damaged record's header (a few dozen bytes before the value:
  // the batch's header, the key) to the end of its block.
  const size_t block_end = ((at + 100) / 32768 + 1) * 32768;
  EXPECT_TRUE(after.compare(0, at - 64, log, 0, at - 64) == 0) << "bytes before it kept";
  EXPECT_EQ(after.find_first_not_of('\0', at), block_end) << "the rest of its block blank";
  EXPECT_TRUE(after.compare(block_end, std::string::npos, log, block_end) == 0);

  ASSERT_TRUE(leveldb::RepairDB(db_dir_, leveldb::Options()).ok());
  std::unique_ptr<leveldb::DB> owned = testing::OpenLevelDb(db_dir_);
  ASSERT_TRUE(owned);
  std::string got;
  EXPECT_TRUE(owned->Get(leveldb::ReadOptions(), Key(4), &got).IsNotFound());
  ASSERT_TRUE(owned->Get(leveldb::ReadOptions(), Key(0), &got).ok());
  EXPECT_TRUE(got == Value(0));
  ASSERT_TRUE(owned->Get(leveldb::ReadOptions(), Key(11), &got).ok());
  EXPECT_TRUE(got == Value(11));
}

}  // namespace
}  // namespace sepfs::kv
