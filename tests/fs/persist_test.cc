// Persistence of the fs core across Close/Open, fsck of the closed store,
// orphans (open-unlinked files, also across a simulated crash), damage in
// the value log, store locking and mkfs/open errors.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

class PersistTest : public FsTest {
 protected:
  uint32_t block_size() const override { return 8192; }

  // Every entry below dir, by path, with its attributes.
  void Snapshot(uint64_t dir, const std::string& prefix,
                std::map<std::string, kv::InodeRecord>* out) {
    std::vector<DirListEntry> list;
    ASSERT_OK(fs_->ListDir(dir, &list));
    for (const auto& e : list) {
      if (e.name == "." || e.name == "..") continue;
      const std::string path = prefix + "/" + e.name;
      kv::InodeRecord r;
      ASSERT_OK(LookupNoRef(dir, e.name, &r));
      (*out)[path] = r;
      if (S_ISDIR(r.mode)) Snapshot(r.ino, path, out);
    }
  }

  std::string SegmentFile() {
    std::vector<std::string> segs;
    for (const auto& e : std::filesystem::directory_iterator(VlogDir(store_dir_))) {
      if (e.path().extension() == ".vlog") segs.push_back(e.path().string());
    }
    EXPECT_EQ(segs.size(), 1u);
    return segs.empty() ? "" : segs[0];
  }
};

TEST_F(PersistTest, EverythingSurvivesReopen) {
  const uint64_t bs = 8192;
  const uint64_t d = Mkdir(kRoot, "dir", 0750);
  const uint64_t sub = Mkdir(d, "sub");
  const uint64_t f = Create(d, "file", S_IFREG | 0604);
  const std::string data = Payload(11, 5 * bs + 123);
  ASSERT_OK(fs_->Write(f, 0, data));
  const uint64_t sparse = Create(sub, "sparse");
  ASSERT_OK(fs_->Write(sparse, 20 * bs + 1, "end"));
  ASSERT_OK(fs_->Write(sparse, 3, "start"));
  kv::InodeRecord r;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "chr", S_IFCHR | 0620, makedev(136, 7), &r));
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "blk", S_IFBLK | 0660, makedev(8, 1), &r));
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "fifo", S_IFIFO | 0644, 0, &r));
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "sock", S_IFSOCK | 0755, 0, &r));
  ASSERT_OK(fs_->Symlink(caller_, d, "link", "../fifo", &r));
  const uint64_t link_ino = r.ino;
  ASSERT_OK(fs_->Link(f, kRoot, "hardlink", &r));
  ASSERT_OK(fs_->SetXattr(f, "user.k", "value", 0));
  ASSERT_OK(fs_->SetXattr(sub, "user.dir", std::string(1000, 'z'), 0));
  ASSERT_OK(fs_->SetXattr(link_ino, "trusted.t", "sym", 0));
  SetAttrRequest req;
  req.set_uid = req.set_gid = req.set_mtime = req.set_atime = true;
  req.uid = 12345;
  req.gid = 54321;
  req.mtime = {1600000000, 987654321};
  req.atime = {1500000000, 1};
  ASSERT_OK(fs_->SetAttr(f, req, &r));
  // An empty file and a truncated one.
  Create(d, "empty");
  const uint64_t cut = Create(d, "cut");
  ASSERT_OK(fs_->Write(cut, 0, data));
  ASSERT_OK(fs_->Flush(cut));
  SetSize(cut, bs + 7);

  ASSERT_OK(fs_->FlushAll(/*sync=*/true));
  std::map<std::string, kv::InodeRecord> before, after;
  Snapshot(kRoot, "", &before);
  const kv::InodeRecord root_before = Attr(kRoot);
  ASSERT_EQ(before.size(), 12u);
  EXPECT_EQ(before["/dir/file"].mtime, (kv::Timespec{1600000000, 987654321}));

  Reopen();
  Snapshot(kRoot, "", &after);
  EXPECT_EQ(Attr(kRoot), root_before);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [path, rec] : before) {
    ASSERT_TRUE(after.count(path)) << path;
    EXPECT_EQ(after[path], rec) << path;  // every field, times to the ns
  }
  EXPECT_EQ(after["/chr"].rdev, makedev(136, 7));
  EXPECT_EQ(after["/blk"].rdev, makedev(8, 1));
  EXPECT_TRUE(S_ISSOCK(after["/sock"].mode));
  EXPECT_EQ(after["/dir/file"].uid, 12345u);
  EXPECT_EQ(after["/dir/file"].gid, 54321u);
  EXPECT_EQ(after["/dir/file"].nlink, 2u);
  EXPECT_EQ(after["/hardlink"].ino, after["/dir/file"].ino);
  EXPECT_EQ(after["/dir"].nlink, 3u);
  EXPECT_EQ(after["/dir"].mode, static_cast<uint32_t>(S_IFDIR | 0750));
  EXPECT_EQ(ReadAll(f), data);
  EXPECT_EQ(ReadAll(cut), data.substr(0, bs + 7));
  EXPECT_EQ(ReadAll(sparse),
            std::string("\0\0\0start", 8) + std::string(20 * bs + 1 - 8, '\0') + "end");
  std::string v;
  ASSERT_OK(fs_->Readlink(link_ino, &v));
  EXPECT_EQ(v, "../fifo");
  ASSERT_OK(fs_->GetXattr(f, "user.k", &v));
  EXPECT_EQ(v, "value");
  ASSERT_OK(fs_->GetXattr(sub, "user.dir", &v));
  EXPECT_EQ(v, std::string(1000, 'z'));
  ASSERT_OK(fs_->GetXattr(link_ino, "trusted.t", &v));
  EXPECT_EQ(v, "sym");

  // Fsck of the closed store: no errors, segment counters checked.
  CloseFs();
  FsckReport rep;
  RunFsck(&rep);
  EXPECT_TRUE(rep.errors.empty()) << rep.errors[0];
  EXPECT_TRUE(rep.notes.empty()) << rep.notes[0];
  EXPECT_EQ(rep.inodes, 12u);  // the hard link shares one
  EXPECT_EQ(rep.dirs, 3u);
  EXPECT_EQ(rep.dentries, 12u);
  EXPECT_EQ(rep.pointers, 6u + 2u + 2u);  // file, sparse, cut
  EXPECT_EQ(rep.segments, 1u);
  EXPECT_GT(rep.data_bytes_checked, data.size());
}

TEST_F(PersistTest, UnflushedWritesSurviveClose) {
  const uint64_t f = Create(kRoot, "f");
  const std::string data = Payload(3, 30000);
  ASSERT_OK(fs_->Write(f, 0, data));
  const kv::InodeRecord r = Attr(f);
  Reopen();
  EXPECT_EQ(ReadAll(f), data);
  EXPECT_EQ(Attr(f).mtime, r.mtime);
  EXPECT_EQ(Attr(f).size, r.size);
  ExpectFsckClean();
}

TEST_F(PersistTest, FsckSeesSegmentCountersAfterOverwrites) {
  // Overwrites and truncates make garbage: the live counters must track it.
  const uint64_t f = Create(kRoot, "f");
  for (int i = 0; i < 5; i++) {
    ASSERT_OK(fs_->Write(f, 0, Payload(i, 40000)));
    ASSERT_OK(fs_->Flush(f));
  }
  SetSize(f, 100);
  ASSERT_OK(fs_->Fallocate(f, 0, 0, 30000));
  ExpectFsckClean();
  Reopen();
  ExpectFsckClean();
  EXPECT_EQ(ReadAll(f), Payload(4, 40000).substr(0, 100) + std::string(29900, '\0'));
}

// A clean mount restores the segment counters persisted at unmount instead
// of scanning every block pointer; they must equal what a scan (the mount
// after a crash) computes, and a tampered counter record is not trusted.
TEST_F(PersistTest, CleanMountRestoresSegmentCountersThatMatchARecount) {
  auto live = [this] {
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> m;  // id -> (live, max_seq)
    for (const auto& s : fs_->store()->vlog()->Segments()) m[s.id] = {s.live_bytes, s.max_seq};
    return m;
  };
  const uint64_t f = Create(kRoot, "f"), g = Create(kRoot, "g");
  for (int i = 0; i < 40; i++) {  // several 4 MiB segments, part garbage
    ASSERT_OK(fs_->Write(f, 0, Payload(i, 300000)));
    ASSERT_OK(fs_->Write(g, static_cast<uint64_t>(i) * 100000, Payload(100 + i, 100000)));
    ASSERT_OK(fs_->Flush(f));
    ASSERT_OK(fs_->Flush(g));
  }
  SetSize(g, 1000000);
  ASSERT_OK(fs_->Flush(g));
  const auto before = live();
  ASSERT_GE(before.size(), 3u);
  uint64_t total = 0;
  for (const auto& [id, v] : before) total += v.first;
  EXPECT_GT(total, 0u);

  Reopen();  // clean: restored
  const auto restored = live();
  for (const auto& [id, v] : before) {
    ASSERT_TRUE(restored.count(id)) << "segment " << id;
    EXPECT_EQ(restored.at(id).first, v.first) << "segment " << id;
    EXPECT_EQ(restored.at(id).second, v.second) << "segment " << id;
  }

  CloseFs();
  InCrashingChild([](Filesystem*) { return 0; });  // leaves the store unclean
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));  // rebuilt by a scan
  const auto rebuilt = live();
  for (const auto& [id, v] : before) {
    ASSERT_TRUE(rebuilt.count(id)) << "segment " << id;
    EXPECT_EQ(rebuilt.at(id).first, v.first) << "segment " << id;
  }

  // A counter record that names a segment the store lacks, or claims more
  // live bytes than a segment holds, is ignored: the mount recounts.
  CloseFs();
  {
    std::unique_ptr<Store> store;
    ASSERT_OK(Store::Open(store_dir_, StoreOptions{}, &store));
    std::vector<vlog::SegmentInfo> bad = store->vlog()->Segments();
    for (auto& s : bad) s.live_bytes = s.size * 2;
    kv::Batch b;
    b.Put(kv::CounterKey(kSegmentUsageCounter), EncodeSegmentUsage(bad));
    ASSERT_OK(store->meta()->Write(&b, /*sync=*/true));
  }
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const auto recounted = live();
  for (const auto& [id, v] : before) EXPECT_EQ(recounted.at(id).first, v.first) << id;
  EXPECT_EQ(ReadAll(f), Payload(39, 300000));
  ExpectFsckClean();
}

TEST_F(PersistTest, OpenUnlinkedFileLivesUntilReleaseAndForget) {
  const uint64_t f = Create(kRoot, "f");  // holds one lookup
  ASSERT_OK(fs_->Write(f, 0, Payload(1, 20000)));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->SetXattr(f, "user.x", "y", 0));
  ASSERT_OK(fs_->OpenFile(f));
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Lookup(kRoot, "f", &r), ENOENT);
  ASSERT_OK(fs_->GetAttr(f, &r));
  EXPECT_EQ(r.nlink, 0u);
  std::string got;
  ASSERT_OK(fs_->Read(f, 0, 20000, &got));
  EXPECT_EQ(got, Payload(1, 20000));
  ASSERT_OK(fs_->Write(f, 19990, "still writable"));
  ASSERT_OK(fs_->Read(f, 19990, 100, &got));
  EXPECT_EQ(got, "still writable");
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->Read(f, 19990, 100, &got));
  EXPECT_EQ(got, "still writable");

  ASSERT_OK(fs_->Release(f));
  ASSERT_OK(fs_->GetAttr(f, &r));  // the lookup still pins it
  fs_->Forget(f, 1);
  EXPECT_ERRNO(fs_->GetAttr(f, &r), ENOENT);
  std::string v;
  EXPECT_ERRNO(fs_->GetXattr(f, "user.x", &v), ENODATA);
  ExpectFsckClean();  // no orphan, no stray pointers, counters right
}

TEST_F(PersistTest, OpenUnlinkedFileReclaimedAtClose) {
  const uint64_t f = Create(kRoot, "f");
  const uint64_t keep = Create(kRoot, "keep");
  ASSERT_OK(fs_->Write(keep, 0, "kept"));
  ASSERT_OK(fs_->Write(f, 0, Payload(2, 50000)));
  ASSERT_OK(fs_->Flush(f));
  ASSERT_OK(fs_->OpenFile(f));
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  ASSERT_OK(fs_->Write(f, 0, "dirty after unlink"));
  CloseFs();  // still open and looked up
  FsckReport rep;
  RunFsck(&rep);
  EXPECT_TRUE(rep.errors.empty()) << rep.errors[0];
  EXPECT_TRUE(rep.notes.empty()) << rep.notes[0];  // no orphan left behind
  EXPECT_EQ(rep.inodes, 2u);
  EXPECT_EQ(rep.pointers, 1u);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->GetAttr(f, &r), ENOENT);
  EXPECT_EQ(ReadAll(keep), "kept");
}

TEST_F(PersistTest, OrphanReclaimedAfterCrash) {
  // A file is open and unlinked when the process dies: the next Open
  // reclaims it. The "crash" is a child process that exits without Close.
  const uint64_t keep = Create(kRoot, "keep");
  ASSERT_OK(fs_->Write(keep, 0, "kept"));
  CloseFs();
  uint64_t orphan_ino = 0;
  {
    // The child reports the inode through a pipe.
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    InCrashingChild([&](Filesystem* fs) -> int {
      close(fds[0]);
      kv::InodeRecord r;
      if (!fs->Mknod(caller_, kRoot, "doomed", S_IFREG | 0644, 0, &r).ok()) return 2;
      if (!fs->Write(r.ino, 0, Payload(5, 40000)).ok()) return 3;
      if (!fs->Fsync(r.ino, false).ok()) return 4;
      if (!fs->SetXattr(r.ino, "user.a", "b", 0).ok()) return 5;
      if (!fs->OpenFile(r.ino).ok()) return 6;
      if (!fs->Unlink(kRoot, "doomed").ok()) return 7;
      if (!fs->FsyncDir(kRoot).ok()) return 8;
      if (write(fds[1], &r.ino, sizeof(r.ino)) != sizeof(r.ino)) return 9;
      return 0;
    });
    close(fds[1]);
    ASSERT_EQ(read(fds[0], &orphan_ino, sizeof(orphan_ino)),
              static_cast<ssize_t>(sizeof(orphan_ino)));
    close(fds[0]);
  }
  if (HasFatalFailure()) return;

  // Fsck of the crashed store: the orphan is a note, not an error.
  {
    FsckReport rep;
    RunFsck(&rep);
    EXPECT_TRUE(rep.errors.empty()) << rep.errors[0];
    bool orphan_noted = false, unclean_noted = false;
    for (const auto& n : rep.notes) {
      orphan_noted |= n.find("inode " + std::to_string(orphan_ino)) != std::string::npos;
      unclean_noted |= n.find("not unmounted cleanly") != std::string::npos;
    }
    EXPECT_TRUE(orphan_noted) << "fsck notes: " << rep.notes.size();
    EXPECT_TRUE(unclean_noted) << "fsck notes: " << rep.notes.size();
  }
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->GetAttr(orphan_ino, &r), ENOENT);
  std::string v;
  EXPECT_ERRNO(fs_->GetXattr(orphan_ino, "user.a", &v), ENODATA);
  EXPECT_EQ(ReadAll(keep), "kept");
  EXPECT_GE(fs_->stats().orphans_reclaimed.load(), 1u);
  ExpectFsckClean();
}

TEST_F(PersistTest, CrashKeepsSyncedDataAndConsistentMetadata) {
  CloseFs();
  InCrashingChild([&](Filesystem* fs) -> int {
    kv::InodeRecord r;
    if (!fs->Mknod(caller_, kRoot, "synced", S_IFREG | 0644, 0, &r).ok()) return 2;
    if (!fs->Write(r.ino, 0, Payload(6, 30000)).ok()) return 3;
    if (!fs->Fsync(r.ino, false).ok()) return 4;
    kv::InodeRecord d;
    if (!fs->Mknod(caller_, kRoot, "dir", S_IFDIR | 0755, 0, &d).ok()) return 5;
    if (!fs->Rename(kRoot, "synced", d.ino, "moved", 0).ok()) return 6;
    // Dirty data that is never flushed.
    if (!fs->Write(r.ino, 30000, Payload(7, 10000)).ok()) return 7;
    if (!fs->FsyncDir(kRoot).ok()) return 8;
    return 0;
  });
  if (HasFatalFailure()) return;
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t d = InoOf(kRoot, "dir");
  const uint64_t f = InoOf(d, "moved");
  const std::string got = ReadAll(f);
  ASSERT_GE(got.size(), 30000u);
  EXPECT_TRUE(got.substr(0, 30000) == Payload(6, 30000));
  EXPECT_EQ(Attr(d).nlink, 2u);
  ExpectFsckClean();
}

// A SETATTR is written to LevelDB at once (an fsync of anything then makes
// it durable, docs/durability.md), times alone too, of files and
// directories, except the times of an unlinked inode: a crash reclaims the
// orphan, so they wait for its next flush, if any.
TEST_F(PersistTest, SetattrIsWrittenAtOnceExceptTimesOfUnlinkedInodes) {
  const kv::Timespec t1{1600000000, 1}, t2{1600000000, 2}, t3{1600000000, 3};
  auto times = [](const kv::Timespec& t) {
    SetAttrRequest req;
    req.set_mtime = req.set_ctime = true;
    req.mtime = req.ctime = t;
    return req;
  };
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->Write(f, 0, "data"));
  const uint64_t d = Mkdir(kRoot, "d", 0755);
  const uint64_t other = Create(kRoot, "other");
  const uint64_t gone = Create(kRoot, "gone");
  CloseFs();
  // In a process that then dies without closing the store.
  InCrashingChild([&](Filesystem* fs) -> int {
    auto stored = [fs](uint64_t ino) {
      kv::InodeRecord r;
      if (!fs->store()->meta()->GetInode(ino, &r).ok()) r.ino = 0;
      return r;
    };
    kv::InodeRecord r;
    if (!fs->SetAttr(f, times(t1), &r).ok() || r.mtime != t1) return 2;
    if (stored(f).mtime != t1 || stored(f).ctime != t1) return 3;
    if (!fs->SetAttr(d, times(t2), &r).ok() || stored(d).mtime != t2) return 4;
    if (!fs->Lookup(kRoot, "gone", &r).ok()) return 5;  // the kernel's reference
    if (!fs->Unlink(kRoot, "gone").ok()) return 6;
    const kv::Timespec unlinked_ctime = stored(gone).ctime;
    if (!fs->SetAttr(gone, times(t3), &r).ok() || r.nlink != 0) return 7;
    if (!fs->GetAttr(gone, &r).ok() || r.mtime != t3) return 8;
    if (stored(gone).ctime != unlinked_ctime) return 9;  // times of an orphan wait
    // An fsync of another file makes the written ones durable.
    if (!fs->Fsync(other, false).ok()) return 10;
    return 0;
  });
  if (HasFatalFailure()) return;
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_EQ(Attr(f).mtime, t1);
  EXPECT_EQ(Attr(d).mtime, t2);
  EXPECT_EQ(ReadAll(f), "data");
  EXPECT_ERRNO(fs_->GetAttr(gone, &r), ENOENT);
  ExpectFsckClean();
}

TEST_F(PersistTest, FsckAndReadDetectDamagedRecord) {
  const uint64_t victim = Create(kRoot, "victim");
  const uint64_t other = Create(kRoot, "other");
  const std::string vdata = Payload(8, 3000), odata = Payload(9, 20000);
  ASSERT_OK(fs_->Write(victim, 0, vdata));
  ASSERT_OK(fs_->Flush(victim));  // the first record of the segment
  ASSERT_OK(fs_->Write(other, 0, odata));
  CloseFs();

  const std::string seg = SegmentFile();
  ASSERT_FALSE(seg.empty());
  {
    std::fstream file(seg, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.is_open());
    const std::streamoff pos = 64 + 48 + 100;  // inside the victim's data
    file.seekg(pos);
    char c = 0;
    file.read(&c, 1);
    ASSERT_EQ(c, vdata[100]);
    c ^= 0x20;
    file.seekp(pos);
    file.write(&c, 1);
    ASSERT_TRUE(file.good());
  }
  FsckReport rep;
  RunFsck(&rep);
  ASSERT_FALSE(rep.errors.empty());
  bool named = false;
  for (const auto& e : rep.errors) {
    named |= e.find("inode " + std::to_string(victim)) != std::string::npos;
  }
  EXPECT_TRUE(named) << rep.errors[0];

  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  std::string got;
  EXPECT_ERRNO(fs_->Read(victim, 0, 3000, &got), EIO);
  EXPECT_ERRNO(fs_->Read(victim, 50, 10, &got), EIO);
  EXPECT_GE(fs_->stats().read_eio.load(), 1u);
  ASSERT_OK(fs_->Read(other, 0, odata.size(), &got));
  EXPECT_TRUE(got == odata);
  // A partial overwrite needs the old block: it fails cleanly too.
  EXPECT_ERRNO(fs_->Write(victim, 10, "x"), EIO);
  // A whole-block overwrite does not read the old block.
  ASSERT_OK(fs_->Write(victim, 0, std::string(8192, 'n')));
  ASSERT_OK(fs_->Read(victim, 0, 8192, &got));
  EXPECT_EQ(got, std::string(8192, 'n'));
}

TEST_F(PersistTest, SecondOpenIsBusy) {
  std::unique_ptr<Filesystem> second;
  // Open fails while the store is in use; a crash of the failed Open's
  // cleanup must not take the process down, so it runs in a child.
  EXPECT_EXIT(
      {
        const Status st = Filesystem::Open(store_dir_, fs_options(), &second);
        std::fprintf(stderr, "open: %s\n", st.ToString().c_str());
        std::fflush(stderr);
        _exit(st.err() == EBUSY && second == nullptr &&
                      st.ToString().find(store_dir_) != std::string::npos
                  ? 0
                  : 1);
      },
      ::testing::ExitedWithCode(0), "");
  std::unique_ptr<Store> store;
  const Status st = Store::Open(store_dir_, StoreOptions{}, &store);
  EXPECT_EQ(st.err(), EBUSY) << st.ToString();
  EXPECT_NE(st.ToString().find(store_dir_), std::string::npos) << st.ToString();
  // The first Filesystem is unaffected.
  EXPECT_OK(fs_->Write(Create(kRoot, "f"), 0, "x"));
}

// umount returns before the daemon has flushed and exited: a store that no
// mount serves but whose lock is held is waited for, up to lock_wait_sec.
TEST_F(PersistTest, OpenWaitsForALockHeldWhileTheStoreIsNotMounted) {
  using Clock = std::chrono::steady_clock;
  ASSERT_OK(fs_->Write(Create(kRoot, "f"), 0, "kept"));
  EXPECT_EQ(StoreMountPoint(store_dir_), "");
  std::unique_ptr<Store> store;
  StoreOptions so;
  so.lock_wait_sec = 0.3;
  Clock::time_point start = Clock::now();
  Status st = Store::Open(store_dir_, so, &store);
  EXPECT_EQ(st.err(), EBUSY) << st.ToString();
  EXPECT_NE(st.ToString().find("still after"), std::string::npos) << st.ToString();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_FALSE(store);

  // The holder closes while the second Open waits: it gets the store.
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CloseFs();
  });
  so.lock_wait_sec = 30;
  start = Clock::now();
  st = Store::Open(store_dir_, so, &store);
  closer.join();
  ASSERT_OK(st);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(250));
  store.reset();
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  ASSERT_OK(LookupNoRef(kRoot, "f", &r));
  std::string got;
  ASSERT_OK(fs_->Read(r.ino, 0, 100, &got));
  EXPECT_EQ(got, "kept");
}

TEST_F(PersistTest, OpenOfMissingStoreFailsCleanly) {
  std::unique_ptr<Filesystem> fs;
  const std::string missing = tmp_.Sub("missing");
  EXPECT_EXIT(
      {
        const Status st = Filesystem::Open(missing, fs_options(), &fs);
        std::fprintf(stderr, "open: %s\n", st.ToString().c_str());
        std::fflush(stderr);
        _exit(st.err() == ENOENT && st.ToString().find(missing) != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(PersistTest, StoreOpenErrorsNameTheDirectory) {
  std::unique_ptr<Store> store;
  const std::string missing = tmp_.Sub("missing");
  Status st = Store::Open(missing, StoreOptions{}, &store);
  EXPECT_EQ(st.err(), ENOENT) << st.ToString();
  EXPECT_NE(st.ToString().find(missing), std::string::npos) << st.ToString();
  EXPECT_FALSE(store);

  const std::string plain = tmp_.Sub("plain");
  ASSERT_TRUE(std::filesystem::create_directory(plain));
  std::ofstream(plain + "/somefile") << "hello";
  st = Store::Open(plain, StoreOptions{}, &store);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.err(), EINVAL) << st.ToString();
  EXPECT_NE(st.ToString().find(plain), std::string::npos) << st.ToString();
  EXPECT_FALSE(store);
  // A failed open leaves nothing behind in the directory.
  EXPECT_FALSE(std::filesystem::exists(plain + "/meta"));
}

// Only a missing directory is "does not exist"; any other failure to reach
// it keeps its own errno.
TEST_F(PersistTest, StoreOpenKeepsTheErrnoOfTheDirectoryCheck) {
  std::unique_ptr<Store> store;
  const std::string file = tmp_.Sub("regular");
  std::ofstream(file) << "x";
  const std::string under_file = file + "/store";
  Status st = Store::Open(under_file, StoreOptions{}, &store);
  EXPECT_EQ(st.err(), ENOTDIR) << st.ToString();
  EXPECT_NE(st.ToString().find(under_file), std::string::npos) << st.ToString();
  EXPECT_EQ(st.ToString().find("does not exist"), std::string::npos) << st.ToString();
  EXPECT_FALSE(store);
  // The store path itself a regular file: not "not a sepfs store".
  st = Store::Open(file, StoreOptions{}, &store);
  EXPECT_EQ(st.err(), ENOTDIR) << st.ToString();
  EXPECT_NE(st.ToString().find("not a directory"), std::string::npos) << st.ToString();
  EXPECT_EQ(st.ToString().find("not a sepfs store"), std::string::npos) << st.ToString();
  EXPECT_FALSE(store);

  const std::string loop = tmp_.Sub("loop");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0) << std::strerror(errno);
  st = Store::Open(loop, StoreOptions{}, &store);
  EXPECT_EQ(st.err(), ELOOP) << st.ToString();
  EXPECT_EQ(st.ToString().find("does not exist"), std::string::npos) << st.ToString();
  EXPECT_FALSE(store);
}

TEST_F(PersistTest, MkfsRefusesNonEmptyDirectoryEvenForced) {
  const std::string dir = tmp_.Sub("other");
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  std::ofstream(dir + "/precious") << "data";
  MkfsOptions mo;
  mo.block_size = 4096;
  mo.segment_size = 1 << 20;
  Status st = Mkfs(dir, mo);
  EXPECT_EQ(st.err(), EEXIST) << st.ToString();
  EXPECT_NE(st.ToString().find(dir), std::string::npos) << st.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir + "/precious"));
  mo.force = true;
  st = Mkfs(dir, mo);
  EXPECT_EQ(st.err(), EEXIST) << st.ToString();
  EXPECT_NE(st.ToString().find("precious"), std::string::npos) << st.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir + "/precious"));
  std::filesystem::remove(dir + "/precious");
  // A store's names holding what no store holds: refused with --force too,
  // and nothing is removed, not even the parts that look like a store's.
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/meta"));
  std::ofstream(dir + "/meta/CURRENT") << "MANIFEST-000001\n";
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/vlog"));
  std::ofstream(dir + "/vlog/" + vlog::SegmentFileName(1)) << "x";
  std::ofstream(dir + "/vlog/junk") << "x";
  st = Mkfs(dir, mo);
  EXPECT_EQ(st.err(), EEXIST) << st.ToString();
  EXPECT_NE(st.ToString().find("vlog/junk"), std::string::npos) << st.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir + "/vlog/junk"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/meta/CURRENT"));
  std::filesystem::remove(dir + "/vlog/junk");
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/vlog/sub"));
  EXPECT_EQ(Mkfs(dir, mo).err(), EEXIST);
  EXPECT_TRUE(std::filesystem::exists(dir + "/vlog/sub"));
  std::filesystem::remove(dir + "/vlog/sub");
  // meta as a link to a user's directory: never followed.
  const std::string user = tmp_.Sub("user-dir");
  ASSERT_TRUE(std::filesystem::create_directory(user));
  std::ofstream(user + "/000001.log") << "mine";
  const std::string aside = tmp_.Sub("meta-aside");
  std::filesystem::rename(dir + "/meta", aside);
  std::filesystem::create_directory_symlink(user, dir + "/meta");
  st = Mkfs(dir, mo);
  EXPECT_EQ(st.err(), EEXIST) << st.ToString();
  EXPECT_NE(st.ToString().find("'meta'"), std::string::npos) << st.ToString();
  EXPECT_TRUE(std::filesystem::exists(user + "/000001.log"));
  std::filesystem::remove(dir + "/meta");
  std::filesystem::rename(aside, dir + "/meta");
  // What leveldb::RepairDB set aside (meta/lost/) is a store's too.
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/meta/lost"));
  std::ofstream(dir + "/meta/lost/000005.ldb") << "t";
  // Half a store (an interrupted mkfs) is replaced with --force only.
  mo.force = false;
  EXPECT_EQ(Mkfs(dir, mo).err(), EEXIST);
  mo.force = true;
  ASSERT_OK(Mkfs(dir, mo));
  EXPECT_FALSE(std::filesystem::exists(dir + "/vlog/" + vlog::SegmentFileName(1)));
  EXPECT_FALSE(std::filesystem::exists(dir + "/meta/lost"));
  std::unique_ptr<Filesystem> fs;
  ASSERT_OK(Filesystem::Open(dir, fs_options(), &fs));
  EXPECT_EQ(fs->block_size(), 4096u);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs->ListDir(kRoot, &list));
  EXPECT_EQ(list.size(), 2u);
  ASSERT_OK(fs->Close());
}

TEST_F(PersistTest, MkfsOverExistingStore) {
  // The fixture's store has content; mkfs without force refuses it.
  Create(kRoot, "old");
  CloseFs();
  MkfsOptions mo;
  EXPECT_ERRNO(Mkfs(store_dir_, mo), EEXIST);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  InoOf(kRoot, "old");
  CloseFs();
  mo.force = true;
  ASSERT_OK(Mkfs(store_dir_, mo));
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Lookup(kRoot, "old", &r), ENOENT);
  EXPECT_EQ(fs_->block_size(), 64u * 1024);
}

TEST_F(PersistTest, MkfsRejectsBadOptions) {
  MkfsOptions mo;
  mo.block_size = 3000;
  EXPECT_ERRNO(Mkfs(tmp_.Sub("a"), mo), EINVAL);
  mo.block_size = 2048;
  EXPECT_ERRNO(Mkfs(tmp_.Sub("b"), mo), EINVAL);
  mo.block_size = 4096;
  mo.segment_size = 1000;
  EXPECT_ERRNO(Mkfs(tmp_.Sub("c"), mo), EINVAL);
}

TEST_F(PersistTest, CloseIsIdempotent) {
  ASSERT_OK(fs_->Write(Create(kRoot, "f"), 0, "x"));
  ASSERT_OK(fs_->Close());
  ASSERT_OK(fs_->Close());
}

}  // namespace
}  // namespace sepfs::fs::testing
