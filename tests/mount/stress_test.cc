// Load and crash tests: 100 000 files in one directory, concurrent writers,
// and SIGKILL of the daemon after fsync and in the middle of a workload.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

constexpr size_t kMiB = 1 << 20;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class StressTest : public MountFixture {
 protected:
  StressTest() { watchdog_seconds_ = 420; }
};

TEST_F(StressTest, HundredThousandFilesInOneDirectory) {
  // SEPFS_MANY_FILES lowers the count for quick local runs only.
  const char* env = std::getenv("SEPFS_MANY_FILES");
  const int kFiles = env != nullptr ? std::atoi(env) : 100000;
  ASSERT_SYS_OK(::mkdir(P("big").c_str(), 0755));
  auto name = [](int i) {
    char buf[32];
    snprintf(buf, sizeof(buf), "file-%06d", i);
    return std::string(buf);
  };
  auto start = Clock::now();
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(P("big/" + name(i)).c_str(),
                    O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << name(i) << ": " << strerror(errno);
    ASSERT_EQ(::close(fd), 0) << name(i) << ": " << strerror(errno);
  }
  fprintf(stderr, "created %d files in %.1f s\n", kFiles, SecondsSince(start));

  auto check = [&](const char* when) {
    auto t = Clock::now();
    DIR* d = ::opendir(P("big").c_str());
    ASSERT_NE(d, nullptr);
    std::set<std::string> names;
    size_t entries = 0;
    errno = 0;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      ++entries;
      names.insert(n);
    }
    EXPECT_EQ(errno, 0) << "readdir";
    ::closedir(d);
    EXPECT_EQ(entries, static_cast<size_t>(kFiles)) << when << ": duplicates?";
    ASSERT_EQ(names.size(), static_cast<size_t>(kFiles)) << when;
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(names.count(name(i))) << when << ": missing " << name(i);
    }
    fprintf(stderr, "%s: readdir in %.1f s\n", when, SecondsSince(t));
    t = Clock::now();
    for (int i = 0; i < kFiles; ++i) {
      struct stat st {};
      ASSERT_EQ(::lstat(P("big/" + name(i)).c_str(), &st), 0)
          << when << ": " << name(i) << ": " << strerror(errno);
      ASSERT_TRUE(S_ISREG(st.st_mode));
      ASSERT_EQ(st.st_size, 0);
    }
    fprintf(stderr, "%s: stat of all in %.1f s\n", when, SecondsSince(t));
  };
  ASSERT_NO_FATAL_FAILURE(check("before remount"));
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(check("after remount"));
  // Lookups of absent names in the big directory still say ENOENT.
  struct stat st {};
  EXPECT_ERRNO(::lstat(P("big/file-" + std::to_string(kFiles)).c_str(), &st),
               ENOENT);
  EXPECT_ERRNO(::lstat(P("big/file-").c_str(), &st), ENOENT);
  // Delete every other file; the listing follows.
  for (int i = 0; i < kFiles; i += 2) {
    ASSERT_EQ(::unlink(P("big/" + name(i)).c_str()), 0) << name(i);
  }
  DIR* d = ::opendir(P("big").c_str());
  ASSERT_NE(d, nullptr);
  size_t left = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ++left;
    int i = std::atoi(e->d_name + 5);
    EXPECT_EQ(i % 2, 1) << e->d_name;
  }
  ::closedir(d);
  EXPECT_EQ(left, static_cast<size_t>(kFiles / 2));
  fprintf(stderr, "total %.1f s\n", SecondsSince(start));
}

TEST_F(StressTest, ConcurrentWritersOfDifferentFiles) {
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      const std::string path = P("t" + std::to_string(t));
      const std::string data = RandomBytes(6 * kMiB + 1000 * t, 500 + t);
      int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) {
        ++failures;
        return;
      }
      size_t off = 0;
      while (off < data.size()) {
        size_t n = std::min<size_t>(data.size() - off, 1 + rng() % 300000);
        ssize_t w = ::write(fd, data.data() + off, n);
        if (w <= 0) {
          ++failures;
          break;
        }
        off += static_cast<size_t>(w);
      }
      if (t % 2 == 0 && ::fsync(fd) != 0) ++failures;
      if (::close(fd) != 0) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  for (int pass = 0; pass < 2; ++pass) {
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_TRUE(SameBytes(ReadFile(P("t" + std::to_string(t))),
                            RandomBytes(6 * kMiB + 1000 * t, 500 + t)))
          << "file " << t << " pass " << pass;
    }
    if (pass == 0) {
      ASSERT_NO_FATAL_FAILURE(Remount());
    }
  }
}

TEST_F(StressTest, ConcurrentPwritesToDisjointRegionsOfOneFile) {
  // Threads own interleaved stripes; stripe sizes that are not multiples of
  // any block size make neighbouring threads share blocks.
  constexpr int kThreads = 4;
  constexpr size_t kStripe = 10007;
  constexpr size_t kStripes = 1200;  // ~12 MiB
  const std::string data = RandomBytes(kStripe * kStripes, 600);
  UniqueFd fd(::open(P("shared").c_str(), O_CREAT | O_RDWR, 0644));
  ASSERT_TRUE(fd.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks its stripes in its own order.
      std::vector<size_t> mine;
      for (size_t s = t; s < kStripes; s += kThreads) mine.push_back(s);
      std::shuffle(mine.begin(), mine.end(), std::mt19937_64(t));
      for (size_t s : mine) {
        size_t off = s * kStripe;
        size_t done = 0;
        while (done < kStripe) {
          ssize_t w = ::pwrite(fd.get(), data.data() + off + done,
                               kStripe - done, off + done);
          if (w <= 0) {
            ++failures;
            return;
          }
          done += static_cast<size_t>(w);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), data.size() + 1, 0), data));
  ASSERT_SYS_OK(::fsync(fd.get()));
  ASSERT_EQ(fd.Close(), 0);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_TRUE(SameBytes(ReadFile(P("shared")), data));
}

// Writes dir/name durably the classic way: a fresh temporary file, fsync,
// rename over the name, fsync of the directory.
void WriteDurably(const std::string& dir, const std::string& name,
                  const std::string& data) {
  const std::string tmp = dir + "/." + name + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
                     0644));
  ASSERT_TRUE(fd.ok()) << tmp << ": " << strerror(errno);
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), data.data(), data.size(), 0));
  ASSERT_EQ(::fsync(fd.get()), 0) << strerror(errno);
  ASSERT_EQ(fd.Close(), 0);
  ASSERT_EQ(::rename(tmp.c_str(), (dir + "/" + name).c_str()), 0)
      << strerror(errno);
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(::fsync(d.get()), 0) << strerror(errno);
}

// Unsynced background traffic: creates, overwrites, renames and deletes until
// told to stop or the mount dies under it. Errors are expected once the
// daemon is killed.
void Churn(const std::string& dir, int seed, std::atomic<bool>* stop) {
  std::mt19937_64 rng(seed);
  const std::string chunk = RandomBytes(256 * 1024, seed);
  for (int i = 0; !stop->load(); ++i) {
    std::string name = dir + "/churn" + std::to_string(i % 16);
    int fd = ::open(name.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == ENOTCONN || errno == EIO || errno == ENOENT) return;
      continue;
    }
    size_t n = 1 + rng() % chunk.size();
    ssize_t w = ::pwrite(fd, chunk.data(), n, rng() % (2 * kMiB));
    ::close(fd);
    if (w < 0 && (errno == ENOTCONN || errno == EIO)) return;
    if (i % 5 == 0) {
      ::rename(name.c_str(), (dir + "/moved" + std::to_string(i % 7)).c_str());
    }
    if (i % 11 == 0) ::unlink((dir + "/moved" + std::to_string(i % 3)).c_str());
    if (i % 13 == 0) {
      ::mkdir((dir + "/sub" + std::to_string(i % 5)).c_str(), 0755);
    }
  }
}

TEST_F(StressTest, KillAfterFsyncKeepsSyncedData) {
  std::mt19937_64 rng(42);
  std::vector<std::pair<std::string, std::string>> synced;  // name, data
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Churn in the background while the durable files are written.
    std::atomic<bool> stop{false};
    std::thread churn(Churn, P("d"), round, &stop);
    for (int f = 0; f < 3; ++f) {
      std::string name = "durable-" + std::to_string(round) + "-" +
                         std::to_string(f);
      std::string data =
          RandomBytes(1 + rng() % (3 * kMiB), 700 + round * 10 + f);
      ASSERT_NO_FATAL_FAILURE(WriteDurably(P("d"), name, data));
      synced.emplace_back(name, std::move(data));
    }
    // An fsync'd overwrite of an earlier file replaces its content.
    if (round > 0) {
      auto& [name, data] = synced[rng() % synced.size()];
      data = RandomBytes(1 + rng() % kMiB, 800 + round);
      ASSERT_NO_FATAL_FAILURE(WriteDurably(P("d"), name, data));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    ASSERT_NO_FATAL_FAILURE(KillDaemon());
    stop = true;
    churn.join();
    ASSERT_NO_FATAL_FAILURE(Mount());
    for (const auto& [name, data] : synced) {
      std::string got;
      ASSERT_EQ(ReadFileErrno(P("d/" + name), &got), 0) << name;
      EXPECT_TRUE(SameBytes(got, data)) << name << " after kill";
    }
    // The tree is usable: everything listed can be stat'ed and read.
    DIR* dir = ::opendir(P("d").c_str());
    ASSERT_NE(dir, nullptr);
    while (struct dirent* e = ::readdir(dir)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      EXPECT_FALSE(n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0)
          << "a temporary file survived its fsync'd rename: " << n;
      struct stat st {};
      ASSERT_EQ(::lstat(P("d/" + n).c_str(), &st), 0) << n;
      if (S_ISREG(st.st_mode)) {
        std::string got;
        EXPECT_EQ(ReadFileErrno(P("d/" + n), &got), 0) << n;
        EXPECT_EQ(got.size(), static_cast<size_t>(st.st_size)) << n;
      }
    }
    ::closedir(dir);
    ASSERT_NO_FATAL_FAILURE(Unmount());
    Fsck();
    ASSERT_NO_FATAL_FAILURE(Mount());
  }
}

TEST_F(StressTest, KillDuringWriteWorkload) {
  const std::string before = RandomBytes(2 * kMiB, 900);
  ASSERT_NO_FATAL_FAILURE(WriteDurably(mnt(), "before", before));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string dir = P("w" + std::to_string(round));
    ASSERT_SYS_OK(::mkdir(dir.c_str(), 0755));
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 3; ++t) {
      workers.emplace_back(Churn, dir, round * 10 + t, &stop);
    }
    // A large streaming writer too.
    workers.emplace_back([&, dir] {
      const std::string chunk = RandomBytes(kMiB, 901);
      int fd = ::open((dir + "/stream").c_str(),
                      O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return;
      while (!stop.load()) {
        if (::write(fd, chunk.data(), chunk.size()) < 0) break;
      }
      ::close(fd);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 400 * round));
    ASSERT_NO_FATAL_FAILURE(KillDaemon());
    stop = true;
    for (auto& w : workers) w.join();
    ASSERT_NO_FATAL_FAILURE(Mount());
    EXPECT_TRUE(SameBytes(ReadFile(P("before")), before));
    ASSERT_NO_FATAL_FAILURE(Unmount());
    CmdResult r = FsckResult();
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    ASSERT_NO_FATAL_FAILURE(Mount());
  }
}

}  // namespace
}  // namespace sepfs::mounttest
