// Inline data (selective KV separation): blocks no longer than the store's
// inline limit keep their bytes in their LSM value instead of a vLog record.
#include <fcntl.h>
#include <linux/falloc.h>

#include <shared_mutex>
#include <string>
#include <vector>

#include "fs/gc_index.h"

#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

class InlineTest : public FsTest {
 protected:
  // The decoded value of (ino, block); fails the test when there is none.
  kv::BlockValue Value(uint64_t ino, uint64_t block, std::string* raw) {
    kv::BlockValue v;
    Status st = fs_->store()->meta()->Get(kv::BlockKey(ino, block), raw);
    EXPECT_TRUE(st.ok()) << "block " << block << ": " << st.ToString();
    if (st.ok()) {
      EXPECT_OK(kv::DecodeBlock(*raw, &v));
    }
    return v;
  }
  bool HasValue(uint64_t ino, uint64_t block) {
    std::string raw;
    return fs_->store()->meta()->Get(kv::BlockKey(ino, block), &raw).ok();
  }
  uint64_t RecordsAppended() { return fs_->store()->vlog()->stats().records_appended; }
  uint64_t LiveBytes() {
    uint64_t live = 0;
    for (const auto& s : fs_->store()->vlog()->Segments()) live += s.live_bytes;
    return live;
  }
};

TEST_F(InlineTest, TheDefaultLimitIsFourKibibytes) {
  EXPECT_EQ(fs_->store()->super().inline_max, 4096u);
  EXPECT_EQ(fs_->store()->super().version, kv::kMetaFormatVersion);
  EXPECT_EQ(kv::DefaultInlineMax(4096), 1024u);
}

TEST_F(InlineTest, ASmallFileKeepsItsBytesInItsValueAndNoRecord) {
  const uint64_t ino = Create(kRoot, "small");
  const std::string data = Payload(1, 3000);
  const uint64_t appended = RecordsAppended();
  ASSERT_OK(fs_->Write(ino, 0, data));
  ASSERT_OK(fs_->Fsync(ino, false));
  EXPECT_EQ(RecordsAppended(), appended);
  std::string raw;
  const kv::BlockValue v = Value(ino, 0, &raw);
  EXPECT_TRUE(v.inlined);
  EXPECT_EQ(v.bytes, data);
  EXPECT_EQ(Attr(ino).blocks, SectorsOf(3000));
  EXPECT_EQ(ReadAll(ino), data);
  std::string part;
  ASSERT_OK(fs_->Read(ino, 1000, 5000, &part));
  EXPECT_EQ(part, data.substr(1000));
  Reopen();
  EXPECT_EQ(ReadAll(ino), data);
  ExpectFsckClean();
}

// Exactly the limit is inline; one byte more is a record.
TEST_F(InlineTest, TheLimitIsInclusive) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  ASSERT_OK(fs_->Write(a, 0, Payload(2, 4096)));
  ASSERT_OK(fs_->Write(b, 0, Payload(3, 4097)));
  ASSERT_OK(fs_->Flush(a));
  ASSERT_OK(fs_->Flush(b));
  std::string raw_a, raw_b;
  EXPECT_TRUE(Value(a, 0, &raw_a).inlined);
  EXPECT_FALSE(Value(b, 0, &raw_b).inlined);
  EXPECT_EQ(ReadAll(a), Payload(2, 4096));
  EXPECT_EQ(ReadAll(b), Payload(3, 4097));
}

// Growing past the limit moves the block into the vLog; truncating it back
// below makes it inline again and releases the record.
TEST_F(InlineTest, BlocksMoveBetweenValueAndLogAsTheyGrowAndShrink) {
  const uint64_t ino = Create(kRoot, "f");
  const std::string data = Payload(4, 20000);
  ASSERT_OK(fs_->Write(ino, 0, data.substr(0, 2000)));
  ASSERT_OK(fs_->Flush(ino));
  const uint64_t live0 = LiveBytes();
  ASSERT_OK(fs_->Write(ino, 2000, data.substr(2000)));
  ASSERT_OK(fs_->Flush(ino));
  std::string raw;
  kv::BlockValue v = Value(ino, 0, &raw);
  ASSERT_FALSE(v.inlined);
  EXPECT_EQ(v.ptr.length, 20000u);
  EXPECT_GT(LiveBytes(), live0);
  EXPECT_EQ(ReadAll(ino), data);
  EXPECT_EQ(Attr(ino).blocks, SectorsOf(20000));

  SetSize(ino, 1500);
  v = Value(ino, 0, &raw);
  ASSERT_TRUE(v.inlined);
  EXPECT_EQ(v.bytes, data.substr(0, 1500));
  EXPECT_EQ(LiveBytes(), live0);  // the record is garbage now
  EXPECT_EQ(Attr(ino).blocks, SectorsOf(1500));
  // Grown again, the cut bytes read as zeros.
  SetSize(ino, 3000);
  std::string want = data.substr(0, 1500);
  want.resize(3000, '\0');
  EXPECT_EQ(ReadAll(ino), want);
  ExpectFsckClean();
  EXPECT_EQ(ReadAll(ino), want);
}

// The short last block of a large file is inline; reads across the
// boundary, hole punches and truncates inside it keep the data right.
TEST_F(InlineTest, TheShortTailOfALargeFileIsInline) {
  const uint64_t ino = Create(kRoot, "big");
  std::string data = Payload(5, 2 * 65536 + 700);
  ASSERT_OK(fs_->Write(ino, 0, data));
  ASSERT_OK(fs_->Flush(ino));
  std::string raw;
  EXPECT_FALSE(Value(ino, 1, &raw).inlined);
  kv::BlockValue tail = Value(ino, 2, &raw);
  ASSERT_TRUE(tail.inlined);
  EXPECT_EQ(tail.bytes, data.substr(2 * 65536));
  std::string got;
  ASSERT_OK(fs_->Read(ino, 2 * 65536 - 100, 1000, &got));
  EXPECT_EQ(got, data.substr(2 * 65536 - 100, 1000));

  ASSERT_OK(fs_->Fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * 65536 + 100, 200));
  std::fill(data.begin() + 2 * 65536 + 100, data.begin() + 2 * 65536 + 300, '\0');
  ASSERT_OK(fs_->Flush(ino));
  EXPECT_TRUE(Value(ino, 2, &raw).inlined);
  EXPECT_EQ(ReadAll(ino), data);

  SetSize(ino, 2 * 65536 + 50);
  data.resize(2 * 65536 + 50);
  EXPECT_EQ(ReadAll(ino), data);
  SetSize(ino, 65536);  // the inline tail goes with its block
  data.resize(65536);
  EXPECT_FALSE(HasValue(ino, 2));
  EXPECT_EQ(Attr(ino).blocks, SectorsOf(65536));
  ExpectFsckClean();
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(InlineTest, UnlinkDropsInlineData) {
  const uint64_t ino = Create(kRoot, "gone");
  ASSERT_OK(fs_->Write(ino, 0, Payload(6, 100)));
  ASSERT_OK(fs_->Flush(ino));
  ASSERT_OK(fs_->Unlink(kRoot, "gone"));
  fs_->Forget(ino, 1);  // the last reference: the inode is reclaimed
  EXPECT_FALSE(HasValue(ino, 0));
  ExpectFsckClean();
}

// fsync'd inline data survives a crash (it is in the synced LSM batch).
TEST_F(InlineTest, FsyncedInlineDataSurvivesACrash) {
  const uint64_t ino = Create(kRoot, "durable");
  ASSERT_OK(fs_->Fsync(ino, false));
  CloseFs();
  InCrashingChild([&](Filesystem* fs) {
    if (!fs->Write(ino, 0, Payload(7, 1234)).ok()) return 1;
    if (!fs->Fsync(ino, false).ok()) return 2;
    return 0;
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(ReadAll(ino), Payload(7, 1234));
  ExpectFsckClean();
}

// Records whose blocks were cut to inline data in place are garbage: GC's
// liveness check calls them dead, and a pass frees their segments while the
// inline bytes read on.
TEST_F(InlineTest, RecordsCutToInlineDataAreCollected) {
  std::vector<uint64_t> inos;
  for (int i = 0; i < 3; i++) {
    inos.push_back(Create(kRoot, "g" + std::to_string(i)));
    ASSERT_OK(fs_->Write(inos.back(), 0, Payload(10 + i, 3 << 20)));
    ASSERT_OK(fs_->Flush(inos.back()));
  }
  std::string raw;
  const vlog::BlockPtr old = Value(inos[0], 0, &raw).ptr;
  for (uint64_t ino : inos) SetSize(ino, 1500);
  EXPECT_TRUE(Value(inos[0], 0, &raw).inlined);
  PtrLocks ptr_locks;
  std::shared_mutex seg_mu;
  FsGcIndex index(fs_->store()->meta(), /*journal=*/nullptr, &ptr_locks, &seg_mu);
  bool live = true;
  ASSERT_OK(index.IsLive(inos[0], 0, old, &live));
  EXPECT_FALSE(live);
  EXPECT_EQ(LiveBytes(), 0u);
  const uint64_t before = fs_->store()->vlog()->TotalBytes();
  uint64_t collected = 0;
  ASSERT_OK(fs_->RunGc(/*min_garbage_ratio=*/0, nullptr, &collected));
  EXPECT_GT(collected, 0u);
  EXPECT_LT(fs_->store()->vlog()->TotalBytes(), before - (4u << 20));
  for (size_t i = 0; i < inos.size(); i++) {
    EXPECT_EQ(ReadAll(inos[i]), Payload(10 + i, 3 << 20).substr(0, 1500));
  }
  ExpectFsckClean();
  EXPECT_EQ(ReadAll(inos[2]), Payload(12, 3 << 20).substr(0, 1500));
}

class NoInlineTest : public InlineTest {
 protected:
  std::optional<uint32_t> inline_max() const override { return 0; }
};

TEST_F(NoInlineTest, ALimitOfZeroKeepsEveryBlockInTheLog) {
  EXPECT_EQ(fs_->store()->super().inline_max, 0u);
  const uint64_t ino = Create(kRoot, "tiny");
  ASSERT_OK(fs_->Write(ino, 0, "x"));
  ASSERT_OK(fs_->Flush(ino));
  std::string raw;
  EXPECT_FALSE(Value(ino, 0, &raw).inlined);
  SetSize(ino, 0);
  ASSERT_OK(fs_->Write(ino, 0, Payload(1, 10)));
  ASSERT_OK(fs_->Flush(ino));
  EXPECT_FALSE(Value(ino, 0, &raw).inlined);
  EXPECT_EQ(ReadAll(ino), Payload(1, 10));
}

TEST(InlineMkfs, RefusesALimitAboveHalfABlockOr64KiB) {
  TempDir tmp;
  MkfsOptions mo;
  mo.block_size = 4096;
  mo.inline_max = 2049;
  Status st = Mkfs(tmp.Sub("a"), mo);
  EXPECT_EQ(st.err(), EINVAL) << st.ToString();
  EXPECT_NE(st.ToString().find("inline limit"), std::string::npos) << st.ToString();
  mo.block_size = 1 << 20;
  mo.inline_max = 64 * 1024 + 1;
  EXPECT_EQ(Mkfs(tmp.Sub("b"), mo).err(), EINVAL);
  mo.inline_max = 64 * 1024;
  EXPECT_OK(Mkfs(tmp.Sub("c"), mo));
}

// Fsck checks inline values like pointers: owner, length, end of file.
TEST_F(InlineTest, FsckReportsInlineDataBeyondTheEndOfTheFile) {
  const uint64_t ino = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(ino, 0, Payload(1, 100)));
  ASSERT_OK(fs_->Flush(ino));
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) { b->PutInlineBlock(ino, 3, "stray"); });
  FsckReport rep;
  RunFsck(&rep);
  ASSERT_EQ(rep.errors.size(), 2u);  // the stray block, and the inode's st_blocks
  bool beyond = false;
  for (const auto& f : rep.findings) {
    if (f.kind != FsckKind::kPointerBeyondEof) continue;
    beyond = true;
    // The size that covers it: repair grows the file (an inode that lost a
    // size update), as for a record past the end.
    EXPECT_EQ(f.value, 3u * 65536 + 5);
  }
  EXPECT_TRUE(beyond);
  EXPECT_NE(rep.errors[0].find("inline data beyond the end of the file"), std::string::npos)
      << rep.errors[0];
  EXPECT_EQ(rep.inline_blocks, 2u);
}

}  // namespace
}  // namespace sepfs::fs::testing
