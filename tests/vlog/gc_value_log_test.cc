// ValueLog additions for GC: segment ages, SealStream, DeleteSegment.
#include <sys/stat.h>

#include <atomic>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "vlog/value_log.h"

namespace sepfs::vlog {
namespace {

using testing::Payload;

using testing::Written;

// Counts directory syncs; fails RemoveFile while fail_remove is set.
class CountingEnv : public EnvWrapper {
 public:
  CountingEnv() : EnvWrapper(Env::Default()) {}
  std::atomic<int> dir_syncs{0};
  std::atomic<int> removes{0};
  std::atomic<bool> fail_remove{false};

  Status SyncDir(const std::string& d) override {
    ++dir_syncs;
    return target()->SyncDir(d);
  }
  Status RemoveFile(const std::string& p) override {
    ++removes;
    if (fail_remove) return Status::FromErrno(EIO, p + ": unlink: injected");
    return target()->RemoveFile(p);
  }
};

class GcValueLogTest : public ::testing::Test {
 protected:
  void OpenLog() {
    vlog_.reset();
    options_.env = &env_;
    options_.segment_size = 64 << 10;
    options_.append_buffer_size = 16 << 10;
    Status st = ValueLog::Open(options_, dir_, &vlog_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  Written Put(Stream stream, uint64_t inode, uint64_t block, size_t size) {
    return testing::PutRecord(vlog_.get(), stream, inode, block, size, 1000003);
  }
  Status ReadBack(const Written& w) { return testing::ReadBack(vlog_.get(), w); }
  std::map<uint32_t, SegmentInfo> SegmentMap() {
    std::map<uint32_t, SegmentInfo> m;
    for (const SegmentInfo& s : vlog_->Segments()) m[s.id] = s;
    return m;
  }
  bool FileExists(uint32_t id) {
    struct stat st;
    return ::stat((dir_ + "/" + SegmentFileName(id)).c_str(), &st) == 0;
  }

  CountingEnv env_;
  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/vlog";
  Options options_;
  std::unique_ptr<ValueLog> vlog_;
};

TEST_F(GcValueLogTest, SegmentInfoCarriesCreateTimeAndMaxSeq) {
  OpenLog();
  const uint64_t before = static_cast<uint64_t>(std::time(nullptr));
  std::vector<Written> all;
  for (int i = 0; i < 40; ++i) all.push_back(Put(Stream::kHot, 1, i, 4000));  // ~3 segments
  Written cold = Put(Stream::kCold, 2, 0, 100);
  const uint64_t after = static_cast<uint64_t>(std::time(nullptr));
  std::map<uint32_t, uint64_t> want_max;
  for (const Written& w : all) want_max[w.ptr.segment] = std::max(want_max[w.ptr.segment], w.ptr.seq);
  want_max[cold.ptr.segment] = cold.ptr.seq;
  ASSERT_GE(want_max.size(), 3u);
  auto segs = SegmentMap();
  ASSERT_EQ(segs.size(), want_max.size());
  for (const auto& [id, info] : segs) {
    EXPECT_EQ(info.max_seq, want_max[id]) << id;
    EXPECT_GE(info.create_time, before) << id;
    EXPECT_LE(info.create_time, after) << id;
    EXPECT_FALSE(info.damaged);
  }
  ASSERT_TRUE(vlog_->Sync().ok());

  // After a reopen: the create times come from the headers; the newest
  // segment of each stream was scanned, the older ones are unknown (0).
  OpenLog();
  const uint32_t newest_hot = all.back().ptr.segment;
  for (const auto& [id, info] : SegmentMap()) {
    EXPECT_EQ(info.create_time, segs[id].create_time) << id;
    if (id == newest_hot || id == cold.ptr.segment) {
      EXPECT_EQ(info.max_seq, want_max[id]) << id;
    } else {
      EXPECT_EQ(info.max_seq, 0u) << id;
    }
  }
  // AddLive (the mount's rebuild) and ScanSegment teach it.
  const uint32_t first = all[0].ptr.segment;
  vlog_->AddLive(all[0].ptr);
  EXPECT_EQ(SegmentMap()[first].max_seq, all[0].ptr.seq);
  ASSERT_TRUE(vlog_->ScanSegment(first, [](auto&&...) { return true; }).ok());
  EXPECT_EQ(SegmentMap()[first].max_seq, want_max[first]);
}

TEST_F(GcValueLogTest, SealStreamClosesTheOpenSegment) {
  OpenLog();
  EXPECT_TRUE(vlog_->SealStream(Stream::kHot).ok());  // nothing open yet
  EXPECT_EQ(vlog_->SealStream(static_cast<Stream>(7)).err(), EINVAL);
  Written a = Put(Stream::kHot, 1, 0, 1000);
  Written c = Put(Stream::kCold, 1, 1, 1000);
  ASSERT_TRUE(SegmentMap()[a.ptr.segment].open);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  auto segs = SegmentMap();
  EXPECT_FALSE(segs[a.ptr.segment].open);
  EXPECT_EQ(segs[a.ptr.segment].size, kSegmentHeaderSize + a.ptr.record_size());
  EXPECT_TRUE(segs[c.ptr.segment].open);  // other streams are untouched
  EXPECT_TRUE(ReadBack(a).ok());
  Written b = Put(Stream::kHot, 1, 2, 1000);
  EXPECT_GT(b.ptr.segment, c.ptr.segment);
  EXPECT_TRUE(ReadBack(b).ok());
  EXPECT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_TRUE(vlog_->SealStream(Stream::kHot).ok());  // idempotent
}

TEST_F(GcValueLogTest, DeleteSegmentRefusesOpenAndUnknownSegments) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);
  Status st = vlog_->DeleteSegment(a.ptr.segment);
  EXPECT_EQ(st.err(), EBUSY) << st.ToString();
  EXPECT_TRUE(ReadBack(a).ok());
  EXPECT_TRUE(vlog_->DeleteSegment(999).IsNotFound());
  EXPECT_EQ(vlog_->stats().segments_deleted, 0u);
  EXPECT_EQ(env_.removes, 0);
}

TEST_F(GcValueLogTest, DeleteSegmentRemovesFileCountsAndSyncsTheDirectory) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);
  Written b = Put(Stream::kHot, 1, 1, 3000);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  Written keep = Put(Stream::kHot, 2, 0, 500);
  ASSERT_TRUE(vlog_->Sync().ok());
  const uint32_t id = a.ptr.segment;
  const uint64_t size = SegmentMap()[id].size;
  const int dir_syncs = env_.dir_syncs;

  ASSERT_TRUE(vlog_->DeleteSegment(id).ok());
  EXPECT_FALSE(FileExists(id));
  EXPECT_EQ(SegmentMap().count(id), 0u);
  EXPECT_EQ(vlog_->stats().segments_deleted, 1u);
  EXPECT_EQ(vlog_->stats().bytes_freed, size);
  EXPECT_EQ(vlog_->TotalBytes(), SegmentMap()[keep.ptr.segment].size);
  Status st = ReadBack(a);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_TRUE(ReadBack(keep).ok());
  EXPECT_TRUE(vlog_->DeleteSegment(id).IsNotFound());

  // The removal is made durable by the next Sync.
  EXPECT_EQ(env_.dir_syncs, dir_syncs);
  ASSERT_TRUE(vlog_->Sync().ok());
  EXPECT_EQ(env_.dir_syncs, dir_syncs + 1);

  // Gone after a reopen too, and ids are not reused while a higher one exists.
  OpenLog();
  EXPECT_EQ(SegmentMap().count(id), 0u);
  EXPECT_TRUE(ReadBack(b).IsCorruption());
  EXPECT_TRUE(ReadBack(keep).ok());
  Written c = Put(Stream::kHot, 3, 0, 100);
  EXPECT_GT(c.ptr.segment, keep.ptr.segment);
}

TEST_F(GcValueLogTest, FailedRemovalKeepsTheSegment) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  env_.fail_remove = true;
  Status st = vlog_->DeleteSegment(a.ptr.segment);
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  EXPECT_EQ(SegmentMap().count(a.ptr.segment), 1u);
  EXPECT_TRUE(FileExists(a.ptr.segment));
  EXPECT_TRUE(ReadBack(a).ok());
  EXPECT_EQ(vlog_->stats().segments_deleted, 0u);
  env_.fail_remove = false;
  EXPECT_TRUE(vlog_->DeleteSegment(a.ptr.segment).ok());
  EXPECT_FALSE(FileExists(a.ptr.segment));
}

TEST_F(GcValueLogTest, ProbeChecksWithoutCountingOrLogging) {
  OpenLog();
  Written a = Put(Stream::kHot, 1, 0, 1000);  // still in the append buffer
  EXPECT_TRUE(vlog_->Probe(a.ptr, 1, 0).ok());
  ASSERT_TRUE(vlog_->Flush().ok());
  EXPECT_TRUE(vlog_->Probe(a.ptr, 1, 0).ok());
  EXPECT_TRUE(vlog_->Probe(a.ptr, 1, 1).IsCorruption());
  BlockPtr stale = a.ptr;
  stale.seq += 1;
  EXPECT_TRUE(vlog_->Probe(stale, 1, 0).IsCorruption());
  BlockPtr past = a.ptr;
  past.offset += 4096;
  EXPECT_TRUE(vlog_->Probe(past, 1, 0).IsCorruption());
  EXPECT_EQ(vlog_->stats().checksum_errors, 0u);
}

TEST_F(GcValueLogTest, ScanInProgressFinishesAfterDelete) {
  OpenLog();
  std::vector<Written> all;
  for (int i = 0; i < 10; ++i) all.push_back(Put(Stream::kHot, 1, i, 3000));
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  const uint32_t id = all[0].ptr.segment;
  ASSERT_EQ(all.back().ptr.segment, id);
  std::vector<std::string> seen;
  Status del;
  Status st = vlog_->ScanSegment(id, [&](const BlockPtr&, const RecordHeader&,
                                         std::string_view data, const Status& rs) {
    EXPECT_TRUE(rs.ok()) << rs.ToString();
    if (seen.empty()) del = vlog_->DeleteSegment(id);
    seen.emplace_back(data);
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(del.ok()) << del.ToString();
  EXPECT_FALSE(FileExists(id));
  ASSERT_EQ(seen.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(seen[i], all[i].data) << i;
}

}  // namespace
}  // namespace sepfs::vlog
