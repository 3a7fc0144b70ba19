// Test fixture for tests that mount a real sepfs daemon through /dev/fuse.
//
// Every test gets a fresh temporary directory /tmp/sepfs-mt-XXXXXX holding
//   store/  the sepfs store (created by `sepfs mkfs`)
//   mnt/    the mountpoint
// The daemon is the binary named by the environment variable SEPFS_BIN,
// started as `sepfs mount -f [-o OPTS] STORE MNT`. Its stdout and stderr go to
// daemon.log in the temporary directory and are printed when something fails.
//
// TearDown always unmounts (lazily if it must), reaps the daemon and removes
// the temporary directory, whatever the test did. A watchdog kills the daemon
// when a test runs longer than watchdog_seconds_, so a hung FUSE request turns
// into ENOTCONN and a failure instead of a hang.
//
// Helpers use gtest assertions; call them inside ASSERT_NO_FATAL_FAILURE()
// when the rest of the test depends on them.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sepfs::mounttest {

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    Reset(other.Release());
    return *this;
  }
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and returns close()'s result (0 or -1 with errno set).
  int Close() {
    int fd = Release();
    return fd >= 0 ? ::close(fd) : 0;
  }

 private:
  int fd_ = -1;
};

struct CmdResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string Describe() const;  // for failure messages
};

// Runs argv (argv[0] is a path) with stdin from /dev/null, capturing stdout
// and stderr through files (so a daemonized grandchild cannot block us).
// Kills the child and sets timed_out after timeout_s seconds.
CmdResult RunCommand(const std::vector<std::string>& argv, int timeout_s = 120);

// The sepfs binary from $SEPFS_BIN; an empty string (and a test failure) when
// unset or not executable.
std::string SepfsBin();
// RunCommand(SepfsBin() + args).
CmdResult RunSepfs(const std::vector<std::string>& args, int timeout_s = 120);

// True when path is a mountpoint according to /proc/self/mountinfo.
bool IsMountpoint(const std::string& path);
// The source ("device", for sepfs the store) of the newest mount at path,
// unescaped, from /proc/self/mountinfo; "" when nothing is mounted there.
std::string MountSource(const std::string& path);
// The super-block options of the newest mount at path ("rw", "user_id=0",
// "default_permissions", ...), from /proc/self/mountinfo.
std::set<std::string> MountSuperOptions(const std::string& path);
// The per-mount options of the newest mount at path ("rw", "noatime",
// "nosuid", ...), from /proc/self/mountinfo; empty when nothing is mounted.
std::set<std::string> MountPointOptions(const std::string& path);

// Deterministic pseudo-random bytes.
std::string RandomBytes(size_t n, uint64_t seed);
// 64-bit FNV-1a.
uint64_t Checksum(const void* data, size_t n);
inline uint64_t Checksum(const std::string& s) {
  return Checksum(s.data(), s.size());
}

// Compares byte strings without printing megabytes: on a mismatch it says
// the sizes and the first differing offset. Use as EXPECT_TRUE(SameBytes(..)).
::testing::AssertionResult SameBytes(const std::string& got,
                                     const std::string& want);

// Whole-file helpers; failures are reported with the path and errno.
void WriteFile(const std::string& path, const std::string& data,
               mode_t mode = 0644);
std::string ReadFile(const std::string& path);
// Returns 0 and fills *out, or the errno of the failing call.
int ReadFileErrno(const std::string& path, std::string* out);
// Writes/reads exactly n bytes at offset (loops on short transfers).
void PwriteAll(int fd, const void* data, size_t n, off_t offset);
std::string PreadAll(int fd, size_t n, off_t offset);
// Removes a tree without crossing into other filesystems.
void RemoveTree(const std::string& path);

// Runs fn in a forked child whose real, effective, saved and filesystem uid
// and gid are uid/gid, with no supplementary groups. fn returns 0 for
// success or an errno; that value is returned (255 when the child failed to
// change identity or crashed). fn must only make plain system calls.
int RunAs(uid_t uid, gid_t gid, const std::function<int()>& fn);
inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;

// Convenience: an errno-style result of a system call returning -1 on error.
inline int Errno(long ret) { return ret < 0 ? errno : 0; }

// "ENOENT" etc.; the number when glibc has no name for it.
inline std::string ErrName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : std::to_string(err);
}

// Expects expr (a system call) to succeed / to fail with errno want.
#define EXPECT_SYS_OK(expr)                                                   \
  do {                                                                        \
    errno = 0;                                                                \
    long sys_ret_ = static_cast<long>(expr);                                  \
    int sys_err_ = errno;                                                     \
    EXPECT_GE(sys_ret_, 0) << #expr << ": " << strerror(sys_err_);            \
  } while (0)
#define ASSERT_SYS_OK(expr)                                                   \
  do {                                                                        \
    errno = 0;                                                                \
    long sys_ret_ = static_cast<long>(expr);                                  \
    int sys_err_ = errno;                                                     \
    ASSERT_GE(sys_ret_, 0) << #expr << ": " << strerror(sys_err_);            \
  } while (0)
#define EXPECT_ERRNO(expr, want)                                              \
  do {                                                                        \
    errno = 0;                                                                \
    long sys_ret_ = static_cast<long>(expr);                                  \
    int sys_err_ = errno;                                                     \
    EXPECT_EQ(sys_ret_, -1) << #expr << " succeeded, expected "               \
                            << ::sepfs::mounttest::ErrName(want);             \
    if (sys_ret_ == -1) {                                                     \
      EXPECT_EQ(sys_err_, want)                                               \
          << #expr << ": got " << ::sepfs::mounttest::ErrName(sys_err_)       \
          << ", expected " << ::sepfs::mounttest::ErrName(want);              \
    }                                                                         \
  } while (0)

class MountFixture : public ::testing::Test {
 protected:
  MountFixture();
  ~MountFixture() override;

  void SetUp() override;
  void TearDown() override;

  // Configuration for SetUp; set these in a derived fixture's constructor.
  std::vector<std::string> mkfs_args_;      // extra `sepfs mkfs` arguments
  std::vector<std::string> mount_options_;  // -o options of every Mount()
  bool mkfs_in_setup_ = true;
  bool mount_in_setup_ = true;
  int watchdog_seconds_ = 300;

  // Paths.
  const std::string& root() const { return root_; }
  const std::string& store() const { return store_; }
  const std::string& mnt() const { return mnt_; }
  void set_store(const std::string& store) { store_ = store; }
  // mnt() + "/" + rel.
  std::string P(const std::string& rel) const { return mnt_ + "/" + rel; }

  // `sepfs mkfs [args] STORE`, expecting exit status 0.
  void Mkfs(const std::vector<std::string>& extra = {});
  // Starts the daemon in the foreground and waits until mnt() is mounted.
  // extra_options are appended to mount_options_.
  void Mount(const std::vector<std::string>& extra_options = {});
  // Starts the daemon; returns false (without failing) when it exits before
  // the mount is live, with its exit status in *exit_code and log in *log.
  bool TryMount(const std::vector<std::string>& options, int* exit_code,
                std::string* log);
  // umount2(mnt) (retrying EBUSY), then expects the daemon to exit with 0.
  void Unmount();
  // Unmount() then Mount() with the same options.
  void Remount();
  // SIGKILLs the daemon, reaps it and detaches the dead mount.
  void KillDaemon();
  // Sends sig to the daemon and returns its wait status once it exited
  // (-1 if it did not within 120 s: then it is killed); detaches a mount
  // it left behind.
  int SignalDaemon(int sig);
  // `sepfs fsck STORE`, expecting exit status 0.
  void Fsck();
  CmdResult FsckResult(const std::vector<std::string>& extra = {});

  bool mounted() const { return daemon_pid_.load() > 0; }
  pid_t daemon_pid() const { return daemon_pid_.load(); }
  std::string DaemonLog() const;
  // What each thread of the daemon is doing, for a failure message when it
  // hangs: gdb's backtraces if gdb is installed, else each thread's name,
  // state, wait channel and system call from /proc.
  std::string DaemonThreads() const;
  // Registers a mount (e.g. a tmpfs made by the test) to be detached in
  // TearDown after the daemon is gone.
  void AddCleanupMount(const std::string& path) {
    cleanup_mounts_.push_back(path);
  }

 private:
  void StartWatchdog();
  void StopWatchdog();
  // Waits up to timeout_s for the daemon to exit; returns its wait status or
  // -1 on timeout.
  int WaitDaemon(int timeout_s);
  void DetachMount();

  std::string root_;
  std::string store_;
  std::string mnt_;
  std::string log_path_;
  std::vector<std::string> active_options_;
  std::vector<std::string> cleanup_mounts_;
  std::atomic<pid_t> daemon_pid_{-1};

  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
  std::thread watchdog_;
};

}  // namespace sepfs::mounttest
