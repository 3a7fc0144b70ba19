// Helpers shared by the fs core tests: a temporary store, a fixture that
// opens a Filesystem on it, and small wrappers that keep tests short.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "fs/clock.h"
#include "fs/filesystem.h"
#include "fs/fsck.h"
#include "fs/store.h"
#include "tests/temp_dir.h"

namespace sepfs::fs::testing {

using sepfs::testing::Payload;
using sepfs::testing::TempDir;

// Status assertions that print the whole status on failure and accept
// streamed context: ASSERT_OK(st) << "while ...".
inline ::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}
inline ::testing::AssertionResult HasErrno(const Status& s, int e) {
  if (s.err() == e) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected errno " << e << " (" << std::strerror(e)
                                       << "), got " << s.ToString();
}
#define ASSERT_OK(expr) ASSERT_TRUE(::sepfs::fs::testing::IsOk(expr)) << #expr << " "
#define EXPECT_OK(expr) EXPECT_TRUE(::sepfs::fs::testing::IsOk(expr)) << #expr << " "
#define ASSERT_ERRNO(expr, e) \
  ASSERT_TRUE(::sepfs::fs::testing::HasErrno((expr), (e))) << #expr << " "
#define EXPECT_ERRNO(expr, e) \
  EXPECT_TRUE(::sepfs::fs::testing::HasErrno((expr), (e))) << #expr << " "

// Returns once the file system's clock (fs::Now, the kernel's coarse clock:
// one tick is 1-10 ms) has moved on, so the next change stamps a later time.
inline void TickClock() {
  const kv::Timespec t0 = Now();
  while (Now() == t0) {
    struct timespec ts = {0, 500'000};
    nanosleep(&ts, nullptr);
  }
}

// Fixture: a store made by Mkfs with block_size() and a Filesystem on it.
// Subclasses choose the block size by overriding block_size().
class FsTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kRoot = Filesystem::kRootIno;

  virtual uint32_t block_size() const { return 64 * 1024; }
  // mkfs's inline limit; unset: the default for block_size().
  virtual std::optional<uint32_t> inline_max() const { return std::nullopt; }
  virtual FsOptions fs_options() const {
    FsOptions o;
    o.flush_interval_sec = 3600;  // tests decide when data is flushed
    return o;
  }

  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    store_dir_ = tmp_.Sub("store");
    MkfsOptions mo;
    mo.block_size = block_size();
    mo.inline_max = inline_max();
    mo.segment_size = 4ull << 20;
    ASSERT_OK(Mkfs(store_dir_, mo));
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  }

  void TearDown() override {
    if (fs_) {
      EXPECT_OK(fs_->Close());
    }
    fs_.reset();
  }

  // Close() then Open() again: everything in memory is gone.
  void Reopen() {
    ASSERT_TRUE(fs_);
    ASSERT_OK(fs_->Close());
    fs_.reset();
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  }

  void CloseFs() {
    ASSERT_TRUE(fs_);
    ASSERT_OK(fs_->Close());
    fs_.reset();
  }

  // Opens the store in a child process, runs fn(fs) there and ends the
  // child with _exit() without closing anything: the store is left as after
  // a crash (what reached the kernel survives, nothing else). fn returns 0
  // or the number of the step that failed. The parent's Filesystem must be
  // closed.
  template <typename Fn>
  void InCrashingChild(Fn fn) {
    ASSERT_FALSE(fs_);
    std::fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(60);  // never hang the test run
      std::unique_ptr<Filesystem> fs;
      if (!Filesystem::Open(store_dir_, fs_options(), &fs).ok()) _exit(100);
      const int rc = fn(fs.get());
      (void)fs.release();  // no destructor, no Close: a crash
      _exit(rc);
    }
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFEXITED(wstatus)) << "child died, status " << wstatus;
    ASSERT_EQ(WEXITSTATUS(wstatus), 0) << "child failed at step " << WEXITSTATUS(wstatus);
  }

  std::unique_ptr<Store> OpenStore() {
    std::unique_ptr<Store> s;
    Status st = Store::Open(store_dir_, StoreOptions{}, &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }

  // Applies one batch to the closed store.
  void Damage(const std::function<void(kv::MetaStore*, kv::Batch*)>& fn) {
    auto s = OpenStore();
    ASSERT_TRUE(s);
    kv::Batch b;
    fn(s->meta(), &b);
    ASSERT_OK(s->meta()->Write(&b, /*sync=*/true));
  }

  // Runs Fsck on the closed store, opened with so.
  void RunFsck(FsckReport* rep, const StoreOptions& so = {}) {
    ASSERT_FALSE(fs_) << "close the Filesystem first";
    std::unique_ptr<Store> store;
    ASSERT_OK(Store::Open(store_dir_, so, &store));
    ASSERT_OK(Fsck(store.get(), rep, nullptr));
  }

  // Number of metadata keys that start with prefix.
  uint64_t KeysWithPrefix(std::string_view prefix) {
    uint64_t n = 0;
    EXPECT_OK(fs_->store()->meta()->ScanPrefix(prefix, [&](std::string_view, std::string_view) {
      n++;
      return true;
    }));
    return n;
  }

  // Closes the Filesystem, runs Fsck, expects a clean report with the
  // segment counters checked, and reopens.
  void ExpectFsckClean() {
    CloseFs();
    FsckReport rep;
    RunFsck(&rep);
    for (const auto& e : rep.errors) ADD_FAILURE() << "fsck: " << e;
    for (const auto& n : rep.notes) ADD_FAILURE() << "unexpected fsck note: " << n;
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  }

  uint64_t Create(uint64_t parent, std::string_view name, uint32_t mode = S_IFREG | 0644) {
    kv::InodeRecord r;
    const Status st = fs_->Mknod(caller_, parent, name, mode, 0, &r);
    EXPECT_TRUE(st.ok()) << "create " << name << ": " << st.ToString();
    return r.ino;
  }
  // A file in the root holding data, flushed (its records and pointers
  // written); returns its inode.
  uint64_t WriteFile(std::string_view name, const std::string& data) {
    const uint64_t ino = Create(kRoot, name);
    EXPECT_OK(fs_->Write(ino, 0, data));
    EXPECT_OK(fs_->Flush(ino));
    return ino;
  }
  uint64_t Mkdir(uint64_t parent, std::string_view name, uint32_t mode = 0755) {
    return Create(parent, name, S_IFDIR | mode);
  }
  kv::InodeRecord Attr(uint64_t ino) {
    kv::InodeRecord r;
    const Status st = fs_->GetAttr(ino, &r);
    EXPECT_TRUE(st.ok()) << "getattr " << ino << ": " << st.ToString();
    return r;
  }
  // Looks name up, and gives the kernel reference back at once.
  Status LookupNoRef(uint64_t parent, std::string_view name, kv::InodeRecord* out) {
    Status st = fs_->Lookup(parent, name, out);
    if (st.ok()) fs_->Forget(out->ino, 1);
    return st;
  }
  uint64_t InoOf(uint64_t parent, std::string_view name) {
    kv::InodeRecord r;
    const Status st = LookupNoRef(parent, name, &r);
    EXPECT_TRUE(st.ok()) << "lookup " << name << ": " << st.ToString();
    return r.ino;
  }
  std::string ReadAll(uint64_t ino) {
    std::string out;
    const uint64_t size = Attr(ino).size;
    const Status st = fs_->Read(ino, 0, size + 1, &out);
    EXPECT_TRUE(st.ok()) << "read " << ino << ": " << st.ToString();
    return out;
  }
  void SetSize(uint64_t ino, uint64_t size) {
    SetAttrRequest req;
    req.set_size = true;
    req.size = size;
    kv::InodeRecord r;
    const Status st = fs_->SetAttr(ino, req, &r);
    EXPECT_TRUE(st.ok()) << "truncate " << ino << " to " << size << ": " << st.ToString();
    EXPECT_EQ(r.size, size);
  }

  // The "dirty bytes" figure of StatsText(): unflushed data in memory.
  uint64_t DirtyBytes() {
    const std::string text = fs_->StatsText();
    const std::string label = "dirty bytes";
    const size_t pos = text.find(label);
    EXPECT_NE(pos, std::string::npos) << text;
    if (pos == std::string::npos) return UINT64_MAX;
    return std::strtoull(text.c_str() + pos + label.size(), nullptr, 10);
  }

  TempDir tmp_;
  std::string store_dir_;
  std::unique_ptr<Filesystem> fs_;
  Caller caller_{1000, 1000};
};

// Same with a 4 KiB block size: multi-block logic with small data.
class SmallBlockFsTest : public FsTest {
 protected:
  uint32_t block_size() const override { return 4096; }
};

}  // namespace sepfs::fs::testing
