// Injected I/O errors (EIO, ENOSPC) in the vLog and in LevelDB: the error
// reaches the caller of the operation that did the I/O, nothing is left
// half done, and the store stays consistent (fsck clean after reopen,
// earlier fsync'd data intact).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <string>

#include "crash_util.h"

namespace sepfs::crashtest {
namespace {

using fs::Filesystem;
using fs::FsOptions;
using fs::testing::Payload;

class ErrorTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kRoot = Filesystem::kRootIno;

  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    fst_ = std::make_unique<FaultStore>(tmp_);
    fs::MkfsOptions mo;
    mo.block_size = 4096;
    mo.segment_size = 1ull << 20;
    ASSERT_OK(fs::Mkfs(fst_->dir(), mo));
    Open();
  }
  void TearDown() override {
    if (fs_) (void)fs_->Close();
    fs_.reset();
  }

  FsOptions Options() {
    FsOptions o;
    o.flush_interval_sec = 3600;
    o.gc = "off";
    o.prefetch_seq = o.prefetch_dir = false;
    o.data_cache_bytes = 0;
    o.store.append_buffer_size = 64 << 10;
    return fst_->FaultOptions(o);
  }
  void Open() { ASSERT_OK(Filesystem::Open(fst_->dir(), Options(), &fs_)); }
  // Clean close, fsck (no errors), reopen. After a failed LevelDB write the
  // metadata store refuses writes until reopened (see MetaStore::Write), and
  // after a failed vLog sync every sync fails (ValueLog::Sync), so the close
  // itself may then fail with EIO; the store must still be clean.
  void CloseFsckReopen(bool after_write_error = false) {
    fst_->model().ClearFailures();
    if (fs_) {
      Status st = fs_->Close();
      if (after_write_error && !st.ok()) {
        EXPECT_EQ(st.err(), EIO) << st.ToString();
      } else {
        EXPECT_OK(st);
      }
    }
    fs_.reset();
    model().Reset();  // a clean close: what is on disk now counts as durable
    EXPECT_EQ(fst_->FsckErrors(), "");
    Open();
  }
  // Power loss now, drop unsynced data, fsck, reopen.
  void CrashFsckReopen() {
    fst_->model().PowerLoss();
    fs_.reset();
    ASSERT_OK(fst_->model().DropUnsyncedData());
    EXPECT_EQ(fst_->FsckErrors(), "");
    Open();
  }

  uint64_t CreateOpen(uint64_t parent, const std::string& name) {
    kv::InodeRecord r;
    Status st = fs_->Mknod(caller_, parent, name, S_IFREG | 0644, 0, &r);
    EXPECT_OK(st) << name;
    fs_->Forget(r.ino, 1);
    EXPECT_OK(fs_->OpenFile(r.ino));
    return r.ino;
  }
  uint64_t InoOf(uint64_t parent, const std::string& name) {
    kv::InodeRecord r;
    Status st = fs_->Lookup(parent, name, &r);
    if (!st.ok()) return 0;
    fs_->Forget(r.ino, 1);
    return r.ino;
  }
  Status ReadAll(uint64_t ino, std::string* out) {
    kv::InodeRecord r;
    SEPFS_RETURN_IF_ERROR(fs_->GetAttr(ino, &r));
    return fs_->Read(ino, 0, r.size + 1, out);
  }
  std::string ReadOk(uint64_t ino) {
    std::string s;
    EXPECT_OK(ReadAll(ino, &s)) << "ino " << ino;
    return s;
  }
  // A file with durable content: created, written, fsync'd, released.
  uint64_t DurableFile(const std::string& name, const std::string& data) {
    uint64_t ino = CreateOpen(kRoot, name);
    EXPECT_OK(fs_->Write(ino, 0, data));
    EXPECT_OK(fs_->Fsync(ino, false));
    EXPECT_OK(fs_->Release(ino));
    return ino;
  }

  FaultModel& model() { return fst_->model(); }

  TempDir tmp_;
  std::unique_ptr<FaultStore> fst_;
  std::unique_ptr<Filesystem> fs_;
  fs::Caller caller_{1000, 1000};
};

// ---- vLog reads ---------------------------------------------------------------

TEST_F(ErrorTest, VlogReadEioFailsThatReadOnly) {
  const std::string a = Payload(1, 20000), b = Payload(2, 30000);
  DurableFile("a", a);
  DurableFile("b", b);
  CloseFsckReopen();  // nothing cached
  const uint64_t ia = InoOf(kRoot, "a"), ib = InoOf(kRoot, "b");
  ASSERT_NE(ia, 0u);
  ASSERT_NE(ib, 0u);
  model().FailNth(FaultOp::kRead, FaultScope::kVlog, 1, EIO);
  std::string got;
  EXPECT_ERRNO(ReadAll(ia, &got), EIO);
  EXPECT_EQ(model().injected(), 1u);
  EXPECT_EQ(ReadOk(ib), b);
  EXPECT_EQ(ReadOk(ia), a);  // the failure was transient
  EXPECT_GE(fs_->stats().read_eio.load(), 1u);
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

TEST_F(ErrorTest, VlogReadEioDuringPartialWriteMerge) {
  const std::string a = Payload(3, 10000);
  DurableFile("a", a);
  CloseFsckReopen();
  const uint64_t ia = InoOf(kRoot, "a");
  ASSERT_OK(fs_->OpenFile(ia));
  // A partial-block write must read the old block first; that read fails.
  model().FailNth(FaultOp::kRead, FaultScope::kVlog, 1, EIO);
  EXPECT_ERRNO(fs_->Write(ia, 100, "xyz"), EIO);
  EXPECT_OK(fs_->Fsync(ia, false));
  EXPECT_EQ(ReadOk(ia), a);  // nothing half applied
  ASSERT_OK(fs_->Write(ia, 100, "xyz"));
  std::string want = a;
  want.replace(100, 3, "xyz");
  EXPECT_OK(fs_->Fsync(ia, false));
  EXPECT_OK(fs_->Release(ia));
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), want);
}

// ---- vLog writes and syncs -----------------------------------------------------

TEST_F(ErrorTest, VlogEnospcReachesFsyncAndStoreStaysConsistent) {
  const std::string a = Payload(4, 50000);
  DurableFile("a", a);
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(5, 40000)));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->Fsync(ib, false), ENOSPC);
  EXPECT_EQ(model().injected(), 1u);
  // The log stays appendable: new data after the error is durable.
  const std::string c = Payload(6, 12345);
  ASSERT_OK(fs_->Write(ib, 0, c));
  ASSERT_OK(fs_->Fsync(ib, false));
  std::string gotb = ReadOk(ib);
  ASSERT_GE(gotb.size(), c.size());
  EXPECT_EQ(gotb.substr(0, c.size()), c);
  EXPECT_OK(fs_->Release(ib));
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  gotb = ReadOk(InoOf(kRoot, "b"));
  ASSERT_GE(gotb.size(), c.size());
  EXPECT_EQ(gotb.substr(0, c.size()), c);
}

// A background flush (timer, memory pressure) that fails drops the dirty
// data; the error must reach the next fsync (once), never a false success.
TEST_F(ErrorTest, FailedBackgroundFlushIsReportedByTheNextFsync) {
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(31, 40000)));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->FlushAll(/*sync=*/false), ENOSPC);  // what the flusher runs
  EXPECT_EQ(model().injected(), 1u);
  model().ClearFailures();
  EXPECT_ERRNO(fs_->Fsync(ib, false), ENOSPC);
  EXPECT_OK(fs_->Fsync(ib, false));  // reported once, like errseq
  EXPECT_OK(fs_->Release(ib));
  CloseFsckReopen();
}

// The error of a failed background flush outlives the kernel's reference:
// once the last handle and lookup are gone the inode left the table and
// took its unreported error with it, so an fsync through a later open
// returned 0 for data that was dropped (a helper's audit).
TEST_F(ErrorTest, FailedBackgroundFlushOutlivesTheInodesEviction) {
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(32, 40000)));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->FlushAll(/*sync=*/false), ENOSPC);  // what the flusher runs
  model().ClearFailures();
  (void)fs_->Release(ib);  // no lookups, no handles: the kernel is done with it
  ASSERT_OK(fs_->OpenFile(ib));
  EXPECT_ERRNO(fs_->Fsync(ib, false), ENOSPC);
  EXPECT_OK(fs_->Fsync(ib, false));  // reported once
  EXPECT_OK(fs_->Release(ib));
  CloseFsckReopen();
}

// A failed flush drops its dirty data; the file must not keep the size
// only those bytes reached. It did (a helper's probe: a full disk under
// -o nowriteback, a segment directory made immutable): the next batch
// stored that size, and the file read back all zeros after a remount.
TEST_F(ErrorTest, FailedFlushLeavesTheFileAtItsStoredSize) {
  const std::string a = Payload(33, 10000);
  const uint64_t ia = DurableFile("a", a);
  ASSERT_OK(fs_->OpenFile(ia));
  ASSERT_OK(fs_->Write(ia, a.size(), Payload(34, 300000)));  // an append
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->FlushAll(/*sync=*/false), ENOSPC);  // what the flusher runs
  model().ClearFailures();
  kv::InodeRecord r;
  ASSERT_OK(fs_->GetAttr(ia, &r));
  EXPECT_EQ(r.size, a.size());
  EXPECT_EQ(ReadOk(ia), a);
  // A later batch for the inode (chmod, the kernel's times, a flush of
  // what it still holds) stores the size that is on disk.
  fs::SetAttrRequest chmod;
  chmod.set_mode = true;
  chmod.mode = 0600;
  ASSERT_OK(fs_->SetAttr(ia, chmod, &r));
  EXPECT_ERRNO(fs_->Fsync(ia, false), ENOSPC);  // the dropped write, reported once
  ASSERT_OK(fs_->Fsync(ia, false));
  EXPECT_OK(fs_->Release(ia));
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

TEST_F(ErrorTest, VlogEnospcReachesFlushAndRelease) {
  const std::string a = Payload(7, 9000);
  DurableFile("a", a);
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(8, 9000)));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->Flush(ib), ENOSPC);
  ASSERT_OK(fs_->Write(ib, 0, Payload(9, 9000)));
  kv::InodeRecord held;  // the kernel's reference, as after a FUSE lookup
  ASSERT_OK(fs_->Lookup(kRoot, "b", &held));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  EXPECT_ERRNO(fs_->Release(ib), ENOSPC);
  EXPECT_EQ(model().injected(), 2u);
  // Nobody waits for a FUSE release: its error waits for the next fsync of
  // the file (through a new open), and is reported once.
  ASSERT_OK(fs_->OpenFile(ib));
  EXPECT_ERRNO(fs_->Fsync(ib, true), ENOSPC);
  EXPECT_OK(fs_->Fsync(ib, true));
  EXPECT_OK(fs_->Release(ib));
  fs_->Forget(ib, 1);
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  std::string got;
  EXPECT_OK(ReadAll(InoOf(kRoot, "b"), &got));  // lost data reads as zeros, not EIO
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

TEST_F(ErrorTest, VlogSyncEioReachesFsync) {
  const std::string a = Payload(10, 7000);
  DurableFile("a", a);
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(11, 7000)));
  model().FailNth(FaultOp::kSync, FaultScope::kVlog, 1, EIO);
  EXPECT_ERRNO(fs_->Fsync(ib, true), EIO);
  EXPECT_OK(fs_->Release(ib));
  // The failure sticks (the disk may "work" again, but the bytes that
  // failed are not on it): no later fsync reports success until a remount.
  const uint64_t ic = CreateOpen(kRoot, "c");
  ASSERT_OK(fs_->Write(ic, 0, Payload(14, 7000)));
  EXPECT_ERRNO(fs_->Fsync(ic, true), EIO);
  EXPECT_OK(fs_->Release(ic));
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  // b's creation was never made durable (its fsync failed): absent, or
  // present and readable.
  if (const uint64_t b = InoOf(kRoot, "b"); b != 0) {
    std::string got;
    EXPECT_OK(ReadAll(b, &got));
  }
  const std::string d = Payload(15, 7000);
  const uint64_t id = CreateOpen(kRoot, "d");
  ASSERT_OK(fs_->Write(id, 0, d));
  EXPECT_OK(fs_->Fsync(id, true));
  EXPECT_OK(fs_->Release(id));
  EXPECT_EQ(ReadOk(id), d);
}

// A flush whose records reached the segment file but whose sync failed
// never references them: they count as garbage at once, or GC would never
// see that space as reclaimable.
TEST_F(ErrorTest, RecordsOfAFailedFlushAreGarbage) {
  const std::string a = Payload(12, 7000);
  DurableFile("a", a);
  const uint64_t ib = CreateOpen(kRoot, "b");
  const uint64_t live = fs_->store()->vlog()->LiveBytes();
  ASSERT_OK(fs_->Write(ib, 0, Payload(13, 7000)));
  model().FailNth(FaultOp::kSync, FaultScope::kVlog, 1, EIO);
  EXPECT_ERRNO(fs_->Fsync(ib, true), EIO);
  EXPECT_OK(fs_->Release(ib));
  EXPECT_EQ(fs_->store()->vlog()->LiveBytes(), live);
  CloseFsckReopen(/*after_write_error=*/true);  // the failed sync stays latched
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

// A truncate that fails (rewriting the shortened last block hits ENOSPC)
// changes nothing: data written but not yet flushed stays readable and
// reaches the disk at the next fsync.
TEST_F(ErrorTest, FailedTruncateKeepsUnflushedData) {
  const uint64_t ino = CreateOpen(kRoot, "f");
  const std::string flushed = Payload(20, 3 * 4096 + 100);
  ASSERT_OK(fs_->Write(ino, 0, flushed));
  ASSERT_OK(fs_->Fsync(ino, false));
  const std::string more = Payload(21, 5000);
  ASSERT_OK(fs_->Write(ino, flushed.size(), more));  // dirty only
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC);
  fs::SetAttrRequest s;
  s.set_size = true;
  // Cuts the flushed block 1, which is rewritten: a record, as its 2000
  // bytes are more than the inline limit (1 KiB with 4 KiB blocks).
  s.size = 4096 + 2000;
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->SetAttr(ino, s, &r), ENOSPC);
  EXPECT_EQ(model().injected(), 1u);
  model().ClearFailures();
  EXPECT_EQ(ReadOk(ino), flushed + more);
  ASSERT_OK(fs_->Fsync(ino, false));
  EXPECT_OK(fs_->Release(ino));
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "f")), flushed + more);
  // The same truncate, now without a fault, still works.
  const uint64_t f = InoOf(kRoot, "f");
  ASSERT_OK(fs_->OpenFile(f));
  ASSERT_OK(fs_->SetAttr(f, s, &r));
  EXPECT_EQ(ReadOk(f), flushed.substr(0, 4096 + 2000));
  EXPECT_OK(fs_->Release(f));
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "f")), flushed.substr(0, 4096 + 2000));
}

// A hole punch whose batch fails changes nothing in memory either: the
// dirty copy of a block it would have dropped, and the edges it would have
// zeroed, still read back as written (before the fix, the dirty block was
// dropped first, and the read showed the older flushed bytes).
TEST_F(ErrorTest, FailedPunchKeepsUnflushedData) {
  const uint64_t ino = CreateOpen(kRoot, "f");
  std::string want = Payload(24, 4 * 4096);
  ASSERT_OK(fs_->Write(ino, 0, want));
  ASSERT_OK(fs_->Fsync(ino, false));
  const std::string newer = Payload(25, 4096 + 400);  // block 1 whole, block 2 in part
  ASSERT_OK(fs_->Write(ino, 4096, newer));            // dirty only
  want.replace(4096, newer.size(), newer);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  // Edges in blocks 0 and 2, block 1 whole.
  EXPECT_ERRNO(fs_->Fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4000,
                              2 * 4096 + 100),
               EIO);
  EXPECT_EQ(model().injected(), 1u);
  model().ClearFailures();
  EXPECT_TRUE(ReadOk(ino) == want) << "a failed punch changed the file";
  kv::InodeRecord r;
  ASSERT_OK(fs_->GetAttr(ino, &r));
  EXPECT_EQ(r.blocks, 4u * 4096 / 512) << "st_blocks moved";
  // The metadata store refuses writes until reopened (see MetaStore::Write).
  EXPECT_ERRNO(fs_->Release(ino), EIO);
  CloseFsckReopen(/*after_write_error=*/true);
}

// A user's flush writes only the streams it appended to: a failing write of
// another stream's buffer (here the cold stream, where the collector's
// copies wait, on a full disk) neither fails the user's fsync nor drops its
// data.
TEST_F(ErrorTest, AnotherStreamsFailedWriteLeavesAFlushAlone) {
  vlog::ValueLog* vl = fs_->store()->vlog();
  vlog::BlockPtr copy;
  ASSERT_OK(vl->Append(vlog::Stream::kCold, 1u << 30, 0, Payload(40, 3000), &copy));
  model().FailNth(FaultOp::kWrite, FaultScope::kVlog, 1, ENOSPC, /*count=*/0,
                  vlog::SegmentFileName(copy.segment));
  const uint64_t ib = CreateOpen(kRoot, "b");
  const std::string b = Payload(41, 10000);
  ASSERT_OK(fs_->Write(ib, 0, b));
  EXPECT_OK(fs_->Fsync(ib, true));
  EXPECT_EQ(model().injected(), 0u);
  EXPECT_EQ(ReadOk(ib), b);
  // The cold buffer's own flush fails and drops it (never referenced).
  EXPECT_ERRNO(vl->Flush(), ENOSPC);
  EXPECT_EQ(model().injected(), 1u);
  EXPECT_OK(fs_->Release(ib));
  CloseFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "b")), b);
}

// Every vLog write of a long workload fails once in turn: each failure is
// reported to the caller and the store stays consistent.
TEST_F(ErrorTest, EveryVlogWriteFailsOnce) {
  const std::string a = Payload(12, 30000);
  DurableFile("a", a);
  for (int n = 1; n <= 6; n++) {
    SCOPED_TRACE("failing vLog write #" + std::to_string(n));
    const uint64_t ino = CreateOpen(kRoot, "w" + std::to_string(n));
    model().FailNth(FaultOp::kWrite, FaultScope::kVlog, n, ENOSPC);
    int errors = 0;
    for (int i = 0; i < 8; i++) {
      ASSERT_OK(fs_->Write(ino, i * 9000, Payload(100 + i, 9000)));
      Status st = fs_->Fsync(ino, false);
      if (!st.ok()) {
        EXPECT_ERRNO(st, ENOSPC);
        errors++;
      }
    }
    EXPECT_EQ(errors, 1);
    EXPECT_OK(fs_->Release(ino));
    model().ClearFailures();
    CloseFsckReopen();
  }
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

// ---- LevelDB writes and syncs ---------------------------------------------------

TEST_F(ErrorTest, LsmWriteErrorFailsRenameCleanly) {
  const std::string a = Payload(20, 5000), b = Payload(21, 6000);
  DurableFile("a", a);
  DurableFile("b", b);
  const uint64_t ia = InoOf(kRoot, "a"), ib = InoOf(kRoot, "b");
  EXPECT_EQ(fs_->StatsText().find("metadata writes"), std::string::npos);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Rename(kRoot, "a", kRoot, "b", 0), EIO);
  EXPECT_EQ(model().injected(), 1u);
  // sepfs stats says so, and what to do.
  const std::string stats = fs_->StatsText();
  EXPECT_NE(stats.find("metadata writes      refused: "), std::string::npos) << stats;
  EXPECT_NE(stats.find("remount to recover"), std::string::npos) << stats;
  EXPECT_EQ(InoOf(kRoot, "a"), ia);
  EXPECT_EQ(InoOf(kRoot, "b"), ib);
  EXPECT_EQ(ReadOk(ia), a);
  EXPECT_EQ(ReadOk(ib), b);
  CloseFsckReopen(/*after_write_error=*/true);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "b")), b);
}

TEST_F(ErrorTest, LsmWriteErrorFailsCreateAndUnlinkCleanly) {
  const std::string a = Payload(22, 5000);
  DurableFile("a", a);
  kv::InodeRecord r;
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, ENOSPC);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "new", S_IFREG | 0644, 0, &r), ENOSPC);
  EXPECT_EQ(InoOf(kRoot, "new"), 0u);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Unlink(kRoot, "a"), EIO);
  EXPECT_NE(InoOf(kRoot, "a"), 0u);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "dir", S_IFDIR | 0755, 0, &r), EIO);
  EXPECT_EQ(InoOf(kRoot, "dir"), 0u);
  CloseFsckReopen(/*after_write_error=*/true);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  EXPECT_EQ(InoOf(kRoot, "new"), 0u);
  EXPECT_EQ(InoOf(kRoot, "dir"), 0u);
}

// A failed LevelDB log append, then enough further writes to cross several
// 32 KiB log blocks, then recovery from that log. LevelDB's log::Writer
// advances its block offset even when the append failed, so records written
// afterwards are framed against the wrong 32 KiB block boundaries and
// recovery (paranoid_checks) fails with "bad record length" unless the
// metadata store stops accepting writes after a write error.
TEST_F(ErrorTest, LsmWriteErrorThenMoreWritesThenCleanReopen) {
  const std::string a = Payload(23, 5000);
  DurableFile("a", a);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Rename(kRoot, "a", kRoot, "a2", 0), EIO);
  int created = 0;
  for (int i = 0; i < 400; i++) {
    kv::InodeRecord r;
    Status st = fs_->Mknod(caller_, kRoot, "n" + std::to_string(i), S_IFREG | 0644, 0, &r);
    if (!st.ok()) break;  // refusing writes after the error is a fine answer
    fs_->Forget(r.ino, 1);
    created++;
  }
  CloseFsckReopen(/*after_write_error=*/true);  // no power loss: LevelDB replays its log at open
  ASSERT_TRUE(fs_);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  EXPECT_EQ(InoOf(kRoot, "a2"), 0u);
  if (created == 400) {
    EXPECT_NE(InoOf(kRoot, "n399"), 0u);
  }
}

// A truncate whose batch fails leaves the file as it was, after the next
// mount too: the shortened copy of the cut block it had already written to
// the vLog lies past the checkpoint (the failed LevelDB write kept the
// close from writing a clean one), and recovery used to install it, so the
// fsync'd bytes past the cut read as zeros (found by a helper audit).
TEST_F(ErrorTest, LsmWriteErrorFailsTruncateAndTheNextMountKeepsTheFile) {
  const std::string data = Payload(24, 3 * 4096 + 100);
  const uint64_t ino = DurableFile("f", data);
  ASSERT_OK(fs_->OpenFile(ino));
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  fs::SetAttrRequest s;
  s.set_size = true;
  s.size = 4096 + 2000;  // block 1 keeps 2000 bytes: a record, not inline
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->SetAttr(ino, s, &r), EIO);
  EXPECT_EQ(model().injected(), 1u);
  EXPECT_EQ(ReadOk(ino), data);
  (void)fs_->Release(ino);
  CloseFsckReopen(/*after_write_error=*/true);
  EXPECT_TRUE(fs_->recovery().unclean);
  EXPECT_EQ(fs_->recovery().pointers_replayed, 0u);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "f")), data);
}

// After a LevelDB write failed every later batch fails too, so a flush
// appends no record: recovery would install it at the next mount (it lies
// past the checkpoint the failed store could not write), and data a caller
// was told was not written would replace what it had fsync'd.
TEST_F(ErrorTest, WritesAfterAnLsmWriteErrorAreNeverReplayed) {
  const std::string data = Payload(25, 3 * 4096 + 100);
  const uint64_t ino = DurableFile("f", data);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Rename(kRoot, "f", kRoot, "g", 0), EIO);
  model().ClearFailures();
  ASSERT_OK(fs_->OpenFile(ino));
  ASSERT_OK(fs_->Write(ino, 0, Payload(26, 2 * 4096)));  // in memory
  EXPECT_ERRNO(fs_->Fsync(ino, false), EIO);
  (void)fs_->Release(ino);
  CloseFsckReopen(/*after_write_error=*/true);
  EXPECT_EQ(fs_->recovery().pointers_replayed, 0u);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "f")), data);
}

TEST_F(ErrorTest, LsmWriteErrorThenMoreWritesThenPowerLoss) {
  const std::string a = Payload(23, 5000);
  DurableFile("a", a);
  model().FailNth(FaultOp::kWrite, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Rename(kRoot, "a", kRoot, "a2", 0), EIO);
  for (int i = 0; i < 400; i++) {
    kv::InodeRecord r;
    Status st = fs_->Mknod(caller_, kRoot, "n" + std::to_string(i), S_IFREG | 0644, 0, &r);
    if (!st.ok()) break;
    fs_->Forget(r.ino, 1);
  }
  (void)fs_->FsyncDir(kRoot);
  CrashFsckReopen();  // recovery replays the log written after the failure
  ASSERT_TRUE(fs_);
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
  EXPECT_EQ(InoOf(kRoot, "a2"), 0u);
}

TEST_F(ErrorTest, LsmSyncErrorReachesFsync) {
  const std::string a = Payload(24, 5000);
  DurableFile("a", a);
  const uint64_t ib = CreateOpen(kRoot, "b");
  ASSERT_OK(fs_->Write(ib, 0, Payload(25, 5000)));
  model().FailNth(FaultOp::kSync, FaultScope::kLevelDb, 1, EIO);
  EXPECT_ERRNO(fs_->Fsync(ib, false), EIO);
  // LevelDB refuses further writes after a failed log sync; closing reports
  // that, and the store still recovers to a consistent state.
  (void)fs_->Release(ib);
  (void)fs_->Close();
  fs_.reset();
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

TEST_F(ErrorTest, FsyncDirErrorIsReported) {
  const std::string a = Payload(26, 5000);
  DurableFile("a", a);
  kv::InodeRecord r;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "d", S_IFDIR | 0755, 0, &r));
  fs_->Forget(r.ino, 1);
  model().FailNth(FaultOp::kSync, FaultScope::kAny, 1, EIO);
  EXPECT_ERRNO(fs_->FsyncDir(kRoot), EIO);
  fs_.reset();
  CrashFsckReopen();
  EXPECT_EQ(ReadOk(InoOf(kRoot, "a")), a);
}

}  // namespace
}  // namespace sepfs::crashtest
