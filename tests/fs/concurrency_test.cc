// Concurrent use of the fs core: writers of separate files, writers of
// disjoint ranges of one file (sharing blocks at the range edges), namespace
// changes racing with listings, and the background flusher racing with
// everything.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fs_test_util.h"
#include "tests/scripted_leveldb_env.h"

namespace sepfs::fs::testing {
namespace {

class ConcurrencyTest : public SmallBlockFsTest {
 protected:
  FsOptions fs_options() const override {
    FsOptions o;
    o.flush_interval_sec = 0.002;    // the flusher runs all the time
    o.inode_flush_bytes = 64 << 10;  // writers flush inline now and then
    return o;
  }
};

constexpr int kThreads = 4;

TEST_F(ConcurrencyTest, WritersOfSeparateFiles) {
  std::vector<uint64_t> inos;
  for (int t = 0; t < kThreads; t++) inos.push_back(Create(kRoot, "f" + std::to_string(t)));
  const size_t kSize = 300000;
  std::vector<std::string> want(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    want[t] = Payload(t, kSize);
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      // Chunks in random order, of odd sizes, with reads in between.
      std::vector<size_t> offs;
      for (size_t off = 0; off < kSize; off += 3001) offs.push_back(off);
      std::shuffle(offs.begin(), offs.end(), rng);
      for (size_t i = 0; i < offs.size(); i++) {
        const size_t off = offs[i], n = std::min<size_t>(3001, kSize - off);
        if (!fs_->Write(inos[t], off, std::string_view(want[t]).substr(off, n)).ok()) failures++;
        std::string got;
        if (!fs_->Read(inos[t], off, n, &got).ok() || got != want[t].substr(off, n)) failures++;
        if (i % 17 == 0 && !fs_->Flush(inos[t]).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; t++) EXPECT_TRUE(ReadAll(inos[t]) == want[t]) << t;
  Reopen();
  for (int t = 0; t < kThreads; t++) EXPECT_TRUE(ReadAll(inos[t]) == want[t]) << t;
  ExpectFsckClean();
}

TEST_F(ConcurrencyTest, WritersOfDisjointRangesOfOneFile) {
  const uint64_t f = Create(kRoot, "shared");
  // Range boundaries are not block aligned: neighbours share a block.
  const size_t kRange = 50 * 4096 + 1234;
  const std::string want = Payload(42, kThreads * kRange);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      const size_t base = t * kRange;
      size_t done = 0;
      // Small chunks from the end of the range backwards, then forwards
      // rewrites, so size changes and edge blocks are contended.
      std::vector<std::pair<size_t, size_t>> chunks;
      while (done < kRange) {
        const size_t n = std::min<size_t>(1 + rng() % 5000, kRange - done);
        chunks.emplace_back(base + done, n);
        done += n;
      }
      std::reverse(chunks.begin(), chunks.end());
      for (int pass = 0; pass < 2; pass++) {
        for (const auto& [off, n] : chunks) {
          if (!fs_->Write(f, off, std::string_view(want).substr(off, n)).ok()) failures++;
        }
        std::reverse(chunks.begin(), chunks.end());
        if (!fs_->Flush(f).ok()) failures++;
      }
      std::string got;
      if (!fs_->Read(f, base, kRange, &got).ok() || got != want.substr(base, kRange)) {
        failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Attr(f).size, want.size());
  EXPECT_TRUE(ReadAll(f) == want);
  Reopen();
  EXPECT_TRUE(ReadAll(f) == want);
  ExpectFsckClean();
}

TEST_F(ConcurrencyTest, NamespaceChangesWithListings) {
  const uint64_t d = Mkdir(kRoot, "d");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      const std::string p = "t" + std::to_string(t) + "-";
      for (int i = 0; i < 150; i++) {
        kv::InodeRecord r;
        const std::string name = p + std::to_string(i);
        if (!fs_->Mknod(caller_, d, name, S_IFREG | 0644, 0, &r).ok()) {
          failures++;
          continue;
        }
        if (!fs_->Write(r.ino, 0, name).ok()) failures++;
        fs_->Forget(r.ino, 1);
        if (i % 3 == 0 && !fs_->Rename(d, name, d, name + "r", 0).ok()) failures++;
        if (i % 5 == 0 && !fs_->Unlink(d, i % 3 == 0 ? name + "r" : name).ok()) failures++;
      }
    });
  }
  std::thread lister([&] {
    while (!stop) {
      std::vector<DirListEntry> list;
      if (!fs_->ListDir(d, &list).ok()) {
        failures++;
        continue;
      }
      std::vector<uint64_t> referenced;
      const Status st = fs_->ReadDirPlus(list, 2, [&](const DirListEntry& e,
                                                      const kv::InodeRecord& r) {
        if (r.ino != 0 && r.ino != e.ino) failures++;
        if (r.ino != 0) referenced.push_back(r.ino);
        return true;
      });
      if (!st.ok()) failures++;
      for (uint64_t ino : referenced) fs_->Forget(ino, 1);
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  lister.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  EXPECT_EQ(list.size(), 2u + kThreads * (150 - 30));
  for (size_t i = 2; i < list.size(); i++) {
    std::string name = list[i].name;
    if (name.back() == 'r') name.pop_back();
    EXPECT_EQ(ReadAll(list[i].ino), name);
  }
  ExpectFsckClean();
}

// Files that are written after being unlinked while open, then let go,
// while the background flusher keeps flushing every cached inode: the
// reclaimed inode must not be brought back by a flush that raced with it.
TEST_F(ConcurrencyTest, OrphansReclaimedWhileFlusherRuns) {
  // Keep a few busy inodes in the table so the flusher has work to do.
  std::vector<uint64_t> busy;
  for (int i = 0; i < 8; i++) busy.push_back(Create(kRoot, "busy" + std::to_string(i)));
  for (uint64_t ino : busy) {
    for (int b = 0; b < 64; b++) ASSERT_OK(fs_->Write(ino, b * 4096, "busy"));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread churn([&] {
    for (uint64_t k = 0; !stop; k++) {
      for (uint64_t ino : busy) {
        if (!fs_->Write(ino, (k % 64) * 4096, "busy").ok()) failures++;
      }
    }
  });
  std::atomic<int> create_failures{0}, io_failures{0}, not_reclaimed{0};
  std::vector<std::thread> threads;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; std::chrono::steady_clock::now() < deadline; i++) {
        const std::string name = "o" + std::to_string(t) + "-" + std::to_string(i);
        kv::InodeRecord r;
        if (!fs_->Mknod(caller_, kRoot, name, S_IFREG | 0644, 0, &r).ok()) {
          create_failures++;
          continue;
        }
        if (!fs_->OpenFile(r.ino).ok()) io_failures++;
        if (!fs_->Unlink(kRoot, name).ok()) io_failures++;
        if (!fs_->Write(r.ino, 0, std::string(3 * 4096, 'o')).ok()) io_failures++;
        if (!fs_->Release(r.ino).ok()) io_failures++;
        fs_->Forget(r.ino, 1);
        kv::InodeRecord gone;
        if (fs_->GetAttr(r.ino, &gone).err() != ENOENT) not_reclaimed++;
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  churn.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(create_failures.load(), 0);
  EXPECT_EQ(io_failures.load(), 0);
  // An inode still found after its last Release and Forget was brought back.
  EXPECT_EQ(not_reclaimed.load(), 0);
  ASSERT_OK(fs_->FlushAll(/*sync=*/false));
  EXPECT_EQ(DirtyBytes(), 0u);
  CloseFs();
  FsckReport rep;
  RunFsck(&rep);
  EXPECT_EQ(rep.inodes, 1u + busy.size());
  EXPECT_EQ(rep.pointers, 64u * busy.size());
  for (size_t i = 0; i < rep.errors.size() && i < 5; i++) ADD_FAILURE() << rep.errors[i];
  EXPECT_EQ(rep.errors.size(), 0u);
  for (size_t i = 0; i < rep.notes.size() && i < 5; i++) ADD_FAILURE() << rep.notes[i];
}

// Fsyncs of four files at once: each holds only its own inode's pointer
// lock, and LevelDB's sync waits outside it, so the waiting syncs are
// committed together. With each log sync taking 200 ms, four fsyncs need
// two (the first, then one for the others once their unsynced batches
// passed LevelDB's writer queue), at most three; with one global pointer
// mutex, held while a flush's unsynced write queued behind a sync in
// progress, they took four.
class FsyncGroupTest : public SmallBlockFsTest {
 protected:
  FsOptions fs_options() const override {
    FsOptions o = SmallBlockFsTest::fs_options();
    o.store.leveldb_env = &env_;
    return o;
  }
  sepfs::testing::Calls calls_;
  mutable sepfs::testing::ScriptedEnv env_{&calls_};
};

TEST_F(FsyncGroupTest, ConcurrentFsyncsShareLevelDbSyncs) {
  std::vector<uint64_t> inos;
  for (int t = 0; t < kThreads; t++) inos.push_back(Create(kRoot, "f" + std::to_string(t)));
  ASSERT_OK(fs_->FsyncDir(kRoot));
  for (int t = 0; t < kThreads; t++) ASSERT_OK(fs_->Write(inos[t], 0, Payload(t, 5000)));
  calls_.sync_delay_ms = 200;
  const int before = calls_.log_syncs;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] { EXPECT_OK(fs_->Fsync(inos[t], false)); });
  }
  for (auto& th : threads) th.join();
  calls_.sync_delay_ms = 0;
  EXPECT_GE(calls_.log_syncs - before, 1);
  EXPECT_LT(calls_.log_syncs - before, kThreads);
  Reopen();
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(ReadAll(inos[t]), Payload(t, 5000)) << t;
}

}  // namespace
}  // namespace sepfs::fs::testing
