#include "vlog/prefetcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace sepfs::vlog {
namespace {

using namespace std::chrono_literals;
using testing::Payload;

// Holds every segment read while `hold` is set (so a test can catch a read
// in flight), and fails reads while `fail_reads` is set.
class GateEnv : public EnvWrapper {
 public:
  GateEnv() : EnvWrapper(Env::Default()) {}

  void Hold() {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  // Waits until n reads are held.
  bool WaitHeld(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, 10s, [&] { return held_ >= n; });
  }
  int Held() {
    std::lock_guard<std::mutex> l(mu_);
    return held_;
  }
  std::atomic<bool> fail_reads{false};

  Status OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) override {
    std::unique_ptr<File> f;
    SEPFS_RETURN_IF_ERROR(target()->OpenFile(p, m, &f));
    *out = std::make_unique<GateFile>(this, std::move(f));
    return Status::OK();
  }

 private:
  class GateFile : public FileWrapper {
   public:
    GateFile(GateEnv* env, std::unique_ptr<File> f) : FileWrapper(std::move(f)), env_(env) {}
    Status Read(uint64_t off, size_t n, char* buf, size_t* got) override {
      {
        std::unique_lock<std::mutex> l(env_->mu_);
        if (env_->hold_) {
          env_->held_++;
          env_->cv_.notify_all();
          env_->cv_.wait(l, [&] { return !env_->hold_; });
          env_->held_--;
        }
      }
      if (env_->fail_reads) return Status::IOError(target()->path() + ": pread: injected");
      return target()->Read(off, n, buf, got);
    }

   private:
    GateEnv* env_;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  int held_ = 0;
};

struct Rec {
  BlockPtr ptr;
  uint64_t inode;
  uint64_t block;
  std::string data;
};

class PrefetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.env = &env_;
    o.segment_size = 8 << 20;
    o.append_buffer_size = 256 << 10;
    ASSERT_TRUE(ValueLog::Open(o, tmp_.path() + "/vlog", &vlog_).ok());
  }
  void TearDown() override {
    env_.Release();
    pf_.reset();
  }
  void Start(uint64_t cache_bytes = 64 << 20, PrefetcherOptions po = {}) {
    cache_ = std::make_unique<BlockCache>(cache_bytes, 1);
    po.threads = po.threads ? po.threads : 4;
    pf_ = std::make_unique<Prefetcher>(vlog_.get(), cache_.get(), po);
  }
  // n records of inode `ino` appended back to back, flushed to the file.
  std::vector<Rec> Write(uint64_t ino, int n, size_t size = 16 << 10) {
    std::vector<Rec> out;
    for (int i = 0; i < n; i++) {
      Rec r{{}, ino, uint64_t(i), Payload(ino * 100 + i, size)};
      EXPECT_TRUE(vlog_->Append(Stream::kHot, ino, i, r.data, &r.ptr).ok());
      out.push_back(r);
    }
    EXPECT_TRUE(vlog_->Flush().ok());
    return out;
  }
  static std::vector<PrefetchRequest> Reqs(const std::vector<Rec>& rs, uint64_t tag = 0) {
    std::vector<PrefetchRequest> q;
    for (const Rec& r : rs) q.push_back({r.ptr, r.inode, r.block, tag});
    return q;
  }
  // Reads rs through the prefetcher; bufs receive the data.
  Status ReadAll(const std::vector<Rec>& rs, std::vector<std::string>* bufs) {
    bufs->assign(rs.size(), "");
    std::vector<ReadRequest> rq(rs.size());
    for (size_t i = 0; i < rs.size(); i++) {
      (*bufs)[i].assign(rs[i].ptr.length, '\0');
      rq[i].ptr = rs[i].ptr;
      rq[i].inode = rs[i].inode;
      rq[i].block = rs[i].block;
      rq[i].buf = (*bufs)[i].data();
    }
    return pf_->Read(rq);
  }
  // Reads of rs that take the data by reference (*holds); once(i) marks
  // request i `once`.
  template <typename Once>
  static std::vector<ReadRequest> RefReads(const std::vector<Rec>& rs,
                                           std::vector<RecordRef>* holds, Once once) {
    std::vector<ReadRequest> rq(rs.size());
    holds->assign(rs.size(), nullptr);
    for (size_t i = 0; i < rs.size(); i++) {
      rq[i].ptr = rs[i].ptr;
      rq[i].inode = rs[i].inode;
      rq[i].block = rs[i].block;
      rq[i].ref = &(*holds)[i];
      rq[i].once = once(i);
    }
    return rq;
  }
  void WaitIdle() {
    for (int i = 0; i < 2000 && pf_->TEST_Pending() > 0; i++) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(pf_->TEST_Pending(), 0u);
  }
  void FlipByte(const BlockPtr& p, uint64_t at) {
    const std::string path = tmp_.path() + "/vlog/" + SegmentFileName(p.segment);
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c;
    ASSERT_EQ(::pread(fd, &c, 1, p.offset + at), 1);
    c ^= 0x11;
    ASSERT_EQ(::pwrite(fd, &c, 1, p.offset + at), 1);
    ::close(fd);
  }

  testing::TempDir tmp_;
  GateEnv env_;
  std::unique_ptr<ValueLog> vlog_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<Prefetcher> pf_;
};

TEST_F(PrefetcherTest, PrefetchedRecordsServedWithoutAnotherPread) {
  Start();
  std::vector<Rec> rs = Write(5, 16);
  EXPECT_EQ(pf_->Prefetch(Reqs(rs)), 16u);
  WaitIdle();
  const uint64_t preads = vlog_->stats().preads;
  std::vector<std::string> bufs;
  ASSERT_TRUE(ReadAll(rs, &bufs).ok());
  for (size_t i = 0; i < rs.size(); i++) EXPECT_EQ(bufs[i], rs[i].data) << i;
  EXPECT_EQ(vlog_->stats().preads, preads);  // everything came from the cache
  PrefetcherStats s = pf_->stats();
  EXPECT_EQ(s.issued, 16u);
  EXPECT_EQ(s.completed, 16u);
  EXPECT_EQ(s.hits, 16u);
  EXPECT_EQ(s.fg_cache_hits, 16u);
  EXPECT_EQ(s.wasted_bytes, 0u);
  // Prefetching them again is a no-op: they are cached.
  EXPECT_EQ(pf_->Prefetch(Reqs(rs)), 0u);
  EXPECT_EQ(pf_->stats().skipped, 16u);
}

// A foreground read marked `once` (the caller takes the whole record and
// keeps it) hands the record over without caching it; the others are cached.
TEST_F(PrefetcherTest, RecordsReadOnceAreHandedOverButNotCached) {
  Start();
  std::vector<Rec> rs = Write(9, 4);
  std::vector<RecordRef> holds;
  std::vector<ReadRequest> rq = RefReads(rs, &holds, [](size_t i) { return i < 2; });
  ASSERT_TRUE(pf_->Read(rq).ok());
  for (size_t i = 0; i < rs.size(); i++) {
    ASSERT_NE(holds[i], nullptr) << i;
    EXPECT_EQ(*holds[i], rs[i].data) << i;
  }
  EXPECT_EQ(cache_->stats().entries, 2u);
  // The cached two come back without a pread, the other two need one each
  // (adjacent: one run).
  uint64_t preads = vlog_->stats().preads;
  std::vector<std::string> bufs;
  ASSERT_TRUE(ReadAll({rs[2], rs[3]}, &bufs).ok());
  EXPECT_EQ(bufs[0], rs[2].data);
  EXPECT_EQ(vlog_->stats().preads, preads);
  ASSERT_TRUE(ReadAll({rs[0], rs[1]}, &bufs).ok());
  EXPECT_EQ(bufs[1], rs[1].data);
  EXPECT_EQ(vlog_->stats().preads, preads + 1);
}

// Prefetched records of a long run are read in place (no copy out of the
// direct read's buffer). A `once` read that takes one drops it from the
// cache, any other read replaces it with a copy of its own, so the buffer
// goes once all its records are read; records read through the page cache
// stay cached as they are whatever reads them.
TEST_F(PrefetcherTest, InPlaceRecordsLeaveTheirBufferWhenRead) {
  Start();
  std::vector<Rec> small = Write(12, 4);          // 64 KiB: through the page cache
  std::vector<Rec> rs = Write(11, 12, 64 << 10);  // 768 KiB: one direct read
  EXPECT_EQ(pf_->Prefetch(Reqs(small)), 4u);
  WaitIdle();  // not merged with rs into one run
  EXPECT_EQ(pf_->Prefetch(Reqs(rs)), 12u);
  WaitIdle();
  EXPECT_EQ(cache_->stats().entries, 16u);
  EXPECT_TRUE(cache_->Lookup(rs[11].ptr, rs[11].inode, rs[11].block).in_place);
  EXPECT_FALSE(cache_->Lookup(small[0].ptr, small[0].inode, small[0].block).in_place);
  EXPECT_EQ(vlog_->stats().shared_buffers, 1u);  // the run's, held by the cache
  const uint64_t preads = vlog_->stats().preads;
  std::vector<Rec> all = rs;
  all.insert(all.end(), small.begin(), small.end());
  std::vector<RecordRef> holds;
  std::vector<ReadRequest> rq = RefReads(all, &holds, [](size_t i) { return i % 2 == 0; });
  ASSERT_TRUE(pf_->Read(rq).ok());
  for (size_t i = 0; i < all.size(); i++) {
    ASSERT_NE(holds[i], nullptr) << i;
    EXPECT_EQ(*holds[i], all[i].data) << i;
  }
  EXPECT_EQ(vlog_->stats().preads, preads);  // all from the cache
  for (size_t i = 0; i < all.size(); i++) {
    const bool left = i >= rs.size() || i % 2 == 1;
    EXPECT_EQ(cache_->Contains(all[i].ptr, all[i].inode, all[i].block), left) << i;
    if (!left) continue;
    CacheHit h = cache_->Lookup(all[i].ptr, all[i].inode, all[i].block);
    EXPECT_FALSE(h.in_place) << i;
    ASSERT_NE(h.data, nullptr) << i;
    EXPECT_EQ(*h.data, all[i].data) << i;
  }
  EXPECT_EQ(pf_->stats().wasted_bytes, 0u);  // taken, not wasted
  // Only the readers' references keep the buffer now: it goes with them.
  EXPECT_EQ(vlog_->stats().shared_buffers, 1u);
  rq.clear();
  holds.clear();
  // (A worker drops its finished group just after the read: give it time.)
  for (int i = 0; i < 200 && vlog_->stats().shared_buffers > 0; i++) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(vlog_->stats().shared_buffers, 0u);
}

TEST_F(PrefetcherTest, AdjacentRequestsShareOnePread) {
  Start();
  std::vector<Rec> rs = Write(6, 8);  // back to back in one segment, 8 x 16 KiB
  pf_->TEST_Pause(true);
  // Shuffled order: the prefetcher sorts them into one run.
  std::vector<PrefetchRequest> q = Reqs(rs);
  std::swap(q[0], q[5]);
  std::swap(q[2], q[7]);
  EXPECT_EQ(pf_->Prefetch(q), 8u);
  const uint64_t preads = vlog_->stats().preads;
  pf_->TEST_Pause(false);
  WaitIdle();
  EXPECT_EQ(vlog_->stats().preads - preads, 1u);
  EXPECT_EQ(pf_->stats().reads, 1u);
  EXPECT_EQ(pf_->stats().completed, 8u);
}

TEST_F(PrefetcherTest, ForegroundWaitsForInFlightReadInsteadOfReadingAgain) {
  Start();
  std::vector<Rec> rs = Write(7, 1, 64 << 10);
  env_.Hold();
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 1u);
  ASSERT_TRUE(env_.WaitHeld(1));  // a worker is inside pread now
  auto fg = std::async(std::launch::async, [&] {
    std::vector<std::string> bufs;
    Status st = ReadAll(rs, &bufs);
    return std::make_pair(st.ok(), bufs.empty() ? std::string() : bufs[0]);
  });
  // The foreground read neither finishes nor issues its own pread.
  EXPECT_EQ(fg.wait_for(200ms), std::future_status::timeout);
  EXPECT_EQ(env_.Held(), 1);  // only the prefetch's pread
  const uint64_t preads = vlog_->stats().preads;
  env_.Release();
  auto [ok, data] = fg.get();
  EXPECT_TRUE(ok);
  EXPECT_EQ(data, rs[0].data);
  EXPECT_EQ(vlog_->stats().preads, preads);  // no second I/O
  PrefetcherStats s = pf_->stats();
  EXPECT_EQ(s.waits, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.completed, 1u);
}

TEST_F(PrefetcherTest, RecordsAWaiterGotAreNotCountedWasted) {
  Start(2 * ((64 << 10) + BlockCache::kEntryOverhead));  // 2 records fit
  std::vector<Rec> rs = Write(7, 3, 64 << 10);
  env_.Hold();
  ASSERT_EQ(pf_->Prefetch(Reqs({rs[0]})), 1u);
  ASSERT_TRUE(env_.WaitHeld(1));
  auto fg = std::async(std::launch::async, [&] {
    std::vector<std::string> bufs;
    return ReadAll({rs[0]}, &bufs).ok();
  });
  EXPECT_EQ(fg.wait_for(200ms), std::future_status::timeout);  // waiting for the worker
  env_.Release();
  ASSERT_TRUE(fg.get());
  ASSERT_EQ(pf_->stats().waits, 1u);
  // Two more prefetches push the waited-for record out: it was used.
  ASSERT_EQ(pf_->Prefetch(Reqs({rs[1], rs[2]})), 2u);
  WaitIdle();
  EXPECT_FALSE(cache_->Contains(rs[0].ptr, rs[0].inode, rs[0].block));
  EXPECT_EQ(pf_->stats().wasted_bytes, 0u);
}

TEST_F(PrefetcherTest, ForegroundTakesOverQueuedRequests) {
  Start();
  std::vector<Rec> rs = Write(8, 4);
  pf_->TEST_Pause(true);
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 4u);
  std::vector<std::string> bufs;
  ASSERT_TRUE(ReadAll({rs[1]}, &bufs).ok());  // read now, not behind the queue
  EXPECT_EQ(bufs[0], rs[1].data);
  EXPECT_EQ(pf_->stats().cancelled, 1u);
  EXPECT_EQ(pf_->TEST_Pending(), 3u);
  pf_->TEST_Pause(false);
  WaitIdle();
  EXPECT_EQ(pf_->stats().completed, 3u);
}

TEST_F(PrefetcherTest, FailedPrefetchIsNotCachedAndForegroundRetries) {
  Start();
  std::vector<Rec> rs = Write(9, 2);
  env_.fail_reads = true;
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 2u);
  WaitIdle();
  EXPECT_EQ(pf_->stats().failed, 2u);
  EXPECT_FALSE(cache_->Contains(rs[0].ptr, rs[0].inode, rs[0].block));
  // The fault is gone: the foreground reads good data itself.
  env_.fail_reads = false;
  std::vector<std::string> bufs;
  ASSERT_TRUE(ReadAll(rs, &bufs).ok());
  EXPECT_EQ(bufs[0], rs[0].data);
  EXPECT_EQ(bufs[1], rs[1].data);
  EXPECT_EQ(pf_->stats().hits, 0u);
}

TEST_F(PrefetcherTest, WaiterOnFailedPrefetchRetriesAndReportsEio) {
  Start();
  std::vector<Rec> rs = Write(10, 1);
  FlipByte(rs[0].ptr, kRecordHeaderSize + 5);  // bad checksum
  env_.Hold();
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 1u);
  ASSERT_TRUE(env_.WaitHeld(1));
  auto fg = std::async(std::launch::async, [&] {
    std::vector<std::string> bufs;
    return ReadAll(rs, &bufs).err();
  });
  EXPECT_EQ(fg.wait_for(100ms), std::future_status::timeout);
  const uint64_t preads = vlog_->stats().preads;
  env_.Release();
  EXPECT_EQ(fg.get(), EIO);
  EXPECT_EQ(vlog_->stats().preads, preads + 1);  // the waiter retried on its own
  EXPECT_EQ(pf_->stats().waits, 1u);
  EXPECT_EQ(pf_->stats().failed, 1u);
  EXPECT_FALSE(cache_->Contains(rs[0].ptr, rs[0].inode, rs[0].block));
}

// A prefetch follows a pointer that may have gone stale (GC freed its
// segment after the lookup): its failure is no evidence of damage, so only
// the foreground read of a bad record is logged and counted.
TEST_F(PrefetcherTest, FailedPrefetchIsNotCountedAsCorruption) {
  Start();
  std::vector<Rec> rs = Write(13, 2);
  FlipByte(rs[0].ptr, kRecordHeaderSize + 5);  // bad checksum
  Rec gone = rs[1];
  gone.ptr.segment += 100;  // no such segment
  ASSERT_EQ(pf_->Prefetch(Reqs({rs[0], gone})), 2u);
  WaitIdle();
  EXPECT_EQ(pf_->stats().failed, 2u);
  EXPECT_EQ(vlog_->stats().checksum_errors, 0u);
  std::vector<std::string> bufs;
  EXPECT_EQ(ReadAll({rs[0]}, &bufs).err(), EIO);
  EXPECT_EQ(vlog_->stats().checksum_errors, 1u);
}

TEST_F(PrefetcherTest, StalePointerNeverServedFromCache) {
  Start();
  std::vector<Rec> rs = Write(11, 1);
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 1u);
  WaitIdle();
  // Same location, another seq (as after a segment id was reused): a miss,
  // read from disk, which then fails verification.
  Rec other = rs[0];
  other.ptr.seq += 1000;
  std::vector<std::string> bufs;
  EXPECT_EQ(ReadAll({other}, &bufs).err(), EIO);
  EXPECT_EQ(pf_->stats().hits, 0u);
}

TEST_F(PrefetcherTest, CancelByTagAndBoundedQueue) {
  PrefetcherOptions po;
  po.max_queued = 5;
  Start(64 << 20, po);
  std::vector<Rec> rs = Write(12, 8);
  pf_->TEST_Pause(true);
  std::vector<Rec> a(rs.begin(), rs.begin() + 3), b(rs.begin() + 3, rs.end());
  EXPECT_EQ(pf_->Prefetch(Reqs(a, 1)), 3u);
  EXPECT_EQ(pf_->Prefetch(Reqs(b, 2)), 2u);  // queue full after 5
  EXPECT_EQ(pf_->stats().dropped, 3u);
  EXPECT_EQ(pf_->Cancel(1), 3u);
  EXPECT_EQ(pf_->TEST_Pending(), 2u);
  pf_->TEST_Pause(false);
  WaitIdle();
  EXPECT_EQ(pf_->stats().completed, 2u);
  EXPECT_FALSE(cache_->Contains(rs[0].ptr, rs[0].inode, rs[0].block));
  EXPECT_TRUE(cache_->Contains(rs[3].ptr, rs[3].inode, rs[3].block));
}

TEST_F(PrefetcherTest, WastedBytesCountPrefetchesEvictedUnused) {
  Start(4 * ((16 << 10) + BlockCache::kEntryOverhead));  // 4 records fit
  std::vector<Rec> rs = Write(13, 8);
  ASSERT_EQ(pf_->Prefetch(Reqs(rs)), 8u);
  WaitIdle();
  EXPECT_EQ(pf_->stats().wasted_bytes, 4u * (16 << 10));
}

TEST_F(PrefetcherTest, DisabledCacheMeansNoPrefetchButReadsWork) {
  Start(0);
  std::vector<Rec> rs = Write(14, 3);
  EXPECT_EQ(pf_->Prefetch(Reqs(rs)), 0u);
  std::vector<std::string> bufs;
  ASSERT_TRUE(ReadAll(rs, &bufs).ok());
  EXPECT_EQ(bufs[2], rs[2].data);
}

TEST_F(PrefetcherTest, ShutdownWithQueuedAndRunningWork) {
  PrefetcherOptions po;
  po.threads = 2;
  po.max_group_bytes = 1;  // one record per read
  Start(64 << 20, po);
  std::vector<Rec> rs = Write(15, 64);
  env_.Hold();
  EXPECT_EQ(pf_->Prefetch(Reqs(rs)), 64u);
  ASSERT_TRUE(env_.WaitHeld(2));  // both workers stuck in a read, 62 queued
  std::thread releaser([&] {
    std::this_thread::sleep_for(100ms);
    env_.Release();
  });
  const auto t0 = std::chrono::steady_clock::now();
  pf_.reset();  // drops the queue, lets the two reads finish, joins
  releaser.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(cache_->stats().entries, 2u);
}

TEST_F(PrefetcherTest, ConcurrentPrefetchAndForegroundReadsReturnRightBytes) {
  Start(1 << 20);  // small: evictions while reading
  std::vector<Rec> rs = Write(16, 200, 8 << 10);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (size_t i = t; i < rs.size(); i += 2) {
        std::vector<Rec> ahead(rs.begin() + i, rs.begin() + std::min(rs.size(), i + 8));
        pf_->Prefetch(Reqs(ahead));
        std::vector<std::string> bufs;
        if (!ReadAll({rs[i]}, &bufs).ok() || bufs[0] != rs[i].data) bad++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace sepfs::vlog
