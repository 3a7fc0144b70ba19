#include "kvstore/meta_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kvstore/leveldb_status.h"
#include "leveldb/db.h"
#include "leveldb/env.h"
#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

using testing::TempDir;

MetaOptions CreateOptions() {
  MetaOptions o;
  o.create_if_missing = true;
  o.block_cache_bytes = 1 << 20;
  o.write_buffer_bytes = 1 << 20;
  return o;
}

class MetaStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.Sub("meta");
    ReopenStore(CreateOptions());
  }
  void ReopenStore(const MetaOptions& o) {
    store_.reset();
    Status s = MetaStore::Open(dir_, o, &store_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void Reopen() { ReopenStore(MetaOptions()); }

  TempDir tmp_;
  std::string dir_;
  std::unique_ptr<MetaStore> store_;
};

InodeRecord Inode(uint64_t ino, uint32_t mode) {
  InodeRecord r;
  r.ino = ino;
  r.mode = mode;
  r.nlink = 1;
  r.size = ino * 10;
  return r;
}

TEST_F(MetaStoreTest, OpenMissingDirWithoutCreateIsENOENT) {
  std::unique_ptr<MetaStore> other;
  Status s = MetaStore::Open(tmp_.Sub("absent"), MetaOptions(), &other);
  EXPECT_EQ(s.err(), ENOENT) << s.ToString();
  EXPECT_NE(s.ToString().find(tmp_.Sub("absent")), std::string::npos) << s.ToString();
  EXPECT_EQ(other, nullptr);
}

TEST_F(MetaStoreTest, ErrorIfExistsIsEEXIST) {
  store_.reset();
  MetaOptions o = CreateOptions();
  o.error_if_exists = true;
  std::unique_ptr<MetaStore> other;
  Status s = MetaStore::Open(dir_, o, &other);
  EXPECT_EQ(s.err(), EEXIST) << s.ToString();
}

TEST_F(MetaStoreTest, GetAbsentIsNotFound) {
  std::string v;
  Status s = store_->Get(InodeKey(99), &v);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.ToString().find("inode(99)"), std::string::npos) << s.ToString();
  InodeRecord r;
  EXPECT_TRUE(store_->GetInode(99, &r).IsNotFound());
  DirEntry e;
  EXPECT_TRUE(store_->GetDentry(1, "x", &e).IsNotFound());
  uint64_t c = 0;
  EXPECT_TRUE(store_->GetCounter("next_ino", &c).IsNotFound());
  Superblock sb;
  EXPECT_TRUE(store_->GetSuperblock(&sb).IsNotFound());
}

TEST_F(MetaStoreTest, BatchIsAtomicAndDurableAcrossReopen) {
  Batch setup;
  setup.PutInode(Inode(1, 040755));
  setup.PutDentry(1, "old", DirEntry{5, 0100000});
  setup.PutInode(Inode(5, 0100644));
  ASSERT_TRUE(store_->Write(&setup, /*sync=*/true).ok());

  // rename-like change: new inode + dentry, old dentry gone, block pointer set.
  Batch b;
  EXPECT_TRUE(b.empty());
  b.PutInode(Inode(6, 0100600));
  b.PutDentry(1, "new", DirEntry{6, 0100000});
  b.DeleteDentry(1, "old");
  b.PutBlock(6, 0, vlog::BlockPtr{3, 64, 4096, 77});
  b.Put(CounterKey("next_ino"), EncodeCounter(4096));
  EXPECT_FALSE(b.empty());
  EXPECT_GT(b.ApproximateSize(), 0u);
  ASSERT_TRUE(store_->Write(&b, /*sync=*/true).ok());

  Reopen();
  InodeRecord r;
  ASSERT_TRUE(store_->GetInode(6, &r).ok());
  EXPECT_EQ(r, Inode(6, 0100600));
  DirEntry e;
  ASSERT_TRUE(store_->GetDentry(1, "new", &e).ok());
  EXPECT_EQ(e, (DirEntry{6, 0100000}));
  EXPECT_TRUE(store_->GetDentry(1, "old", &e).IsNotFound());
  std::string v;
  ASSERT_TRUE(store_->Get(BlockKey(6, 0), &v).ok());
  vlog::BlockPtr p;
  ASSERT_TRUE(DecodeBlockValue(v, &p).ok());
  EXPECT_EQ(p, (vlog::BlockPtr{3, 64, 4096, 77}));
  uint64_t c = 0;
  ASSERT_TRUE(store_->GetCounter("next_ino", &c).ok());
  EXPECT_EQ(c, 4096u);
}

// Sync() after a synced write, or after another Sync(), has nothing to make
// durable and writes nothing; after an unsynced write it syncs.
TEST_F(MetaStoreTest, SyncSkipsWhenNothingWasWrittenSinceTheLastSyncedWrite) {
  Batch b;
  b.PutInode(Inode(10, 0100644));
  ASSERT_TRUE(store_->Write(&b, /*sync=*/true).ok());
  ASSERT_TRUE(store_->Sync().ok());
  EXPECT_EQ(store_->stats().synced_writes, 1u);
  Batch c;
  c.PutInode(Inode(11, 0100644));
  ASSERT_TRUE(store_->Write(&c, /*sync=*/false).ok());
  ASSERT_TRUE(store_->Sync().ok());
  EXPECT_EQ(store_->stats().synced_writes, 2u);
  ASSERT_TRUE(store_->Sync().ok());
  EXPECT_EQ(store_->stats().synced_writes, 2u);
}

TEST_F(MetaStoreTest, UnsyncedWritesSurviveCleanReopenAndSyncCounts) {
  Batch b;
  b.PutInode(Inode(9, 0100644));
  ASSERT_TRUE(store_->Write(&b, /*sync=*/false).ok());
  ASSERT_TRUE(store_->Sync().ok());
  MetaStore::Stats st = store_->stats();
  EXPECT_EQ(st.writes, 1u);  // Sync syncs the log; it writes no batch
  EXPECT_EQ(st.synced_writes, 1u);
  Reopen();
  InodeRecord r;
  EXPECT_TRUE(store_->GetInode(9, &r).ok());
}

TEST_F(MetaStoreTest, BatchClear) {
  Batch b;
  b.PutInode(Inode(3, 0100644));
  b.Clear();
  EXPECT_TRUE(b.empty());
  ASSERT_TRUE(store_->Write(&b, false).ok());
  InodeRecord r;
  EXPECT_TRUE(store_->GetInode(3, &r).IsNotFound());
}

TEST_F(MetaStoreTest, SuperblockAndCorruptValues) {
  Superblock sb;
  sb.uuid = "00112233445566778899aabbccddeeff";
  sb.created = 42;
  Batch b;
  b.Put(SuperKey(), EncodeSuperblock(sb));
  b.Put(InodeKey(4), "garbage");
  b.Put(CounterKey("bad"), "1234");
  ASSERT_TRUE(store_->Write(&b, true).ok());
  Superblock back;
  ASSERT_TRUE(store_->GetSuperblock(&back).ok());
  EXPECT_EQ(back.uuid, sb.uuid);
  EXPECT_EQ(back.created, 42);
  InodeRecord r;
  EXPECT_TRUE(store_->GetInode(4, &r).IsCorruption());
  uint64_t c = 0;
  EXPECT_TRUE(store_->GetCounter("bad", &c).IsCorruption());
}

TEST_F(MetaStoreTest, ScanPrefixReturnsExactlyOneDirectoryInNameOrder) {
  Batch b;
  // Neighbouring directories, including the one whose number differs only in
  // the last byte, and a name full of 0xff bytes.
  const std::vector<std::string> names = {"zeta", "alpha", std::string(3, '\xff'),
                                          std::string("\0x", 2), "m"};
  for (uint64_t parent : {0xffull, 0x100ull, 0x101ull}) {
    for (const std::string& n : names) b.PutDentry(parent, n, DirEntry{parent * 1000, 0});
  }
  b.PutInode(Inode(0x100, 040755));
  b.PutBlock(0x100, 0, vlog::BlockPtr{});
  ASSERT_TRUE(store_->Write(&b, false).ok());

  std::vector<std::string> got;
  Status s = store_->ScanPrefix(DentryPrefix(0x100), [&](std::string_view k, std::string_view v) {
    uint64_t parent = 0;
    std::string_view name;
    EXPECT_TRUE(ParseDentryKey(k, &parent, &name));
    EXPECT_EQ(parent, 0x100u);
    DirEntry e;
    EXPECT_TRUE(DecodeDirEntry(v, &e).ok());
    EXPECT_EQ(e.ino, 0x100u * 1000);
    got.emplace_back(name);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::vector<std::string> want = {std::string("\0x", 2), "alpha", "m", "zeta",
                                         std::string(3, '\xff')};
  EXPECT_EQ(got, want);

  // fn returning false stops the scan.
  int calls = 0;
  ASSERT_TRUE(store_
                  ->ScanPrefix(DentryPrefix(0x100),
                               [&](std::string_view, std::string_view) { return ++calls < 2; })
                  .ok());
  EXPECT_EQ(calls, 2);

  // An empty directory yields nothing.
  calls = 0;
  ASSERT_TRUE(
      store_->ScanPrefix(DentryPrefix(0x102), [&](std::string_view, std::string_view) {
        ++calls;
        return true;
      }).ok());
  EXPECT_EQ(calls, 0);
}

TEST_F(MetaStoreTest, ScanRangeAndOpenEnd) {
  Batch b;
  for (uint64_t blk = 0; blk < 10; ++blk) b.PutBlock(7, blk, vlog::BlockPtr{1, 0, 1, blk});
  ASSERT_TRUE(store_->Write(&b, false).ok());
  std::vector<uint64_t> blocks;
  auto collect = [&](std::string_view k, std::string_view) {
    uint64_t ino = 0, blk = 0;
    EXPECT_TRUE(ParseBlockKey(k, &ino, &blk));
    blocks.push_back(blk);
    return true;
  };
  ASSERT_TRUE(store_->Scan(BlockKey(7, 3), BlockKey(7, 6), collect).ok());
  EXPECT_EQ(blocks, (std::vector<uint64_t>{3, 4, 5}));
  blocks.clear();
  ASSERT_TRUE(store_->Scan(BlockKey(7, 8), "", collect).ok());  // "" = no end
  EXPECT_EQ(blocks, (std::vector<uint64_t>{8, 9}));
}

TEST_F(MetaStoreTest, ScanBlocksVisitsOneInodesRangeAndStopsWhenAsked) {
  Batch b;
  for (uint64_t blk = 0; blk < 10; ++blk) b.PutBlock(7, blk, vlog::BlockPtr{1, 1u << 20, 1, blk});
  b.PutBlock(8, 0, vlog::BlockPtr{1, 1u << 20, 1, 99});  // the next inode's first block
  b.PutInode(Inode(7, 0100644));
  ASSERT_TRUE(store_->Write(&b, false).ok());
  std::vector<uint64_t> blocks;
  auto collect = [&](uint64_t blk, std::string_view key, std::string_view value) {
    uint64_t ino = 0, parsed = 0;
    EXPECT_TRUE(ParseBlockKey(key, &ino, &parsed));
    EXPECT_EQ(ino, 7u);
    EXPECT_EQ(parsed, blk);
    vlog::BlockPtr p;
    EXPECT_TRUE(DecodeBlockValue(value, &p).ok());
    EXPECT_EQ(p.seq, blk);
    blocks.push_back(blk);
    return true;
  };
  ASSERT_TRUE(store_->ScanBlocks(7, 3, 6, collect).ok());
  EXPECT_EQ(blocks, (std::vector<uint64_t>{3, 4, 5}));
  blocks.clear();
  ASSERT_TRUE(store_->ScanBlocks(7, 8, UINT64_MAX, collect).ok());  // never reaches inode 8
  EXPECT_EQ(blocks, (std::vector<uint64_t>{8, 9}));
  blocks.clear();
  ASSERT_TRUE(store_->ScanBlocks(7, 5, 5, collect).ok());
  ASSERT_TRUE(store_->ScanBlocks(7, 6, 2, collect).ok());
  EXPECT_TRUE(blocks.empty());
  // fn returning false ends the scan.
  ASSERT_TRUE(store_->ScanBlocks(7, 0, 10, [&](uint64_t blk, std::string_view, std::string_view) {
                      blocks.push_back(blk);
                      return blk < 2;
                    }).ok());
  EXPECT_EQ(blocks, (std::vector<uint64_t>{0, 1, 2}));
}

TEST_F(MetaStoreTest, ScanBlocksReportsAMalformedKeyInItsRange) {
  Batch b;
  b.PutBlock(7, 1, vlog::BlockPtr{1, 0, 1, 1});
  b.Put(BlockKey(7, 2) + "x", "junk");  // a block key one byte too long
  b.PutBlock(7, 3, vlog::BlockPtr{1, 0, 1, 3});
  ASSERT_TRUE(store_->Write(&b, false).ok());
  std::vector<uint64_t> blocks;
  Status s = store_->ScanBlocks(7, 0, 10, [&](uint64_t blk, std::string_view, std::string_view) {
    blocks.push_back(blk);
    return true;
  });
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.err(), EIO);
  EXPECT_EQ(blocks, (std::vector<uint64_t>{1}));
}

// Every inode's pointers, inline ones too, in key order; keys and values
// that do not decode are passed over, and fn returning false ends the scan.
TEST_F(MetaStoreTest, ScanAllBlocksVisitsEveryDecodablePointer) {
  Batch b;
  b.PutBlock(7, 1, vlog::BlockPtr{1, 64, 1, 71});
  b.Put(BlockKey(7, 2) + "x", EncodeBlockValue(vlog::BlockPtr{1, 64, 1, 72}));  // bad key
  b.Put(BlockKey(7, 3), "junk");                                               // bad value
  b.PutInlineBlock(8, 0, "tiny");
  b.PutBlock(9, 5, vlog::BlockPtr{2, 64, 1, 95});
  b.PutInode(Inode(7, 0100644));
  ASSERT_TRUE(store_->Write(&b, false).ok());
  std::vector<std::string> seen;
  auto collect = [&](std::string_view key, uint64_t ino, uint64_t block, const BlockValue& v) {
    EXPECT_EQ(key, BlockKey(ino, block));
    seen.push_back(std::to_string(ino) + "/" + std::to_string(block) + ":" +
                   (v.inlined ? std::string(v.bytes) : std::to_string(v.ptr.seq)));
    return true;
  };
  ASSERT_TRUE(store_->ScanAllBlocks(collect).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"7/1:71", "8/0:tiny", "9/5:95"}));
  seen.clear();
  auto first_only = [&](std::string_view key, uint64_t ino, uint64_t block,
                        const BlockValue& v) {
    collect(key, ino, block, v);
    return false;
  };
  ASSERT_TRUE(store_->ScanAllBlocks(first_only).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"7/1:71"}));
}

TEST_F(MetaStoreTest, MultiGetSortedClusteredKeysUseFewSeeks) {
  Batch b;
  // 200 clustered children, every third one missing; plus other records.
  for (uint64_t ino = 1000; ino < 1200; ++ino) {
    if (ino % 3 != 0) b.PutInode(Inode(ino, 0100644));
  }
  for (uint64_t ino = 2000; ino < 2100; ++ino) b.PutInode(Inode(ino, 0100644));  // not asked
  b.PutInode(Inode(5000, 0100644));
  b.PutDentry(1, "a", DirEntry{1000, 0});
  ASSERT_TRUE(store_->Write(&b, false).ok());
  // Push everything into tables as well, so both memtable and SSTs are exercised.
  store_->TEST_db()->CompactRange(nullptr, nullptr);

  std::vector<std::string> keys;
  std::vector<uint64_t> inos;
  for (uint64_t ino = 999; ino <= 1200; ++ino) inos.push_back(ino);
  inos.push_back(4999);
  inos.push_back(5000);
  inos.push_back(9999);
  for (uint64_t ino : inos) keys.push_back(InodeKey(ino));

  const uint64_t seeks_before = store_->stats().seeks;
  std::vector<int> seen(keys.size(), 0);
  Status s = store_->MultiGetSorted(keys, [&](size_t i, const std::string* v) {
    ASSERT_LT(i, keys.size());
    ++seen[i];
    const uint64_t ino = inos[i];
    const bool present = (ino >= 1000 && ino < 1200 && ino % 3 != 0) || ino == 5000;
    if (!present) {
      EXPECT_EQ(v, nullptr) << ino;
      return;
    }
    ASSERT_NE(v, nullptr) << ino;
    InodeRecord r;
    ASSERT_TRUE(DecodeInode(*v, &r).ok());
    EXPECT_EQ(r, Inode(ino, 0100644));
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << i;
  const uint64_t seeks = store_->stats().seeks - seeks_before;
  EXPECT_GE(seeks, 2u);  // the jump over 2000..2099 to 4999 must not be stepped
  EXPECT_LE(seeks, 4u) << "keys: " << keys.size();
}

TEST_F(MetaStoreTest, MultiGetSortedSparseAndEdgeCases) {
  Batch b;
  for (uint64_t ino = 0; ino < 100; ino += 10) b.PutInode(Inode(ino * 100, 0100644));
  ASSERT_TRUE(store_->Write(&b, false).ok());
  std::vector<std::string> keys = {InodeKey(0), InodeKey(0), InodeKey(1), InodeKey(2000),
                                   InodeKey(9000), InodeKey(9001), InodeKey(~0ull)};
  std::vector<bool> found;
  ASSERT_TRUE(store_->MultiGetSorted(keys, [&](size_t i, const std::string* v) {
    EXPECT_EQ(i, found.size());
    found.push_back(v != nullptr);
  }).ok());
  EXPECT_EQ(found, (std::vector<bool>{true, true, false, true, true, false, false}));

  // Unsorted input is answered correctly too (by seeking).
  keys = {InodeKey(9000), InodeKey(1000), InodeKey(1001)};
  found.clear();
  ASSERT_TRUE(store_->MultiGetSorted(keys, [&](size_t, const std::string* v) {
    found.push_back(v != nullptr);
  }).ok());
  EXPECT_EQ(found, (std::vector<bool>{true, true, false}));

  int calls = 0;
  ASSERT_TRUE(
      store_->MultiGetSorted({}, [&](size_t, const std::string*) { ++calls; }).ok());
  EXPECT_EQ(calls, 0);
}

TEST_F(MetaStoreTest, ConcurrentWritersAndReaders) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        Batch b;
        const uint64_t ino = 10000 * (t + 1) + i;
        b.PutInode(Inode(ino, 0100644));
        b.PutDentry(t + 1, "f" + std::to_string(i), DirEntry{ino, 0100000});
        EXPECT_TRUE(store_->Write(&b, false).ok());
        InodeRecord r;
        EXPECT_TRUE(store_->GetInode(ino, &r).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    uint64_t n = 0;
    ASSERT_TRUE(store_->ScanPrefix(DentryPrefix(t + 1), [&](std::string_view, std::string_view) {
      ++n;
      return true;
    }).ok());
    EXPECT_EQ(n, kPerThread);
  }
  EXPECT_EQ(store_->stats().gets, kThreads * kPerThread);
}

TEST_F(MetaStoreTest, StatsTextAndSize) {
  Batch b;
  for (uint64_t ino = 0; ino < 1000; ++ino) b.PutInode(Inode(ino, 0100644));
  ASSERT_TRUE(store_->Write(&b, true).ok());
  EXPECT_NE(store_->LevelDbStats().find("Compactions"), std::string::npos)
      << store_->LevelDbStats();
  EXPECT_GT(store_->ApproximateBytes(), 1000u * 40);
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) total += e.file_size();
  return total;
}

// ApproximateBytes reuses a directory scan for a second: what is written
// meanwhile is added, and a later call scans again.
TEST_F(MetaStoreTest, ApproximateBytesCountsWritesBetweenScans) {
  const uint64_t first = store_->ApproximateBytes();
  EXPECT_EQ(first, DirBytes(dir_));
  Batch b;
  for (uint64_t ino = 0; ino < 2000; ++ino) b.PutInode(Inode(ino, 0100644));
  const uint64_t batch_bytes = b.ApproximateSize();
  ASSERT_TRUE(store_->Write(&b, false).ok());
  // Within the second: the scan's total plus the batch, not a stale figure.
  EXPECT_EQ(store_->ApproximateBytes(), first + batch_bytes);
  EXPECT_GE(DirBytes(dir_), first + batch_bytes);
  // Compacted into a table, the log gone: a second later, a fresh scan.
  store_->TEST_db()->CompactRange(nullptr, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(store_->ApproximateBytes(), DirBytes(dir_));
}

TEST_F(MetaStoreTest, SecondOpenInSameProcessIsEBUSY) {
  std::unique_ptr<MetaStore> second;
  Status s = MetaStore::Open(dir_, MetaOptions(), &second);
  EXPECT_EQ(s.err(), EBUSY) << s.ToString();
  EXPECT_NE(s.ToString().find("already mounted?"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find(dir_), std::string::npos) << s.ToString();
  EXPECT_EQ(second, nullptr);
  // The first handle still works.
  ASSERT_TRUE(store_->Sync().ok());
}

TEST_F(MetaStoreTest, OpenWhileAnotherProcessHoldsTheLockIsEBUSY) {
  store_.reset();
  // A child takes LevelDB's fcntl lock on LOCK, as a running sepfs would.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const std::string lock_path = dir_ + "/LOCK";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(release[1]);  // else the read below never sees end-of-file
    close(ready[0]);
    int fd = open(lock_path.c_str(), O_RDWR);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char c = (fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0) ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (read(release[0], &c, 1) < 0) _exit(3);
    _exit(0);
  }
  close(ready[1]);
  close(release[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  std::unique_ptr<MetaStore> second;
  Status s = MetaStore::Open(dir_, MetaOptions(), &second);
  close(release[1]);
  close(ready[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_EQ(s.err(), EBUSY) << s.ToString();
  EXPECT_NE(s.ToString().find("locked by another process"), std::string::npos) << s.ToString();

  // Once the holder is gone the store opens again.
  Reopen();
}

TEST(LevelDbStatus, Mapping) {
  EXPECT_TRUE(FromLevelDb(leveldb::Status::OK(), "ctx").ok());
  Status s = FromLevelDb(leveldb::Status::NotFound("k"), "ctx");
  EXPECT_EQ(s.err(), ENOENT);
  s = FromLevelDb(leveldb::Status::Corruption("bad block", "/d/000005.ldb"), "/d");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(s.ToString().find("000005.ldb"), std::string::npos);
  EXPECT_NE(s.ToString().find("/d"), std::string::npos);
  s = FromLevelDb(leveldb::Status::IOError("/d/000007.log", strerror(ENOSPC)), "/d");
  EXPECT_EQ(s.err(), ENOSPC) << s.ToString();
  EXPECT_NE(s.ToString().find("000007.log"), std::string::npos);
  s = FromLevelDb(leveldb::Status::IOError("/d/000007.log", strerror(EACCES)), "/d");
  EXPECT_EQ(s.err(), EACCES) << s.ToString();
  s = FromLevelDb(leveldb::Status::IOError("/d/000007.log", "weird failure"), "/d");
  EXPECT_EQ(s.err(), EIO);
  EXPECT_FALSE(s.IsCorruption());
  s = FromLevelDb(leveldb::Status::IOError("lock /d/LOCK", strerror(EAGAIN)), "/d");
  EXPECT_EQ(s.err(), EBUSY);
  EXPECT_NE(s.ToString().find("metadata is locked by another process (already mounted?)"),
            std::string::npos);
  EXPECT_NE(s.ToString().find("/d/LOCK"), std::string::npos);
  // A read past a table's end (a truncated table) is damage, not an I/O error.
  s = FromLevelDb(leveldb::Status::IOError("/d/000008.ldb", strerror(EINVAL)), "/d");
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("truncated table"), std::string::npos) << s.ToString();
  s = FromLevelDb(leveldb::Status::IOError("/d/000007.log", strerror(EINVAL)), "/d");
  EXPECT_FALSE(s.IsCorruption()) << s.ToString();
  s = FromLevelDb(leveldb::Status::NotSupported("x"), "/d");
  EXPECT_EQ(s.err(), EOPNOTSUPP);
  s = FromLevelDb(leveldb::Status::InvalidArgument("/d", "exists (error_if_exists is true)"), "/d");
  EXPECT_EQ(s.err(), EEXIST);
}

}  // namespace
}  // namespace sepfs::kv
