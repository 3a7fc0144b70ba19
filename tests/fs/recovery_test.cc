// Crash recovery of the fs core: the live-count journal and the vLog head
// checkpoint (fs/live_journal.h, fs/recovery.cc). Power-loss cases that need
// the fault model are in tests/crash/crash_test.cc.
#include <fcntl.h>
#include <linux/falloc.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fs/live_journal.h"
#include "fs_test_util.h"
#include "kvstore/schema.h"
#include "vlog/format.h"

namespace sepfs::fs::testing {
namespace {

TEST(LiveJournalCodec, RoundTripsAndRejectsBadInput) {
  const std::vector<SegmentDelta> deltas = {{3, -4096, 0}, {9, 1 << 20, 123456789}};
  std::vector<SegmentDelta> got;
  std::vector<uint64_t> owners;
  ASSERT_OK(DecodeJournalEntry(EncodeJournalEntry(deltas), &got, &owners));
  EXPECT_EQ(got, deltas);
  EXPECT_TRUE(owners.empty());
  ASSERT_OK(DecodeJournalEntry(EncodeJournalEntry(deltas, {5, 1ull << 40}), &got, &owners));
  EXPECT_EQ(got, deltas);
  EXPECT_EQ(owners, (std::vector<uint64_t>{5, 1ull << 40}));
  EXPECT_FALSE(DecodeJournalEntry(EncodeJournalEntry(deltas, {5}) + "x", &got).ok());
  std::string raw = EncodeJournalEntry(deltas);
  EXPECT_FALSE(DecodeJournalEntry(raw.substr(0, raw.size() - 1), &got).ok());
  raw[0] = 2;
  EXPECT_FALSE(DecodeJournalEntry(raw, &got).ok());
  EXPECT_FALSE(DecodeJournalEntry("", &got).ok());

  const VlogHeads heads{17, {{16, 4096}, {17, 65}}};
  VlogHeads h;
  ASSERT_OK(DecodeVlogHeads(EncodeVlogHeads(heads), &h));
  EXPECT_EQ(h, heads);
  ASSERT_OK(DecodeVlogHeads(EncodeVlogHeads(VlogHeads{}), &h));
  EXPECT_EQ(h, VlogHeads{});
  EXPECT_FALSE(DecodeVlogHeads(std::string(1, 1), &h).ok());
  EXPECT_FALSE(DecodeVlogHeads(EncodeVlogHeads(heads) + "x", &h).ok());
}

TEST(LiveJournal, EntriesCountUntilACheckpointFoldsThem) {
  LiveJournal j({{1, 1000}}, {5});
  kv::Batch b;
  const vlog::BlockPtr old_ptr{1, 64, 452, 1}, new_ptr{2, 64, 100, 9};
  const std::vector<uint64_t> owners = {7, 3, 7};
  LiveJournal::Entry e = j.Note(&b, std::vector<vlog::BlockPtr>{new_ptr},
                                std::vector<vlog::BlockPtr>{old_ptr}, owners);
  EXPECT_EQ(e.owners, (std::vector<uint64_t>{3, 7}));
  EXPECT_EQ(e.n, 6u);  // after the highest entry already on disk
  ASSERT_EQ(e.deltas.size(), 2u);
  EXPECT_EQ(e.deltas[0], (SegmentDelta{1, -500, 0}));
  EXPECT_EQ(e.deltas[1], (SegmentDelta{2, 148, 64 + 148}));
  EXPECT_EQ(j.live(), (std::map<uint32_t, uint64_t>{{1, 1000}}));  // not committed yet
  j.Commit(e);
  EXPECT_EQ(j.live(), (std::map<uint32_t, uint64_t>{{1, 500}, {2, 148}}));
  EXPECT_EQ(j.entries_since_checkpoint(), 2u);
  // Nothing changed: no entry.
  EXPECT_EQ(j.Note(&b, {}, {}, owners).n, 0u);
  kv::Batch cp;
  const size_t folded = j.PutCheckpoint(&cp, {}, VlogHeads{2, {}});
  EXPECT_EQ(folded, 2u);
  j.CheckpointWritten(folded);
  EXPECT_EQ(j.entries_since_checkpoint(), 0u);
  EXPECT_EQ(j.live(), (std::map<uint32_t, uint64_t>{{1, 500}, {2, 148}}));
}

class RecoveryTest : public FsTest {
 protected:
  uint32_t block_size() const override { return 8192; }

  std::map<uint32_t, uint64_t> Live() {
    std::map<uint32_t, uint64_t> m;
    for (const auto& s : fs_->store()->vlog()->Segments()) {
      if (s.live_bytes > 0) m[s.id] = s.live_bytes;
    }
    return m;
  }
};

// The mount after a crash reads the journal entries and vLog records written
// since the last checkpoint, not every block pointer, and ends with counts
// that equal a recount (fsck compares them).
TEST_F(RecoveryTest, UncleanMountReadsOnlyWhatFollowsTheCheckpoint) {
  const uint32_t bs = block_size();
  CloseFs();
  InCrashingChild([&](Filesystem* fs) -> int {
    for (int i = 0; i < 100; i++) {  // 300 block pointers before the checkpoint
      kv::InodeRecord r;
      if (!fs->Mknod({}, kRoot, "old" + std::to_string(i), S_IFREG | 0644, 0, &r).ok()) return 1;
      if (!fs->Write(r.ino, 0, Payload(i, 3 * bs)).ok() || !fs->Flush(r.ino).ok()) return 2;
    }
    if (!fs->Checkpoint().ok()) return 3;
    for (int i = 0; i < 5; i++) {  // 10 records after it
      kv::InodeRecord r;
      if (!fs->Mknod({}, kRoot, "new" + std::to_string(i), S_IFREG | 0644, 0, &r).ok()) return 4;
      if (!fs->Write(r.ino, 0, Payload(100 + i, 2 * bs)).ok() || !fs->Flush(r.ino).ok()) return 5;
    }
    kv::InodeRecord r;
    if (!fs->Lookup(kRoot, "old0", &r).ok()) return 6;
    if (!fs->Write(r.ino, 0, Payload(500, 100)).ok() || !fs->Flush(r.ino).ok()) return 7;
    if (!fs->Unlink(kRoot, "old1").ok()) return 8;  // its pointers go with the inode
    return 0;
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const RecoveryReport& rep = fs_->recovery();
  EXPECT_TRUE(rep.unclean);
  EXPECT_FALSE(rep.full_recount);
  EXPECT_EQ(rep.pointers_checked, 0u);
  EXPECT_EQ(rep.records_scanned, 11u);
  EXPECT_GE(rep.journal_entries, 6u);  // 5 new files, the overwrite
  EXPECT_LE(rep.journal_entries, 8u);  // + the unlinked file's reclaim, at most
  EXPECT_EQ(rep.pointers_replayed, 0u);
  kv::InodeRecord r;
  ASSERT_OK(fs_->Lookup(kRoot, "old0", &r));
  std::string want = Payload(0, 3 * bs);
  want.replace(0, 100, Payload(500, 100));
  EXPECT_TRUE(ReadAll(r.ino) == want);
  ASSERT_OK(fs_->Lookup(kRoot, "new4", &r));
  EXPECT_TRUE(ReadAll(r.ino) == Payload(104, 2 * bs));
  EXPECT_ERRNO(fs_->Lookup(kRoot, "old1", &r), ENOENT);
  const auto after_crash = Live();
  ExpectFsckClean();  // counters == recount
  EXPECT_EQ(Live(), after_crash);
  // The mount wrote a checkpoint: a second crash has nothing to read.
  CloseFs();
  InCrashingChild([](Filesystem*) { return 0; });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(fs_->recovery().records_scanned, 0u);
  EXPECT_EQ(fs_->recovery().journal_entries, 0u);
  EXPECT_EQ(Live(), after_crash);
}

// A crash while creating a segment leaves its file shorter than a header;
// the next open removes it, and the checkpoint written after that names its
// id as the highest. That id must never be handed out again: replay takes
// every id up to the checkpoint's highest for a segment sealed before it.
TEST_F(RecoveryTest, RemovedUnfinishedSegmentIdIsNeverReused) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 3000)));
  ASSERT_OK(fs_->Flush(f));
  uint32_t max_id = 0;
  for (const auto& s : fs_->store()->vlog()->Segments()) max_id = std::max(max_id, s.id);
  CloseFs();
  const uint32_t unfinished = max_id + 1;
  std::ofstream(VlogDir(store_dir_) + "/" + vlog::SegmentFileName(unfinished)) << "VSEG";
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));  // removes it
  Reopen();  // a clean checkpoint in between; the file is gone now
  const uint64_t g = Create(kRoot, "g");
  ASSERT_OK(fs_->Write(g, 0, Payload(2, 3000)));
  ASSERT_OK(fs_->Flush(g));
  for (const auto& s : fs_->store()->vlog()->Segments()) EXPECT_NE(s.id, unfinished);
  EXPECT_TRUE(ReadAll(f) == Payload(1, 3000));
  EXPECT_TRUE(ReadAll(g) == Payload(2, 3000));
  ExpectFsckClean();
}

// A segment file taken away from a cleanly closed store: the open says how
// many pointers name it in one line (not a line per pointer), keeps them
// (a restored file serves them again), and their reads fail with EIO.
TEST_F(RecoveryTest, MissingSegmentIsReportedOnceAndItsBlocksFail) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 40 * block_size())));
  ASSERT_OK(fs_->Flush(f));
  const auto live = Live();
  ASSERT_EQ(live.size(), 1u);
  const uint32_t id = live.begin()->first;
  CloseFs();
  const std::string path = VlogDir(store_dir_) + "/" + vlog::SegmentFileName(id);
  const std::string kept = store_dir_ + "/kept.vlog";
  ASSERT_EQ(::rename(path.c_str(), kept.c_str()), 0);
  ::testing::internal::CaptureStderr();
  Status st = Filesystem::Open(store_dir_, fs_options(), &fs_);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_OK(st);
  const std::string line = "40 block pointers name segment " + std::to_string(id) +
                           ", whose file is missing";
  EXPECT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find("unknown"), std::string::npos) << log;
  std::string got;
  EXPECT_ERRNO(fs_->Read(f, 0, block_size(), &got), EIO);
  CloseFs();
  // Every open without the file says so again.
  ::testing::internal::CaptureStderr();
  st = Filesystem::Open(store_dir_, fs_options(), &fs_);
  const std::string again = ::testing::internal::GetCapturedStderr();
  ASSERT_OK(st);
  EXPECT_NE(again.find(line), std::string::npos) << again;
  CloseFs();
  // Put back, the file is served and counted again.
  ASSERT_EQ(::rename(kept.c_str(), path.c_str()), 0);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == Payload(1, 40 * block_size()));
  ExpectFsckClean();
}

// Segments the last checkpoint declared durable, cut short or removed while
// the store was not cleanly unmounted, are damaged, not lost in the crash:
// fsck reports errors (not notes), and the mount keeps the pointers, so
// their blocks fail with EIO instead of reading as zeros.
TEST_F(RecoveryTest, DamageToCheckpointedSegmentsIsNotTakenForACrashLoss) {
  const uint64_t f = Create(kRoot, "f");
  const std::string data = Payload(3, 520 * block_size());  // segments 1 and 2
  ASSERT_OK(fs_->Write(f, 0, data));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_EQ(Live().size(), 2u);
  CloseFs();
  InCrashingChild([](Filesystem*) { return 0; });  // a mount that died idle
  const std::string first = VlogDir(store_dir_) + "/" + vlog::SegmentFileName(1);
  const std::string second = VlogDir(store_dir_) + "/" + vlog::SegmentFileName(2);
  ASSERT_EQ(::truncate(first.c_str(), 2 << 20), 0);
  ASSERT_EQ(::unlink(second.c_str()), 0);
  FsckReport rep;
  RunFsck(&rep);
  EXPECT_FALSE(rep.errors.empty());
  for (const auto& n : rep.notes) EXPECT_EQ(n.find("lost in a crash"), std::string::npos) << n;
  ::testing::internal::CaptureStderr();
  Status st = Filesystem::Open(store_dir_, fs_options(), &fs_);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_OK(st);
  EXPECT_EQ(fs_->recovery().pointers_dropped, 0u) << log;
  EXPECT_NE(log.find("name segment 2, whose file is missing"), std::string::npos) << log;
  std::string got;
  ASSERT_OK(fs_->Read(f, 0, block_size(), &got));
  EXPECT_TRUE(got == data.substr(0, block_size()));
  EXPECT_ERRNO(fs_->Read(f, 300 * block_size(), block_size(), &got), EIO);  // cut off
  EXPECT_ERRNO(fs_->Read(f, 515 * block_size(), block_size(), &got), EIO);  // removed
}

// fsck opens the store like a mount, which removes an unfinished segment
// file; the report says so.
TEST_F(RecoveryTest, FsckNotesAnUnfinishedSegmentItRemoved) {
  CloseFs();
  const std::string path = VlogDir(store_dir_) + "/" + vlog::SegmentFileName(77);
  std::ofstream(path) << "VSEG";
  FsckReport rep;
  RunFsck(&rep);
  EXPECT_TRUE(rep.errors.empty());
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("removed 1 unfinished segment"), std::string::npos) << rep.notes[0];
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
}

// Only a read-write open removes such a file: a check, `sepfs stats` and
// a read-only mount leave the store as they found it.
TEST_F(RecoveryTest, ReadOnlyOpensLeaveAnUnfinishedSegmentInPlace) {
  CloseFs();
  const std::string path = VlogDir(store_dir_) + "/" + vlog::SegmentFileName(77);
  std::ofstream(path) << "VSEG";
  StoreOptions so;
  so.read_only = true;
  FsckReport rep;
  RunFsck(&rep, so);
  EXPECT_TRUE(rep.errors.empty());
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("1 unfinished segment"), std::string::npos) << rep.notes[0];
  EXPECT_NE(rep.notes[0].find("next mount removes"), std::string::npos) << rep.notes[0];
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  FsOptions ro = fs_options();
  ro.read_only = true;
  ASSERT_OK(Filesystem::Open(store_dir_, ro, &fs_));
  fs_.reset();
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

// A record past the checkpoint whose pointer a later truncate, hole punch,
// unlink or overwrite removed must stay removed: the journal and pointers
// survived (a process crash), so nothing is replayed.
TEST_F(RecoveryTest, ReplayNeverBringsBackRemovedData) {
  const uint32_t bs = block_size();
  CloseFs();
  InCrashingChild([&](Filesystem* fs) -> int {
    if (!fs->Checkpoint().ok()) return 1;
    uint64_t ino[3];
    for (int i = 0; i < 3; i++) {
      kv::InodeRecord r;
      if (!fs->Mknod({}, kRoot, "f" + std::to_string(i), S_IFREG | 0644, 0, &r).ok()) return 2;
      ino[i] = r.ino;
      if (!fs->Write(r.ino, 0, Payload(i, 4 * bs)).ok() || !fs->Flush(r.ino).ok()) return 3;
    }
    SetAttrRequest req;
    req.set_size = true;
    req.size = bs;
    kv::InodeRecord r;
    if (!fs->SetAttr(ino[0], req, &r).ok()) return 4;  // blocks 1..3 of f0 go
    req.size = 3 * bs;
    if (!fs->SetAttr(ino[0], req, &r).ok()) return 5;  // and read as zeros
    if (!fs->Fallocate(ino[1], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs, 2 * bs).ok()) {
      return 6;
    }
    if (!fs->Write(ino[2], 0, Payload(9, bs)).ok() || !fs->Flush(ino[2]).ok()) return 7;
    if (!fs->Write(ino[2], 0, Payload(10, bs)).ok() || !fs->Flush(ino[2]).ok()) return 8;
    if (!fs->Unlink(kRoot, "f2").ok()) return 9;
    if (!fs->Mknod({}, kRoot, "f2", S_IFREG | 0644, 0, &r).ok()) return 10;
    return 0;
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_FALSE(fs_->recovery().full_recount);
  EXPECT_EQ(fs_->recovery().records_scanned, 14u);
  EXPECT_EQ(fs_->recovery().pointers_replayed, 0u);
  kv::InodeRecord r;
  ASSERT_OK(fs_->Lookup(kRoot, "f0", &r));
  EXPECT_TRUE(ReadAll(r.ino) == Payload(0, 4 * bs).substr(0, bs) + std::string(2 * bs, '\0'));
  ASSERT_OK(fs_->Lookup(kRoot, "f1", &r));
  std::string want = Payload(1, 4 * bs);
  std::fill(want.begin() + bs, want.begin() + 3 * bs, '\0');
  EXPECT_TRUE(ReadAll(r.ino) == want);
  ASSERT_OK(fs_->Lookup(kRoot, "f2", &r));
  EXPECT_EQ(r.size, 0u);
  ExpectFsckClean();
}

// A size never reaches the LSM ahead of its data. A batch that writes the
// record of a file whose last writes are still in memory (the kernel's
// SETATTR of the times at close, a chmod, an xattr, a link) stores the size
// of the data stored so far: after a killed daemon such files came back at
// their new size, all zeros. A file renamed over another has its data stored
// first, so the name keeps old or new contents (it kept zeros).
TEST_F(RecoveryTest, KilledDaemonLeavesNoSizeAheadOfItsData) {
  const uint32_t bs = block_size();
  const std::string old_data = Payload(30, 2 * bs + 10), new_data = Payload(31, 3 * bs + 20);
  const std::vector<std::string> names = {"times", "chmod", "xattr", "link"};
  CloseFs();
  InCrashingChild([&](Filesystem* fs) -> int {
    kv::InodeRecord r;
    if (!fs->Mknod({}, kRoot, "config", S_IFREG | 0644, 0, &r).ok()) return 1;
    if (!fs->Write(r.ino, 0, old_data).ok() || !fs->Fsync(r.ino, false).ok()) return 2;
    std::vector<uint64_t> inos;
    for (const std::string& name : names) {
      if (!fs->Mknod({}, kRoot, name, S_IFREG | 0644, 0, &r).ok()) return 3;
      if (!fs->Write(r.ino, 0, new_data).ok()) return 4;
      inos.push_back(r.ino);
    }
    SetAttrRequest times;
    times.set_mtime = times.set_atime = true;
    times.mtime = times.atime = kv::Timespec{1000, 0};
    if (!fs->SetAttr(inos[0], times, &r).ok()) return 5;
    SetAttrRequest chmod;
    chmod.set_mode = true;
    chmod.mode = 0600;
    if (!fs->SetAttr(inos[1], chmod, &r).ok()) return 6;
    if (!fs->SetXattr(inos[2], "user.a", "1", 0).ok()) return 7;
    if (!fs->Link(inos[3], kRoot, "link2", &r).ok()) return 8;
    if (!fs->Mknod({}, kRoot, "config.tmp", S_IFREG | 0644, 0, &r).ok()) return 9;
    if (!fs->Write(r.ino, 0, new_data).ok()) return 10;
    if (!fs->Rename(kRoot, "config.tmp", kRoot, "config", 0).ok()) return 11;
    return 0;
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    kv::InodeRecord r;
    ASSERT_OK(fs_->Lookup(kRoot, name, &r));
    const std::string got = ReadAll(r.ino);
    EXPECT_TRUE(got.empty() || got == new_data) << got.size() << " bytes, not what was written";
  }
  kv::InodeRecord r;
  ASSERT_OK(fs_->Lookup(kRoot, "config", &r));
  EXPECT_TRUE(ReadAll(r.ino) == new_data);
  ExpectFsckClean();
}

// Old stores, and stores whose checkpoint repair dropped, have no
// checkpoint: the mount recounts every pointer once and writes one.
TEST_F(RecoveryTest, StoreWithoutCheckpointIsRecountedOnce) {
  WriteFile("f", Payload(1, 5 * block_size()));
  const auto live = Live();
  CloseFs();
  Damage([](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::CounterKey(kVlogHeadsCounter)); });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(fs_->recovery().full_recount);
  EXPECT_EQ(fs_->recovery().pointers_checked, 5u);
  EXPECT_EQ(Live(), live);
  Reopen();
  EXPECT_FALSE(fs_->recovery().full_recount);
  EXPECT_EQ(Live(), live);
  ExpectFsckClean();
}

// Binaries older than the checkpoint keep their counts under
// "segment_usage" alone, which every checkpoint deletes: finding it beside
// a checkpoint means one of them used the store since, and the checkpoint
// knows nothing of the segments it wrote (it would install zero for them,
// and GC would take them for garbage). The mount recounts.
TEST_F(RecoveryTest, CheckpointAnOlderBinaryLeftStaleIsRecounted) {
  const uint64_t f = WriteFile("f", Payload(4, 6 * block_size()));
  const auto live = Live();
  ASSERT_FALSE(live.empty());
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) {
    b->Put(kv::CounterKey(kSegmentUsageCounter), EncodeLiveCounts({}));
    b->Put(kv::CounterKey(kOldSegmentUsageCounter), EncodeLiveCounts(live));
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(fs_->recovery().full_recount);
  EXPECT_EQ(Live(), live);
  uint64_t n = 0;
  ASSERT_OK(fs_->RunGc(/*min_garbage_ratio=*/0, nullptr, &n));
  EXPECT_TRUE(ReadAll(f) == Payload(4, 6 * block_size()));
  Reopen();
  EXPECT_FALSE(fs_->recovery().full_recount);
  EXPECT_EQ(Live(), live);
  ExpectFsckClean();
}

// A journal entry that does not decode, or sums that go negative, are not
// trusted: the mount recounts, and fsck reports the damage beforehand.
TEST_F(RecoveryTest, DamagedJournalIsReportedAndRecounted) {
  const uint64_t f = WriteFile("f", Payload(2, 3 * block_size()));
  const auto live = Live();
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) {
    b->Put(kv::JournalKey(999), EncodeJournalEntry({{live.begin()->first, -(1 << 30), 0}}));
  });
  FsckReport rep;
  RunFsck(&rep);
  bool reported = false;
  for (const auto& e : rep.errors) reported |= e.find("counter") != std::string::npos;
  EXPECT_TRUE(reported);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(fs_->recovery().full_recount);
  EXPECT_EQ(Live(), live);
  EXPECT_TRUE(ReadAll(f) == Payload(2, 3 * block_size()));
  ExpectFsckClean();
}

}  // namespace
}  // namespace sepfs::fs::testing
