#include "vlog/value_log.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace sepfs::vlog {
namespace {

using testing::Payload;

using testing::Written;

class ValueLogTest : public ::testing::Test {
 protected:
  void OpenLog(uint64_t segment_size = 1 << 20, size_t buffer = 64 << 10) {
    vlog_.reset();
    options_.segment_size = segment_size;
    options_.append_buffer_size = buffer;
    ASSERT_TRUE(ValueLog::Open(options_, dir_, &vlog_).ok());
  }
  void Reopen() { OpenLog(options_.segment_size, options_.append_buffer_size); }

  Written Put(Stream stream, uint64_t inode, uint64_t block, size_t size) {
    return testing::PutRecord(vlog_.get(), stream, inode, block, size, 1000003);
  }

  void ExpectReadable(const Written& w) {
    std::string buf(w.data.size(), '\0');
    Status st = vlog_->Read(w.ptr, w.inode, w.block, buf.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(buf, w.data);
  }

  // Drops the page-cache pages of the file at path.
  static void DropCached(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }

  // ReadMany requests for ws in order, each reading into its own (*bufs)[i].
  static std::vector<ReadRequest> RequestsFor(const std::vector<Written>& ws,
                                              std::vector<std::string>* bufs) {
    bufs->assign(ws.size(), "");
    std::vector<ReadRequest> reqs(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) {
      (*bufs)[i].assign(ws[i].data.size(), '\0');
      reqs[i].ptr = ws[i].ptr;
      reqs[i].inode = ws[i].inode;
      reqs[i].block = ws[i].block;
      reqs[i].buf = (*bufs)[i].data();
    }
    return reqs;
  }

  std::map<uint32_t, SegmentInfo> SegmentMap() {
    std::map<uint32_t, SegmentInfo> m;
    for (const SegmentInfo& s : vlog_->Segments()) m[s.id] = s;
    return m;
  }

  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/vlog";
  Options options_;
  std::unique_ptr<ValueLog> vlog_;
};

TEST_F(ValueLogTest, OpenCreatesOwnerOnlyDirectory) {
  OpenLog();
  struct stat st;
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(vlog_->dir(), dir_);
  EXPECT_TRUE(vlog_->Segments().empty());  // segments are created lazily
  EXPECT_EQ(vlog_->LastSeq(), 0u);
}

TEST_F(ValueLogTest, RejectsBadOptionsAndOversizedRecords) {
  options_.segment_size = 100;
  EXPECT_EQ(ValueLog::Open(options_, dir_, &vlog_).err(), EINVAL);
  OpenLog();
  std::string big(kMaxRecordData + 1, 'x');
  BlockPtr p;
  EXPECT_EQ(vlog_->Append(Stream::kHot, 1, 1, big, &p).err(), EINVAL);
}

TEST_F(ValueLogTest, ReadFromBufferAfterFlushAndAfterReopen) {
  OpenLog();
  Written a = Put(Stream::kHot, 5, 0, 4096);
  Written b = Put(Stream::kHot, 5, 1, 0);
  Written c = Put(Stream::kCold, 6, 0, 777);
  EXPECT_EQ(a.ptr.offset, kSegmentHeaderSize);
  EXPECT_EQ(b.ptr.offset, a.ptr.offset + a.ptr.record_size());
  EXPECT_EQ(b.ptr.segment, a.ptr.segment);
  EXPECT_NE(c.ptr.segment, a.ptr.segment);
  EXPECT_LT(a.ptr.seq, b.ptr.seq);
  EXPECT_LT(b.ptr.seq, c.ptr.seq);
  EXPECT_EQ(vlog_->LastSeq(), c.ptr.seq);

  const uint64_t preads_before = vlog_->stats().preads;
  for (const Written& w : {a, b, c}) ExpectReadable(w);
  EXPECT_EQ(vlog_->stats().preads, preads_before);  // served from the buffers

  ASSERT_TRUE(vlog_->Flush().ok());
  for (const Written& w : {a, b, c}) ExpectReadable(w);
  EXPECT_EQ(vlog_->stats().preads, preads_before + 3);

  ASSERT_TRUE(vlog_->Sync().ok());
  Reopen();
  for (const Written& w : {a, b, c}) ExpectReadable(w);
  EXPECT_EQ(vlog_->LastSeq(), c.ptr.seq);
  // New appends never go to segments that existed at Open.
  Written d = Put(Stream::kHot, 7, 0, 10);
  EXPECT_GT(d.ptr.segment, std::max(a.ptr.segment, c.ptr.segment));
  EXPECT_GT(d.ptr.seq, c.ptr.seq);
  ExpectReadable(d);
}

// A directory or a FIFO with a segment's name: ignored, and its id never
// handed out. The FIFO hung the open (fsck, mount); the directory failed
// it with EISDIR (a helper's probe).
TEST_F(ValueLogTest, EntriesThatAreNotFilesAreIgnored) {
  OpenLog();
  Written a = Put(Stream::kHot, 5, 0, 4096);
  ASSERT_TRUE(vlog_->Sync().ok());
  vlog_.reset();
  char name[32];
  std::snprintf(name, sizeof(name), "/seg-%08u.vlog", a.ptr.segment + 5);
  ASSERT_EQ(::mkdir((dir_ + name).c_str(), 0700), 0);
  std::snprintf(name, sizeof(name), "/seg-%08u.vlog", a.ptr.segment + 6);
  ASSERT_EQ(::mkfifo((dir_ + name).c_str(), 0600), 0);
  Reopen();
  ExpectReadable(a);
  EXPECT_EQ(vlog_->Segments().size(), 1u);
  Written b = Put(Stream::kHot, 6, 0, 4096);
  EXPECT_GT(b.ptr.segment, a.ptr.segment + 6);
  ASSERT_TRUE(vlog_->Sync().ok());
  ExpectReadable(b);
}

TEST_F(ValueLogTest, DestructorFlushes) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 5000);
  vlog_.reset();
  Reopen();
  ExpectReadable(a);
}

TEST_F(ValueLogTest, ManyRecordsAcrossRotationsAndStreams) {
  constexpr uint64_t kSegSize = 8192;
  OpenLog(kSegSize, 3000);
  std::mt19937 rng(7);
  std::vector<Written> all;
  auto stream_of = [](size_t i) { return static_cast<Stream>(i % kNumStreams); };
  for (int i = 0; i < 600; ++i) {
    all.push_back(Put(stream_of(i), 100 + i % 17, i, rng() % 2000));
    if (i % 50 == 0) ExpectReadable(all[rng() % all.size()]);
  }
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].ptr.seq, all[i].ptr.seq);
  for (const Written& w : all) ExpectReadable(w);

  auto segs = SegmentMap();
  EXPECT_GT(segs.size(), 20u);
  int open_per_stream[kNumStreams] = {};
  for (const auto& [id, info] : segs) {
    EXPECT_LE(info.size, kSegSize) << id;
    if (info.open) ++open_per_stream[static_cast<int>(info.stream)];
  }
  for (int k = 0; k < kNumStreams; k++) EXPECT_EQ(open_per_stream[k], 1) << k;
  EXPECT_EQ(vlog_->Heads().size(), size_t{kNumStreams});
  // Every record lies in a segment of the stream it was appended to.
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(segs[all[i].ptr.segment].stream, stream_of(i)) << i;
  }
  uint64_t total = 0;
  for (const auto& [id, info] : segs) total += info.size;
  EXPECT_EQ(vlog_->TotalBytes(), total);
  EXPECT_EQ(vlog_->LiveBytes(), total - segs.size() * kSegmentHeaderSize);

  Reopen();
  for (const Written& w : all) ExpectReadable(w);
  for (const auto& info : vlog_->Segments()) EXPECT_FALSE(info.open);
  Written next = Put(Stream::kHot, 1, 1, 10);
  EXPECT_GT(next.ptr.seq, all.back().ptr.seq);
  EXPECT_GT(next.ptr.segment, segs.rbegin()->first);
}

TEST_F(ValueLogTest, RecordLargerThanSegmentGetsItsOwnSegment) {
  OpenLog(4096, 1024);
  Written small1 = Put(Stream::kHot, 1, 0, 100);
  Written big = Put(Stream::kHot, 1, 1, 10000);
  Written small2 = Put(Stream::kHot, 1, 2, 100);
  EXPECT_NE(big.ptr.segment, small1.ptr.segment);
  EXPECT_NE(big.ptr.segment, small2.ptr.segment);
  EXPECT_EQ(big.ptr.offset, kSegmentHeaderSize);
  auto segs = SegmentMap();
  EXPECT_EQ(segs[big.ptr.segment].size, kSegmentHeaderSize + big.ptr.record_size());
  for (const Written& w : {small1, big, small2}) ExpectReadable(w);
  Reopen();
  for (const Written& w : {small1, big, small2}) ExpectReadable(w);
}

TEST_F(ValueLogTest, ReadManyMergesAdjacentRecords) {
  OpenLog(64 << 20, 1 << 20);
  std::vector<Written> all;
  for (int i = 0; i < 64; ++i) all.push_back(Put(Stream::kHot, 9, i, 4096));
  ASSERT_TRUE(vlog_->Flush().ok());

  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  std::vector<std::string> bufs(order.size(), std::string(4096, '\0'));
  std::vector<ReadRequest> reqs(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const Written& w = all[order[k]];
    reqs[k].ptr = w.ptr;
    reqs[k].inode = w.inode;
    reqs[k].block = w.block;
    reqs[k].buf = bufs[k].data();
  }
  const Stats before = vlog_->stats();
  ASSERT_TRUE(vlog_->ReadMany(reqs).ok());
  const Stats after = vlog_->stats();
  EXPECT_LT(after.preads - before.preads, reqs.size());
  EXPECT_EQ(after.preads - before.preads, 1u);
  EXPECT_EQ(after.records_read - before.records_read, reqs.size());
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_TRUE(reqs[k].status.ok());
    EXPECT_EQ(bufs[k], all[order[k]].data) << k;
  }
}

TEST_F(ValueLogTest, ReadManyMixesRunsBufferedRecordsAndBadRequests) {
  OpenLog(64 << 20, 1 << 20);
  std::vector<Written> flushed;
  for (int i = 0; i < 10; ++i) flushed.push_back(Put(Stream::kHot, 3, i, 1000));
  Written cold = Put(Stream::kCold, 4, 0, 500);
  ASSERT_TRUE(vlog_->Flush().ok());
  Written buffered = Put(Stream::kHot, 3, 10, 1000);

  // Every other hot record (no runs), one run of three, the cold one, the
  // buffered one, and one with the wrong inode in the middle of a run.
  std::vector<const Written*> want = {&flushed[0], &flushed[2], &flushed[5], &flushed[6],
                                      &flushed[7], &cold, &buffered, &flushed[8]};
  std::vector<std::string> bufs(want.size() + 1, std::string(1000, '\0'));
  std::vector<ReadRequest> reqs(want.size() + 1);
  for (size_t k = 0; k < want.size(); ++k) {
    reqs[k].ptr = want[k]->ptr;
    reqs[k].inode = want[k]->inode;
    reqs[k].block = want[k]->block;
    reqs[k].buf = bufs[k].data();
  }
  ReadRequest& bad = reqs.back();
  bad.ptr = flushed[9].ptr;
  bad.inode = 999;
  bad.block = flushed[9].block;
  bad.buf = bufs.back().data();

  const Stats before = vlog_->stats();
  Status st = vlog_->ReadMany(reqs);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_TRUE(bad.status.IsCorruption());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_TRUE(reqs[k].status.ok()) << k << " " << reqs[k].status.ToString();
    EXPECT_EQ(bufs[k].substr(0, want[k]->data.size()), want[k]->data) << k;
  }
  const Stats after = vlog_->stats();
  EXPECT_EQ(after.checksum_errors - before.checksum_errors, 1u);
  // Runs: {0}, {2}, {5,6,7,8,9(bad)}, {cold}; the buffered one needs no pread.
  EXPECT_EQ(after.preads - before.preads, 4u);
}

TEST_F(ValueLogTest, ReadChecksInodeBlockSeqAndBounds) {
  OpenLog();
  Written w = Put(Stream::kHot, 10, 20, 100);
  ASSERT_TRUE(vlog_->Flush().ok());
  std::string buf(200, '\0');
  auto expect_eio = [&](const BlockPtr& p, uint64_t inode, uint64_t block) {
    Status st = vlog_->Read(p, inode, block, buf.data());
    EXPECT_EQ(st.err(), EIO) << st.ToString();
    EXPECT_TRUE(st.IsCorruption());
  };
  const uint64_t errors = vlog_->stats().checksum_errors;
  expect_eio(w.ptr, 11, 20);
  expect_eio(w.ptr, 10, 21);
  BlockPtr p = w.ptr;
  p.seq++;
  expect_eio(p, 10, 20);
  p = w.ptr;
  p.length = 99;
  expect_eio(p, 10, 20);
  p = w.ptr;
  p.offset += 10000;  // past the end: never read there
  expect_eio(p, 10, 20);
  p = w.ptr;
  p.offset = 0;  // inside the segment header
  expect_eio(p, 10, 20);
  p = w.ptr;
  p.segment += 100;  // unknown segment
  expect_eio(p, 10, 20);
  EXPECT_EQ(vlog_->stats().checksum_errors, errors + 7);
  ExpectReadable(w);
}

TEST_F(ValueLogTest, LiveAndGarbageAccounting) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);
  Written b = Put(Stream::kHot, 1, 1, 500);
  const uint32_t seg = a.ptr.segment;
  auto info = SegmentMap()[seg];
  EXPECT_EQ(info.size, kSegmentHeaderSize + a.ptr.record_size() + b.ptr.record_size());
  EXPECT_EQ(info.live_bytes, a.ptr.record_size() + b.ptr.record_size());
  EXPECT_EQ(info.garbage_bytes, 0u);

  vlog_->Release(a.ptr);
  info = SegmentMap()[seg];
  EXPECT_EQ(info.live_bytes, b.ptr.record_size());
  EXPECT_EQ(info.garbage_bytes, a.ptr.record_size());

  vlog_->Release(b.ptr);
  vlog_->Release(b.ptr);  // double release clamps at zero
  info = SegmentMap()[seg];
  EXPECT_EQ(info.live_bytes, 0u);
  EXPECT_EQ(info.garbage_bytes, info.size - kSegmentHeaderSize);

  vlog_->AddLive(a.ptr);
  EXPECT_EQ(SegmentMap()[seg].live_bytes, a.ptr.record_size());
  vlog_->ResetLive();
  EXPECT_EQ(SegmentMap()[seg].live_bytes, 0u);

  // After reopen everything starts as garbage until rebuilt with AddLive.
  Reopen();
  info = SegmentMap()[seg];
  EXPECT_EQ(info.live_bytes, 0u);
  EXPECT_EQ(info.size, kSegmentHeaderSize + a.ptr.record_size() + b.ptr.record_size());
  vlog_->AddLive(b.ptr);
  EXPECT_EQ(SegmentMap()[seg].live_bytes, b.ptr.record_size());
  BlockPtr unknown = a.ptr;
  unknown.segment = 12345;
  vlog_->Release(unknown);  // logged, no effect
  vlog_->AddLive(unknown);
  EXPECT_EQ(SegmentMap().size(), 1u);
}

// What GC can reclaim: the garbage of sealed segments, not of open ones.
TEST_F(ValueLogTest, CollectableGarbageCountsSealedSegments) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);
  Put(Stream::kHot, 1, 1, 500);
  Written c = Put(Stream::kCold, 2, 0, 700);
  vlog_->Release(a.ptr);
  vlog_->Release(c.ptr);
  EXPECT_EQ(vlog_->CollectableGarbage(), 0u) << "garbage of open segments";
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_EQ(vlog_->CollectableGarbage(), a.ptr.record_size());
  ASSERT_TRUE(vlog_->SealStream(Stream::kCold).ok());
  EXPECT_EQ(vlog_->CollectableGarbage(), a.ptr.record_size() + c.ptr.record_size());
}

TEST_F(ValueLogTest, ScanSegmentSeesAllRecordsInOrder) {
  OpenLog();
  std::vector<Written> all;
  for (int i = 0; i < 50; ++i) all.push_back(Put(Stream::kCold, 2, i, i * 37));
  const uint32_t seg = all[0].ptr.segment;
  // Still buffered: ScanSegment flushes an open segment first.
  std::vector<BlockPtr> seen;
  Status st = vlog_->ScanSegment(
      seg, [&](const BlockPtr& p, const RecordHeader& h, std::string_view data, const Status& s) {
        EXPECT_TRUE(s.ok());
        EXPECT_EQ(h.inode, 2u);
        EXPECT_EQ(h.block, seen.size());
        EXPECT_EQ(data, all[seen.size()].data);
        seen.push_back(p);
        return true;
      });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(seen.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(seen[i], all[i].ptr);

  int calls = 0;
  ASSERT_TRUE(vlog_->ScanSegment(seg, [&](const BlockPtr&, const RecordHeader&, std::string_view,
                                          const Status&) { return ++calls < 5; })
                  .ok());
  EXPECT_EQ(calls, 5);
  EXPECT_TRUE(vlog_->ScanSegment(seg + 100, [](auto&&...) { return true; }).IsNotFound());
}

TEST_F(ValueLogTest, ConcurrentAppendsAndReads) {
  OpenLog(256 << 10, 16 << 10);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 400;
  std::vector<std::vector<Written>> results(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      auto& mine = results[t];
      const Stream s = t % 2 ? Stream::kCold : Stream::kHot;
      for (int i = 0; i < kPerThread; ++i) {
        Written w{{}, static_cast<uint64_t>(t + 1), static_cast<uint64_t>(i),
                  Payload(t * 100000 + i, rng() % 3000)};
        if (!vlog_->Append(s, w.inode, w.block, w.data, &w.ptr).ok()) ++failures;
        mine.push_back(std::move(w));
        // Read back one of our own records, maybe still buffered.
        const Written& r = mine[rng() % mine.size()];
        std::string buf(r.data.size(), '\0');
        if (!vlog_->Read(r.ptr, r.inode, r.block, buf.data()).ok() || buf != r.data) ++failures;
        if (i % 100 == 99 && !vlog_->Flush().ok()) ++failures;
        if (t == 0 && i % 150 == 0 && !vlog_->Sync().ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<uint64_t> seqs;
  for (const auto& mine : results) {
    for (size_t i = 0; i < mine.size(); ++i) {
      ExpectReadable(mine[i]);
      seqs.insert(mine[i].ptr.seq);
      if (i > 0) {
        EXPECT_LT(mine[i - 1].ptr.seq, mine[i].ptr.seq);
      }
    }
  }
  EXPECT_EQ(seqs.size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(vlog_->stats().records_appended, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(vlog_->stats().checksum_errors, 0u);
  Reopen();
  for (const auto& mine : results) {
    for (const Written& w : mine) ExpectReadable(w);
  }
}

// The recovery scan after a crash starts at the heads of a checkpoint: each
// stream's open segment and its size, and the highest segment id; GC copies
// carry kRecordRelocated so that recovery never replays them.
TEST_F(ValueLogTest, HeadsFlagsAndScanFromOffset) {
  OpenLog();
  EXPECT_TRUE(vlog_->Heads().empty());
  EXPECT_EQ(vlog_->MaxSegmentId(), 0u);
  BlockPtr a, b, c;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 7, 0, "first", &a).ok());
  const std::vector<StreamHead> heads = vlog_->Heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0].segment, a.segment);
  EXPECT_EQ(heads[0].offset, a.offset + a.record_size());  // the append buffer counts
  EXPECT_EQ(vlog_->MaxSegmentId(), a.segment);
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 7, 1, "second", &b).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 8, 0, "copy", &c, kRecordRelocated).ok());
  EXPECT_EQ(vlog_->Heads().size(), 2u);
  EXPECT_EQ(vlog_->MaxSegmentId(), c.segment);

  std::vector<std::pair<uint64_t, uint8_t>> seen;  // (block, flags)
  auto collect = [&](const BlockPtr&, const RecordHeader& h, std::string_view, const Status& st) {
    EXPECT_TRUE(st.ok()) << st.ToString();
    seen.push_back({h.block, h.flags});
    return true;
  };
  ASSERT_TRUE(vlog_->ScanSegment(a.segment, collect, heads[0].offset).ok());
  ASSERT_EQ(seen.size(), 1u);  // only what came after the head
  EXPECT_EQ(seen[0], std::make_pair(uint64_t{1}, uint8_t{0}));
  seen.clear();
  ASSERT_TRUE(vlog_->ScanSegment(c.segment, collect).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, kRecordRelocated);
  // A start past the end scans nothing; the flag survives a reopen.
  seen.clear();
  ASSERT_TRUE(vlog_->ScanSegment(a.segment, collect, 1u << 30).ok());
  EXPECT_TRUE(seen.empty());
  Reopen();
  ASSERT_TRUE(vlog_->ScanSegment(c.segment, collect).ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].second, kRecordRelocated);
  EXPECT_GE(vlog_->MaxSegmentId(), c.segment);
}

// A sealed segment that is not its stream's newest keeps a torn last record
// across Open (only the newest is scanned there); recovery cuts it with
// CutTornTail, which touches nothing but a tear.
TEST_F(ValueLogTest, CutTornTailOfASealedSegment) {
  OpenLog();
  BlockPtr a, b, c;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, std::string(5000, 'a'), &a).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 1, std::string(5000, 'b'), &b).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 2, 0, "newer segment", &c).ok());
  ASSERT_NE(b.segment, c.segment);
  vlog_.reset();
  const std::string path = dir_ + "/" + SegmentFileName(b.segment);
  std::filesystem::resize_file(path, b.offset + 100);  // b is torn
  OpenLog();
  auto scan = [&](uint32_t id, uint64_t* records, uint64_t* bad_at) {
    *records = 0;
    *bad_at = 0;
    return vlog_->ScanSegment(id, [&](const BlockPtr& p, const RecordHeader&, std::string_view,
                                      const Status& st) {
      if (!st.ok()) {
        *bad_at = p.offset;
        return false;
      }
      ++*records;
      return true;
    });
  };
  uint64_t records = 0, bad_at = 0;
  ASSERT_TRUE(scan(b.segment, &records, &bad_at).ok());
  EXPECT_EQ(records, 1u);
  EXPECT_EQ(bad_at, b.offset);
  ASSERT_TRUE(vlog_->CutTornTail(b.segment, a.offset).ok());  // a is whole: no cut
  EXPECT_EQ(std::filesystem::file_size(path), b.offset + 100);
  ASSERT_TRUE(vlog_->CutTornTail(b.segment, b.offset).ok());
  EXPECT_EQ(std::filesystem::file_size(path), b.offset);
  ASSERT_TRUE(scan(b.segment, &records, &bad_at).ok());
  EXPECT_EQ(records, 1u);
  EXPECT_EQ(bad_at, 0u);
  std::string got(5000, '\0');
  EXPECT_TRUE(vlog_->Read(a, 1, 0, got.data()).ok());
  EXPECT_EQ(got, std::string(5000, 'a'));
}

// ---- Recycled segment files (Options::recycle_segments) ----

// Records of a recycled file's earlier life that lie past this life's end
// are never taken for this life's: scans stop at the end, and an open
// after a crash (no clean close) cuts them off.
class RecycleTest : public ValueLogTest {
 protected:
  // Fills segment 1 of kHot with ten records of inode 1 (the first ends at
  // offset 4 096, the others hold 4 000 bytes), seals it and deletes it:
  // its file becomes a free file.
  void MakeFreeFile() {
    options_.recycle_segments = 1;
    OpenLog(64 << 10);
    for (uint64_t b = 0; b < 10; ++b) {
      old_.push_back(Put(Stream::kHot, 1, b, b == 0 ? kFirstData : 4000));
    }
    ASSERT_EQ(old_[1].ptr.offset, File::kDirectAlign);
    ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
    ASSERT_TRUE(vlog_->DeleteSegment(old_[0].ptr.segment).ok());
    ASSERT_TRUE(std::filesystem::exists(dir_ + "/" + FreeFileName(old_[0].ptr.segment)));
    ASSERT_FALSE(std::filesystem::exists(dir_ + "/" + SegmentFileName(old_[0].ptr.segment)));
    EXPECT_EQ(vlog_->stats().free_files, 1u);
  }

  // Records of `id` a scan returns (and where it stopped on a bad one).
  std::vector<uint64_t> ScanSeqs(uint32_t id, uint64_t* bad_at = nullptr) {
    std::vector<uint64_t> seqs;
    Status st = vlog_->ScanSegment(id, [&](const BlockPtr& p, const RecordHeader& h,
                                           std::string_view, const Status& rs) {
      if (!rs.ok()) {
        if (bad_at != nullptr) *bad_at = p.offset;
        return false;
      }
      seqs.push_back(h.seq);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return seqs;
  }

  uint64_t HeaderBaseSeq(uint32_t id) {
    std::ifstream f(dir_ + "/" + SegmentFileName(id), std::ios::binary);
    char raw[kSegmentHeaderSize];
    f.read(raw, sizeof(raw));
    SegmentHeader h;
    EXPECT_TRUE(DecodeSegmentHeader(raw, &h).ok());
    EXPECT_EQ(h.segment_id, id);
    return h.base_seq;
  }

  static constexpr size_t kFirstData = File::kDirectAlign - kSegmentHeaderSize - kRecordHeaderSize;
  std::vector<Written> old_;
};

TEST_F(RecycleTest, NewSegmentOverwritesAFreeFile) {
  MakeFreeFile();
  const uint32_t old_id = old_[0].ptr.segment;
  const uint64_t old_size = std::filesystem::file_size(dir_ + "/" + FreeFileName(old_id));
  EXPECT_EQ(vlog_->ReusableBytes(), old_size);
  EXPECT_EQ(vlog_->stats().free_file_bytes, old_size);
  std::vector<Written> now;
  for (uint64_t b = 0; b < 2; ++b) now.push_back(Put(Stream::kHot, 2, b, 3000));
  const uint32_t id = now[0].ptr.segment;
  EXPECT_GT(id, old_id);
  EXPECT_EQ(vlog_->stats().segments_recycled, 1u);
  EXPECT_EQ(vlog_->stats().free_files, 0u);
  EXPECT_EQ(vlog_->stats().free_file_bytes, 0u);
  // What this life has not written of the file yet is still room, for
  // records of its stream.
  const uint64_t tail = old_size - (now[1].ptr.offset + now[1].ptr.record_size());
  EXPECT_EQ(vlog_->ReusableBytes(), tail);
  EXPECT_EQ(vlog_->ReusableBytes(MaskOf(Stream::kHot)), tail);
  EXPECT_EQ(vlog_->ReusableBytes(MaskOf(Stream::kCold)), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + FreeFileName(old_id)));
  ASSERT_TRUE(vlog_->Flush().ok());
  // The file kept its earlier size: the earlier life's records follow.
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + SegmentFileName(id)), old_size);
  EXPECT_GT(HeaderBaseSeq(id), old_[9].ptr.seq);
  EXPECT_EQ(HeaderBaseSeq(id), now[0].ptr.seq);
  for (const Written& w : now) ExpectReadable(w);
  EXPECT_EQ(ScanSeqs(id), (std::vector<uint64_t>{now[0].ptr.seq, now[1].ptr.seq}));
  // A pointer of the earlier life names other bytes now: its read fails.
  std::string buf(old_[5].data.size(), '\0');
  BlockPtr stale = old_[5].ptr;
  stale.segment = id;
  EXPECT_TRUE(vlog_->Read(stale, 1, 5, buf.data()).IsCorruption());
}

// Kept files can be given back to the disk; new segments then grow files
// of their own.
TEST_F(RecycleTest, DropKeptFilesRemovesThem) {
  MakeFreeFile();
  const uint32_t old_id = old_[0].ptr.segment;
  EXPECT_GT(vlog_->ReusableBytes(), 0u);
  EXPECT_EQ(vlog_->DropKeptFiles(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + FreeFileName(old_id)));
  EXPECT_EQ(vlog_->ReusableBytes(), 0u);
  EXPECT_EQ(vlog_->stats().free_files, 0u);
  EXPECT_EQ(vlog_->DropKeptFiles(), 0u);
  const Written w = Put(Stream::kHot, 2, 0, 3000);
  EXPECT_EQ(vlog_->stats().segments_recycled, 0u);
  ExpectReadable(w);
}

TEST_F(RecycleTest, CleanCloseCutsTheEarlierLife) {
  MakeFreeFile();
  const Written w = Put(Stream::kHot, 2, 0, 3000);
  const uint64_t end = w.ptr.offset + w.ptr.record_size();
  vlog_.reset();
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + SegmentFileName(w.ptr.segment)), end);
  Reopen();
  ExpectReadable(w);
  EXPECT_EQ(SegmentMap()[w.ptr.segment].size, end);
  EXPECT_GE(vlog_->LastSeq(), w.ptr.seq);
}

TEST_F(RecycleTest, OpenAfterACrashCutsTheEarlierLife) {
  MakeFreeFile();
  const Written w = Put(Stream::kHot, 2, 0, 3000);
  ASSERT_TRUE(vlog_->Sync().ok());
  // A crash: the files as they are now, without the close.
  const std::string copy = tmp_.path() + "/crashed";
  std::filesystem::copy(dir_, copy);
  vlog_.reset();
  dir_ = copy;
  Reopen();
  const uint64_t end = w.ptr.offset + w.ptr.record_size();
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + SegmentFileName(w.ptr.segment)), end);
  ExpectReadable(w);
  EXPECT_EQ(ScanSeqs(w.ptr.segment), std::vector<uint64_t>{w.ptr.seq});
  // New appends get sequence numbers above every earlier life's.
  const Written next = Put(Stream::kHot, 3, 0, 100);
  EXPECT_GT(next.ptr.seq, w.ptr.seq);
}

TEST_F(RecycleTest, ScanStopsAtAnEarlierLifeRecord) {
  MakeFreeFile();
  // This life's first record ends where old record 1 starts, at a block
  // boundary, so no zeros follow it: old record 1 does, whole and valid,
  // but of a lower sequence number.
  const Written w = Put(Stream::kHot, 2, 0, kFirstData);
  ASSERT_EQ(w.ptr.offset + w.ptr.record_size(), old_[1].ptr.offset);
  ASSERT_TRUE(vlog_->Flush().ok());
  EXPECT_EQ(ScanSeqs(w.ptr.segment), std::vector<uint64_t>{w.ptr.seq});
  const std::string copy = tmp_.path() + "/crashed";
  std::filesystem::copy(dir_, copy);
  vlog_.reset();
  dir_ = copy;
  Reopen();
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + SegmentFileName(w.ptr.segment)),
            old_[1].ptr.offset);
  ExpectReadable(w);
}

// Repair's new header for a damaged recycled segment keeps this life's
// records apart from the earlier life's that follow them.
TEST_F(RecycleTest, RewrittenHeaderKeepsTheEarlierLifeOut) {
  MakeFreeFile();
  const Written w = Put(Stream::kHot, 2, 0, kFirstData);  // ends where old record 1 starts
  ASSERT_EQ(w.ptr.offset + w.ptr.record_size(), old_[1].ptr.offset);
  ASSERT_TRUE(vlog_->Sync().ok());
  // A crash, and a damaged header: the open neither scans nor cuts it.
  const std::string copy = tmp_.path() + "/crashed";
  std::filesystem::copy(dir_, copy);
  vlog_.reset();
  dir_ = copy;
  const std::string path = dir_ + "/" + SegmentFileName(w.ptr.segment);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(static_cast<char>(0x77));
  }
  Reopen();
  ASSERT_TRUE(SegmentMap()[w.ptr.segment].damaged);
  ASSERT_GT(std::filesystem::file_size(path), old_[9].ptr.offset);
  ASSERT_TRUE(vlog_->RewriteHeader(w.ptr.segment).ok());
  EXPECT_EQ(HeaderBaseSeq(w.ptr.segment), w.ptr.seq);
  EXPECT_EQ(ScanSeqs(w.ptr.segment), std::vector<uint64_t>{w.ptr.seq});
  Reopen();
  EXPECT_EQ(ScanSeqs(w.ptr.segment), std::vector<uint64_t>{w.ptr.seq});
  ExpectReadable(w);
}

// A store whose format predates version-2 headers: collected files are
// removed, and a rewritten header is version 1.
TEST_F(RecycleTest, NoVersionTwoHeadersWhereTheFormatForbidsThem) {
  options_.recycle_segments = 1;
  options_.version2_headers = false;
  OpenLog(64 << 10);
  const Written a = Put(Stream::kHot, 1, 0, 100);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->DeleteSegment(a.ptr.segment).ok());
  EXPECT_EQ(vlog_->stats().free_files, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + FreeFileName(a.ptr.segment)));
  const Written b = Put(Stream::kHot, 2, 0, 100);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_EQ(vlog_->stats().segments_recycled, 0u);
  EXPECT_EQ(HeaderBaseSeq(b.ptr.segment), 0u);
  vlog_.reset();
  {
    std::fstream f(dir_ + "/" + SegmentFileName(b.ptr.segment),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(static_cast<char>(0x77));
  }
  Reopen();
  ASSERT_TRUE(vlog_->RewriteHeader(b.ptr.segment).ok());
  EXPECT_EQ(HeaderBaseSeq(b.ptr.segment), 0u);
  ExpectReadable(b);
}

TEST_F(RecycleTest, DamageBeforeRecordsOfThisLifeIsNotCutUnlessSinceACheckpoint) {
  MakeFreeFile();
  std::vector<Written> now;
  for (uint64_t b = 0; b < 3; ++b) now.push_back(Put(Stream::kHot, 2, b, 3000));
  ASSERT_TRUE(vlog_->Sync().ok());
  const std::string copy = tmp_.path() + "/crashed";
  std::filesystem::copy(dir_, copy);
  vlog_.reset();
  dir_ = copy;
  const std::string path = dir_ + "/" + SegmentFileName(now[1].ptr.segment);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(now[1].ptr.offset + kRecordHeaderSize + 10));
    f.put('\x7f');  // one damaged byte in the middle record's data
  }
  ASSERT_GT(std::filesystem::file_size(path), now[2].ptr.offset + now[2].ptr.record_size());
  Reopen();
  // A whole record of this life follows the damage: not a tear. The open
  // passes over it and cuts where this life's records end (the earlier
  // life's bytes behind them), not at the damage.
  const uint64_t size = now[2].ptr.offset + now[2].ptr.record_size();
  EXPECT_EQ(std::filesystem::file_size(path), size);
  ExpectReadable(now[0]);
  ExpectReadable(now[2]);
  std::string buf(now[1].data.size(), '\0');
  EXPECT_TRUE(vlog_->Read(now[1].ptr, 2, 1, buf.data()).IsCorruption());
  ASSERT_TRUE(vlog_->CutTornTail(now[1].ptr.segment, now[1].ptr.offset).ok());
  EXPECT_EQ(std::filesystem::file_size(path), size);
  // Crash recovery past a checkpoint head: pages written after the last
  // sync may reach the disk in any order, so it cuts there.
  ASSERT_TRUE(vlog_->CutTornTail(now[1].ptr.segment, now[1].ptr.offset,
                                 /*since_checkpoint=*/true).ok());
  EXPECT_EQ(std::filesystem::file_size(path), now[1].ptr.offset);
  ExpectReadable(now[0]);
}

TEST_F(RecycleTest, SealCutsTheFileToThisLife) {
  MakeFreeFile();
  const Written w = Put(Stream::kHot, 2, 0, 3000);
  EXPECT_GT(vlog_->ReusableBytes(), 0u);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/" + SegmentFileName(w.ptr.segment)),
            w.ptr.offset + w.ptr.record_size());
  EXPECT_EQ(vlog_->ReusableBytes(), 0u);  // the rest went back to the disk
  EXPECT_EQ(ScanSeqs(w.ptr.segment), std::vector<uint64_t>{w.ptr.seq});
}

TEST_F(RecycleTest, KeepsAtMostTheConfiguredNumberOfFreeFilesAndNoneAcrossOpens) {
  options_.recycle_segments = 1;
  OpenLog(64 << 10);
  const Written hot = Put(Stream::kHot, 1, 0, 100);
  const Written cold = Put(Stream::kCold, 2, 0, 100);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kCold).ok());
  ASSERT_TRUE(vlog_->DeleteSegment(hot.ptr.segment).ok());   // kept
  ASSERT_TRUE(vlog_->DeleteSegment(cold.ptr.segment).ok());  // the pool is full: removed
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + FreeFileName(hot.ptr.segment)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + FreeFileName(cold.ptr.segment)));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + SegmentFileName(cold.ptr.segment)));
  EXPECT_EQ(vlog_->stats().free_files, 1u);
  // An open removes free files: the seqs of their records are unknown.
  Reopen();
  EXPECT_EQ(vlog_->stats().free_files, 0u);
  EXPECT_EQ(vlog_->ReusableBytes(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + FreeFileName(hot.ptr.segment)));
  EXPECT_EQ(vlog_->stats().segments_recycled, 0u);
  const Written w = Put(Stream::kHot, 3, 0, 100);
  EXPECT_EQ(vlog_->stats().segments_recycled, 0u);
  ExpectReadable(w);
}

// A large flush writes its whole blocks around the page cache (the test
// directory is on a disk file system, which takes O_DIRECT), its partial
// last block and small flushes through it; the file holds exactly the records
// either way, and they read back, also after reopening. With direct writes
// off every written page is in the cache.
TEST_F(ValueLogTest, LargeFlushesWriteTheirWholeBlocksDirect) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    options_.direct_writes = direct;
    OpenLog(64 << 20, 4 << 20);
    std::vector<Written> all;
    for (size_t i = 0; i < 3; ++i) all.push_back(Put(Stream::kHot, i + 1, 0, 1000 + i));
    ASSERT_TRUE(vlog_->Flush().ok());  // small: buffered
    const uint64_t big_from = all.back().ptr.offset + all.back().ptr.record_size();
    for (size_t i = 0; i < 40; ++i) all.push_back(Put(Stream::kHot, 9, i, 20000 + 7 * i));
    ASSERT_TRUE(vlog_->Flush().ok());
    const Written& last = all.back();
    const uint64_t big_to = last.ptr.offset + last.ptr.record_size();
    ASSERT_GE(big_to - big_from, 2 * kMinDirectWrite);
    all.push_back(Put(Stream::kHot, 10, 0, 333));
    ASSERT_TRUE(vlog_->Flush().ok());
    const std::string path = dir_ + "/" + SegmentFileName(last.ptr.segment);
    const uint64_t end = all.back().ptr.offset + all.back().ptr.record_size();
    EXPECT_EQ(std::filesystem::file_size(path), end);

    const uint64_t block = File::kDirectAlign;
    const uint64_t lo = (big_from + block - 1) / block * block, hi = big_to / block * block;
    const size_t resident = testing::ResidentPages(path, lo, hi);
    if (direct) {
      EXPECT_EQ(resident, 0u);
    } else {
      EXPECT_EQ(resident, (hi - lo) / block);
    }
    for (const Written& w : all) ExpectReadable(w);
    Reopen();
    for (const Written& w : all) ExpectReadable(w);
    uint64_t records = 0;
    ASSERT_TRUE(vlog_->ScanSegment(last.ptr.segment, [&](const BlockPtr&, const RecordHeader&,
                                                         std::string_view, const Status& st) {
                       EXPECT_TRUE(st.ok()) << st.ToString();
                       ++records;
                       return true;
                     })
                    .ok());
    EXPECT_EQ(records, all.size());
    vlog_.reset();
    std::filesystem::remove_all(dir_);
  }
}

// ReadMany reads a run of at least kMinDirectRead bytes around the page
// cache: nothing of the segment but the block its flushed bytes end in is
// cached after it (with direct reads off, the run's pages are), the bytes
// are the records', and a flipped byte is still caught. A shorter run goes
// through the page cache.
TEST_F(ValueLogTest, RunsAreReadDirect) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    options_.direct_reads = direct;
    OpenLog(64 << 20, 4 << 20);
    std::vector<Written> all;
    for (size_t i = 0; i < 24; ++i) all.push_back(Put(Stream::kHot, 5, i, 30000 + 11 * i));
    ASSERT_TRUE(vlog_->Sync().ok());
    const std::string path = dir_ + "/" + SegmentFileName(all[0].ptr.segment);
    ASSERT_NO_FATAL_FAILURE(DropCached(path));  // whatever the writes left
    const uint64_t from = all.front().ptr.offset;
    const uint64_t to = all.back().ptr.offset + all.back().ptr.record_size();
    ASSERT_GE(to - from, kMinDirectRead);
    ASSERT_EQ(testing::ResidentPages(path, from, to), 0u);
    std::vector<std::string> bufs;
    std::vector<ReadRequest> reqs = RequestsFor(all, &bufs);
    const uint64_t preads = vlog_->stats().preads;
    ASSERT_TRUE(vlog_->ReadMany(reqs).ok());
    EXPECT_EQ(vlog_->stats().preads, preads + 1);
    for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(bufs[i] == all[i].data) << i;
    // The run ends where the open segment's flushed bytes do: its partial
    // last block (possibly a dirty buffered tail) is read through the cache.
    const uint64_t whole = to / File::kDirectAlign * File::kDirectAlign;
    ASSERT_LT(whole, to);
    if (direct) {
      EXPECT_EQ(testing::ResidentPages(path, from, whole), 0u);
      EXPECT_EQ(testing::ResidentPages(path, whole, to), 1u);
    } else {
      EXPECT_GT(testing::ResidentPages(path, from, whole), 0u);
    }
    // One flipped data byte in the middle record: that record only is EIO.
    {
      const Written& w = all[12];
      const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      ASSERT_GE(fd, 0);
      const off_t at = static_cast<off_t>(w.ptr.offset + kRecordHeaderSize + 100);
      char c;
      ASSERT_EQ(::pread(fd, &c, 1, at), 1);
      c ^= 0x20;
      ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
      ::close(fd);
    }
    Status st = vlog_->ReadMany(reqs);
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(reqs[i].status.ok(), i != 12) << i;
      if (i != 12) {
        EXPECT_TRUE(bufs[i] == all[i].data) << i;
      }
    }
    // Three records: buffered whatever the option.
    std::span<ReadRequest> few(reqs.data(), 3);
    ASSERT_TRUE(vlog_->ReadMany(few).ok());
    EXPECT_GT(testing::ResidentPages(path, from, all[3].ptr.offset), 0u);
    vlog_.reset();
    std::filesystem::remove_all(dir_);
  }
}

// Requests that take their data in place get it where the direct read put
// it: the right bytes, their buffers untouched, each charged a share of the
// read buffer, which outlives the log while referenced. A flipped byte
// still fails its record only; a run read through the page cache, and one
// that finds every shared buffer taken, fill the requests' buffers instead.
TEST_F(ValueLogTest, RunsReadDirectCanLeaveTheirDataInPlace) {
  OpenLog(64 << 20, 8 << 20);
  std::vector<Written> all;
  for (size_t i = 0; i < 20; ++i) all.push_back(Put(Stream::kHot, 8, i, 65536 + 100 * i));
  all.push_back(Put(Stream::kHot, 9, 0, 8000));  // the run ends blocks before the flushed end
  ASSERT_TRUE(vlog_->Sync().ok());
  all.pop_back();
  auto read_in_place = [&](const std::vector<Written>& ws, std::vector<std::string>* bufs,
                           std::vector<RecordRef>* refs) {
    std::vector<ReadRequest> reqs = RequestsFor(ws, bufs);
    refs->assign(ws.size(), nullptr);
    for (size_t i = 0; i < ws.size(); ++i) reqs[i].in_place = &(*refs)[i];
    const Status st = vlog_->ReadMany(reqs);
    return std::make_pair(st, reqs);
  };
  std::vector<std::string> bufs;
  std::vector<RecordRef> refs;
  const uint64_t in_place_before = vlog_->stats().records_in_place;
  auto [st, reqs] = read_in_place(all, &bufs, &refs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(vlog_->stats().records_in_place, in_place_before + all.size());
  uint64_t shares = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_NE(refs[i], nullptr) << i;
    EXPECT_TRUE(*refs[i] == all[i].data) << i;
    EXPECT_EQ(bufs[i], std::string(all[i].data.size(), '\0')) << i;  // untouched
    EXPECT_GE(reqs[i].in_place_share, all[i].ptr.length) << i;
    shares += reqs[i].in_place_share;
  }
  const uint64_t run = all.back().ptr.offset + all.back().ptr.record_size() - all[0].ptr.offset;
  EXPECT_GE(shares, run - 2 * kRecordHeaderSize);  // the buffer, shared out
  EXPECT_LE(shares, 2 * run + 2 * File::kDirectAlign);

  // A flipped data byte: that record fails and is not handed out.
  const std::string path = dir_ + "/" + SegmentFileName(all[0].ptr.segment);
  {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const off_t at = static_cast<off_t>(all[5].ptr.offset + kRecordHeaderSize + 7);
    char c;
    ASSERT_EQ(::pread(fd, &c, 1, at), 1);
    c ^= 0x04;
    ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
    ::close(fd);
  }
  std::vector<std::string> bufs2;
  std::vector<RecordRef> refs2;
  auto [st2, reqs2] = read_in_place(all, &bufs2, &refs2);
  EXPECT_TRUE(st2.IsCorruption()) << st2.ToString();
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(reqs2[i].status.ok(), i != 5) << i;
    EXPECT_EQ(refs2[i] != nullptr, i != 5) << i;
    if (i != 5) {
      EXPECT_TRUE(*refs2[i] == all[i].data) << i;
    }
  }

  // Three records are read through the page cache: into the buffers.
  std::vector<Written> few(all.begin(), all.begin() + 3);
  auto [st3, reqs3] = read_in_place(few, &bufs2, &refs2);
  ASSERT_TRUE(st3.ok());
  for (size_t i = 0; i < few.size(); ++i) {
    EXPECT_EQ(refs2[i], nullptr) << i;
    EXPECT_EQ(bufs2[i], few[i].data) << i;
  }

  // With every shared buffer referenced, a run is copied out as before.
  std::vector<Written> good(all.begin() + 8, all.end());
  ASSERT_GE(good.back().ptr.offset + good.back().ptr.record_size() - good[0].ptr.offset,
            kMinDirectRead);
  // (refs, from the first read, holds two.)
  std::vector<std::vector<RecordRef>> held;
  for (;;) {
    ASSERT_LE(held.size(), kSharedReadBuffers);
    held.emplace_back();
    auto [st4, reqs4] = read_in_place(good, &bufs2, &held.back());
    ASSERT_TRUE(st4.ok());
    if (held.back()[0] == nullptr) break;
  }
  EXPECT_EQ(held.size(), kSharedReadBuffers - 2 + 1);
  const uint64_t in_place_now = vlog_->stats().records_in_place;
  for (size_t i = 0; i < good.size(); ++i) {
    EXPECT_EQ(held.back()[i], nullptr) << i;
    EXPECT_EQ(bufs2[i], good[i].data) << i;
  }
  // One buffer back (its last reference gone): in place again.
  held[0].clear();
  ASSERT_TRUE(read_in_place(good, &bufs2, &refs2).first.ok());
  EXPECT_EQ(vlog_->stats().records_in_place, in_place_now + good.size());
  ASSERT_NE(refs2[0], nullptr);
  EXPECT_TRUE(*refs2[0] == good[0].data);

  // The data outlives the log that read it.
  vlog_.reset();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(*refs[i] == all[i].data) << i;
}

// A long run is read direct in pieces of about equal size, none over
// 1 MiB and none short enough to go through the page cache.
TEST_F(ValueLogTest, LongRunsAreReadInEvenPieces) {
  OpenLog(64 << 20, 8 << 20);
  std::vector<Written> all;
  for (size_t i = 0; i < 40; ++i) all.push_back(Put(Stream::kHot, 6, i, 65536));  // 2.5 MiB
  all.push_back(Put(Stream::kHot, 7, 0, 8000));  // the run ends blocks before the flushed end
  ASSERT_TRUE(vlog_->Sync().ok());
  all.pop_back();
  const std::string path = dir_ + "/" + SegmentFileName(all[0].ptr.segment);
  ASSERT_NO_FATAL_FAILURE(DropCached(path));
  std::vector<std::string> bufs;
  std::vector<ReadRequest> reqs = RequestsFor(all, &bufs);
  const uint64_t preads = vlog_->stats().preads;
  ASSERT_TRUE(vlog_->ReadMany(reqs).ok());
  EXPECT_EQ(vlog_->stats().preads, preads + 3);  // 14 + 13 + 13 records
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(bufs[i] == all[i].data) << i;
  const uint64_t from = all.front().ptr.offset;
  const uint64_t to = all.back().ptr.offset + all.back().ptr.record_size();
  EXPECT_EQ(testing::ResidentPages(path, from, to), 0u);
}

// A flipped bit in the length of a record in the middle of the newest
// segment makes it run past the end of the file, as a torn append would.
// The whole records behind it show it is damage: Open must not cut them
// off (fsck reports the damaged record; the others stay readable).
TEST_F(ValueLogTest, DamagedLengthIsNotCutAsATornTail) {
  OpenLog();
  BlockPtr a, b, c;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, std::string(5000, 'a'), &a).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 1, std::string(5000, 'b'), &b).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 2, std::string(5000, 'c'), &c).ok());
  ASSERT_TRUE(vlog_->Sync().ok());
  vlog_.reset();
  const std::string path = dir_ + "/" + SegmentFileName(b.segment);
  const uint64_t size = std::filesystem::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(b.offset + 10));  // data_len bits 16-23
    f.put(static_cast<char>(0x40));                     // 5000 + 4 MiB: past the end
  }
  OpenLog();
  EXPECT_EQ(std::filesystem::file_size(path), size) << "damaged records were cut off";
  std::string got(5000, '\0');
  EXPECT_TRUE(vlog_->Read(a, 1, 0, got.data()).ok());
  EXPECT_TRUE(vlog_->Read(c, 1, 2, got.data()).ok());
  EXPECT_EQ(got, std::string(5000, 'c'));
  EXPECT_EQ(vlog_->Read(b, 1, 1, got.data()).err(), EIO);
}

// A crash between creating a segment file and writing its header leaves a
// file shorter than the header. Nothing in it was ever durable, so Open
// removes it instead of reporting a damaged segment at every open, and its
// id is not handed out again.
TEST_F(ValueLogTest, UnfinishedSegmentIsRemovedAtOpen) {
  OpenLog();
  BlockPtr a;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, std::string(5000, 'a'), &a).ok());
  ASSERT_TRUE(vlog_->Sync().ok());
  vlog_.reset();
  const uint32_t crashed = a.segment + 5;
  for (uint64_t size : {0u, 20u}) {
    SCOPED_TRACE(size);
    const std::string path = dir_ + "/" + SegmentFileName(crashed);
    std::ofstream(path, std::ios::binary) << std::string(size, '\x5a');
    OpenLog();
    EXPECT_FALSE(std::filesystem::exists(path));
    for (const SegmentInfo& s : vlog_->Segments()) EXPECT_FALSE(s.damaged) << s.id;
    EXPECT_EQ(SegmentMap().count(crashed), 0u);
    std::string got(5000, '\0');
    EXPECT_TRUE(vlog_->Read(a, 1, 0, got.data()).ok());
    BlockPtr b;
    ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
    ASSERT_TRUE(vlog_->Append(Stream::kHot, 2, 0, "after", &b).ok());
    EXPECT_GT(b.segment, crashed);
    vlog_.reset();
  }
}

StoreId TestStoreId(uint8_t fill) {
  StoreId id;
  id.fill(fill);
  return id;
}

SegmentHeader HeaderOf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char raw[kSegmentHeaderSize];
  f.read(raw, sizeof(raw));
  SegmentHeader h;
  EXPECT_TRUE(DecodeSegmentHeader(raw, &h).ok()) << path;
  return h;
}

// Every header the log writes names its store: new segments and rewritten
// ones. Segments of no known store (written before store ids) open in a log
// that has one, and a log without one opens every segment.
TEST_F(ValueLogTest, HeadersNameTheStoreAndUnknownIdsAreAccepted) {
  OpenLog();  // no store id: headers carry zeros
  BlockPtr legacy;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, "legacy", &legacy).ok());
  vlog_.reset();
  EXPECT_FALSE(KnownStoreId(HeaderOf(dir_ + "/" + SegmentFileName(legacy.segment)).store_id));

  options_.store_id = TestStoreId(0x11);
  OpenLog();
  EXPECT_TRUE(vlog_->SetAsideSegments().empty());
  std::string got(6, '\0');
  ASSERT_TRUE(vlog_->Read(legacy, 1, 0, got.data()).ok());
  BlockPtr stamped;
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 2, 0, std::string(5000, 's'), &stamped).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kCold).ok());
  BlockPtr newer;
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 3, 0, "newer", &newer).ok());
  vlog_.reset();
  const std::string path = dir_ + "/" + SegmentFileName(stamped.segment);
  EXPECT_EQ(HeaderOf(path).store_id, TestStoreId(0x11));

  // A rewritten header keeps naming the store.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(static_cast<char>(0x77));
  }
  OpenLog();
  ASSERT_TRUE(SegmentMap()[stamped.segment].damaged);
  ASSERT_TRUE(vlog_->RewriteHeader(stamped.segment).ok());
  vlog_.reset();
  EXPECT_EQ(HeaderOf(path).store_id, TestStoreId(0x11));

  options_.store_id = StoreId{};  // a log of no known store opens them all
  OpenLog();
  EXPECT_TRUE(vlog_->SetAsideSegments().empty());
  EXPECT_EQ(SegmentMap().count(stamped.segment), 1u);
}

// A segment file of another store is never taken for this store's, even
// when its records carry the same inode, block and seq numbers as this
// store's pointers expect: not read, not scanned, not learned from, its id
// not handed out again; repair can move it out.
TEST_F(ValueLogTest, AnotherStoresSegmentIsLeftAloneAndCanBeMovedOut) {
  const std::string other_dir = tmp_.path() + "/other";
  Options other = options_;
  other.store_id = TestStoreId(0xBB);
  std::unique_ptr<ValueLog> theirs;
  ASSERT_TRUE(ValueLog::Open(other, other_dir, &theirs).ok());
  BlockPtr their_ptr;
  for (uint64_t b = 0; b < 50; ++b) {  // seqs above any this log uses
    ASSERT_TRUE(theirs->Append(Stream::kHot, 7, b, "theirs " + std::to_string(b), &their_ptr).ok());
  }
  const uint64_t their_last_seq = theirs->LastSeq();
  theirs.reset();

  options_.store_id = TestStoreId(0xAA);
  OpenLog();
  BlockPtr mine;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 7, 49, "mine", &mine).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  vlog_.reset();
  const uint32_t planted = mine.segment + 10;
  std::filesystem::copy_file(other_dir + "/" + SegmentFileName(their_ptr.segment),
                             dir_ + "/" + SegmentFileName(planted));
  OpenLog();
  const auto foreign = vlog_->SetAsideSegments();
  ASSERT_EQ(foreign.size(), 1u);
  EXPECT_EQ(foreign[0].id, planted);
  EXPECT_EQ(foreign[0].why, SetAsideSegment::Why::kForeign);
  EXPECT_EQ(foreign[0].store_id, TestStoreId(0xBB));
  EXPECT_EQ(foreign[0].size, std::filesystem::file_size(dir_ + "/" + SegmentFileName(planted)));
  EXPECT_EQ(SegmentMap().count(planted), 0u);
  EXPECT_LT(vlog_->LastSeq(), their_last_seq);  // its records taught nothing
  // A pointer into it (inode, block and seq all match its record) reads as
  // a missing segment, never as their bytes.
  BlockPtr into = their_ptr;
  into.segment = planted;
  std::string got(their_ptr.length, '\0');
  Status st = vlog_->Read(into, 7, 49, got.data());
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(vlog_->ScanSegment(planted, [](auto&&...) { return true; }).IsNotFound());
  BlockPtr next;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 8, 0, "after", &next).ok());
  EXPECT_GT(next.segment, planted);

  const std::string aside = tmp_.path() + "/aside.vlog";
  ASSERT_TRUE(vlog_->MoveOut(planted, aside).ok());
  EXPECT_TRUE(std::filesystem::exists(aside));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + SegmentFileName(planted)));
  EXPECT_TRUE(vlog_->SetAsideSegments().empty());
  EXPECT_TRUE(vlog_->MoveOut(planted, aside).IsNotFound());
  EXPECT_TRUE(vlog_->MoveOut(mine.segment, aside).IsNotFound());
  ASSERT_TRUE(vlog_->Read(mine, 7, 49, got.data()).ok());
}

// Flips bits of the header of segment file `path` at byte `at`.
void FlipHeaderBits(const std::string& path, int at, char mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ mask));
}

// A header that fails its checksum still tells whose it is when the store
// id in it is far from this store's: another store's segment with a
// damaged header is set aside, never served nor given this store's id by a
// rewrite. A few flipped bits of this store's id are damage to this
// store's header.
TEST_F(ValueLogTest, DamagedHeaderOfAnotherStoresSegmentIsStillAnothers) {
  const std::string other_dir = tmp_.path() + "/other";
  Options other = options_;
  other.store_id = TestStoreId(0x3C);
  std::unique_ptr<ValueLog> theirs;
  ASSERT_TRUE(ValueLog::Open(other, other_dir, &theirs).ok());
  BlockPtr their_ptr;
  ASSERT_TRUE(theirs->Append(Stream::kHot, 7, 0, "theirs", &their_ptr).ok());
  theirs.reset();

  options_.store_id = TestStoreId(0xC3);
  OpenLog();
  BlockPtr mine;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 7, 0, "mine", &mine).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  vlog_.reset();
  const uint32_t planted = mine.segment + 10;
  const std::string planted_path = dir_ + "/" + SegmentFileName(planted);
  std::filesystem::copy_file(other_dir + "/" + SegmentFileName(their_ptr.segment), planted_path);
  FlipHeaderBits(planted_path, 20, 0x40);  // create_time: the checksum fails
  const std::string mine_path = dir_ + "/" + SegmentFileName(mine.segment);
  FlipHeaderBits(mine_path, 33, 0x05);  // two bits of this store's id

  OpenLog();
  const auto aside = vlog_->SetAsideSegments();
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(aside[0].id, planted);
  EXPECT_EQ(aside[0].why, SetAsideSegment::Why::kForeignDamaged);
  EXPECT_EQ(aside[0].store_id, TestStoreId(0x3C));
  EXPECT_EQ(SegmentMap().count(planted), 0u);
  EXPECT_TRUE(vlog_->RewriteHeader(planted).IsNotFound());
  ASSERT_TRUE(SegmentMap()[mine.segment].damaged);
  std::string got(4, '\0');
  ASSERT_TRUE(vlog_->Read(mine, 7, 0, got.data()).ok());
  EXPECT_EQ(got, "mine");
  ASSERT_TRUE(vlog_->RewriteHeader(mine.segment).ok());
  vlog_.reset();
  EXPECT_EQ(HeaderOf(mine_path).store_id, TestStoreId(0xC3));
}

// A segment file renamed by hand (its header names another segment of this
// store) is neither read under its new name nor taken for damage: it is set
// aside, and NameBack gives it its name back, never over another file.
TEST_F(ValueLogTest, RenamedSegmentIsSetAsideAndNamedBack) {
  options_.store_id = TestStoreId(0x5A);
  OpenLog();
  BlockPtr a, b;
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 1, 0, "first", &a).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kCold).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 2, 0, "second", &b).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kCold).ok());
  vlog_.reset();
  ASSERT_NE(a.segment, b.segment);
  const std::string a_path = dir_ + "/" + SegmentFileName(a.segment);
  const std::string moved = dir_ + "/" + SegmentFileName(b.segment + 20);
  std::filesystem::rename(a_path, moved);

  OpenLog();
  auto aside = vlog_->SetAsideSegments();
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(aside[0].id, b.segment + 20);
  EXPECT_EQ(aside[0].why, SetAsideSegment::Why::kMisnamed);
  EXPECT_EQ(aside[0].header_id, a.segment);
  EXPECT_EQ(SegmentMap().count(b.segment + 20), 0u);
  std::string got(5, '\0');
  EXPECT_FALSE(vlog_->Read(a, 1, 0, got.data()).ok());
  EXPECT_TRUE(vlog_->NameBack(b.segment).IsNotFound());  // not misnamed
  // A file that took the name is never replaced.
  { std::ofstream(a_path) << "something else"; }
  EXPECT_EQ(vlog_->NameBack(b.segment + 20).err(), EEXIST);
  EXPECT_EQ(std::filesystem::file_size(a_path), 14u);
  std::filesystem::remove(a_path);
  ASSERT_TRUE(vlog_->NameBack(b.segment + 20).ok());
  EXPECT_TRUE(vlog_->SetAsideSegments().empty());
  EXPECT_FALSE(std::filesystem::exists(moved));
  vlog_.reset();

  OpenLog();
  EXPECT_TRUE(vlog_->SetAsideSegments().empty());
  ASSERT_TRUE(vlog_->Read(a, 1, 0, got.data()).ok());
  EXPECT_EQ(got, "first");
}

// A file that takes the name of the next segment while the log is open
// keeps it: the log skips that id instead of failing the flush (and so
// dropping buffered data) or replacing the file.
TEST_F(ValueLogTest, NewSegmentSkipsANameTakenWhileOpen) {
  OpenLog();
  BlockPtr a;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, "first", &a).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  const std::string taken = dir_ + "/" + SegmentFileName(a.segment + 1);
  { std::ofstream(taken) << "not a segment"; }
  BlockPtr b;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 2, 0, "second", &b).ok());
  ASSERT_TRUE(vlog_->SyncAll().ok());
  EXPECT_GT(b.segment, a.segment + 1);
  EXPECT_EQ(std::filesystem::file_size(taken), 13u);
  std::string got(6, '\0');
  ASSERT_TRUE(vlog_->Read(b, 2, 0, got.data()).ok());
  EXPECT_EQ(got, "second");
}

// A damaged segment header does not make the records behind it unreadable
// (each verifies on its own); RewriteHeader makes the segment whole again,
// durably.
TEST_F(ValueLogTest, RecordsBehindADamagedHeaderStayReadable) {
  OpenLog();
  BlockPtr a, b;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, std::string(5000, 'a'), &a).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 2, 0, "newer", &b).ok());
  vlog_.reset();
  const std::string path = dir_ + "/" + SegmentFileName(a.segment);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(static_cast<char>(0x77));
  }
  OpenLog();
  ASSERT_TRUE(SegmentMap()[a.segment].damaged);
  std::string got(5000, '\0');
  Status st = vlog_->Read(a, 1, 0, got.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, std::string(5000, 'a'));
  EXPECT_EQ(vlog_->Read(a, 1, 1, got.data()).err(), EIO);  // still checked
  ASSERT_TRUE(vlog_->RewriteHeader(a.segment).ok());
  EXPECT_FALSE(SegmentMap()[a.segment].damaged);
  Reopen();
  EXPECT_FALSE(SegmentMap()[a.segment].damaged);
  EXPECT_TRUE(vlog_->Read(a, 1, 0, got.data()).ok());
  EXPECT_EQ(got, std::string(5000, 'a'));
}

// A rewritten header's stream is a guess: the segment must not stand for
// its stream's newest when the next Open learns the highest seq. Here the
// rewritten segment (once hot) is newer than the cold segment that holds
// the highest seq.
TEST_F(ValueLogTest, RewrittenSegmentDoesNotHideItsStreamsNewestSeq) {
  OpenLog();
  BlockPtr c1, r, c2;
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 1, 0, "first", &c1).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 2, 0, "second", &r).ok());
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 3, 0, "third", &c2).ok());
  ASSERT_LT(c1.segment, r.segment);
  ASSERT_EQ(c1.segment, c2.segment);
  vlog_.reset();
  {
    std::fstream f(dir_ + "/" + SegmentFileName(r.segment),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put(static_cast<char>(0x77));
  }
  OpenLog();
  ASSERT_TRUE(vlog_->RewriteHeader(r.segment).ok());
  Reopen();
  BlockPtr next;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 4, 0, "fourth", &next).ok());
  EXPECT_GT(next.seq, c2.seq);
  std::string got(6, '\0');
  EXPECT_TRUE(vlog_->Read(r, 2, 0, got.data()).ok());
}

TEST_F(ValueLogTest, ReservedSegmentIdsAreSkipped) {
  OpenLog();
  vlog_->ReserveSegmentIds(40);
  BlockPtr p;
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 0, "x", &p).ok());
  EXPECT_EQ(p.segment, 41u);
  vlog_->ReserveSegmentIds(7);  // lower: no effect
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  ASSERT_TRUE(vlog_->Append(Stream::kHot, 1, 1, "y", &p).ok());
  EXPECT_EQ(p.segment, 42u);
}

}  // namespace
}  // namespace sepfs::vlog
