// The GC relocation job against a fake in-memory index.
#include "vlog/gc_job.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "vlog/gc_picker.h"
#include "vlog/value_log.h"

namespace sepfs::vlog {
namespace {

using testing::Payload;
using Key = std::pair<uint64_t, uint64_t>;  // (inode, block)

// What the filesystem would keep: (inode, block) -> pointer, with the
// accounting the fs does on user writes (Release of the replaced pointer).
// Readers hold read_mu shared while they look up and read; Quiesce takes it
// exclusively.
class FakeIndex : public GcIndex {
 public:
  explicit FakeIndex(ValueLog** vlog) : vlog_(vlog) {}

  // Test hooks.
  std::function<void()> before_swap;                        // runs unlocked
  std::function<void()> before_quiesce_fn, after_quiesce_fn;
  Status swap_error;      // returned by SwapPointers (nothing installed)
  Status is_live_error;   // returned by IsLive
  bool skip_quiesce_fn = false;  // "crash" before the victim is deleted
  int is_live_calls = 0, swap_calls = 0, quiesce_calls = 0;
  std::shared_mutex read_mu;

  // A user write: the new pointer replaces the old one, which is released.
  void Set(Key k, const BlockPtr& p) {
    std::lock_guard lk(mu_);
    auto it = map_.find(k);
    if (it != map_.end()) (*vlog_)->Release(it->second);
    map_[k] = p;
  }
  // A user delete (truncate/unlink).
  void Erase(Key k) {
    std::lock_guard lk(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return;
    (*vlog_)->Release(it->second);
    map_.erase(it);
  }
  bool Get(Key k, BlockPtr* p) {
    std::lock_guard lk(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    *p = it->second;
    return true;
  }
  std::map<Key, BlockPtr> Snapshot() {
    std::lock_guard lk(mu_);
    return map_;
  }

  Status IsLive(uint64_t inode, uint64_t block, const BlockPtr& ptr, bool* live) override {
    std::lock_guard lk(mu_);
    ++is_live_calls;
    if (!is_live_error.ok()) return is_live_error;
    auto it = map_.find({inode, block});
    *live = it != map_.end() && it->second == ptr;
    return Status::OK();
  }
  Status SwapPointers(const std::vector<Relocation>& relocs, std::vector<bool>* swapped) override {
    if (before_swap) before_swap();
    std::lock_guard lk(mu_);
    ++swap_calls;
    if (!swap_error.ok()) return swap_error;
    swapped->assign(relocs.size(), false);
    for (size_t i = 0; i < relocs.size(); ++i) {
      auto it = map_.find({relocs[i].inode, relocs[i].block});
      if (it != map_.end() && it->second == relocs[i].from) {
        it->second = relocs[i].to;
        (*swapped)[i] = true;
      }
    }
    swap_batches.push_back(relocs);
    return Status::OK();
  }
  Status Quiesce(const std::function<Status()>& fn) override {
    std::unique_lock lk(read_mu);
    ++quiesce_calls;
    if (skip_quiesce_fn) return Status::IOError("injected crash before the deletion");
    if (before_quiesce_fn) before_quiesce_fn();
    Status st = fn();
    if (after_quiesce_fn) after_quiesce_fn();
    return st;
  }

  std::vector<std::vector<Relocation>> swap_batches;

 private:
  ValueLog** vlog_;
  std::mutex mu_;
  std::map<Key, BlockPtr> map_;
};

// Fails segment fdatasync while fail_sync is set, writes while fail_writes
// is, and writes past the segment header while fail_data_writes is.
class FaultEnv : public EnvWrapper {
 public:
  FaultEnv() : EnvWrapper(Env::Default()) {}
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> fail_writes{false};
  std::atomic<bool> fail_data_writes{false};

  Status OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) override {
    std::unique_ptr<File> f;
    SEPFS_RETURN_IF_ERROR(target()->OpenFile(p, m, &f));
    *out = std::make_unique<FaultFile>(this, std::move(f));
    return Status::OK();
  }

 private:
  class FaultFile : public FileWrapper {
   public:
    FaultFile(FaultEnv* env, std::unique_ptr<File> f) : FileWrapper(std::move(f)), env_(env) {}
    Status Write(uint64_t off, std::string_view data) override {
      if (env_->fail_writes || (env_->fail_data_writes && off >= kSegmentHeaderSize)) return Status::FromErrno(ENOSPC, target()->path() + ": injected");
      return target()->Write(off, data);
    }
    Status Sync() override {
      if (env_->fail_sync) return Status::FromErrno(EIO, target()->path() + ": fdatasync: injected");
      return target()->Sync();
    }

   private:
    FaultEnv* env_;
  };
};

// Time passes only when the job sleeps.
class FakeClock : public GcClock {
 public:
  uint64_t NowMicros() override { return now_us; }
  void SleepMicros(uint64_t us) override {
    now_us += us;
    slept_us += us;
    ++sleeps;
  }
  uint64_t now_us = 1000000, slept_us = 0;
  int sleeps = 0;
};

class GcJobTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenLog(); }

  void OpenLog() {
    vlog_.reset();
    raw_ = nullptr;
    options_.env = &env_;
    options_.segment_size = 256 << 10;
    options_.append_buffer_size = 32 << 10;
    Status st = ValueLog::Open(options_, dir_, &vlog_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    raw_ = vlog_.get();
  }
  // Reopens the log and rebuilds the live counts from the index, as a mount does.
  void Remount() {
    OpenLog();
    vlog_->ResetLive();
    for (const auto& [k, p] : index_.Snapshot()) vlog_->AddLive(p);
  }

  // A user write of (inode, block) to the hot stream.
  void Write(uint64_t inode, uint64_t block, size_t size, uint64_t version = 0) {
    std::string data = Payload(inode * 1000003 + block * 31 + version, size);
    BlockPtr p;
    Status st = vlog_->Append(Stream::kHot, inode, block, data, &p);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::lock_guard lk(model_mu_);  // model and index change together
    model_[{inode, block}] = data;
    index_.Set({inode, block}, p);
  }
  // The index's pointers into segment id, with their keys, by offset.
  std::vector<std::pair<BlockPtr, Key>> PointersByOffset(uint32_t id) {
    std::vector<std::pair<BlockPtr, Key>> out;
    for (const auto& [k, p] : index_.Snapshot()) {
      if (p.segment == id) out.emplace_back(p, k);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first.offset < b.first.offset; });
    return out;
  }
  void Delete(uint64_t inode, uint64_t block) {
    std::lock_guard lk(model_mu_);
    model_.erase({inode, block});
    index_.Erase({inode, block});
  }

  // Every pointer in the index reads back its latest data.
  void ExpectAllReadable() {
    auto snap = index_.Snapshot();
    std::lock_guard lk(model_mu_);
    ASSERT_EQ(snap.size(), model_.size());
    for (const auto& [k, p] : snap) {
      std::string buf(p.length, '\0');
      Status st = vlog_->Read(p, k.first, k.second, buf.data());
      ASSERT_TRUE(st.ok()) << k.first << "/" << k.second << ": " << st.ToString();
      ASSERT_EQ(buf, model_[k]) << k.first << "/" << k.second;
    }
  }
  // The vlog's live count of every segment equals the bytes the index references.
  void ExpectExactLiveCounts() {
    std::map<uint32_t, uint64_t> want;
    for (const auto& [k, p] : index_.Snapshot()) want[p.segment] += p.record_size();
    for (const SegmentInfo& s : vlog_->Segments()) {
      EXPECT_EQ(s.live_bytes, want[s.id]) << "segment " << s.id;
      want.erase(s.id);
    }
    EXPECT_TRUE(want.empty()) << "pointers into a missing segment " << want.begin()->first;
  }
  uint32_t PointersInto(uint32_t seg) {
    uint32_t n = 0;
    for (const auto& [k, p] : index_.Snapshot()) n += p.segment == seg;
    return n;
  }
  bool FileExists(uint32_t id) {
    struct stat st;
    return ::stat((dir_ + "/" + SegmentFileName(id)).c_str(), &st) == 0;
  }
  bool Listed(uint32_t id) {
    for (const SegmentInfo& s : vlog_->Segments()) {
      if (s.id == id) return true;
    }
    return false;
  }
  SegmentInfo Info(uint32_t id) {
    for (const SegmentInfo& s : vlog_->Segments()) {
      if (s.id == id) return s;
    }
    ADD_FAILURE() << "no segment " << id;
    return {};
  }
  // (inode, block) of every record in segment id, in file order.
  std::vector<Key> RecordsOf(uint32_t id) {
    std::vector<Key> out;
    Status st = vlog_->ScanSegment(id, [&](const BlockPtr&, const RecordHeader& h,
                                           std::string_view, const Status& rs) {
      EXPECT_TRUE(rs.ok()) << rs.ToString();
      out.emplace_back(h.inode, h.block);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  std::vector<uint32_t> SegmentsOf(Stream s) {
    std::vector<uint32_t> out;
    for (const SegmentInfo& i : vlog_->Segments()) {
      if (i.stream == s) out.push_back(i.id);
    }
    return out;
  }

  // Interleaved writes of 4 files into one hot segment, then overwrites and
  // deletes of some blocks (their old records become garbage), then seals
  // it. Returns the victim id.
  uint32_t FillVictim() {
    std::mt19937 rng(42);
    std::vector<Key> keys;
    for (uint64_t ino = 10; ino < 14; ++ino) {
      for (uint64_t b = 0; b < 12; ++b) keys.emplace_back(ino, b);
    }
    std::shuffle(keys.begin(), keys.end(), rng);
    for (const Key& k : keys) Write(k.first, k.second, 1000 + (k.second * 97) % 2000);
    BlockPtr first;
    EXPECT_TRUE(index_.Get(keys[0], &first));
    // Overwrite every 5th key (goes to the same hot segment), delete every 7th.
    for (size_t i = 0; i < keys.size(); i += 5) Write(keys[i].first, keys[i].second, 1500, 1);
    for (size_t i = 3; i < keys.size(); i += 7) Delete(keys[i].first, keys[i].second);
    EXPECT_TRUE(vlog_->SealStream(Stream::kHot).ok());
    EXPECT_TRUE(vlog_->Sync().ok());
    EXPECT_EQ(SegmentsOf(Stream::kHot).size(), 1u) << "the victim should be one segment";
    return first.segment;
  }

  FaultEnv env_;
  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/vlog";
  Options options_;
  std::unique_ptr<ValueLog> vlog_;
  ValueLog* raw_ = nullptr;
  FakeIndex index_{&raw_};
  std::mutex model_mu_;
  std::map<Key, std::string> model_;
  GcJobOptions opts_;
  GcJobStats stats_;
};

TEST_F(GcJobTest, LiveRecordsSurviveDeadOnesAreGone) {
  const uint32_t victim = FillVictim();
  const SegmentInfo before = Info(victim);
  const uint32_t live = PointersInto(victim);
  ASSERT_GT(live, 10u);
  ExpectExactLiveCounts();
  const std::vector<Key> victim_records = RecordsOf(victim);

  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(stats_.records_scanned, victim_records.size());
  EXPECT_EQ(stats_.bytes_scanned, before.size - kSegmentHeaderSize);
  EXPECT_EQ(stats_.live_records, live);
  EXPECT_EQ(stats_.records_relocated, live);
  EXPECT_EQ(stats_.records_lost_race, 0u);
  EXPECT_EQ(stats_.bytes_moved, before.live_bytes);
  EXPECT_EQ(stats_.bytes_freed, before.size);
  EXPECT_EQ(stats_.batches, 1u);
  EXPECT_EQ(stats_.seconds_throttled, 0.0);
  EXPECT_EQ(index_.quiesce_calls, 1);

  EXPECT_FALSE(FileExists(victim));
  EXPECT_FALSE(Listed(victim));
  EXPECT_EQ(vlog_->stats().segments_deleted, 1u);
  EXPECT_EQ(vlog_->stats().bytes_freed, before.size);
  EXPECT_EQ(PointersInto(victim), 0u);
  ExpectAllReadable();
  ExpectExactLiveCounts();

  // Only the live records were copied, to the cold stream, once each.
  std::vector<Key> copied;
  for (uint32_t id : SegmentsOf(Stream::kCold)) {
    auto r = RecordsOf(id);
    copied.insert(copied.end(), r.begin(), r.end());
  }
  std::vector<Key> want;
  for (const auto& [k, p] : index_.Snapshot()) want.push_back(k);
  std::sort(copied.begin(), copied.end());
  EXPECT_EQ(copied, want);
  for (uint32_t id : SegmentsOf(Stream::kCold)) EXPECT_EQ(Info(id).garbage_bytes, 0u);

  // Durable: after a reopen (a new mount) everything still reads back.
  ASSERT_TRUE(vlog_->Sync().ok());
  Remount();
  EXPECT_FALSE(Listed(victim));
  ExpectAllReadable();
}

TEST_F(GcJobTest, RelocatedRecordsAreInInodeBlockOrder) {
  const uint32_t victim = FillVictim();
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  auto cold = SegmentsOf(Stream::kCold);
  ASSERT_EQ(cold.size(), 1u);
  std::vector<Key> recs = RecordsOf(cold[0]);
  ASSERT_EQ(recs.size(), stats_.records_relocated);
  EXPECT_TRUE(std::is_sorted(recs.begin(), recs.end()));
  // A file's blocks are back to back: each pointer follows the previous one.
  auto snap = index_.Snapshot();
  for (auto it = snap.begin(), next = std::next(it); next != snap.end(); ++it, ++next) {
    EXPECT_EQ(uint64_t{next->second.offset}, it->second.offset + it->second.record_size());
  }
}

TEST_F(GcJobTest, OldSurvivorsGoToOldDest) {
  // Inode 1's records are written first, inode 2's last: with the age split
  // between them, 1 goes to old_dest and 2 to dest.
  for (uint64_t b = 0; b < 8; ++b) Write(1, b, 1000);
  for (uint64_t b = 0; b < 8; ++b) Write(2, b, 1000);
  for (uint64_t b = 0; b < 8; b += 2) Write(2, b, 1000, 1);  // garbage in the victim
  BlockPtr p1, p2;
  ASSERT_TRUE(index_.Get({1, 0}, &p1));
  ASSERT_TRUE(index_.Get({2, 1}, &p2));
  ASSERT_EQ(p1.segment, p2.segment);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  const uint64_t now = vlog_->LastSeq();
  opts_.dest = Stream::kCold;
  opts_.old_dest = Stream::kFrozen;
  opts_.old_after_seqs = now - p2.seq + 1;  // inode 2's surviving records are younger
  ASSERT_GE(now - p1.seq, opts_.old_after_seqs + 7);
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, p1.segment, opts_, &stats_).ok());
  std::set<uint64_t> cold_inodes, frozen_inodes;
  for (uint32_t id : SegmentsOf(Stream::kCold)) {
    for (const Key& k : RecordsOf(id)) cold_inodes.insert(k.first);
  }
  for (uint32_t id : SegmentsOf(Stream::kFrozen)) {
    for (const Key& k : RecordsOf(id)) frozen_inodes.insert(k.first);
  }
  EXPECT_EQ(frozen_inodes, std::set<uint64_t>{1});
  EXPECT_EQ(cold_inodes, std::set<uint64_t>{2});
  EXPECT_EQ(stats_.records_relocated, 8u + 8u);  // inode 2's rewrites are in the victim too
  ExpectAllReadable();
  ExpectExactLiveCounts();
  // A bad old_dest is refused like a bad dest.
  opts_.old_dest = static_cast<Stream>(kNumStreams);
  Write(3, 0, 1000);
  Write(3, 0, 1000, 1);
  BlockPtr p3;
  ASSERT_TRUE(index_.Get({3, 0}, &p3));
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_EQ(CollectSegment(vlog_.get(), &index_, p3.segment, opts_, &stats_).err(), EINVAL);
}

TEST_F(GcJobTest, SmallBatchesAreEachSortedAndBoundMemory) {
  const uint32_t victim = FillVictim();
  const uint32_t live = PointersInto(victim);
  opts_.batch_bytes = 8000;  // a few records per batch
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_EQ(stats_.records_relocated, live);
  EXPECT_GT(stats_.batches, 5u);
  EXPECT_EQ(index_.swap_batches.size(), stats_.batches);
  size_t total = 0;
  for (const auto& batch : index_.swap_batches) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(std::tie(batch[i - 1].inode, batch[i - 1].block),
                  std::tie(batch[i].inode, batch[i].block));
        EXPECT_EQ(batch[i].to.offset, batch[i - 1].to.offset + batch[i - 1].to.record_size());
      }
      EXPECT_EQ(batch[i].from.segment, victim);
      if (i + 1 < batch.size()) bytes += batch[i].from.record_size();
    }
    EXPECT_LT(bytes, opts_.batch_bytes);  // a batch closes at the first record past the limit
    total += batch.size();
  }
  EXPECT_EQ(total, live);
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, ConcurrentUserWriteWinsTheSwap) {
  const uint32_t victim = FillVictim();
  const uint32_t live = PointersInto(victim);
  std::vector<Key> in_victim;
  for (const auto& [k, p] : index_.Snapshot()) {
    if (p.segment == victim) in_victim.push_back(k);
  }
  // Between IsLive and SwapPointers: two blocks are rewritten by the user,
  // one is deleted.
  index_.before_swap = [&] {
    index_.before_swap = nullptr;
    Write(in_victim[0].first, in_victim[0].second, 700, 9);
    Write(in_victim[5].first, in_victim[5].second, 800, 9);
    Delete(in_victim[9].first, in_victim[9].second);
  };
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_EQ(stats_.live_records, live);
  EXPECT_EQ(stats_.records_lost_race, 3u);
  EXPECT_EQ(stats_.records_relocated, live - 3);
  EXPECT_FALSE(Listed(victim));

  BlockPtr p;
  ASSERT_TRUE(index_.Get(in_victim[0], &p));
  EXPECT_EQ(p.length, 700u);  // the user's pointer, not the GC copy
  ASSERT_TRUE(index_.Get(in_victim[5], &p));
  EXPECT_EQ(p.length, 800u);
  EXPECT_FALSE(index_.Get(in_victim[9], &p)) << "GC resurrected a deleted block";
  ExpectAllReadable();
  // The three losing copies were released: they are garbage in the cold segment.
  ExpectExactLiveCounts();
  auto cold = SegmentsOf(Stream::kCold);
  ASSERT_EQ(cold.size(), 1u);
  EXPECT_EQ(RecordsOf(cold[0]).size(), live);
  EXPECT_GT(Info(cold[0]).garbage_bytes, 0u);
}

TEST_F(GcJobTest, FailedSyncKeepsVictimAndPointers) {
  const uint32_t victim = FillVictim();
  const auto before = index_.Snapshot();
  env_.fail_sync = true;
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  env_.fail_sync = false;
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  EXPECT_EQ(index_.swap_calls, 0);  // pointers never moved
  EXPECT_EQ(index_.quiesce_calls, 0);
  EXPECT_TRUE(FileExists(victim));
  EXPECT_TRUE(Listed(victim));
  EXPECT_EQ(index_.Snapshot(), before);
  ExpectAllReadable();
  ExpectExactLiveCounts();  // the copies were released
  EXPECT_GT(stats_.bytes_moved, 0u);

  // A crash now (reopen without the copies' sync) still loses nothing, and
  // the collection succeeds on a retry.
  Remount();
  ExpectAllReadable();
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_FALSE(Listed(victim));
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, FailedWriteOfCopiesKeepsVictim) {
  const uint32_t victim = FillVictim();
  env_.fail_writes = true;
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  env_.fail_writes = false;
  EXPECT_EQ(st.err(), ENOSPC) << st.ToString();
  EXPECT_EQ(index_.swap_calls, 0);
  EXPECT_TRUE(Listed(victim));
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

// The append buffer of the copies fails to reach the file: the vlog drops
// those copies and takes their live bytes back itself; the job must not
// release them a second time (that would undercount the cold segment).
TEST_F(GcJobTest, FailedFlushOfCopiesIsNotReleasedTwice) {
  const uint32_t first = FillVictim();
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, first, opts_, &stats_).ok());
  auto cold = SegmentsOf(Stream::kCold);
  ASSERT_EQ(cold.size(), 1u);
  ASSERT_GT(Info(cold[0]).live_bytes, 0u);
  ASSERT_TRUE(Info(cold[0]).open);
  for (uint64_t b = 0; b < 60; ++b) Write(20, b, 2000);
  for (uint64_t b = 0; b < 60; b += 4) Delete(20, b);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  BlockPtr p;
  ASSERT_TRUE(index_.Get({20, 1}, &p));
  env_.fail_data_writes = true;
  Status st = CollectSegment(vlog_.get(), &index_, p.segment, opts_, &stats_);
  env_.fail_data_writes = false;
  EXPECT_EQ(st.err(), ENOSPC) << st.ToString();
  EXPECT_GE(stats_.bytes_moved, options_.append_buffer_size);  // a buffer was dropped
  EXPECT_EQ(vlog_->stats().checksum_errors, 0u);  // probing the copies is not corruption
  EXPECT_EQ(index_.swap_calls, 1);  // the first job's only
  EXPECT_TRUE(Listed(p.segment));
  ExpectAllReadable();
  ExpectExactLiveCounts();
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, p.segment, opts_, &stats_).ok());
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, FailedSwapKeepsVictimAndReleasesCopies) {
  const uint32_t victim = FillVictim();
  const auto before = index_.Snapshot();
  index_.swap_error = Status::IOError("leveldb write: injected");
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  EXPECT_EQ(index_.swap_calls, 1);
  EXPECT_EQ(index_.quiesce_calls, 0);
  EXPECT_TRUE(FileExists(victim));
  EXPECT_EQ(index_.Snapshot(), before);
  ExpectAllReadable();
  ExpectExactLiveCounts();
  for (uint32_t id : SegmentsOf(Stream::kCold)) EXPECT_EQ(Info(id).live_bytes, 0u);
  Remount();
  ExpectAllReadable();
}

TEST_F(GcJobTest, FailureInALaterBatchKeepsEarlierSwaps) {
  const uint32_t victim = FillVictim();
  opts_.batch_bytes = 8000;
  int swaps = 0;
  index_.before_swap = [&] {
    if (++swaps == 3) index_.swap_error = Status::IOError("injected");
  };
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  EXPECT_EQ(st.err(), EIO);
  EXPECT_EQ(stats_.batches, 3u);
  EXPECT_GT(stats_.records_relocated, 0u);
  EXPECT_GT(PointersInto(victim), 0u);
  EXPECT_TRUE(Listed(victim));
  ExpectAllReadable();
  ExpectExactLiveCounts();
  // Retry finishes the job.
  index_.swap_error = Status::OK();
  index_.before_swap = nullptr;
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_EQ(PointersInto(victim), 0u);
  EXPECT_FALSE(Listed(victim));
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, CrashAfterSwapBeforeDeleteIsCollectedAgain) {
  const uint32_t victim = FillVictim();
  const size_t records = RecordsOf(victim).size();
  index_.skip_quiesce_fn = true;
  EXPECT_FALSE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  index_.skip_quiesce_fn = false;
  EXPECT_TRUE(Listed(victim));
  EXPECT_EQ(PointersInto(victim), 0u);
  EXPECT_EQ(Info(victim).live_bytes, 0u);  // all garbage now
  Remount();
  ExpectAllReadable();
  ExpectExactLiveCounts();
  // The picker sees it as all garbage; the next job moves nothing.
  PickOptions po;
  po.policy = GcPolicy::kGreedy;
  EXPECT_EQ(PickVictims(vlog_->Segments(), po), std::vector<uint32_t>{victim});
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_EQ(stats_.live_records, 0u);
  EXPECT_EQ(stats_.bytes_moved, 0u);
  EXPECT_EQ(stats_.batches, 0u);
  // Its count is zero since the reopen, not by releases: it is read.
  EXPECT_EQ(stats_.collected_unread, 0u);
  EXPECT_EQ(stats_.records_scanned, records);
  EXPECT_FALSE(FileExists(victim));
  ExpectAllReadable();
}

// A victim whose live count is zero (every block in it overwritten or
// deleted: a batch delete) is deleted without being read: its records are
// overwritten with junk here, which a scan would report as damage.
TEST_F(GcJobTest, VictimWithNothingLiveIsDeletedUnread) {
  const uint32_t victim = FillVictim();
  Write(50, 0, 1000);  // a newer hot segment: the victim is not a stream's newest
  ASSERT_TRUE(vlog_->Sync().ok());
  for (const auto& [p, k] : PointersByOffset(victim)) Delete(k.first, k.second);
  const SegmentInfo before = Info(victim);
  ASSERT_EQ(before.live_bytes, 0u);
  ASSERT_TRUE(before.emptied);
  {
    int fd = ::open((dir_ + "/" + SegmentFileName(victim)).c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const std::string junk(before.size - kSegmentHeaderSize, '\x5a');
    ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), kSegmentHeaderSize),
              static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
  index_.is_live_calls = 0;
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(stats_.collected_unread, 1u);
  EXPECT_EQ(stats_.records_scanned, 0u);
  EXPECT_EQ(stats_.bytes_scanned, 0u);
  EXPECT_EQ(stats_.damaged_collected, 0u);
  EXPECT_EQ(index_.is_live_calls, 0);
  EXPECT_EQ(index_.quiesce_calls, 1);
  EXPECT_EQ(stats_.bytes_freed, before.size);
  EXPECT_FALSE(FileExists(victim));
  EXPECT_FALSE(Listed(victim));
  ExpectAllReadable();
  ExpectExactLiveCounts();

  // One live record left in a victim: it is read, and only the live count
  // decides (the scan and IsLive run as before).
  for (uint64_t b = 0; b < 5; ++b) Write(60, b, 1000);
  for (uint64_t b = 1; b < 5; ++b) Delete(60, b);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  BlockPtr left;
  ASSERT_TRUE(index_.Get({60, 0}, &left));
  const uint32_t next = left.segment;
  ASSERT_GT(Info(next).live_bytes, 0u);
  Status st2 = CollectSegment(vlog_.get(), &index_, next, opts_, &stats_);
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  EXPECT_EQ(stats_.collected_unread, 0u);
  EXPECT_GT(stats_.records_scanned, 0u);
  EXPECT_GT(index_.is_live_calls, 0);
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, QuiesceWrapsTheDeletion) {
  const uint32_t victim = FillVictim();
  bool existed_before = false, existed_after = true;
  index_.before_quiesce_fn = [&] { existed_before = FileExists(victim) && Listed(victim); };
  index_.after_quiesce_fn = [&] { existed_after = FileExists(victim) || Listed(victim); };
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  EXPECT_EQ(index_.quiesce_calls, 1);
  EXPECT_TRUE(existed_before);
  EXPECT_FALSE(existed_after);
}

TEST_F(GcJobTest, OpenSegmentIsRefused) {
  Write(1, 0, 1000);
  BlockPtr p;
  ASSERT_TRUE(index_.Get({1, 0}, &p));
  Status st = CollectSegment(vlog_.get(), &index_, p.segment, opts_, &stats_);
  EXPECT_EQ(st.err(), EBUSY) << st.ToString();
  EXPECT_EQ(index_.is_live_calls, 0);
  EXPECT_EQ(index_.quiesce_calls, 0);
  EXPECT_EQ(vlog_->DeleteSegment(p.segment).err(), EBUSY);
  EXPECT_TRUE(CollectSegment(vlog_.get(), &index_, 999, opts_, &stats_).IsNotFound());
  opts_.dest = static_cast<Stream>(9);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  EXPECT_EQ(CollectSegment(vlog_.get(), &index_, p.segment, opts_, &stats_).err(), EINVAL);
  ExpectAllReadable();
}

TEST_F(GcJobTest, IndexErrorAbortsAndKeepsVictim) {
  const uint32_t victim = FillVictim();
  index_.is_live_error = Status::IOError("leveldb get: injected");
  EXPECT_EQ(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).err(), EIO);
  EXPECT_EQ(index_.swap_calls, 0);
  EXPECT_TRUE(Listed(victim));
  index_.is_live_error = Status::OK();
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, CorruptVictimAbortsAndIsKept) {
  const uint32_t victim = FillVictim();
  // Flip a data byte of a live record in the middle of the victim.
  const std::vector<std::pair<BlockPtr, Key>> in_victim = PointersByOffset(victim);
  const auto [bad, bad_key] = in_victim[in_victim.size() / 2];
  vlog_.reset();
  {
    int fd = ::open((dir_ + "/" + SegmentFileName(victim)).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const off_t off = bad.offset + kRecordHeaderSize + 10;
    char c;
    ASSERT_EQ(::pread(fd, &c, 1, off), 1);
    c ^= 0x40;
    ASSERT_EQ(::pwrite(fd, &c, 1, off), 1);
    ::close(fd);
  }
  Remount();
  opts_.batch_bytes = 8000;  // some batches are relocated before the bad record
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_EQ(st.err(), EIO);
  EXPECT_NE(st.message().find("offset " + std::to_string(bad.offset)), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find(std::to_string(bad.record_size()) +
                              " live bytes are in damaged records"),
            std::string::npos)
      << st.ToString();
  // Every record but the flipped one was relocated, those behind it too.
  EXPECT_EQ(stats_.records_relocated, in_victim.size() - 1);
  EXPECT_EQ(index_.quiesce_calls, 0);
  EXPECT_TRUE(FileExists(victim));
  EXPECT_TRUE(Listed(victim));
  EXPECT_EQ(Info(victim).live_bytes, bad.record_size());
  ExpectExactLiveCounts();
  BlockPtr p;
  ASSERT_TRUE(index_.Get(bad_key, &p));
  EXPECT_EQ(p, bad);
  std::string buf(p.length, '\0');
  EXPECT_TRUE(vlog_->Read(p, bad_key.first, bad_key.second, buf.data()).IsCorruption());
  EXPECT_EQ(PointersInto(victim), 1u);
  Delete(bad_key.first, bad_key.second);  // what fsck would report and drop
  vlog_->Release(p);
  ExpectAllReadable();
  // Then nothing in it is live: the next job deletes it without reading it.
  st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(stats_.collected_unread, 1u);
  EXPECT_EQ(stats_.records_relocated, 0u);
  EXPECT_FALSE(FileExists(victim));
  ExpectExactLiveCounts();
}

// A damaged record of a deleted file in the middle of a segment, live
// records behind it: the scan goes on past the damage, relocates them all
// and collects the segment. The scan stopped at the damage, the job
// aborted, and the segment was excluded from GC for good (its space never
// regained) before.
TEST_F(GcJobTest, DamagedDeadRecordInTheMiddleIsPassedOver) {
  const uint32_t victim = FillVictim();
  Write(50, 0, 1000);  // a newer hot segment: the victim is not a stream's newest
  ASSERT_TRUE(vlog_->Sync().ok());
  const std::vector<std::pair<BlockPtr, Key>> in_victim = PointersByOffset(victim);
  ASSERT_GT(in_victim.size(), 10u);
  const auto [dead, dead_key] = in_victim[in_victim.size() / 3];
  Delete(dead_key.first, dead_key.second);  // garbage now
  const SegmentInfo before = Info(victim);
  vlog_.reset();
  {
    int fd = ::open((dir_ + "/" + SegmentFileName(victim)).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const std::string junk(100, '\x5a');  // over its header: even its length is lost
    ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), dead.offset), 100);
    ::close(fd);
  }
  Remount();
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(stats_.damaged_collected, 1u);
  EXPECT_EQ(stats_.records_relocated, in_victim.size() - 1);
  EXPECT_EQ(stats_.bytes_freed, before.size);
  EXPECT_FALSE(FileExists(victim));
  EXPECT_EQ(PointersInto(victim), 0u);
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

// Bytes that are not records after the last record of a sealed segment
// (appended to its file by something else, or a length extended with
// zeros): nothing live lies past them, so the job relocates the records
// before them and collects the segment. It failed with EIO every time and
// the space was never regained (a helper's probe).
TEST_F(GcJobTest, DamagedTailWithNothingLivePastItIsCollected) {
  const uint32_t victim = FillVictim();
  Write(50, 0, 1000);  // a newer hot segment: the victim is not a stream's newest
  ASSERT_TRUE(vlog_->Sync().ok());
  ASSERT_NE(SegmentsOf(Stream::kHot).back(), victim);
  const SegmentInfo before = Info(victim);
  const uint32_t live = PointersInto(victim);
  ASSERT_GT(live, 10u);
  vlog_.reset();
  {
    int fd = ::open((dir_ + "/" + SegmentFileName(victim)).c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    const std::string junk(5000, '\x5a');
    ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    ::close(fd);
  }
  Remount();
  ASSERT_EQ(Info(victim).size, before.size + 5000) << "the open kept the junk";
  Status st = CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(stats_.damaged_collected, 1u);
  EXPECT_EQ(stats_.records_relocated, live);
  EXPECT_EQ(stats_.bytes_freed, before.size + 5000);
  EXPECT_FALSE(FileExists(victim));
  EXPECT_FALSE(Listed(victim));
  EXPECT_EQ(PointersInto(victim), 0u);
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

TEST_F(GcJobTest, RateLimitSleepsByTheInjectedClock) {
  const uint32_t victim = FillVictim();
  FakeClock clock;
  opts_.clock = &clock;
  opts_.batch_bytes = 16000;
  opts_.max_bytes_per_sec = 100000;  // 100 kB/s
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, victim, opts_, &stats_).ok());
  const uint64_t io = stats_.bytes_scanned + stats_.bytes_moved;
  const double want = static_cast<double>(io) / 1e5;
  // Time only passes in the job's sleeps, and the job throttles after its
  // last batch, so it slept exactly the time the I/O was worth.
  EXPECT_GT(clock.sleeps, 1);
  EXPECT_NEAR(static_cast<double>(clock.slept_us) / 1e6, want, 1e-5);
  EXPECT_NEAR(stats_.seconds_throttled, want, 1e-5);
  EXPECT_NEAR(stats_.seconds, want, 1e-5);
  ExpectAllReadable();

  // Unlimited: no sleeps at all.
  FakeClock idle;
  opts_.clock = &idle;
  opts_.max_bytes_per_sec = 0;
  Write(50, 0, 3000);
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  BlockPtr p;
  ASSERT_TRUE(index_.Get({50, 0}, &p));
  ASSERT_TRUE(CollectSegment(vlog_.get(), &index_, p.segment, opts_, &stats_).ok());
  EXPECT_EQ(idle.sleeps, 0);
  EXPECT_EQ(stats_.seconds_throttled, 0.0);
}

// User writes and reads run while segments are collected; every read sees
// the latest bytes and nothing is lost or resurrected.
TEST_F(GcJobTest, ConcurrentWritesAndReadsDuringCollection) {
  options_.segment_size = 64 << 10;
  OpenLog();
  for (uint64_t ino = 1; ino <= 4; ++ino) {
    for (uint64_t b = 0; b < 40; ++b) Write(ino, b, 1500);
  }
  ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> read_errors{0}, reads{0};
  std::thread writer([&] {
    std::mt19937 rng(7);
    for (uint64_t v = 1; !stop; ++v) {
      const uint64_t ino = 1 + rng() % 4, b = rng() % 40;
      if (rng() % 10 == 0) {
        Delete(ino, b);
      } else {
        Write(ino, b, 500 + rng() % 2000, v);
      }
    }
  });
  std::thread reader([&] {
    std::mt19937 rng(8);
    while (!stop) {
      std::this_thread::yield();  // let Quiesce in
      const Key k{1 + rng() % 4, rng() % 40};
      std::shared_lock lk(index_.read_mu);
      BlockPtr p;
      std::string want;
      {
        std::lock_guard ml(model_mu_);
        if (!index_.Get(k, &p)) continue;
        want = model_[k];
      }
      std::string buf(p.length, '\0');
      Status st = vlog_->Read(p, k.first, k.second, buf.data());
      ++reads;
      if (!st.ok() || buf != want) ++read_errors;
    }
  });
  PickOptions po;
  po.policy = GcPolicy::kGreedy;
  po.min_garbage_ratio = 0.0;
  po.max_victims = 1;
  int collected = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((collected < 10 || reads < 1000) && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(vlog_->SealStream(Stream::kHot).ok());
    auto victims = PickVictims(vlog_->Segments(), po);
    if (victims.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    opts_.batch_bytes = 20000;
    Status st = CollectSegment(vlog_.get(), &index_, victims[0], opts_, &stats_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ++collected;
  }
  stop = true;
  writer.join();
  reader.join();
  EXPECT_GE(collected, 10);
  EXPECT_GE(reads, 1000);
  EXPECT_EQ(read_errors, 0);
  ExpectAllReadable();
  ExpectExactLiveCounts();
}

}  // namespace
}  // namespace sepfs::vlog
