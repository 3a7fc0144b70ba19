// File data path of the fs core: reads and writes against an in-memory
// model, truncation, holes, fallocate and st_blocks.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

// An in-memory model of one file's contents.
class Model {
 public:
  void Write(uint64_t off, const std::string& data) {
    if (s_.size() < off + data.size()) s_.resize(off + data.size(), '\0');
    s_.replace(off, data.size(), data);
  }
  void Truncate(uint64_t size) { s_.resize(size, '\0'); }
  void Punch(uint64_t off, uint64_t len) {
    if (off >= s_.size()) return;
    const uint64_t end = std::min<uint64_t>(s_.size(), off + len);
    std::fill(s_.begin() + off, s_.begin() + end, '\0');
  }
  std::string Read(uint64_t off, uint64_t n) const {
    if (off >= s_.size()) return "";
    return s_.substr(off, n);
  }
  const std::string& data() const { return s_; }

 private:
  std::string s_;
};

// First differing offset, for readable failures on large buffers.
std::string Diff(const std::string& got, const std::string& want) {
  if (got == want) return "equal";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) i++;
  return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size()) +
         ", first difference at byte " + std::to_string(i);
}

// Random writes, truncates, hole punches, flushes and reads of one file,
// checked against the model after every step and across reopen.
template <typename Fixture>
void RandomOps(Fixture* t, uint64_t seed, int steps, uint64_t max_size) {
  std::printf("random data test: seed %llu, block size %u, max size %llu\n",
              static_cast<unsigned long long>(seed), t->fs()->block_size(),
              static_cast<unsigned long long>(max_size));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto rnd = [&](uint64_t n) { return n ? rng() % n : 0; };
  const uint64_t bs = t->fs()->block_size();
  uint64_t ino = t->CreateFile("model");
  Model m;
  auto check = [&](const std::string& what) {
    const kv::InodeRecord r = t->Attr(ino);
    ASSERT_EQ(r.size, m.data().size()) << what;
    std::string got;
    ASSERT_OK(t->fs()->Read(ino, 0, m.data().size() + bs, &got));
    ASSERT_TRUE(got == m.data()) << what << ": " << Diff(got, m.data());
  };
  // Offsets near block boundaries are the interesting ones.
  auto offset = [&]() -> uint64_t {
    switch (rnd(3)) {
      case 0: return rnd(max_size);
      case 1: return std::min(max_size, rnd(max_size / bs + 1) * bs);
      default: {
        const uint64_t b = rnd(max_size / bs + 1) * bs, j = rnd(9);
        return b + j >= 4 ? b + j - 4 : 0;
      }
    }
  };
  auto length = [&]() -> uint64_t {
    switch (rnd(4)) {
      case 0: return 1 + rnd(16);
      case 1: return 1 + rnd(bs);
      case 2: return bs;
      default: return 1 + rnd(3 * bs);
    }
  };
  for (int step = 0; step < steps; step++) {
    const int op = static_cast<int>(rnd(100));
    std::string what = "step " + std::to_string(step) + ": ";
    if (op < 45) {
      const uint64_t off = offset(), len = length();
      what += "write " + std::to_string(off) + "+" + std::to_string(len);
      const std::string data = Payload(rng(), len);
      ASSERT_OK(t->fs()->Write(ino, off, data)) << what;
      m.Write(off, data);
    } else if (op < 55) {
      const uint64_t size = rnd(3) == 0 ? rnd(m.data().size() + 1) : offset();
      what += "truncate " + std::to_string(size);
      t->SetSize(ino, size);
      m.Truncate(size);
    } else if (op < 65) {
      const uint64_t off = rnd(3) == 0 ? rnd(m.data().size() + 1) : offset();
      const uint64_t len = rnd(4) == 0 ? max_size : length();
      what += "punch " + std::to_string(off) + "+" + std::to_string(len);
      ASSERT_OK(t->fs()->Fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len))
          << what;
      m.Punch(off, len);
    } else if (op < 72) {
      what += "flush";
      ASSERT_OK(t->fs()->Flush(ino)) << what;
      ASSERT_EQ(t->Dirty(), 0u) << what << ": dirty byte accounting";
    } else if (op < 74) {
      const uint64_t off = offset(), len = length();
      what += "fallocate " + std::to_string(off) + "+" + std::to_string(len);
      ASSERT_OK(t->fs()->Fallocate(ino, 0, off, len)) << what;
      if (off + len > m.data().size()) m.Truncate(off + len);
    } else if (op < 77) {
      const uint64_t off = rnd(3) == 0 ? rnd(m.data().size() + 1) : offset(), len = length();
      const bool keep = rnd(2) == 0;
      what += "zero range " + std::to_string(off) + "+" + std::to_string(len) +
              (keep ? " keeping the size" : "");
      ASSERT_OK(t->fs()->Fallocate(ino, FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0),
                                   off, len))
          << what;
      m.Punch(off, len);
      if (!keep && off + len > m.data().size()) m.Truncate(off + len);
    } else if (op < 79) {
      what += "reopen";
      t->ReopenFs();
      if (::testing::Test::HasFatalFailure()) return;
      ino = t->InoOf(Fixture::kRoot, "model");
    } else {
      const uint64_t off = rnd(m.data().size() + 2 * bs), len = length();
      what += "read " + std::to_string(off) + "+" + std::to_string(len);
      std::string got;
      ASSERT_OK(t->fs()->Read(ino, off, len, &got)) << what;
      const std::string want = m.Read(off, len);
      ASSERT_TRUE(got == want) << what << ": " << Diff(got, want);
    }
    check(what);
    if (::testing::Test::HasFatalFailure()) return;
  }
  t->ReopenFs();
  if (::testing::Test::HasFatalFailure()) return;
  ino = t->InoOf(Fixture::kRoot, "model");
  check("after the final reopen");
}

// Exposes fixture internals to RandomOps.
template <typename Base>
class DataFixture : public Base {
 public:
  using Base::Attr;
  using Base::InoOf;
  using Base::kRoot;
  using Base::SetSize;
  Filesystem* fs() { return this->fs_.get(); }
  uint64_t CreateFile(const std::string& name) { return this->Create(kRoot, name); }
  void ReopenFs() { this->Reopen(); }
  uint64_t Dirty() { return this->DirtyBytes(); }
};

class DataTest : public DataFixture<FsTest> {};
class SmallDataTest : public DataFixture<SmallBlockFsTest> {};

// Dirty blocks of all files may take 1 MiB.
class DirtyLimitTest : public DataTest {
 protected:
  static constexpr uint64_t kLimit = 1 << 20;
  FsOptions fs_options() const override {
    FsOptions o = DataTest::fs_options();
    o.dirty_limit_bytes = kLimit;
    return o;
  }
};

// Dirty blocks stay within their limit even while the background flusher
// does nothing (as when it falls behind the kernel's writeback): a write
// that takes them over it flushes its own file.
TEST_F(DirtyLimitTest, WritesKeepDirtyBlocksWithinTheLimitWithoutTheFlusher) {
  fs_->TEST_PauseFlusher(true);
  std::vector<std::string> wants;
  for (int i = 0; i < 48; i++) {
    const uint64_t ino = Create(kRoot, "p" + std::to_string(i));
    wants.push_back(Payload(i, 256 * 1024 + 1000 * i));
    ASSERT_OK(fs_->Write(ino, 0, wants.back()));
    ASSERT_LE(DirtyBytes(), kLimit) << "after file " << i;
  }
  EXPECT_GT(DirtyBytes(), 0u);
  // The writes over the limit woke the flusher: it flushes once let go.
  fs_->TEST_PauseFlusher(false);
  for (int waited_ms = 0; DirtyBytes() > 0 && waited_ms < 20000; waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(DirtyBytes(), 0u);
  auto expect_all_read_back = [&] {
    for (int i = 0; i < 48; i++) {
      EXPECT_TRUE(ReadAll(InoOf(kRoot, "p" + std::to_string(i))) == wants[i]) << "file " << i;
    }
  };
  expect_all_read_back();
  Reopen();
  expect_all_read_back();
  ExpectFsckClean();
}

TEST_F(SmallDataTest, RandomOpsSmallBlocks) {
  RandomOps(this, 20240601, 1500, 12 * 4096);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, RandomOpsSmallBlocksSecondSeed) {
  RandomOps(this, 7, 1500, 5 * 4096);
  ExpectFsckClean();
}

TEST_F(DataTest, RandomOpsDefaultBlocks) {
  RandomOps(this, 99991, 400, 4 * 65536);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, RoundTripManyOffsetsAndSizes) {
  const uint64_t bs = 4096;
  int n = 0;
  std::vector<std::string> wants;
  for (uint64_t off : {0ull, 1ull, 511ull, 4095ull, 4096ull, 4097ull, 8191ull, 12288ull + 7}) {
    for (uint64_t len : {1ull, 7ull, 4095ull, 4096ull, 4097ull, 3 * 4096ull + 5}) {
      const uint64_t ino = Create(kRoot, "f" + std::to_string(n));
      const std::string data = Payload(n++, len);
      ASSERT_OK(fs_->Write(ino, off, data));
      const std::string want = std::string(off, '\0') + data;
      wants.push_back(want);
      EXPECT_EQ(Attr(ino).size, off + len);
      std::string got;
      ASSERT_OK(fs_->Read(ino, 0, off + len + bs, &got));
      EXPECT_TRUE(got == want) << off << "+" << len << ": " << Diff(got, want);
      ASSERT_OK(fs_->Flush(ino));
      ASSERT_OK(fs_->Read(ino, 0, off + len + bs, &got));
      EXPECT_TRUE(got == want) << "flushed " << off << "+" << len << ": " << Diff(got, want);
      // Unaligned sub-range read from flushed records.
      ASSERT_OK(fs_->Read(ino, off + len / 2, len, &got));
      EXPECT_TRUE(got == want.substr(off + len / 2, len)) << off << "+" << len;
    }
  }
  Reopen();
  for (int i = 0; i < n; i++) {
    const uint64_t ino = InoOf(kRoot, "f" + std::to_string(i));
    EXPECT_TRUE(ReadAll(ino) == wants[i]) << "file " << i << ": " << Diff(ReadAll(ino), wants[i]);
  }
}

TEST_F(SmallDataTest, PartialBlockOverwrite) {
  const uint64_t f = Create(kRoot, "f");
  const std::string base = Payload(1, 3 * 4096);
  ASSERT_OK(fs_->Write(f, 0, base));
  ASSERT_OK(fs_->Flush(f));
  std::string want = base;
  // Overwrite inside one block and across a block boundary, flushed and not.
  ASSERT_OK(fs_->Write(f, 100, "hello"));
  want.replace(100, 5, "hello");
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Write(f, 4096 - 3, "boundary"));
  want.replace(4096 - 3, 8, "boundary");
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(ReadAll(f), want);
  Reopen();
  EXPECT_EQ(ReadAll(InoOf(kRoot, "f")), want);
}

TEST_F(DataTest, PartialBlockOverwriteDefaultBlockSize) {
  const uint64_t f = Create(kRoot, "f");
  const std::string base = Payload(2, 200000);
  ASSERT_OK(fs_->Write(f, 0, base));
  ASSERT_OK(fs_->Flush(f));
  std::string want = base;
  const std::string patch = Payload(3, 70000);  // spans two block boundaries
  ASSERT_OK(fs_->Write(f, 65000, patch));
  want.replace(65000, patch.size(), patch);
  EXPECT_EQ(ReadAll(f), want);
  Reopen();
  EXPECT_EQ(ReadAll(InoOf(kRoot, "f")), want);
}

TEST_F(SmallDataTest, SparseReadsAreZeros) {
  const uint64_t f = Create(kRoot, "f");
  const uint64_t off = 10 * 4096 + 5;
  ASSERT_OK(fs_->Write(f, off, "tail"));
  EXPECT_EQ(Attr(f).size, off + 4);
  std::string want = std::string(off, '\0') + "tail";
  EXPECT_EQ(ReadAll(f), want);
  std::string got;
  ASSERT_OK(fs_->Read(f, 4096 + 17, 3 * 4096, &got));
  EXPECT_EQ(got, std::string(3 * 4096, '\0'));
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(ReadAll(f), want);
  // Only the written block is allocated.
  EXPECT_EQ(Attr(f).blocks, 1u);
}

TEST_F(SmallDataTest, TruncateShrinkThenGrowReadsZeros) {
  const uint64_t bs = 4096;
  for (bool flush_before : {false, true}) {
    for (bool flush_between : {false, true}) {
      SCOPED_TRACE(std::string("flush before ") + (flush_before ? "yes" : "no") +
                   ", between " + (flush_between ? "yes" : "no"));
      const std::string name =
          "f" + std::to_string(flush_before) + std::to_string(flush_between);
      const uint64_t f = Create(kRoot, name);
      const std::string data = Payload(4, 3 * bs);
      ASSERT_OK(fs_->Write(f, 0, data));
      if (flush_before) {
        ASSERT_OK(fs_->Flush(f));
      }
      SetSize(f, bs + 100);
      if (flush_between) {
        ASSERT_OK(fs_->Flush(f));
      }
      EXPECT_EQ(ReadAll(f), data.substr(0, bs + 100));
      SetSize(f, 3 * bs);
      const std::string want = data.substr(0, bs + 100) + std::string(2 * bs - 100, '\0');
      EXPECT_EQ(ReadAll(f), want);
      // Writing past the old tail must not resurrect old bytes either.
      ASSERT_OK(fs_->Write(f, 3 * bs, "x"));
      EXPECT_EQ(ReadAll(f), want + "x");
      ASSERT_OK(fs_->Flush(f));
      EXPECT_EQ(ReadAll(f), want + "x");
    }
  }
  Reopen();
  const std::string data = Payload(4, 3 * bs);
  const std::string want = data.substr(0, bs + 100) + std::string(2 * bs - 100, '\0') + "x";
  for (const char* name : {"f00", "f01", "f10", "f11"}) {
    EXPECT_EQ(ReadAll(InoOf(kRoot, name)), want) << name;
  }
  ExpectFsckClean();
}

TEST_F(SmallDataTest, TruncateGrowByExtendingWriteAfterShrink) {
  // Shrink inside a block, then a write far beyond: the bytes between the
  // new EOF and the write are zeros, also in the block that was cut.
  const uint64_t f = Create(kRoot, "f");
  const std::string data = Payload(5, 4096);
  ASSERT_OK(fs_->Write(f, 0, data));
  ASSERT_OK(fs_->Flush(f));
  SetSize(f, 10);
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->Write(f, 2000, "y"));
  const std::string want = data.substr(0, 10) + std::string(1990, '\0') + "y";
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(ReadAll(f), want);
}

TEST_F(SmallDataTest, ReadsPastEof) {
  const uint64_t f = Create(kRoot, "f");
  std::string got = "junk";
  ASSERT_OK(fs_->Read(f, 0, 100, &got));
  EXPECT_EQ(got, "");
  ASSERT_OK(fs_->Write(f, 0, "0123456789"));
  got = "junk";
  ASSERT_OK(fs_->Read(f, 10, 100, &got));
  EXPECT_EQ(got, "");
  ASSERT_OK(fs_->Read(f, 5000, 100, &got));
  EXPECT_EQ(got, "");
  ASSERT_OK(fs_->Read(f, 7, 100, &got));
  EXPECT_EQ(got, "789");
  ASSERT_OK(fs_->Read(f, 3, 0, &got));
  EXPECT_EQ(got, "");
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->Read(f, 7, 100, &got));
  EXPECT_EQ(got, "789");
  ASSERT_OK(fs_->Read(f, 11, 100, &got));
  EXPECT_EQ(got, "");
}

TEST_F(SmallDataTest, WriteToNonRegularFile) {
  const uint64_t d = Mkdir(kRoot, "d");
  EXPECT_ERRNO(fs_->Write(d, 0, "x"), EINVAL);
  EXPECT_OK(fs_->Write(Create(kRoot, "f"), 0, ""));
  EXPECT_ERRNO(fs_->Write(Create(kRoot, "g"), Filesystem::MaxFileSize(), "x"), EFBIG);
  EXPECT_ERRNO(fs_->Write(Create(kRoot, "h"), UINT64_MAX - 1, "xyz"), EFBIG);
}

TEST_F(SmallDataTest, PunchInsideAFile) {
  const uint64_t bs = 4096;
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 4 * bs)));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs, 2 * bs));
  EXPECT_EQ(Attr(f).size, 4 * bs);
  std::string want = Payload(1, 4 * bs);
  std::fill(want.begin() + bs, want.begin() + 3 * bs, '\0');
  EXPECT_EQ(ReadAll(f), want);
  EXPECT_EQ(Attr(f).blocks, 2u * bs / 512);
}

TEST_F(SmallDataTest, PunchHoleEdgesAndBeyondEof) {
  const uint64_t bs = 4096;
  const uint64_t f = Create(kRoot, "f");
  std::string want = Payload(6, 3 * bs + 100);
  ASSERT_OK(fs_->Write(f, 0, want));
  // Unaligned punch inside one block, unflushed.
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10, 20));
  std::fill(want.begin() + 10, want.begin() + 30, '\0');
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Flush(f));
  // Across a boundary, flushed.
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs - 5, 10));
  std::fill(want.begin() + bs - 5, want.begin() + bs + 5, '\0');
  EXPECT_EQ(ReadAll(f), want);
  // From inside the last block far past EOF: size is kept.
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 3 * bs + 50, 1 << 20));
  std::fill(want.begin() + 3 * bs + 50, want.end(), '\0');
  EXPECT_EQ(Attr(f).size, 3 * bs + 100);
  EXPECT_EQ(ReadAll(f), want);
  // Entirely past EOF: nothing happens.
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * bs, bs));
  EXPECT_EQ(Attr(f).size, 3 * bs + 100);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(ReadAll(f), want);
  Reopen();
  EXPECT_EQ(ReadAll(f), want);
}

// FALLOC_FL_ZERO_RANGE: zeros inside the size, flushed or dirty, across
// block edges; past the size it extends the file unless told to keep it
// (on a full store: CapacityTest.ZeroRangePastTheFreeSpaceChangesNothing).
TEST_F(SmallDataTest, ZeroRange) {
  const uint64_t bs = 4096;
  const uint64_t f = Create(kRoot, "f");
  std::string want = Payload(7, 4 * bs + 100);
  ASSERT_OK(fs_->Write(f, 0, want.substr(0, 2 * bs)));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->Write(f, 2 * bs, want.substr(2 * bs)));  // dirty
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_ZERO_RANGE, bs - 10, 2 * bs + 20));
  std::fill(want.begin() + bs - 10, want.begin() + 3 * bs + 10, '\0');
  EXPECT_EQ(ReadAll(f), want);
  EXPECT_EQ(Attr(f).size, want.size());
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 4 * bs, 10 * bs));
  std::fill(want.begin() + 4 * bs, want.end(), '\0');
  EXPECT_EQ(Attr(f).size, want.size());
  EXPECT_EQ(ReadAll(f), want);
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_ZERO_RANGE, 4 * bs + 50, 2 * bs));
  want.resize(6 * bs + 50, '\0');
  EXPECT_EQ(Attr(f).size, want.size());
  EXPECT_EQ(ReadAll(f), want);
  Reopen();
  EXPECT_EQ(Attr(f).size, want.size());
  EXPECT_EQ(ReadAll(f), want);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, FallocateModes) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, "abc"));
  ASSERT_OK(fs_->Fallocate(f, 0, 0, 10000));
  EXPECT_EQ(Attr(f).size, 10000u);
  EXPECT_EQ(ReadAll(f), "abc" + std::string(10000 - 3, '\0'));
  // Inside the file: no change.
  ASSERT_OK(fs_->Fallocate(f, 0, 100, 200));
  EXPECT_EQ(Attr(f).size, 10000u);
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_KEEP_SIZE, 0, 50000));
  EXPECT_EQ(Attr(f).size, 10000u);
  EXPECT_ERRNO(fs_->Fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->Fallocate(f, FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->Fallocate(f, FALLOC_FL_INSERT_RANGE, 0, 4096), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->Fallocate(f, 0, 0, 0), EINVAL);
  EXPECT_ERRNO(fs_->Fallocate(Mkdir(kRoot, "d"), 0, 0, 10), ENODEV);
  EXPECT_EQ(Attr(f).size, 10000u);
  EXPECT_EQ(ReadAll(f), "abc" + std::string(10000 - 3, '\0'));
  Reopen();
  EXPECT_EQ(Attr(f).size, 10000u);
  EXPECT_EQ(ReadAll(f), "abc" + std::string(10000 - 3, '\0'));
}

// A size a batch could not store yet (its data was still dirty) is stored
// later even when no dirty block is left: after a SETATTR of the times, a
// punch that dropped every dirty block left the size in memory only, and a
// clean unmount lost it (a helper's review).
TEST_F(SmallDataTest, SizeAheadOfStoredDataIsStoredWithoutDirtyBlocks) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 2 * 4096)));
  SetAttrRequest times;
  times.set_mtime = true;
  times.mtime = {1000, 0};
  kv::InodeRecord r;
  ASSERT_OK(fs_->SetAttr(f, times, &r));
  ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 2 * 4096));
  ASSERT_OK(fs_->Fsync(f, false));
  Reopen();
  EXPECT_EQ(Attr(f).size, 2 * 4096u);
  EXPECT_EQ(ReadAll(f), std::string(2 * 4096, '\0'));
}

TEST_F(SmallDataTest, LargestOffsets) {
  const uint64_t max = Filesystem::MaxFileSize();
  const uint64_t f = Create(kRoot, "huge");
  ASSERT_OK(fs_->Write(f, max - 1, "z"));
  EXPECT_EQ(Attr(f).size, max);
  std::string got;
  ASSERT_OK(fs_->Read(f, max - 1, 10, &got));
  EXPECT_EQ(got, "z");
  ASSERT_OK(fs_->Read(f, 0, 100, &got));
  EXPECT_EQ(got, std::string(100, '\0'));
  ASSERT_OK(fs_->Flush(f));
  Reopen();
  ASSERT_OK(fs_->Read(f, max - 4096, 4096, &got));
  EXPECT_EQ(got, std::string(4095, '\0') + "z");
  // A record holds its block from the start: the last byte costs a block.
  EXPECT_EQ(Attr(f).blocks, 4096u / 512);
  SetAttrRequest req;
  req.set_size = true;
  req.size = max + 1;
  kv::InodeRecord rec;
  EXPECT_ERRNO(fs_->SetAttr(f, req, &rec), EFBIG);
  EXPECT_ERRNO(fs_->Fallocate(f, 0, max, 1), EFBIG);
  SetSize(f, 0);
  EXPECT_EQ(Attr(f).blocks, 0u);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, BlocksGrowAndShrink) {
  const uint64_t bs = 4096;
  const uint64_t f = Create(kRoot, "f");
  EXPECT_EQ(Attr(f).blocks, 0u);
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 10 * bs)));
  EXPECT_GE(Attr(f).blocks, 10 * bs / 512);  // counted before the flush too
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(Attr(f).blocks, 10 * bs / 512);
  // Rewriting does not grow the allocation, before its flush either.
  ASSERT_OK(fs_->Write(f, 0, Payload(2, 10 * bs)));
  EXPECT_EQ(Attr(f).blocks, 10 * bs / 512);
  ASSERT_OK(fs_->Write(f, 3 * bs + 100, "partial"));
  EXPECT_EQ(Attr(f).blocks, 10 * bs / 512);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(Attr(f).blocks, 10 * bs / 512);
  // A partial last block: its overwrite is not counted twice either.
  const uint64_t g = Create(kRoot, "g");
  ASSERT_OK(fs_->Write(g, 0, Payload(3, 2 * bs + 700)));
  ASSERT_OK(fs_->Flush(g));
  const uint64_t flushed = Attr(g).blocks;
  EXPECT_EQ(flushed, (2 * bs + 700 + 511) / 512);
  ASSERT_OK(fs_->Write(g, 2 * bs + 10, "tail"));
  EXPECT_EQ(Attr(g).blocks, flushed);
  ASSERT_OK(fs_->Flush(g));
  EXPECT_EQ(Attr(g).blocks, flushed);
  SetSize(f, 0);
  EXPECT_EQ(Attr(f).blocks, 0u);
  ASSERT_OK(fs_->Write(f, 0, Payload(3, 2 * bs + bs / 2)));
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(Attr(f).blocks, (2 * bs + bs / 2) / 512);
  SetSize(f, bs + 100);
  EXPECT_LT(Attr(f).blocks, (2 * bs + bs / 2) / 512);
  ASSERT_OK(fs_->Flush(f));
  EXPECT_EQ(Attr(f).blocks, (bs + 512) / 512);
  Reopen();
  EXPECT_EQ(Attr(f).blocks, (bs + 512) / 512);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, ReclaimedFilesLeaveNoPointer) {
  // A reclaim stops scanning at the pointer that completes the file's
  // allocation count; files of every shape (holes in the middle and at the
  // end, inline tails, punched, truncated, empty, never flushed) must still
  // lose every pointer, deleted in either order, and leave the store clean.
  const uint64_t bs = 4096;
  std::mt19937_64 rng(20261125);
  auto rnd = [&](uint64_t n) { return rng() % n; };
  std::vector<uint64_t> files;
  for (int i = 0; i < 60; i++) {
    const uint64_t f = Create(kRoot, "f" + std::to_string(i));
    files.push_back(f);
    for (int op = 0, ops = static_cast<int>(rnd(6)); op < ops; op++) {
      const uint64_t off = rnd(12 * bs), len = 1 + rnd(3 * bs);
      switch (rnd(4)) {
        case 0:
        case 1:
          ASSERT_OK(fs_->Write(f, off, Payload(rng(), len)));
          break;
        case 2:
          SetSize(f, off);
          break;
        default:
          ASSERT_OK(fs_->Fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len));
      }
      if (rnd(2) == 0) {
        ASSERT_OK(fs_->Flush(f));
      }
    }
    if (rnd(3) > 0) {
      ASSERT_OK(fs_->Flush(f));
    }
  }
  // Deleted in reverse, then forward, order: a reclaim meets the deletion
  // markers of the files before or after it.
  for (size_t i = files.size(); i-- > files.size() / 2;) {
    ASSERT_OK(fs_->Unlink(kRoot, "f" + std::to_string(i)));
    fs_->Forget(files[i], 1);
  }
  for (size_t i = 0; i < files.size() / 2; i++) {
    ASSERT_OK(fs_->Unlink(kRoot, "f" + std::to_string(i)));
    fs_->Forget(files[i], 1);
  }
  EXPECT_EQ(KeysWithPrefix(std::string(1, kv::kTagBlock)), 0u);
  ExpectFsckClean();
}

TEST_F(SmallDataTest, ReclaimAtUnmountTakesPointersTheRecordMissed) {
  // A stored record that undercounts its file's pointers (an older record
  // that leveldb::RepairDB brought back): the reclaims at unmount and mount
  // scan the whole prefix, so no pointer outlives its inode there.
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, Payload(7, 3 * 4096)));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->OpenFile(f));
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  fs_->Forget(f, 1);  // still open: reclaimed at unmount
  kv::InodeRecord r;
  ASSERT_OK(fs_->store()->meta()->GetInode(f, &r));
  r.size = 4096;
  r.blocks = 4096 / 512;
  kv::Batch b;
  b.PutInode(r);
  ASSERT_OK(fs_->store()->meta()->Write(&b, /*sync=*/false));
  Reopen();
  EXPECT_EQ(KeysWithPrefix(kv::BlockPrefix(f)), 0u);
  ExpectFsckClean();
}

TEST_F(DataTest, LargeFileDefaultBlocks) {
  // Unaligned appends of about 2 MB: 31 blocks of 64 KiB, the last partial.
  const uint64_t f = Create(kRoot, "big");
  std::string want;
  for (int i = 0; i < 40; i++) {
    const std::string chunk = Payload(100 + i, 50000 + i);
    ASSERT_OK(fs_->Write(f, want.size(), chunk));
    want += chunk;
  }
  EXPECT_EQ(ReadAll(f), want);
  Reopen();
  EXPECT_EQ(ReadAll(f), want);
  // Full blocks are whole sectors; the partial last block counts its own.
  EXPECT_EQ(Attr(f).blocks, (want.size() + 511) / 512);
  ExpectFsckClean();
}

// Truncating into the middle of a flushed block rewrites that block in the
// truncate's own batch: no persisted pointer may keep the cut bytes, or
// growing the file again and dying before a flush would bring them back.
TEST_F(FsTest, TruncateRewritesTheCutLastBlockAtOnce) {
  const uint64_t ino = Create(kRoot, "t");
  ASSERT_OK(fs_->Write(ino, 0, Payload(3, 64 * 1024)));
  ASSERT_OK(fs_->Flush(ino));
  SetSize(ino, 10 * 1024);
  SetSize(ino, 64 * 1024);
  std::string raw;
  ASSERT_OK(fs_->store()->meta()->Get(kv::BlockKey(ino, 0), &raw));
  vlog::BlockPtr p;
  ASSERT_OK(kv::DecodeBlockValue(raw, &p));
  EXPECT_EQ(p.length, 10u * 1024);
  std::string want = Payload(3, 64 * 1024).substr(0, 10 * 1024);
  want.resize(64 * 1024, '\0');
  EXPECT_EQ(ReadAll(ino), want);
}

}  // namespace
}  // namespace sepfs::fs::testing
