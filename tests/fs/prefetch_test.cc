// Prefetch: the readahead policy (SequentialDetector, DirLearner,
// DirStreams) and the Filesystem's read path through the Prefetcher.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fs/readahead.h"
#include "fs_test_util.h"

namespace sepfs::fs {
namespace {

using testing::Payload;

// ---- SequentialDetector ----------------------------------------------------

TEST(SequentialDetectorTest, WindowGrowsWhileSequentialAndResetsOnJump) {
  ReadaheadOptions o;
  o.initial_blocks = 4;
  o.max_blocks = 64;
  o.max_bytes = 1 << 30;
  o.slack_bytes = 0;
  o.start_bytes = 0;
  SequentialDetector d(o);
  const uint32_t bs = 4096;
  const uint64_t size = 1000 * bs;
  // First read at 0: window 4 after block 0.
  BlockRange r = d.OnRead(0, bs, size, bs);
  EXPECT_EQ(d.window(), 4u);
  EXPECT_EQ(r.first, 1u);
  EXPECT_EQ(r.end, 5u);
  // Next read continues: window 8, only blocks not returned before.
  r = d.OnRead(bs, bs, size, bs);
  EXPECT_EQ(d.window(), 8u);
  EXPECT_EQ(r.first, 5u);
  EXPECT_EQ(r.end, 10u);
  uint64_t off = 2 * bs, covered = r.end;
  for (int i = 0; i < 10; i++, off += bs) {
    r = d.OnRead(off, bs, size, bs);
    if (!r.empty()) {
      EXPECT_EQ(r.first, covered);  // never twice, never a gap
      covered = r.end;
    }
  }
  EXPECT_EQ(d.window(), 64u);  // capped
  EXPECT_GT(covered, off / bs + 32);
  // A jump: window reset, nothing prefetched.
  r = d.OnRead(500 * bs, bs, size, bs);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(d.window(), 0u);
  // Sequential again from there: starts small.
  r = d.OnRead(501 * bs, bs, size, bs);
  EXPECT_EQ(d.window(), 4u);
  EXPECT_EQ(r.first, 502u);
  EXPECT_EQ(r.end, 506u);
}

TEST(SequentialDetectorTest, ByteCapFileEndAndRandomStart) {
  ReadaheadOptions o;
  o.max_bytes = 256 << 10;
  o.slack_bytes = 0;
  o.start_bytes = 0;
  SequentialDetector d(o);
  const uint32_t bs = 64 << 10;
  // A first read not at 0 is not a sequential start.
  EXPECT_TRUE(d.OnRead(10 * bs, bs, 100 * bs, bs).empty());
  SequentialDetector e(o);
  for (uint64_t i = 0; i < 6; i++) (void)e.OnRead(i * bs, bs, 100 * bs, bs);
  EXPECT_EQ(e.window(), 4u);  // 256 KiB / 64 KiB
  SequentialDetector f(o);
  BlockRange r = f.OnRead(0, bs, 3 * bs + 1, bs);  // 4 blocks in the file
  EXPECT_EQ(r.first, 1u);
  EXPECT_EQ(r.end, 4u);
  EXPECT_TRUE(f.OnRead(bs, bs, 3 * bs + 1, bs).empty());  // nothing left
}

TEST(SequentialDetectorTest, CallersByteCapLimitsTheWindow) {
  ReadaheadOptions o;
  o.start_bytes = 0;
  o.max_blocks = 512;
  o.max_bytes = 32 << 20;
  const uint32_t bs = 64 << 10;
  const uint64_t size = 4000ull * bs;
  SequentialDetector d(o), e(o);
  for (uint64_t i = 0; i < 200; i++) {
    (void)d.OnRead(i * bs, bs, size, bs, 1 << 20);  // 16 blocks at most
    (void)e.OnRead(i * bs, bs, size, bs);
  }
  EXPECT_EQ(d.window(), 16u);
  EXPECT_EQ(e.window(), 512u);
  // A cap above the options' changes nothing.
  SequentialDetector f(o);
  for (uint64_t i = 0; i < 200; i++) (void)f.OnRead(i * bs, bs, size, bs, 1ull << 40);
  EXPECT_EQ(f.window(), 512u);
}

TEST(SequentialDetectorTest, SlackToleratesReorderedAsyncReads) {
  ReadaheadOptions o;  // 1 MiB slack
  o.start_bytes = 0;
  SequentialDetector d(o);
  const uint32_t bs = 64 << 10;
  (void)d.OnRead(0, 128 << 10, 100 * bs, bs);
  (void)d.OnRead(256 << 10, 128 << 10, 100 * bs, bs);  // arrived before 128K
  (void)d.OnRead(128 << 10, 128 << 10, 100 * bs, bs);
  EXPECT_EQ(d.window(), 16u);
  EXPECT_TRUE(d.OnRead(50 * bs, bs, 100 * bs, bs).empty());
  EXPECT_EQ(d.window(), 0u);
}

// The order a cold 2 GiB read's READs arrived in (traced): two readahead
// windows of 1 MiB in flight, served by several threads, 2 MiB apart. Each
// block is returned once, and the window keeps growing.
TEST(SequentialDetectorTest, TwoReadaheadWindowsOutOfOrderKeepTheWindow) {
  ReadaheadOptions o;  // the defaults sepfs mounts with
  SequentialDetector d(o);
  const uint32_t bs = 64 << 10;
  const uint64_t size = 1ull << 31, mib = 1 << 20, len = 128 << 10;
  std::vector<uint64_t> offs;
  for (uint64_t w = 0; w < 64; w += 2) {
    // Window w+1 is served before the end of window w.
    for (uint64_t k = 0; k < 4; k++) offs.push_back(w * mib + k * len);
    for (uint64_t k = 0; k < 8; k++) offs.push_back((w + 1) * mib + k * len);
    for (uint64_t k = 4; k < 8; k++) offs.push_back(w * mib + k * len);
  }
  std::vector<int> returned(size / bs);
  for (uint64_t off : offs) {
    const BlockRange r = d.OnRead(off, len, size, bs);
    for (uint64_t b = r.first; b < r.end; b++) returned[b]++;
    // No window before 1 MiB (start_bytes): the kernel's readahead has it.
    if (off >= 2 * mib) {
      EXPECT_GT(d.window(), 0u) << "reset at " << off;
    }
  }
  EXPECT_EQ(d.window(), 512u);
  EXPECT_EQ(*std::max_element(returned.begin(), returned.end()), 1);
  // A real jump still resets it.
  EXPECT_TRUE(d.OnRead(1ull << 30, len, size, bs).empty());
  EXPECT_EQ(d.window(), 0u);
}

TEST(SequentialDetectorTest, NoWindowWhileTheKernelReadaheadCoversTheStart) {
  ReadaheadOptions o;  // start_bytes 1 MiB, the readahead sepfs sets
  SequentialDetector d(o);
  const uint32_t bs = 64 << 10;
  const uint64_t size = 100 * bs;
  // A photo-sized file read front to back: the kernel's requests only.
  EXPECT_TRUE(d.OnRead(0, 64 << 10, size, bs).empty());
  EXPECT_TRUE(d.OnRead(64 << 10, 256 << 10, size, bs).empty());
  EXPECT_TRUE(d.OnRead(320 << 10, 512 << 10, size, bs).empty());
  EXPECT_EQ(d.window(), 0u);
  // Past 1 MiB the window opens at its initial size, after the read.
  BlockRange r = d.OnRead(832 << 10, 512 << 10, size, bs);
  EXPECT_EQ(d.window(), 4u);
  EXPECT_EQ(r.first, (1344u << 10) / bs);  // the first block after the read
  EXPECT_EQ(r.end, r.first + 4);
  // A jump before 1 MiB of a new run: still nothing.
  EXPECT_TRUE(d.OnRead(90 * bs, bs, size, bs).empty());
  EXPECT_EQ(d.window(), 0u);
}

// ---- DirLearner / DirStreams ------------------------------------------------

TEST(DirLearnerTest, StopsOnLowHitRatioAndProbes) {
  DirLearner l;
  EXPECT_TRUE(l.ShouldPrefetch(7));
  l.Record(7, 60, 2);
  EXPECT_TRUE(l.ShouldPrefetch(7));
  for (int i = 0; i < 6; i++) l.Record(7, 0, 32);
  EXPECT_LT(l.HitRatio(7), 0.25);
  int allowed = 0;
  for (int i = 0; i < 16; i++) allowed += l.ShouldPrefetch(7);
  EXPECT_EQ(allowed, 2);  // one probe in every 8 listings
  // A directory without history follows all recent listings: skipped too.
  allowed = 0;
  for (int i = 0; i < 16; i++) allowed += l.ShouldPrefetch(8);
  EXPECT_EQ(allowed, 2);
  for (int i = 0; i < 3; i++) l.Record(7, 32, 0);  // reads came back
  EXPECT_TRUE(l.ShouldPrefetch(7));
  EXPECT_TRUE(l.ShouldPrefetch(9));
  // A directory with a good history of its own is prefetched even when
  // recent listings elsewhere were wasted.
  DirLearner m;
  for (int i = 0; i < 3; i++) m.Record(1, 32, 0);
  for (int i = 0; i < 6; i++) m.Record(2, 0, 32);
  EXPECT_TRUE(m.ShouldPrefetch(1));
  EXPECT_FALSE(m.ShouldPrefetch(3));
}

TEST(DirLearnerTest, ListingsOfAFewFilesAddUp) {
  // dbench lists directories of two or three files thousands of times and
  // reads almost none of them: their waste must reach min_samples.
  DirLearner l;
  for (int i = 0; i < 16; i++) l.Record(7, 0, 3);
  EXPECT_EQ(l.HitRatio(7), 0.0);
  int allowed = 0;
  for (int i = 0; i < 16; i++) allowed += l.ShouldPrefetch(7);
  EXPECT_EQ(allowed, 2);  // probes only
  // The same files read back: prefetched again.
  for (int i = 0; i < 32; i++) l.Record(7, 3, 0);
  EXPECT_GT(l.HitRatio(7), 0.5);
  EXPECT_TRUE(l.ShouldPrefetch(7));
}

bool Cancels(const DirPrefetch& p, uint64_t tag) {
  return std::find(p.cancel.begin(), p.cancel.end(), tag) != p.cancel.end();
}

TEST(DirStreamsTest, WindowFollowsReadsInListingOrder) {
  DirStreams::Options o;
  o.initial_files = 4;
  o.max_ahead = 16;
  DirStreams s(o);
  std::vector<uint64_t> files;
  for (uint64_t i = 100; i < 200; i++) files.push_back(i);
  DirPrefetch p = s.OnListing(1, files);
  ASSERT_NE(p.tag, 0u);
  EXPECT_EQ(p.inos, (std::vector<uint64_t>{100, 101, 102, 103}));
  p = s.OnRead(100);  // window 8 past file 0
  EXPECT_EQ(p.inos.size(), 5u);
  EXPECT_EQ(p.inos.front(), 104u);
  EXPECT_TRUE(s.OnRead(100).inos.empty());  // a second read of the same file
  EXPECT_TRUE(s.OnRead(999).inos.empty());  // not listed
  size_t total = 9;
  for (uint64_t i = 101; i < 200; i++) total += s.OnRead(i).inos.size();
  EXPECT_EQ(total, 100u);  // every file once
  for (uint64_t d = 2; d < 10; d++) EXPECT_FALSE(Cancels(s.OnListing(d, {d}), p.tag));  // read
}

TEST(DirStreamsTest, UnreadListingsAreCancelledAndLearned) {
  DirStreams s;  // unread_listings = 4
  std::vector<uint64_t> files;
  for (uint64_t i = 1000; i < 1100; i++) files.push_back(i);
  for (int round = 0; round < 2; round++) {
    DirPrefetch p = s.OnListing(5, files);  // ls -l: nobody reads
    ASSERT_EQ(p.inos.size(), 32u) << round;
    for (uint64_t d = 101; d <= 103; d++) {
      EXPECT_FALSE(Cancels(s.OnListing(d, {d}), p.tag)) << round << " " << d;  // not yet
    }
    EXPECT_TRUE(Cancels(s.OnListing(104, {104}), p.tag)) << round;
  }
  // Two wasted listings in a row: the directory is not prefetched.
  EXPECT_TRUE(s.OnListing(5, files).inos.empty());
  EXPECT_LT(s.learner().HitRatio(5), 0.25);
}

TEST(DirStreamsTest, FilesReadOutOfOrderAreNotHitsUnlessFetched) {
  // The last file first, then the rest: the window jumps past files it
  // never fetched. Only the fetched ones are hits, so hits never exceed
  // what was issued (the waste once wrapped around to ~1.8e19).
  DirStreams s;  // initial_files = 32
  std::vector<uint64_t> files;
  for (uint64_t i = 0; i < 100; i++) files.push_back(1000 + i);
  ASSERT_EQ(s.OnListing(5, files).inos.size(), 32u);
  (void)s.OnRead(1099);
  for (uint64_t i = 1000; i < 1099; i++) (void)s.OnRead(i);
  (void)s.OnListing(5, files);  // scores the first stream: 32 hits, no waste
  EXPECT_GT(s.learner().HitRatio(5), 0.9);
}

TEST(DirStreamsTest, ListingsThatStartNoStreamCountToo) {
  DirStreams s;
  const uint64_t tag = s.OnListing(9, {1, 2, 3}).tag;
  for (uint64_t d = 10; d < 13; d++) EXPECT_FALSE(Cancels(s.OnListing(d, {}), tag));  // no files
  EXPECT_TRUE(Cancels(s.OnListing(13, {}), tag));
}

TEST(DirStreamsTest, ListingADirectoryAgainCancelsItsOlderStream) {
  DirStreams s;
  std::vector<uint64_t> files = {1, 2, 3, 4};
  const uint64_t first = s.OnListing(9, files).tag;
  EXPECT_TRUE(s.OnRead(1).inos.empty());  // all four were issued at once
  DirPrefetch again = s.OnListing(9, files);
  EXPECT_TRUE(Cancels(again, first));
  EXPECT_NE(again.tag, first);
  EXPECT_EQ(again.inos, files);
}

std::vector<uint64_t> Range(uint64_t first, size_t n) {
  std::vector<uint64_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = first + i;
  return v;
}

TEST(DirStreamsTest, FilesRememberedOverAllListingsAreBounded) {
  DirStreams::Options o;
  o.initial_files = 2;
  o.max_files = 100;
  o.max_total_files = 250;
  DirStreams s(o);
  const uint64_t t1 = s.OnListing(1, Range(1000, 100)).tag;
  const uint64_t t2 = s.OnListing(2, Range(2000, 100)).tag;
  EXPECT_FALSE(s.OnRead(1000).inos.empty());
  EXPECT_FALSE(s.OnRead(2000).inos.empty());
  // A third listing of 100 would make 300: the oldest listing goes.
  DirPrefetch third = s.OnListing(3, Range(3000, 100));
  EXPECT_TRUE(Cancels(third, t1));
  EXPECT_FALSE(Cancels(third, t2));
  EXPECT_TRUE(s.OnRead(1050).inos.empty());   // forgotten
  EXPECT_FALSE(s.OnRead(2050).inos.empty());  // still followed
  EXPECT_FALSE(s.OnRead(3050).inos.empty());
  // One listing longer than the whole budget keeps the budget's first files.
  o.max_files = 1000;
  DirStreams big(o);
  (void)big.OnListing(4, Range(4000, 1000));
  EXPECT_FALSE(big.OnRead(4240).inos.empty());
  EXPECT_TRUE(big.OnRead(4250).inos.empty());
}

TEST(DirStreamsTest, ReadsAfterCancellationRestartTheStream) {
  DirStreams s;
  std::vector<uint64_t> files = {1, 2, 3, 4, 5, 6, 7, 8};
  const uint64_t tag = s.OnListing(9, files).tag;
  for (uint64_t d = 10; d < 13; d++) (void)s.OnListing(d, {d * 10});
  EXPECT_TRUE(Cancels(s.OnListing(13, {130}), tag));  // glob, other work, then read
  DirPrefetch p = s.OnRead(1);
  EXPECT_EQ(p.inos, (std::vector<uint64_t>{2, 3, 4, 5, 6, 7, 8}));
  for (uint64_t d = 20; d < 30; d++) EXPECT_FALSE(Cancels(s.OnListing(d, {d * 10}), tag));  // read since
}

// ---- Filesystem -------------------------------------------------------------

class PrefetchFsTest : public testing::SmallBlockFsTest {
 protected:
  FsOptions fs_options() const override {
    FsOptions o = SmallBlockFsTest::fs_options();
    o.prefetch_seq = seq_;
    o.prefetch_dir = dir_;
    o.prefetch_threads = 4;
    o.data_cache_bytes = cache_bytes_;
    return o;
  }
  // Two files written block by block, alternately, each block flushed on
  // its own: their records interleave in the vLog (no two neighbours).
  void WriteInterleaved(uint64_t a, uint64_t b, int blocks, std::string* da, std::string* db) {
    const uint32_t bs = block_size();
    *da = Payload(a, blocks * bs);
    *db = Payload(b, blocks * bs);
    for (int i = 0; i < blocks; i++) {
      ASSERT_OK(fs_->Write(a, uint64_t(i) * bs, std::string_view(*da).substr(i * bs, bs)));
      ASSERT_OK(fs_->Flush(a));
      ASSERT_OK(fs_->Write(b, uint64_t(i) * bs, std::string_view(*db).substr(i * bs, bs)));
      ASSERT_OK(fs_->Flush(b));
    }
  }
  std::string ReadSequential(uint64_t ino, uint64_t size, size_t chunk, FileHandle* fh) {
    std::string all, got;
    for (uint64_t off = 0; off < size; off += chunk) {
      Status st = fs_->Read(ino, off, chunk, &got, fh);
      EXPECT_OK(st);
      if (!st.ok()) break;
      all += got;
      // Give the pool a moment, as a real reader spends time on the data.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return all;
  }
  void WaitPrefetchIdle() {
    for (int i = 0; i < 1000; i++) {
      vlog::PrefetcherStats s = fs_->PrefetchStats();
      if (s.completed + s.failed + s.cancelled >= s.issued) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "prefetches did not finish";
  }

  bool seq_ = true;
  bool dir_ = true;
  uint64_t cache_bytes_ = 16 << 20;
};

TEST_F(PrefetchFsTest, SequentialReadOfFragmentedFilePrefetchesAndReturnsRightBytes) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  // 1 MiB that the kernel's readahead covers (no window there), then 96
  // blocks read with prefetch.
  const int blocks = (1 << 20) / static_cast<int>(block_size()) + 96;
  WriteInterleaved(a, b, blocks, &da, &db);
  Reopen();
  const uint64_t preads0 = fs_->store()->vlog()->stats().preads;
  FileHandle fh;
  EXPECT_EQ(ReadSequential(a, da.size(), 16 << 10, &fh), da);
  vlog::PrefetcherStats s = fs_->PrefetchStats();
  EXPECT_GT(s.issued, 60u);
  EXPECT_GT(s.hits, 60u);  // most blocks were there (or in flight) when wanted
  EXPECT_EQ(s.failed, 0u);
  // Every record was read once: by a prefetch or by the foreground.
  const uint64_t preads = fs_->store()->vlog()->stats().preads - preads0;
  EXPECT_LE(preads, static_cast<uint64_t>(blocks));
  // The other file, read without a handle: correct, no sequential trigger.
  const uint64_t issued = s.issued;
  EXPECT_EQ(ReadSequential(b, db.size(), 16 << 10, nullptr), db);
  EXPECT_EQ(fs_->PrefetchStats().issued, issued);
  EXPECT_NE(fs_->StatsText().find("prefetch:"), std::string::npos);
}

TEST_F(PrefetchFsTest, ASmallDataCacheStillKeepsPrefetchedBlocks) {
  // Spread over 16 shards, this would leave each less than one block.
  cache_bytes_ = 16 * (block_size() + vlog::BlockCache::kEntryOverhead) - 1;
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  const int blocks = (1 << 20) / static_cast<int>(block_size()) + 96;
  WriteInterleaved(a, b, blocks, &da, &db);
  Reopen();
  FileHandle fh;
  EXPECT_EQ(ReadSequential(a, da.size(), 16 << 10, &fh), da);
  WaitPrefetchIdle();
  EXPECT_GT(fs_->PrefetchStats().completed, 10u);
  const vlog::BlockCacheStats c = fs_->DataCacheStats();
  EXPECT_GT(c.inserts, 10u);
  EXPECT_LE(c.usage, c.capacity);
}

TEST_F(PrefetchFsTest, ADataCacheSmallerThanABlockIsRefusedAtMount) {
  const uint64_t a = Create(kRoot, "a");
  ASSERT_OK(fs_->Write(a, 0, "kept"));
  CloseFs();
  cache_bytes_ = block_size();  // the entry's charge does not fit beside it
  std::unique_ptr<Filesystem> fs;
  Status st = Filesystem::Open(store_dir_, fs_options(), &fs);
  EXPECT_EQ(st.err(), EINVAL);
  EXPECT_NE(st.message().find("data_cache_mb="), std::string::npos) << st.ToString();
  EXPECT_EQ(fs, nullptr);
  // Nothing was lost; the cache turned off mounts.
  cache_bytes_ = 0;
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  std::string got;
  ASSERT_OK(fs_->Read(a, 0, 100, &got));
  EXPECT_EQ(got, "kept");
}

// The bytes a ReadInto with pieces lists, in order.
std::string Gather(const ReadPieces& p) {
  std::string all;
  for (const iovec& v : p.iov) all.append(static_cast<const char*>(v.iov_base), v.iov_len);
  return all;
}

// With inline data on (the default: blocks of at most 1 KiB here) and off,
// so short records are read by reference too.
class ReadPiecesTest : public PrefetchFsTest, public ::testing::WithParamInterface<bool> {
 protected:
  std::optional<uint32_t> inline_max() const override {
    return GetParam() ? std::nullopt : std::optional<uint32_t>(0);
  }
};
INSTANTIATE_TEST_SUITE_P(InlineOnOff, ReadPiecesTest, ::testing::Bool());

TEST_P(ReadPiecesTest, ReadPiecesGiveTheSameBytesAndShareCachedRecords) {
  const uint32_t bs = block_size();
  const uint64_t a = Create(kRoot, "a");
  // Blocks 0-2 whole, block 3 100 bytes, 4-5 holes, block 6 50 bytes (both
  // short blocks inline or records); then block 1 rewritten in part and
  // left dirty.
  std::string model = Payload(a, 3 * bs + 100);
  ASSERT_OK(fs_->Write(a, 0, model));
  const std::string tail = Payload(a + 7, 50);
  ASSERT_OK(fs_->Write(a, 6 * bs, tail));
  ASSERT_OK(fs_->Flush(a));
  model.resize(6 * bs, '\0');
  model += tail;
  const std::string patch(300, 'P');
  ASSERT_OK(fs_->Write(a, bs + 1000, patch));
  model.replace(bs + 1000, patch.size(), patch);

  std::string out(8 * bs, '\0');
  ReadPieces pieces;
  const std::pair<uint64_t, size_t> reads[] = {
      {0, 8 * bs}, {0, model.size()}, {10, 3 * bs}, {bs + 900, 500}, {3 * bs + 50, 2 * bs},
      {6 * bs + 10, 100}, {2 * bs + 4000, 200}, {model.size(), 10}, {0, 8 * bs}};
  bool shared = false;
  for (const auto& [off, size] : reads) {
    SCOPED_TRACE(std::to_string(off) + "+" + std::to_string(size));
    size_t got = 0;
    ASSERT_OK(fs_->ReadInto(a, off, size, out.data(), &got, nullptr, &pieces));
    const std::string want = off < model.size() ? model.substr(off, size) : "";
    EXPECT_EQ(got, want.size());
    EXPECT_EQ(Gather(pieces), want);
    std::string copied;
    ASSERT_OK(fs_->Read(a, off, size, &copied));
    EXPECT_EQ(copied, want);
    for (const iovec& v : pieces.iov) {
      const char* base = static_cast<const char*>(v.iov_base);
      if (base < out.data() || base >= out.data() + out.size()) shared = true;
    }
  }
  // Records came by reference, not copied into out.
  EXPECT_TRUE(shared);
  EXPECT_GT(fs_->DataCacheStats().hits, 0u);
  std::string raw;
  ASSERT_OK(fs_->store()->meta()->Get(kv::BlockKey(a, 3), &raw));
  kv::BlockValue v;
  ASSERT_OK(kv::DecodeBlock(raw, &v));
  EXPECT_EQ(v.inlined, GetParam());
}

// A READ that takes a record whole leaves it to the kernel's page cache (the
// FUSE file's pages hold it once the reply is in); a record read in part is
// kept for the READs of its other parts.
TEST_F(PrefetchFsTest, RecordsAReadTakesWholeAreNotKeptInTheDataCache) {
  const uint32_t bs = block_size();
  const uint64_t a = Create(kRoot, "a");
  const std::string data = Payload(a, 4 * bs);
  ASSERT_OK(fs_->Write(a, 0, data));
  ASSERT_OK(fs_->Flush(a));
  Reopen();
  std::string out(4 * bs, '\0');
  ReadPieces pieces;
  pieces.kernel_keeps_pages = true;
  size_t got = 0;
  ASSERT_OK(fs_->ReadInto(a, 0, 2 * bs, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(Gather(pieces), data.substr(0, 2 * bs));
  EXPECT_EQ(fs_->DataCacheStats().entries, 0u);
  // Part of a record, from its start or from inside it: kept.
  ASSERT_OK(fs_->ReadInto(a, 2 * bs + 10, 100, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(Gather(pieces), data.substr(2 * bs + 10, 100));
  EXPECT_EQ(fs_->DataCacheStats().entries, 1u);
  const uint64_t hits = fs_->DataCacheStats().hits;
  ASSERT_OK(fs_->ReadInto(a, 2 * bs + 200, 100, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(Gather(pieces), data.substr(2 * bs + 200, 100));
  EXPECT_EQ(fs_->DataCacheStats().hits, hits + 1);
  ASSERT_OK(fs_->ReadInto(a, 3 * bs, 100, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(Gather(pieces), data.substr(3 * bs, 100));
  EXPECT_EQ(fs_->DataCacheStats().entries, 2u);
  // When the kernel may drop its pages (our OPENs without the writeback
  // cache), whole records are kept too.
  Reopen();
  pieces.kernel_keeps_pages = false;
  ASSERT_OK(fs_->ReadInto(a, 0, 2 * bs, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(Gather(pieces), data.substr(0, 2 * bs));
  EXPECT_EQ(fs_->DataCacheStats().entries, 2u);
}

TEST_F(PrefetchFsTest, ReadPiecesFallBackToOneBufferWhenThereAreTooMany) {
  const uint32_t bs = block_size();
  const uint64_t a = Create(kRoot, "a");
  // Every other block a hole: two pieces per block pair.
  const int blocks = 701;  // ends with a written block
  std::string model(size_t(blocks) * bs, '\0');
  for (int b = 0; b < blocks; b += 2) {
    const std::string d = Payload(a * 1000 + b, bs);
    model.replace(size_t(b) * bs, bs, d);
    ASSERT_OK(fs_->Write(a, uint64_t(b) * bs, d));
  }
  ASSERT_OK(fs_->Flush(a));
  std::string out(model.size(), '\0');
  ReadPieces pieces;
  size_t got = 0;
  ASSERT_OK(fs_->ReadInto(a, 0, model.size(), out.data(), &got, nullptr, &pieces));
  ASSERT_EQ(got, model.size());
  ASSERT_EQ(pieces.iov.size(), 1u);
  EXPECT_EQ(pieces.iov[0].iov_base, out.data());
  EXPECT_TRUE(pieces.holds.empty());
  EXPECT_EQ(Gather(pieces), model);
  // A smaller read of the same file is listed piece by piece.
  ASSERT_OK(fs_->ReadInto(a, 0, 64 * bs, out.data(), &got, nullptr, &pieces));
  EXPECT_EQ(pieces.iov.size(), 64u);
  EXPECT_EQ(Gather(pieces), model.substr(0, 64 * bs));
}

TEST_F(PrefetchFsTest, RandomReadsDoNotPrefetch) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  WriteInterleaved(a, b, 64, &da, &db);
  Reopen();
  FileHandle fh;
  std::string got;
  const uint64_t offs[] = {40, 3, 57, 12, 30, 61, 5, 22};
  for (uint64_t blk : offs) {
    ASSERT_OK(fs_->Read(a, blk * 4096 + 100, 1000, &got, &fh));
    EXPECT_EQ(got, da.substr(blk * 4096 + 100, 1000));
  }
  EXPECT_EQ(fs_->PrefetchStats().issued, 0u);
}

TEST_F(PrefetchFsTest, NoPrefetchOptionsDisableIt) {
  seq_ = false;
  dir_ = false;
  Reopen();
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  WriteInterleaved(a, b, 32, &da, &db);
  Reopen();
  FileHandle fh;
  std::vector<DirListEntry> entries;
  ASSERT_OK(fs_->ListDir(kRoot, &entries));
  fs_->DirListed(kRoot, entries);
  EXPECT_EQ(ReadSequential(a, da.size(), 8192, &fh), da);
  EXPECT_EQ(fs_->PrefetchStats().issued, 0u);
  EXPECT_EQ(fs_->DataCacheStats().capacity, 0u);  // no engine at all
  EXPECT_NE(fs_->StatsText().find("prefetch:\n  off"), std::string::npos);
}

TEST_F(PrefetchFsTest, NoPrefetchSeqKeepsDirTriggerOnly) {
  seq_ = false;
  Reopen();
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  WriteInterleaved(a, b, 32, &da, &db);
  Reopen();
  FileHandle fh;
  EXPECT_EQ(ReadSequential(a, da.size(), 8192, &fh), da);
  EXPECT_EQ(fs_->PrefetchStats().issued, 0u);
}

TEST_F(PrefetchFsTest, ListingPrefetchesFirstBlocksInListingOrder) {
  const uint64_t dir = Mkdir(kRoot, "gallery");
  std::vector<std::string> names, data;
  for (int i = 0; i < 40; i++) {
    names.push_back("img" + std::to_string(1000 + i));
    data.push_back(Payload(i, 3000 + i * 97));  // one block each
    const uint64_t f = Create(dir, names.back());
    ASSERT_OK(fs_->Write(f, 0, data.back()));
  }
  Create(dir, "subdir", S_IFDIR | 0755);
  ASSERT_OK(fs_->FlushAll(false));
  Reopen();
  std::vector<DirListEntry> entries;
  ASSERT_OK(fs_->ListDir(dir, &entries));
  fs_->DirListed(dir, entries);
  // ... then every file is read, in listing order.
  size_t k = 0;
  for (const DirListEntry& e : entries) {
    if (!S_ISREG(e.type)) continue;
    std::string got;
    ASSERT_OK(fs_->Read(e.ino, 0, 1 << 20, &got));
    const size_t i = std::stoi(e.name.substr(3)) - 1000;
    EXPECT_EQ(got, data[i]) << e.name;
    k++;
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  EXPECT_EQ(k, 40u);
  vlog::PrefetcherStats s = fs_->PrefetchStats();
  EXPECT_GE(s.issued, 40u);
  EXPECT_GE(s.hits, 30u);
  WaitPrefetchIdle();
}

TEST_F(PrefetchFsTest, UnreadListingsStopBeingPrefetched) {
  const uint64_t dir = Mkdir(kRoot, "d");
  for (int i = 0; i < 64; i++) {
    const uint64_t f = Create(dir, "f" + std::to_string(i));
    ASSERT_OK(fs_->Write(f, 0, Payload(i, 2000)));
  }
  std::vector<uint64_t> others;
  for (const char* other : {"e1", "e2", "e3", "e4"}) {
    others.push_back(Mkdir(kRoot, other));
    ASSERT_OK(fs_->Write(Create(others.back(), "x"), 0, Payload(99, 100)));
  }
  ASSERT_OK(fs_->FlushAll(false));
  Reopen();
  std::vector<DirListEntry> entries;
  ASSERT_OK(fs_->ListDir(dir, &entries));
  auto list_others = [&] {
    for (uint64_t o : others) {
      std::vector<DirListEntry> oe;
      ASSERT_OK(fs_->ListDir(o, &oe));
      fs_->DirListed(o, oe);
    }
  };
  // Streams the listings started ("dir listings" of the prefetch stats).
  auto streams = [&] {
    const std::string text = fs_->StatsText();
    const size_t at = text.find("dir listings");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + 12));
  };
  // ls -l twice: four newer listings end an unread one (readdir has no
  // close); its prefetch is cancelled and scored as waste.
  EXPECT_EQ(fs_->PrefetchStats().issued, 0u);
  for (int round = 0; round < 2; round++) {
    const uint64_t before = streams();
    fs_->DirListed(dir, entries);
    EXPECT_EQ(streams(), before + 1) << round;
    list_others();
  }
  EXPECT_GE(fs_->PrefetchStats().issued, 32u);  // the first initial window, at least
  // Two wasted listings: the third starts no stream.
  const uint64_t before = streams();
  fs_->DirListed(dir, entries);
  EXPECT_EQ(streams(), before);
  WaitPrefetchIdle();
  vlog::PrefetcherStats s = fs_->PrefetchStats();
  EXPECT_EQ(s.completed + s.cancelled + s.failed, s.issued);
}

TEST_F(PrefetchFsTest, OverwrittenBlocksAreNeverServedStale) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  std::string da, db;
  WriteInterleaved(a, b, 32, &da, &db);
  Reopen();
  FileHandle fh;
  EXPECT_EQ(ReadSequential(a, da.size(), 4096, &fh), da);  // everything cached now
  WaitPrefetchIdle();
  // New data for blocks 3..9, flushed: new pointers, the old records stay cached.
  const std::string fresh = Payload(777, 7 * 4096);
  ASSERT_OK(fs_->Write(a, 3 * 4096, fresh));
  ASSERT_OK(fs_->Flush(a));
  da.replace(3 * 4096, fresh.size(), fresh);
  FileHandle fh2;
  EXPECT_EQ(ReadSequential(a, da.size(), 4096, &fh2), da);
  // Truncate and extend: the tail reads as zeros.
  SetSize(a, 5 * 4096);
  SetSize(a, 32 * 4096);
  da.replace(5 * 4096, 27 * 4096, std::string(27 * 4096, '\0'));
  FileHandle fh3;
  EXPECT_EQ(ReadSequential(a, da.size(), 8192, &fh3), da);
}

}  // namespace
}  // namespace sepfs::fs
