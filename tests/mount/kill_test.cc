// kill -9 of the real daemon in the middle of a mixed workload.
//
// Each iteration mounts the store, runs a workload in a forked child (files
// of random sizes, some fsync'd, renames, unlinks, mkdirs), SIGKILLs the
// daemon after 50-500 ms, detaches the dead mount, remounts and checks that
// every file the child fsync'd (recorded in a side file outside the mount,
// itself fsync'd, only after the fsync returned) reads back byte for byte;
// then unmounts and expects `sepfs fsck` to exit 0. The store is kept across
// iterations, so each check covers all earlier iterations too.
//
// KILL_ITERATIONS (default 50) and KILL_SEED tune it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

constexpr size_t kPool = 4u << 20;  // file contents are slices of this pool

uint64_t EnvNumber(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

class KillTest : public MountFixture {
 protected:
  KillTest() { watchdog_seconds_ = 900; }
};

// The child: plain system calls only (forked from a threaded process).
// Writes "rel offset size\n" to side_fd after each file's fsync returned.
[[noreturn]] void Workload(const std::string& mnt, int iter, uint64_t seed, const char* pool,
                           int side_fd) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto rnd = [&x](uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return n ? x % n : 0;
  };
  char dir[512], path[600], path2[600], line[700];
  std::snprintf(dir, sizeof dir, "%s/it%d", mnt.c_str(), iter);
  if (::mkdir(dir, 0755) != 0) ::_exit(2);
  int subdirs = 0;
  for (int k = 0; k < 100000; k++) {
    const uint64_t dice = rnd(100);
    if (dice < 60) {  // a new file, fsync'd or not
      const bool sync = rnd(2) == 0;
      const int sub = subdirs ? static_cast<int>(rnd(subdirs + 1)) : 0;
      char rel[200];
      if (sub == 0) {
        std::snprintf(rel, sizeof rel, "it%d/%s%d", iter, sync ? "s" : "u", k);
      } else {
        std::snprintf(rel, sizeof rel, "it%d/d%d/%s%d", iter, sub, sync ? "s" : "u", k);
      }
      std::snprintf(path, sizeof path, "%s/%s", mnt.c_str(), rel);
      const size_t size = rnd(4) == 0 ? rnd(1u << 20) : rnd(200000);
      const size_t off = rnd(kPool - size);
      int fd = ::open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
      if (fd < 0) ::_exit(3);
      size_t done = 0;
      while (done < size) {
        const size_t n = std::min<size_t>(size - done, 1 + rnd(256 << 10));
        ssize_t w = ::write(fd, pool + off + done, n);
        if (w <= 0) ::_exit(4);
        done += static_cast<size_t>(w);
      }
      if (sync) {
        if (::fsync(fd) != 0) ::_exit(5);
        int len = std::snprintf(line, sizeof line, "%s %zu %zu\n", rel, off, size);
        if (::write(side_fd, line, len) != len || ::fsync(side_fd) != 0) ::_exit(6);
      }
      ::close(fd);
    } else if (dice < 70) {  // rename an unsynced file (maybe over another)
      std::snprintf(path, sizeof path, "%s/u%d", dir, static_cast<int>(rnd(k + 1)));
      std::snprintf(path2, sizeof path2, "%s/u%d", dir, static_cast<int>(rnd(k + 1)));
      (void)::rename(path, path2);
    } else if (dice < 80) {  // unlink an unsynced file
      std::snprintf(path, sizeof path, "%s/u%d", dir, static_cast<int>(rnd(k + 1)));
      (void)::unlink(path);
    } else if (dice < 85) {  // mkdir
      std::snprintf(path, sizeof path, "%s/d%d", dir, subdirs + 1);
      if (::mkdir(path, 0755) == 0) subdirs++;
    } else if (dice < 90) {  // fsync of the directory
      int fd = ::open(dir, O_RDONLY | O_DIRECTORY);
      if (fd >= 0) {
        (void)::fsync(fd);
        ::close(fd);
      }
    } else {  // overwrite part of an unsynced file
      std::snprintf(path, sizeof path, "%s/u%d", dir, static_cast<int>(rnd(k + 1)));
      int fd = ::open(path, O_WRONLY);
      if (fd >= 0) {
        (void)::pwrite(fd, pool + rnd(kPool / 2), rnd(100000), static_cast<off_t>(rnd(100000)));
        ::close(fd);
      }
    }
  }
  ::_exit(0);
}

TEST_F(KillTest, KillDaemonDuringWorkload) {
  const int iterations = static_cast<int>(EnvNumber("KILL_ITERATIONS", 50));
  const uint64_t seed = EnvNumber("KILL_SEED", static_cast<uint64_t>(::time(nullptr)));
  std::printf("KILL_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::string pool = RandomBytes(kPool, seed);
  const std::string side = root() + "/fsynced.txt";
  uint64_t records = 0, checked = 0, bytes_checked = 0;
  int killed_mid_write = 0;
  Unmount();  // the loop mounts
  for (int it = 0; it < iterations; it++) {
    SCOPED_TRACE("KILL_SEED=" + std::to_string(seed) + " iteration " + std::to_string(it));
    ASSERT_NO_FATAL_FAILURE(Mount());
    const int side_fd = ::open(side.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
    ASSERT_GE(side_fd, 0);
    const uint64_t child_seed = rng();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) Workload(mnt(), it, child_seed, pool.data(), side_fd);
    ::close(side_fd);
    const int delay_ms = 50 + static_cast<int>(rng() % 451);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    int status = 0;
    const bool child_done = ::waitpid(child, &status, WNOHANG) == child;
    ASSERT_NO_FATAL_FAILURE(KillDaemon());
    if (!child_done) {
      killed_mid_write++;
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
    } else {
      ADD_FAILURE() << "workload child ended before the kill: status " << status;
    }
    ASSERT_NO_FATAL_FAILURE(Mount());
    // Every recorded file, from this and all earlier iterations.
    std::ifstream in(side);
    std::string rel;
    size_t off, size;
    uint64_t n = 0;
    while (in >> rel >> off >> size) {
      n++;
      std::string got;
      const int err = ReadFileErrno(P(rel), &got);
      ASSERT_EQ(err, 0) << rel << ": " << ErrName(err) << " after kill in iteration " << it;
      ASSERT_TRUE(SameBytes(got, pool.substr(off, size))) << rel;
      bytes_checked += size;
    }
    checked += n;
    records = n;
    ASSERT_NO_FATAL_FAILURE(Unmount());
    CmdResult fsck = FsckResult();
    ASSERT_EQ(fsck.exit_code, 0) << fsck.Describe();
  }
  std::printf(
      "kill summary: %d kills (%d mid-workload), %llu fsync'd files recorded, %llu file checks "
      "(%.1f MiB) passed, fsck clean after every kill\n",
      iterations, killed_mid_write, static_cast<unsigned long long>(records),
      static_cast<unsigned long long>(checked), bytes_checked / 1048576.0);
  ASSERT_NO_FATAL_FAILURE(Mount());  // TearDown unmounts
}

// Files written and closed but never fsync'd, then the daemon killed at
// once (while their data was still in its dirty-block cache): each comes
// back whole or shorter, never at its new size with zeros (the kernel's
// SETATTR of the times at close stored the size before the data). A file
// renamed over another replaces it whole (the name read as zeros).
TEST_F(KillTest, ClosedFilesAreWholeOrShortAfterAKill) {
  const std::string old_data = RandomBytes(150000, 80), new_data = RandomBytes(300000, 81);
  WriteFile(P("config"), old_data);
  UniqueFd dir(::open(mnt().c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(dir.ok());
  {
    UniqueFd fd(::open(P("config").c_str(), O_RDONLY));
    ASSERT_TRUE(fd.ok());
    ASSERT_SYS_OK(::fsync(fd.get()));
  }
  ASSERT_SYS_OK(::fsync(dir.get()));
  dir.Close();
  for (int i = 0; i < 8; i++) WriteFile(P("f" + std::to_string(i)), new_data);
  WriteFile(P("config.tmp"), new_data);
  ASSERT_SYS_OK(::rename(P("config.tmp").c_str(), P("config").c_str()));
  ASSERT_NO_FATAL_FAILURE(KillDaemon());
  ASSERT_NO_FATAL_FAILURE(Mount());
  for (int i = 0; i < 8; i++) {
    const std::string got = ReadFile(P("f" + std::to_string(i)));
    EXPECT_TRUE(got.size() <= new_data.size() && new_data.compare(0, got.size(), got) == 0)
        << "f" << i << ": " << got.size() << " bytes, not a prefix of what was written";
  }
  EXPECT_TRUE(SameBytes(ReadFile(P("config")), new_data));
  ASSERT_NO_FATAL_FAILURE(Unmount());
  CmdResult fsck = FsckResult();
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
  ASSERT_NO_FATAL_FAILURE(Mount());  // TearDown unmounts
}

}  // namespace
}  // namespace sepfs::mounttest
