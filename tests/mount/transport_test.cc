// How requests reach the daemon: with -o io_uring over io_uring when the
// kernel offers it (Linux 6.14+ with the fuse module's enable_uring on;
// tools/install-deps turns it on), otherwise through /dev/fuse. Every test
// here needs the kernel's io_uring support and fails, naming the parameter,
// without it.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

constexpr char kEnableUring[] = "/sys/module/fuse/parameters/enable_uring";

// Turns the kernel's FUSE io_uring support on (root may); fails the test,
// saying why, when this kernel has none.
void EnableKernelUring() {
  std::string v;
  ASSERT_EQ(ReadFileErrno(kEnableUring, &v), 0)
      << kEnableUring << " is missing: this kernel has no FUSE over io_uring (Linux 6.14+)";
  if (!v.empty() && v[0] == 'Y') return;
  UniqueFd fd(::open(kEnableUring, O_WRONLY));
  ASSERT_TRUE(fd.ok()) << kEnableUring << ": " << strerror(errno);
  ASSERT_EQ(::write(fd.get(), "Y", 1), 1) << kEnableUring << ": " << strerror(errno);
}

std::string Stats(const std::string& mnt) {
  std::vector<char> buf(256 * 1024);
  const ssize_t n = ::getxattr(mnt.c_str(), "sepfs.stats", buf.data(), buf.size());
  EXPECT_GT(n, 0) << strerror(errno);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : "";
}

// The "fuse transport:" line of the statistics.
std::string Transport(const std::string& mnt) {
  const std::string s = Stats(mnt);
  const std::string key = "fuse transport: ";
  const size_t at = s.find(key);
  EXPECT_NE(at, std::string::npos) << s;
  if (at == std::string::npos) return "";
  const size_t end = s.find('\n', at);
  return s.substr(at + key.size(), end - at - key.size());
}

// The request count of an io_uring transport line ("..., N requests").
uint64_t RingRequests(const std::string& line) {
  const size_t end = line.find(" requests");
  EXPECT_NE(end, std::string::npos) << line;
  if (end == std::string::npos) return 0;
  const size_t start = line.rfind(' ', end - 1);
  return std::stoull(line.substr(start + 1, end - start - 1));
}

unsigned OnlineCpus() {
  return static_cast<unsigned>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

// The kernel's queue count: the possible CPUs ("0-1", "0,2-5") counted.
unsigned PossibleCpus() {
  std::string list;
  EXPECT_EQ(ReadFileErrno("/sys/devices/system/cpu/possible", &list), 0);
  unsigned n = 0;
  size_t at = 0;
  while (at < list.size() && std::isdigit(static_cast<unsigned char>(list[at]))) {
    size_t end;
    const unsigned first = std::stoul(list.substr(at), &end);
    at += end;
    unsigned last = first;
    if (at < list.size() && list[at] == '-') {
      last = std::stoul(list.substr(at + 1), &end);
      at += 1 + end;
    }
    n += last - first + 1;
    if (at < list.size() && list[at] == ',') ++at;
  }
  return n;
}

class UringTest : public MountFixture {
 protected:
  UringTest() { mount_options_ = {"io_uring"}; }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(EnableKernelUring());
    MountFixture::SetUp();
  }

  // Writes, reads back, renames, lists, sets an xattr and removes files
  // named by `tag`: each a request or several.
  void Exercise(const std::string& tag) {
    const std::string data = RandomBytes(3 * (1 << 20) + 123, std::hash<std::string>{}(tag));
    ASSERT_NO_FATAL_FAILURE(WriteFile(P(tag), data));
    {
      UniqueFd fd(::open(P(tag).c_str(), O_RDWR));
      ASSERT_TRUE(fd.ok()) << strerror(errno);
      ASSERT_SYS_OK(::fsync(fd.get()));
    }
    EXPECT_TRUE(SameBytes(ReadFile(P(tag)), data));
    ASSERT_SYS_OK(::rename(P(tag).c_str(), P(tag + ".moved").c_str()));
    ASSERT_SYS_OK(::setxattr(P(tag + ".moved").c_str(), "user.k", "v", 1, 0));
    char v[8];
    EXPECT_EQ(::getxattr(P(tag + ".moved").c_str(), "user.k", v, sizeof(v)), 1);
    struct stat st {};
    ASSERT_SYS_OK(::stat(P(tag + ".moved").c_str(), &st));
    EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
    ASSERT_SYS_OK(::unlink(P(tag + ".moved").c_str()));
    EXPECT_ERRNO(::stat(P(tag + ".moved").c_str(), &st), ENOENT);
  }
};

TEST_F(UringTest, RequestsComeOverIoUringWhenTheKernelOffersIt) {
  const std::string before = Transport(mnt());
  ASSERT_EQ(before.rfind("io_uring, " + std::to_string(PossibleCpus()) + " queues x ", 0), 0u)
      << before;
  ASSERT_NO_FATAL_FAILURE(Exercise("f"));
  const std::string after = Transport(mnt());
  // A 3 MiB write and read, an fsync, a rename, xattrs, stats and an unlink
  // are dozens of requests; forgets alone would still use /dev/fuse.
  EXPECT_GE(RingRequests(after), RingRequests(before) + 10) << before << " -> " << after;
  EXPECT_EQ(after.find("refused"), std::string::npos) << after;
}

// Each CPU has its own queue: callers pinned to every CPU, at once, get
// their own data back.
TEST_F(UringTest, CallersOnEveryCpuAreServed) {
  const unsigned cpus = OnlineCpus();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (unsigned c = 0; c < cpus; ++c) {
    for (int k = 0; k < 2; ++k) {
      threads.emplace_back([&, c, k] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) ++failures;
        for (int i = 0; i < 20; ++i) {
          const std::string name = P("c" + std::to_string(c) + "-" + std::to_string(k) + "-" +
                                     std::to_string(i));
          const std::string data = RandomBytes(4096 * (i + 1), c * 1000 + k * 100 + i);
          UniqueFd fd(::open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644));
          if (!fd.ok() || ::pwrite(fd.get(), data.data(), data.size(), 0) !=
                              static_cast<ssize_t>(data.size())) {
            ++failures;
            continue;
          }
          std::string back(data.size(), '\0');
          if (::pread(fd.get(), back.data(), back.size(), 0) != static_cast<ssize_t>(back.size()) ||
              back != data || ::unlink(name.c_str()) != 0) {
            ++failures;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Transport(mnt()).rfind("io_uring, ", 0), 0u);
}

// The count in "idle handoff on N replies (M stalled)"; fails if absent.
uint64_t HandoffCount(const std::string& line, bool stalled) {
  const std::string key = stalled ? " replies (" : "idle handoff on ";
  const size_t at = line.find(key);
  EXPECT_NE(at, std::string::npos) << line;
  if (at == std::string::npos) return 0;
  return std::stoull(line.substr(at + key.size()));
}

// A lone caller's replies are committed at SCHED_IDLE (so it is woken on
// its own CPU); while other tasks keep every CPU busy, the handoff stalls
// its thread and backs off, and the requests are still all served.
TEST_F(UringTest, IdleHandoffBacksOffWhileTheCpuIsBusy) {
  auto pin = [](unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
  };
  const std::string f = P("x");
  ASSERT_NO_FATAL_FAILURE(WriteFile(f, "data"));
  // More than a backed-off thread's replies without the handoff (256).
  constexpr int kCalls = 600;
  auto round_trips = [&](int n) {
    int served = 0;
    char v[8];
    for (int i = 0; i < n; ++i) {
      if (::getxattr(f.c_str(), "user.none", v, sizeof(v)) < 0 && errno == ENODATA) ++served;
    }
    return served;
  };
  uint64_t handoffs, stalls;
  {
    std::thread lone([&] {
      ASSERT_TRUE(pin(0));
      EXPECT_EQ(round_trips(kCalls), kCalls);
    });
    lone.join();
    const std::string line = Transport(mnt());
    handoffs = HandoffCount(line, false);
    stalls = HandoffCount(line, true);
    // Not all of them: tests running beside this one may make a thread
    // back off for a while.
    EXPECT_GT(handoffs, 0u) << line;
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (unsigned c = 0; c < OnlineCpus(); ++c) {
    hogs.emplace_back([&, c] {
      (void)pin(c);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  // The backoff is kept per ring entry, and the kernel spreads requests
  // over a queue's entries: one that stalled in the first part (under the
  // load of tests running beside this one) hands off again only after 256
  // replies of its own. So: rounds of calls until a handoff was counted,
  // at most 20.
  std::string line;
  std::thread busy([&] {
    EXPECT_TRUE(pin(0));
    for (int r = 0; r < 20; ++r) {
      EXPECT_EQ(round_trips(kCalls), kCalls);
      line = Transport(mnt());
      if (HandoffCount(line, false) > handoffs) break;
    }
  });
  busy.join();
  stop = true;
  for (auto& t : hogs) t.join();
  EXPECT_GT(HandoffCount(line, false), handoffs) << line;
  // A stall is counted when the stalled thread runs again, which a thread
  // at SCHED_IDLE does only once the CPU is free of other work: after the
  // busy loops, and after whatever else the machine runs (CI runs tests
  // side by side; CI failed when the count was read with the loops still
  // running). Wait up to 60 s for it.
  for (int i = 0; i < 600; ++i) {
    line = Transport(mnt());
    if (HandoffCount(line, true) > stalls) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(HandoffCount(line, true), stalls) << line;
}

// Unmounting ends the ring's waiting entries; the daemon exits cleanly and
// everything written is there at the next mount.
TEST_F(UringTest, UnmountEndsTheRingAndKeepsTheData) {
  const std::string data = RandomBytes((1 << 20) + 7, 5);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("kept"), data));
  ASSERT_NO_FATAL_FAILURE(Unmount());
  ASSERT_NO_FATAL_FAILURE(Mount());
  EXPECT_EQ(Transport(mnt()).rfind("io_uring, ", 0), 0u);
  EXPECT_TRUE(SameBytes(ReadFile(P("kept")), data));
}

// The default, and -o noio_uring after -o io_uring (the last one counts).
TEST_F(UringTest, WithoutTheOptionRequestsGoThroughDevFuse) {
  const std::string devfuse = "/dev/fuse (io_uring not asked for: -o io_uring)";
  ASSERT_NO_FATAL_FAILURE(Unmount());
  mount_options_.clear();
  ASSERT_NO_FATAL_FAILURE(Mount());
  EXPECT_EQ(Transport(mnt()), devfuse);
  ASSERT_NO_FATAL_FAILURE(Exercise("g"));
  EXPECT_EQ(Transport(mnt()), devfuse);
  ASSERT_NO_FATAL_FAILURE(Unmount());
  mount_options_ = {"io_uring", "noio_uring"};
  ASSERT_NO_FATAL_FAILURE(Mount());
  EXPECT_EQ(Transport(mnt()), devfuse);
}

// With the kernel's support off the mount falls back to /dev/fuse and says
// why; the parameter is restored for the other tests.
TEST_F(UringTest, AKernelWithoutIoUringFallsBackToDevFuse) {
  ASSERT_NO_FATAL_FAILURE(Unmount());
  struct Restore {
    ~Restore() { EnableKernelUring(); }
  } restore;
  {
    UniqueFd fd(::open(kEnableUring, O_WRONLY));
    ASSERT_TRUE(fd.ok()) << strerror(errno);
    ASSERT_EQ(::write(fd.get(), "N", 1), 1) << strerror(errno);
  }
  ASSERT_NO_FATAL_FAILURE(Mount());
  EXPECT_EQ(Transport(mnt()).rfind("/dev/fuse (the kernel offers no io_uring", 0), 0u)
      << Transport(mnt());
  ASSERT_NO_FATAL_FAILURE(Exercise("h"));
}

}  // namespace
}  // namespace sepfs::mounttest
