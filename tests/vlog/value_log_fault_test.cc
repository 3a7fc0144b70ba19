// Damaged segment files on disk and injected I/O failures.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "vlog/fault_env.h"
#include "vlog/value_log.h"

namespace sepfs::vlog {
namespace {

using testing::Payload;

using testing::Written;

// Fails File::Write with ENOSPC while `fail_writes` is set, or the
// `fail_nth`th write from when it was set; with `partial_writes`, writes half
// of the data before failing. (WriteDirect is not forwarded: it is Write.)
class FaultEnv : public EnvWrapper {
 public:
  FaultEnv() : EnvWrapper(Env::Default()) {}

  std::atomic<bool> fail_writes{false};
  std::atomic<bool> partial_writes{false};
  std::atomic<int> fail_nth{0};
  std::atomic<bool> fail_sync{false};  // fdatasync fails with EIO
  std::atomic<int> syncs{0};
  std::atomic<int> dir_syncs{0};

  Status OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) override {
    std::unique_ptr<File> f;
    SEPFS_RETURN_IF_ERROR(target()->OpenFile(p, m, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f));
    return Status::OK();
  }
  Status SyncDir(const std::string& d) override {
    ++dir_syncs;
    return target()->SyncDir(d);
  }

 private:
  class FaultFile : public FileWrapper {
   public:
    FaultFile(FaultEnv* env, std::unique_ptr<File> f) : FileWrapper(std::move(f)), env_(env) {}
    Status Write(uint64_t off, std::string_view data) override {
      if (env_->fail_writes || (env_->fail_nth > 0 && --env_->fail_nth == 0)) {
        if (env_->partial_writes) (void)target()->Write(off, data.substr(0, data.size() / 2));
        return Status::FromErrno(ENOSPC, target()->path() + ": pwrite: injected");
      }
      return target()->Write(off, data);
    }
    Status Sync() override {
      ++env_->syncs;
      if (env_->fail_sync) {
        return Status::FromErrno(EIO, target()->path() + ": fdatasync: injected");
      }
      return target()->Sync();
    }

   private:
    FaultEnv* env_;
  };
};

class ValueLogFaultTest : public ::testing::Test {
 protected:
  void OpenLog(size_t append_buffer = 64 << 10) {
    vlog_.reset();
    options_.env = &env_;
    options_.segment_size = 1 << 20;
    options_.append_buffer_size = append_buffer;
    Status st = ValueLog::Open(options_, dir_, &vlog_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  Written Put(Stream stream, uint64_t inode, uint64_t block, size_t size) {
    return testing::PutRecord(vlog_.get(), stream, inode, block, size, 7919);
  }
  Status ReadBack(const Written& w) { return testing::ReadBack(vlog_.get(), w); }
  std::string SegPath(uint32_t id) { return dir_ + "/" + SegmentFileName(id); }
  void FlipByte(uint32_t seg, uint64_t off) {
    int fd = ::open(SegPath(seg).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c;
    ASSERT_EQ(::pread(fd, &c, 1, off), 1);
    c ^= 0x20;
    ASSERT_EQ(::pwrite(fd, &c, 1, off), 1);
    ::close(fd);
  }
  void Truncate(uint32_t seg, uint64_t size) {
    ASSERT_EQ(::truncate(SegPath(seg).c_str(), size), 0);
  }
  // Records of segment seg, each expected to scan cleanly; -1 if the scan fails.
  int CountRecords(uint32_t seg) {
    int records = 0;
    Status st = vlog_->ScanSegment(
        seg, [&](const BlockPtr&, const RecordHeader&, std::string_view, const Status& s) {
          EXPECT_TRUE(s.ok()) << s.ToString();
          ++records;
          return true;
        });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return st.ok() ? records : -1;
  }
  uint64_t FileSize(uint32_t seg) {
    struct stat st;
    EXPECT_EQ(::stat(SegPath(seg).c_str(), &st), 0);
    return st.st_size;
  }
  std::vector<Written> WriteAndClose(int n, size_t size) {
    OpenLog();
    std::vector<Written> all;
    for (int i = 0; i < n; ++i) all.push_back(Put(Stream::kHot, 1, i, size));
    EXPECT_TRUE(vlog_->Sync().ok());
    vlog_.reset();
    return all;
  }

  FaultEnv env_;
  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/vlog";
  Options options_;
  std::unique_ptr<ValueLog> vlog_;
};

TEST_F(ValueLogFaultTest, FlippedDataByteIsEio) {
  auto all = WriteAndClose(5, 1000);
  FlipByte(all[2].ptr.segment, all[2].ptr.offset + kRecordHeaderSize + 500);
  OpenLog();
  Status st = ReadBack(all[2]);
  EXPECT_EQ(st.err(), EIO);
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("offset " + std::to_string(all[2].ptr.offset)), std::string::npos)
      << st.ToString();
  EXPECT_EQ(vlog_->stats().checksum_errors, 1u);
  for (int i : {0, 1, 3, 4}) EXPECT_TRUE(ReadBack(all[i]).ok()) << i;
}

TEST_F(ValueLogFaultTest, FlippedHeaderBytesAreEio) {
  auto all = WriteAndClose(5, 1000);
  // inode field, reserved field, checksum field.
  FlipByte(all[1].ptr.segment, all[1].ptr.offset + 16);
  FlipByte(all[2].ptr.segment, all[2].ptr.offset + 13);
  FlipByte(all[3].ptr.segment, all[3].ptr.offset + 45);
  OpenLog();
  for (int i : {1, 2, 3}) {
    Status st = ReadBack(all[i]);
    EXPECT_EQ(st.err(), EIO) << i;
    EXPECT_TRUE(st.IsCorruption()) << i;
  }
  EXPECT_EQ(vlog_->stats().checksum_errors, 3u);
  EXPECT_TRUE(ReadBack(all[0]).ok());
  EXPECT_TRUE(ReadBack(all[4]).ok());

  // ReadMany checks every record of a merged read as well.
  std::vector<std::string> bufs(5, std::string(1000, '\0'));
  std::vector<ReadRequest> reqs(5);
  for (int i = 0; i < 5; ++i) {
    reqs[i].ptr = all[i].ptr;
    reqs[i].inode = all[i].inode;
    reqs[i].block = all[i].block;
    reqs[i].buf = bufs[i].data();
  }
  EXPECT_EQ(vlog_->ReadMany(reqs).err(), EIO);
  EXPECT_TRUE(reqs[0].status.ok());
  EXPECT_TRUE(reqs[4].status.ok());
  EXPECT_EQ(bufs[4], all[4].data);
  for (int i : {1, 2, 3}) EXPECT_TRUE(reqs[i].status.IsCorruption()) << i;
}

TEST_F(ValueLogFaultTest, TruncatedSegmentTornTail) {
  auto all = WriteAndClose(6, 1000);
  const uint32_t seg = all[0].ptr.segment;
  Truncate(seg, all[4].ptr.offset + 500);  // cut inside record 4
  OpenLog();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ReadBack(all[i]).ok()) << i;
  for (int i : {4, 5}) {
    Status st = ReadBack(all[i]);
    EXPECT_EQ(st.err(), EIO) << i;
    EXPECT_TRUE(st.IsCorruption()) << i;
  }
  // The torn records' seqs are not reused, since the newest intact one is known.
  EXPECT_EQ(vlog_->LastSeq(), all[3].ptr.seq);
  Written next = Put(Stream::kHot, 2, 0, 100);
  EXPECT_GT(next.ptr.seq, all[3].ptr.seq);
  EXPECT_NE(next.ptr.segment, seg);
  EXPECT_TRUE(ReadBack(next).ok());

  // Open cut the torn record off: the segment now scans cleanly, ending
  // where the tear began, so GC and fsck can process it.
  std::vector<uint32_t> offsets;
  Status bad;
  ASSERT_TRUE(vlog_->ScanSegment(seg, [&](const BlockPtr& p, const RecordHeader&,
                                          std::string_view, const Status& st) {
                     offsets.push_back(p.offset);
                     if (!st.ok()) bad = st;
                     return true;
                   })
                  .ok());
  ASSERT_EQ(offsets.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(offsets[i], all[i].ptr.offset);
  EXPECT_TRUE(bad.ok()) << bad.ToString();
  for (const auto& info : vlog_->Segments()) {
    if (info.id == seg) {
      EXPECT_EQ(info.size, all[4].ptr.offset);
    }
  }

  // Seqs keep increasing over another reopen.
  vlog_.reset();
  OpenLog();
  EXPECT_EQ(vlog_->LastSeq(), next.ptr.seq);
  Written again = Put(Stream::kHot, 2, 1, 100);
  EXPECT_GT(again.ptr.seq, next.ptr.seq);
  EXPECT_TRUE(ReadBack(next).ok());
}

// A read-only open (fsck without --repair, sepfs stats, -o ro) reads past
// nothing torn and changes nothing: the tear stays for a read-write open.
TEST_F(ValueLogFaultTest, ReadOnlyOpenLeavesATornTailInPlace) {
  auto all = WriteAndClose(6, 1000);
  const uint32_t seg = all[0].ptr.segment;
  const uint64_t torn_size = all[4].ptr.offset + 500;
  Truncate(seg, torn_size);
  options_.read_only = true;
  OpenLog();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ReadBack(all[i]).ok()) << i;
  EXPECT_EQ(vlog_->LastSeq(), all[3].ptr.seq);
  vlog_.reset();
  EXPECT_EQ(FileSize(seg), torn_size);
  options_.read_only = false;
  OpenLog();
  vlog_.reset();
  EXPECT_EQ(FileSize(seg), all[4].ptr.offset);
}

// A damaged record in the middle is reported; a scan that asks to go on
// resumes at the next whole record, one that does not stops there.
TEST_F(ValueLogFaultTest, ScanReportsACorruptRecordInTheMiddleAndCanGoOn) {
  auto all = WriteAndClose(6, 300);
  FlipByte(all[2].ptr.segment, all[2].ptr.offset + kRecordHeaderSize + 1);
  OpenLog();
  for (bool go_on : {true, false}) {
    SCOPED_TRACE(go_on);
    std::vector<uint64_t> ok;
    int bad = 0;
    ASSERT_TRUE(vlog_->ScanSegment(all[0].ptr.segment, [&](const BlockPtr& p,
                                                           const RecordHeader&,
                                                           std::string_view data,
                                                           const Status& st) {
                       if (st.ok()) {
                         ok.push_back(p.offset);
                       } else {
                         ++bad;
                         EXPECT_EQ(p.offset, all[2].ptr.offset);
                         EXPECT_TRUE(data.empty());
                         return go_on;
                       }
                       return true;
                     })
                    .ok());
    std::vector<uint64_t> want = {all[0].ptr.offset, all[1].ptr.offset};
    if (go_on) {
      for (size_t i = 3; i < all.size(); ++i) want.push_back(all[i].ptr.offset);
    }
    EXPECT_EQ(ok, want);
    EXPECT_EQ(bad, 1);
  }
}

// Damage that destroyed a record's header, its length with it, is passed
// over too: the scan finds the next record that verifies by its magic.
TEST_F(ValueLogFaultTest, ScanGoesOnPastADestroyedHeader) {
  auto all = WriteAndClose(8, 5000);
  const uint32_t seg = all[0].ptr.segment;
  ASSERT_EQ(all.back().ptr.segment, seg);
  {
    std::fstream f(dir_ + "/" + SegmentFileName(seg), std::ios::in | std::ios::out |
                                                            std::ios::binary);
    f.seekp(static_cast<std::streamoff>(all[3].ptr.offset));
    const std::string junk(kRecordHeaderSize + 7000, '\x11');  // into record 4 too
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  OpenLog();
  std::vector<uint64_t> ok, bad;
  ASSERT_TRUE(vlog_->ScanSegment(seg, [&](const BlockPtr& p, const RecordHeader&,
                                          std::string_view, const Status& st) {
                     (st.ok() ? ok : bad).push_back(p.offset);
                     return true;
                   })
                  .ok());
  EXPECT_EQ(bad, std::vector<uint64_t>{all[3].ptr.offset});
  std::vector<uint64_t> want = {all[0].ptr.offset, all[1].ptr.offset, all[2].ptr.offset};
  for (size_t i = 5; i < all.size(); ++i) want.push_back(all[i].ptr.offset);
  EXPECT_EQ(ok, want);
}

// The highest seq is learned past a damaged record in a stream's newest
// segment: new records never reuse the seqs of the records behind it.
TEST_F(ValueLogFaultTest, OpenLearnsTheHighestSeqPastDamage) {
  auto all = WriteAndClose(6, 300);
  FlipByte(all[2].ptr.segment, all[2].ptr.offset + kRecordHeaderSize + 1);
  OpenLog();
  EXPECT_EQ(vlog_->LastSeq(), all.back().ptr.seq);
  BlockPtr p;
  ASSERT_TRUE(vlog_->Append(Stream::kCold, 9, 0, "after", &p).ok());
  EXPECT_GT(p.seq, all.back().ptr.seq);
}

// A damaged header keeps the segment out of scans (and so out of GC), while
// each record behind it still reads, verified on its own.
TEST_F(ValueLogFaultTest, DamagedSegmentHeaderIsKeptAndRecordsVerifyAlone) {
  auto all = WriteAndClose(3, 100);
  const uint32_t seg = all[0].ptr.segment;
  FlipByte(seg, 8);  // segment_id field of the header
  OpenLog();
  bool listed = false;
  for (const SegmentInfo& s : vlog_->Segments()) listed |= s.id == seg;
  EXPECT_TRUE(listed);
  for (const Written& w : all) EXPECT_TRUE(ReadBack(w).ok());
  EXPECT_TRUE(vlog_->ScanSegment(seg, [](auto&&...) { return true; }).IsCorruption());
  // Its records still count for the sequence numbers, and new segments get new ids.
  Written next = Put(Stream::kHot, 5, 0, 10);
  EXPECT_GT(next.ptr.seq, all[2].ptr.seq);
  EXPECT_GT(next.ptr.segment, seg);
}

// A segment file shorter than a header (a crash while creating it) is
// removed at open, and its id is not handed out again.
TEST_F(ValueLogFaultTest, ShortSegmentFileIsRemovedNotFatal) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  int fd = ::open(SegPath(3).c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "VSEG", 4), 4);
  ::close(fd);
  OpenLog();
  EXPECT_EQ(vlog_->Segments().size(), 0u);
  EXPECT_NE(::access(SegPath(3).c_str(), F_OK), 0);
  Written w = Put(Stream::kHot, 1, 0, 10);
  EXPECT_EQ(w.ptr.segment, 4u);
  BlockPtr p{3, 64, 10, 1};
  std::string buf(10, '\0');
  EXPECT_TRUE(vlog_->Read(p, 1, 0, buf.data()).IsCorruption());
}

TEST_F(ValueLogFaultTest, EnospcOnFlushKeepsTheLogUsable) {
  for (bool partial : {false, true}) {
    SCOPED_TRACE(partial ? "partial write" : "no write");
    OpenLog();
    Written kept = Put(Stream::kHot, 1, 0, 2000);
    ASSERT_TRUE(vlog_->Flush().ok());
    const uint32_t seg = kept.ptr.segment;
    const uint64_t good_size = FileSize(seg);

    Written lost1 = Put(Stream::kHot, 1, 1, 3000);
    Written lost2 = Put(Stream::kHot, 1, 2, 3000);
    EXPECT_TRUE(ReadBack(lost1).ok());  // buffered
    env_.partial_writes = partial;
    env_.fail_writes = true;
    Status st = vlog_->Flush();
    EXPECT_EQ(st.err(), ENOSPC) << st.ToString();
    env_.fail_writes = false;

    EXPECT_EQ(FileSize(seg), good_size);  // truncated back
    EXPECT_TRUE(ReadBack(lost1).IsCorruption());
    EXPECT_TRUE(ReadBack(lost2).IsCorruption());
    EXPECT_TRUE(ReadBack(kept).ok());
    for (const SegmentInfo& s : vlog_->Segments()) {
      if (s.id == seg) {
        EXPECT_EQ(s.size, good_size);
        EXPECT_EQ(s.live_bytes, kept.ptr.record_size());
      }
    }

    Written after = Put(Stream::kHot, 1, 3, 1500);
    EXPECT_GT(after.ptr.seq, lost2.ptr.seq);
    EXPECT_TRUE(ReadBack(after).ok());
    ASSERT_TRUE(vlog_->Sync().ok());
    EXPECT_TRUE(ReadBack(after).ok());
    EXPECT_TRUE(ReadBack(lost1).IsCorruption());  // seq check: never the new record's bytes

    vlog_.reset();
    OpenLog();
    EXPECT_TRUE(ReadBack(kept).ok());
    EXPECT_TRUE(ReadBack(after).ok());
    EXPECT_TRUE(ReadBack(lost2).IsCorruption());
    EXPECT_EQ(CountRecords(seg), 2);
    vlog_.reset();
  }
}

// A record discarded while still in the append buffer stops counting once:
// when the buffer is written (it is garbage in the file), or with the whole
// buffer when a failed write drops it. Releasing it at once, as Discard
// did, and again with the dropped buffer counted it twice (live bytes too
// low: GC deletes a segment whose count reaches zero).
TEST_F(ValueLogFaultTest, DiscardedBufferedRecordStopsCountingOnce) {
  for (bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "failed write" : "write");
    OpenLog();
    Written kept = Put(Stream::kHot, 1, 0, 2000);
    ASSERT_TRUE(vlog_->Flush().ok());
    const uint32_t seg = kept.ptr.segment;
    auto live = [&] {
      for (const SegmentInfo& i : vlog_->Segments()) {
        if (i.id == seg) return i.live_bytes;
      }
      ADD_FAILURE() << "no segment " << seg;
      return uint64_t{0};
    };
    Written gone = Put(Stream::kHot, 1, 1, 3000);
    Written other = Put(Stream::kHot, 1, 2, 3000);
    const uint64_t k = kept.ptr.record_size(), g = gone.ptr.record_size(),
                   o = other.ptr.record_size();
    ASSERT_EQ(live(), k + g + o);
    vlog_->Discard(gone.ptr, gone.inode, gone.block);
    EXPECT_EQ(live(), k + g + o);  // still buffered: decided by the write
    env_.fail_writes = fail;
    Status st = vlog_->Flush();
    env_.fail_writes = false;
    EXPECT_EQ(st.ok(), !fail) << st.ToString();
    EXPECT_EQ(live(), fail ? k : k + o);
    // A record in the file stops counting at once.
    vlog_->Discard(kept.ptr, kept.inode, kept.block);
    EXPECT_EQ(live(), fail ? 0 : o);
    if (fail) {  // a dropped record is gone: nothing to take back
      Written more = Put(Stream::kHot, 1, 3, 500);
      ASSERT_TRUE(vlog_->Flush().ok());
      vlog_->Discard(other.ptr, other.inode, other.block);
      EXPECT_EQ(live(), more.ptr.record_size());
    }
    vlog_.reset();
    std::filesystem::remove_all(dir_);
  }
}

// A large flush writes in two parts (whole blocks, then the partial last
// one); a failure of either drops the flush's records and truncates the
// file back, and the log goes on from the partly written block it kept.
TEST_F(ValueLogFaultTest, FailedPartOfALargeFlushKeepsTheLogUsable) {
  for (int nth : {1, 2}) {
    SCOPED_TRACE("failing write " + std::to_string(nth));
    options_.direct_writes = true;
    OpenLog(4 << 20);
    Written kept = Put(Stream::kHot, 1, 0, 1234);  // the flushed end is mid-block
    ASSERT_TRUE(vlog_->Flush().ok());
    const uint32_t seg = kept.ptr.segment;
    const uint64_t good_size = kept.ptr.offset + kept.ptr.record_size();
    std::vector<Written> lost;
    for (int i = 0; i < 5; ++i) lost.push_back(Put(Stream::kHot, 2, i, 50000 + i));
    env_.fail_nth = nth;
    Status st = vlog_->Flush();
    EXPECT_EQ(st.err(), ENOSPC) << st.ToString();
    EXPECT_EQ(env_.fail_nth, 0);  // the flush made at least nth writes
    env_.fail_nth = 0;
    EXPECT_EQ(FileSize(seg), good_size);
    for (const Written& w : lost) EXPECT_TRUE(ReadBack(w).IsCorruption());
    EXPECT_TRUE(ReadBack(kept).ok());

    std::vector<Written> after;
    for (int i = 0; i < 5; ++i) after.push_back(Put(Stream::kHot, 3, i, 40000 + 3 * i));
    ASSERT_TRUE(vlog_->Sync().ok());
    EXPECT_EQ(after[0].ptr.offset, good_size);
    for (const Written& w : after) EXPECT_TRUE(ReadBack(w).ok());
    vlog_.reset();
    OpenLog();
    EXPECT_TRUE(ReadBack(kept).ok());
    for (const Written& w : after) EXPECT_TRUE(ReadBack(w).ok());
    EXPECT_EQ(CountRecords(seg), 6);
    vlog_.reset();
    std::filesystem::remove_all(dir_);
  }
}

// A checkpoint's heads must not lie past records written after them. Taken
// before a flush that then fails, a head does: the dropped records' offsets
// are written again. SyncHeads takes each head after its stream's flush.
TEST_F(ValueLogFaultTest, SyncHeadsNeverPointPastRecordsWrittenAfterThem) {
  OpenLog();
  Written hot = Put(Stream::kHot, 1, 0, 1000);
  ASSERT_TRUE(vlog_->Flush(MaskOf(Stream::kHot)).ok());  // only the cold flush fails
  Written dropped = Put(Stream::kCold, 2, 0, 3000);
  const std::vector<StreamHead> early = vlog_->Heads();  // what Heads() then Sync() would claim
  env_.fail_writes = true;
  std::vector<StreamHead> heads;
  EXPECT_EQ(vlog_->SyncHeads(&heads).err(), ENOSPC);  // no heads to write down
  env_.fail_writes = false;
  Written later = Put(Stream::kCold, 2, 1, 500);  // at the dropped record's offset
  EXPECT_EQ(later.ptr.offset, dropped.ptr.offset);
  bool early_skips_it = false;
  for (const StreamHead& h : early) {
    if (h.segment == later.ptr.segment && h.offset > later.ptr.offset) early_skips_it = true;
  }
  EXPECT_TRUE(early_skips_it);  // the hazard this call exists for

  ASSERT_TRUE(vlog_->SyncHeads(&heads).ok());
  ASSERT_EQ(heads.size(), 2u);
  Written next = Put(Stream::kCold, 2, 2, 700);
  for (const StreamHead& h : heads) {
    const Written& last = h.segment == hot.ptr.segment ? hot : later;
    ASSERT_EQ(h.segment, last.ptr.segment);
    EXPECT_EQ(h.offset, last.ptr.offset + last.ptr.record_size());
    EXPECT_EQ(h.offset, FileSize(h.segment));  // written, and synced by the call
  }
  ASSERT_TRUE(vlog_->Flush().ok());
  std::vector<uint64_t> after;  // blocks a replay from the cold head finds
  for (const StreamHead& h : heads) {
    if (h.segment != next.ptr.segment) continue;
    ASSERT_TRUE(vlog_->ScanSegment(h.segment,
                                   [&](const BlockPtr&, const RecordHeader& r, std::string_view,
                                       const Status& st) {
                                     EXPECT_TRUE(st.ok()) << st.ToString();
                                     after.push_back(r.block);
                                     return true;
                                   },
                                   h.offset)
                    .ok());
  }
  EXPECT_EQ(after, std::vector<uint64_t>{2});
}

TEST_F(ValueLogFaultTest, EnospcWhenAppendFillsTheBuffer) {
  OpenLog();
  Written first = Put(Stream::kCold, 1, 0, 40000);
  env_.fail_writes = true;
  BlockPtr p;
  // Does not fit the 64 KiB buffer next to `first`: the flush fails.
  Status st = vlog_->Append(Stream::kCold, 1, 1, std::string(40000, 'z'), &p);
  EXPECT_EQ(st.err(), ENOSPC);
  env_.fail_writes = false;
  EXPECT_TRUE(ReadBack(first).IsCorruption());
  Written next = Put(Stream::kCold, 1, 2, 40000);
  ASSERT_TRUE(vlog_->Flush().ok());
  EXPECT_TRUE(ReadBack(next).ok());
}

TEST_F(ValueLogFaultTest, EnospcCreatingASegmentLeavesNoFile) {
  OpenLog();
  env_.fail_writes = true;
  BlockPtr p;
  EXPECT_EQ(vlog_->Append(Stream::kHot, 1, 0, "abc", &p).err(), ENOSPC);
  env_.fail_writes = false;
  std::vector<std::string> names;
  ASSERT_TRUE(Env::Default()->ListDir(dir_, &names).ok());
  EXPECT_TRUE(names.empty());
  EXPECT_TRUE(vlog_->Segments().empty());
  Written w = Put(Stream::kHot, 1, 0, 100);
  EXPECT_TRUE(ReadBack(w).ok());
}

TEST_F(ValueLogFaultTest, SyncSyncsWrittenSegmentsAndTheDirectory) {
  OpenLog();
  Put(Stream::kHot, 1, 0, 100);
  Put(Stream::kCold, 1, 1, 100);
  ASSERT_TRUE(vlog_->Sync().ok());
  EXPECT_EQ(env_.syncs.load(), 2);
  EXPECT_EQ(env_.dir_syncs.load(), 1);
  ASSERT_TRUE(vlog_->Sync().ok());  // nothing new
  EXPECT_EQ(env_.syncs.load(), 2);
  EXPECT_EQ(env_.dir_syncs.load(), 1);
  Put(Stream::kHot, 1, 2, 100);
  ASSERT_TRUE(vlog_->Sync().ok());  // one segment written, none created
  EXPECT_EQ(env_.syncs.load(), 3);
  EXPECT_EQ(env_.dir_syncs.load(), 1);
}

// The kernel reports a write-back error to one fdatasync only; a later one
// succeeds though the bytes never reached the disk. So the log keeps the
// first failure: no later Sync may declare those records durable.
TEST_F(ValueLogFaultTest, FailedSyncIsLatchedUntilReopen) {
  OpenLog();
  const Written before = Put(Stream::kHot, 1, 0, 100);
  ASSERT_TRUE(vlog_->Sync().ok());
  const Written lost = Put(Stream::kHot, 1, 1, 100);
  EXPECT_FALSE(vlog_->stats().sync_failed);
  env_.fail_sync = true;
  Status st = vlog_->Sync();
  env_.fail_sync = false;
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  EXPECT_TRUE(vlog_->stats().sync_failed);
  const int syncs = env_.syncs.load();
  // The disk "works" again, yet every sync keeps failing, also for records
  // appended after the failure and for SyncHeads and SyncAll.
  st = vlog_->Sync();
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  EXPECT_NE(st.ToString().find("mounted again"), std::string::npos) << st.ToString();
  const Written after = Put(Stream::kHot, 1, 2, 100);
  EXPECT_EQ(vlog_->Sync().err(), EIO);
  std::vector<StreamHead> heads;
  EXPECT_EQ(vlog_->SyncHeads(&heads).err(), EIO);
  EXPECT_EQ(vlog_->SyncAll().err(), EIO);
  EXPECT_EQ(env_.syncs.load(), syncs) << "a retried fdatasync could report lost bytes as durable";
  // Reads are unaffected; a new open starts clean.
  EXPECT_TRUE(ReadBack(before).ok());
  EXPECT_TRUE(ReadBack(lost).ok());
  EXPECT_TRUE(ReadBack(after).ok());
  OpenLog();
  EXPECT_FALSE(vlog_->stats().sync_failed);
  EXPECT_TRUE(vlog_->Sync().ok());
  EXPECT_TRUE(ReadBack(after).ok());
}

// After a crash, what the dead process wrote may be in the page cache only.
// SyncAll makes the segments of an earlier open durable (a power loss after
// it keeps them), where Sync, which syncs only what this process wrote,
// does not.
TEST(ValueLogDurabilityTest, SyncAllMakesAnEarlierOpensSegmentsDurable) {
  for (bool sync_all : {false, true}) {
    SCOPED_TRACE(sync_all ? "SyncAll" : "Sync");
    testing::TempDir tmp;
    FaultModel model(tmp.path() + "/scratch");
    model.set_real_syncs(false);
    FaultInjectionEnv env(Env::Default(), &model);
    Options o;
    o.env = &env;
    o.segment_size = 1 << 20;
    const std::string dir = tmp.path() + "/vlog";
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    model.Reset();  // the directory itself is durable
    BlockPtr p;
    {
      std::unique_ptr<ValueLog> v;
      ASSERT_TRUE(ValueLog::Open(o, dir, &v).ok());
      ASSERT_TRUE(v->Append(Stream::kHot, 1, 0, std::string(3000, 'r'), &p).ok());
      ASSERT_TRUE(v->Flush().ok());  // written, never synced: the process dies
    }
    {
      std::unique_ptr<ValueLog> v;  // the recovering process
      ASSERT_TRUE(ValueLog::Open(o, dir, &v).ok());
      ASSERT_TRUE((sync_all ? v->SyncAll() : v->Sync()).ok());
    }
    model.PowerLoss();
    ASSERT_TRUE(model.DropUnsyncedData().ok());
    std::unique_ptr<ValueLog> v;
    ASSERT_TRUE(ValueLog::Open(o, dir, &v).ok());
    std::string got(3000, '\0');
    EXPECT_EQ(v->Read(p, 1, 0, got.data()).ok(), sync_all);
  }
}

}  // namespace
}  // namespace sepfs::vlog
