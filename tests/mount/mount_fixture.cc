#include "mount_fixture.h"

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace sepfs::mounttest {
namespace {

using Clock = std::chrono::steady_clock;

void SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::string ReadAllFromFd(int fd) {
  std::string out;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

// An unlinked temporary file for capturing output.
UniqueFd TempCaptureFile() {
  char tmpl[] = "/tmp/sepfs-mt-out-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::unlink(tmpl);
  return UniqueFd(fd);
}

std::vector<char*> ArgvPointers(const std::vector<std::string>& argv) {
  std::vector<char*> ptrs;
  ptrs.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    ptrs.push_back(const_cast<char*>(a.c_str()));
  }
  ptrs.push_back(nullptr);
  return ptrs;
}

// Spawns argv with stdin from /dev/null and stdout/stderr on out_fd/err_fd,
// every other descriptor closed. Returns the pid or -1 (errno in *err).
pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
            int* err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // Default dispositions and no blocked signals, however the tests were
  // started: under nohup SIGHUP is ignored, an ignored signal stays ignored
  // across exec, and libfuse then leaves it so (a daemon started under
  // nohup rightly keeps running on SIGHUP; the tests expect the default).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def, none;
  sigemptyset(&def);
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE}) sigaddset(&def, sig);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> ptrs = ArgvPointers(argv);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, &attr, ptrs.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *err = rc;
    return -1;
  }
  return pid;
}

std::string UnescapeMountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = s[i + j];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string DescribeStatus(int status) {
  std::ostringstream os;
  if (WIFEXITED(status)) {
    os << "exit status " << WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    os << "killed by signal " << WTERMSIG(status);
  } else {
    os << "wait status " << status;
  }
  return os.str();
}

}  // namespace

std::string CmdResult::Describe() const {
  std::ostringstream os;
  os << "exit_code=" << exit_code << (timed_out ? " (TIMED OUT)" : "")
     << "\n--- stdout ---\n"
     << out << "\n--- stderr ---\n"
     << err;
  return os.str();
}

CmdResult RunCommand(const std::vector<std::string>& argv, int timeout_s) {
  CmdResult result;
  UniqueFd out = TempCaptureFile();
  UniqueFd err = TempCaptureFile();
  if (!out.ok() || !err.ok()) {
    result.err = std::string("cannot create capture file: ") + strerror(errno);
    return result;
  }
  int spawn_err = 0;
  pid_t pid = Spawn(argv, out.get(), err.get(), &spawn_err);
  if (pid < 0) {
    result.err = "posix_spawn " + argv[0] + ": " + strerror(spawn_err);
    return result;
  }
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    SleepMs(5);
  }
  result.exit_code =
      (!result.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  result.out = ReadAllFromFd(out.get());
  result.err = ReadAllFromFd(err.get());
  return result;
}

std::string SepfsBin() {
  const char* bin = std::getenv("SEPFS_BIN");
  if (bin == nullptr || *bin == '\0') {
    ADD_FAILURE() << "SEPFS_BIN is not set: it must name the sepfs binary "
                     "(meson test sets it)";
    return "";
  }
  if (::access(bin, X_OK) != 0) {
    ADD_FAILURE() << "SEPFS_BIN=" << bin
                  << " is not an executable file: " << strerror(errno);
    return "";
  }
  return bin;
}

CmdResult RunSepfs(const std::vector<std::string>& args, int timeout_s) {
  std::string bin = SepfsBin();
  if (bin.empty()) {
    CmdResult r;
    r.err = "SEPFS_BIN missing";
    return r;
  }
  std::vector<std::string> argv{bin};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout_s);
}

bool IsMountpoint(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f;
    for (int i = 0; i < 5 && (fields >> f); ++i) {
      if (i == 4 && UnescapeMountinfo(f) == path) return true;
    }
  }
  return false;
}

namespace {

// The fields of the newest line of /proc/self/mountinfo for a mount at path;
// empty when nothing is mounted there.
std::vector<std::string> MountinfoFields(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::vector<std::string> found;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (f.size() >= 5 && UnescapeMountinfo(f[4]) == path) found = std::move(f);
  }
  return found;
}

// The field `n` after the "-" that ends the optional fields: 0 the file
// system type, 1 the source, 2 the super options; "" when absent.
std::string FieldAfterDash(const std::vector<std::string>& f, size_t n) {
  if (f.size() < 6) return "";
  auto dash = std::find(f.begin() + 5, f.end(), "-");
  if (dash == f.end() || static_cast<size_t>(f.end() - dash) <= n + 1) return "";
  return UnescapeMountinfo(*(dash + 1 + static_cast<std::ptrdiff_t>(n)));
}

}  // namespace

std::string MountSource(const std::string& path) {
  return FieldAfterDash(MountinfoFields(path), 1);
}

namespace {

std::set<std::string> SplitCommas(const std::string& text) {
  std::set<std::string> opts;
  std::istringstream in(text);
  for (std::string o; std::getline(in, o, ',');) opts.insert(o);
  return opts;
}

}  // namespace

std::set<std::string> MountSuperOptions(const std::string& path) {
  return SplitCommas(FieldAfterDash(MountinfoFields(path), 2));
}

std::set<std::string> MountPointOptions(const std::string& path) {
  const std::vector<std::string> f = MountinfoFields(path);
  return f.size() > 5 ? SplitCommas(f[5]) : std::set<std::string>{};
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t i = 0;
  while (i < n) {
    // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    size_t take = std::min<size_t>(8, n - i);
    memcpy(&out[i], &z, take);
    i += take;
  }
  return out;
}

uint64_t Checksum(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

::testing::AssertionResult SameBytes(const std::string& got,
                                     const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto r = ::testing::AssertionFailure();
  r << "got " << got.size() << " bytes, want " << want.size()
    << "; first difference at offset " << i;
  if (want.size() <= 64 && got.size() <= 64) {
    r << " (got \"" << got << "\", want \"" << want << "\")";
  }
  return r;
}

void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                     mode));
  ASSERT_TRUE(fd.ok()) << "open " << path << ": " << strerror(errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << "write " << path << " at " << done << ": "
                    << strerror(errno);
    done += static_cast<size_t>(n);
  }
  ASSERT_EQ(fd.Close(), 0) << "close " << path << ": " << strerror(errno);
}

int ReadFileErrno(const std::string& path, std::string* out) {
  out->clear();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) return errno;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return fd.Close() == 0 ? 0 : errno;
}

std::string ReadFile(const std::string& path) {
  std::string out;
  int err = ReadFileErrno(path, &out);
  EXPECT_EQ(err, 0) << "reading " << path << ": " << strerror(err);
  return out;
}

void PwriteAll(int fd, const void* data, size_t n, off_t offset) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd, p + done, n - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    ASSERT_GT(r, 0) << "pwrite of " << n << " bytes at " << offset << ": "
                    << strerror(errno);
    done += static_cast<size_t>(r);
  }
}

std::string PreadAll(int fd, size_t n, off_t offset) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, &out[done], n - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ADD_FAILURE() << "pread of " << n << " bytes at " << offset << ": "
                    << strerror(errno);
      break;
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

void RemoveTree(const std::string& path) {
  auto rm = [](const char* p, const struct stat*, int type, struct FTW*) {
    int rc = (type == FTW_DP) ? ::rmdir(p) : ::unlink(p);
    if (rc != 0 && errno != ENOENT) {
      fprintf(stderr, "RemoveTree: cannot remove %s: %s\n", p, strerror(errno));
    }
    return 0;
  };
  ::nftw(path.c_str(), rm, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int RunAs(uid_t uid, gid_t gid, const std::function<int()>& fn) {
  fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    return 255;
  }
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      _exit(255);
    }
    ::setfsgid(gid);
    ::setfsuid(uid);
    if (::geteuid() != uid || ::getegid() != gid) _exit(255);
    int r = fn();
    _exit(r < 0 || r > 254 ? 254 : r);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    ADD_FAILURE() << "RunAs child: " << DescribeStatus(status);
    return 255;
  }
  return WEXITSTATUS(status);
}

// ---------------------------------------------------------------------------

MountFixture::MountFixture() = default;

MountFixture::~MountFixture() { StopWatchdog(); }

void MountFixture::SetUp() {
  ::umask(022);
  char tmpl[] = "/tmp/sepfs-mt-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr) << strerror(errno);
  root_ = tmpl;
  // Other users (RunAs) must be able to reach the mountpoint.
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0) << strerror(errno);
  store_ = root_ + "/store";
  mnt_ = root_ + "/mnt";
  log_path_ = root_ + "/daemon.log";
  ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0) << strerror(errno);
  ASSERT_FALSE(SepfsBin().empty());
  StartWatchdog();
  if (mkfs_in_setup_) {
    ASSERT_NO_FATAL_FAILURE(Mkfs(mkfs_args_));
  }
  if (mkfs_in_setup_ && mount_in_setup_) {
    ASSERT_NO_FATAL_FAILURE(Mount());
  }
}

void MountFixture::TearDown() {
  StopWatchdog();
  if (daemon_pid_.load() > 0) {
    bool unmounted = false;
    for (int i = 0; i < 50 && !unmounted; ++i) {
      if (::umount2(mnt_.c_str(), 0) == 0 || errno == EINVAL) {
        unmounted = true;
      } else {
        SleepMs(100);
      }
    }
    if (!unmounted) ::umount2(mnt_.c_str(), MNT_DETACH);
    if (WaitDaemon(60) < 0) {
      ADD_FAILURE() << "daemon did not exit after unmount in TearDown; "
                       "killing it\n"
                    << DaemonLog() << DaemonThreads();
      pid_t pid = daemon_pid_.exchange(-1);
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  }
  if (!mnt_.empty()) DetachMount();
  for (auto it = cleanup_mounts_.rbegin(); it != cleanup_mounts_.rend(); ++it) {
    if (IsMountpoint(*it)) ::umount2(it->c_str(), MNT_DETACH);
  }
  if (HasFailure() && !log_path_.empty()) {
    std::string log = DaemonLog();
    if (!log.empty()) {
      fprintf(stderr, "---- daemon log (%s) ----\n%s\n----\n",
              log_path_.c_str(),
              log.size() > 20000 ? log.substr(log.size() - 20000).c_str()
                                 : log.c_str());
    }
  }
  if (!root_.empty()) {
    if (IsMountpoint(mnt_)) {
      ADD_FAILURE() << mnt_ << " is still mounted; leaving " << root_;
    } else {
      RemoveTree(root_);
    }
  }
}

void MountFixture::StartWatchdog() {
  watchdog_stop_ = false;
  watchdog_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(watchdog_mu_);
    if (watchdog_cv_.wait_for(lock, std::chrono::seconds(watchdog_seconds_),
                              [this] { return watchdog_stop_; })) {
      return;
    }
    fprintf(stderr,
            "WATCHDOG: test still running after %d s; killing the daemon\n",
            watchdog_seconds_);
    ADD_FAILURE() << "watchdog: test exceeded " << watchdog_seconds_ << " s";
    pid_t pid = daemon_pid_.load();
    if (pid > 0) ::kill(pid, SIGKILL);
    ::umount2(mnt_.c_str(), MNT_DETACH);
  });
}

void MountFixture::StopWatchdog() {
  {
    std::lock_guard<std::mutex> lock(watchdog_mu_);
    watchdog_stop_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

std::string MountFixture::DaemonLog() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MountFixture::DaemonThreads() const {
  const pid_t pid = daemon_pid_.load();
  if (pid <= 0) return "(no daemon)\n";
  const std::string gdb = "/usr/bin/gdb";
  if (::access(gdb.c_str(), X_OK) == 0) {
    CmdResult r = RunCommand(
        {gdb, "-batch", "-nx", "-p", std::to_string(pid), "-ex", "thread apply all bt 16"}, 60);
    if (r.exit_code == 0 && !r.out.empty()) return "threads of the daemon (gdb):\n" + r.out;
  }
  std::string out = "threads of the daemon (/proc: name, state, wchan, syscall):\n";
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  auto first_line = [](const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator(task, ec)) {
    const std::string d = t.path().string();
    std::string state = first_line(d + "/stat");
    const size_t paren = state.rfind(')');
    state = paren == std::string::npos ? "?" : state.substr(paren + 2, 1);
    out += "  " + t.path().filename().string() + " " + first_line(d + "/comm") + " " + state +
           " " + first_line(d + "/wchan") + " [" + first_line(d + "/syscall") + "]\n";
  }
  return out;
}

void MountFixture::Mkfs(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"mkfs"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(store_);
  CmdResult r = RunSepfs(args);
  ASSERT_EQ(r.exit_code, 0) << "sepfs mkfs failed: " << r.Describe();
}

bool MountFixture::TryMount(const std::vector<std::string>& options,
                            int* exit_code, std::string* log) {
  *exit_code = -1;
  std::string bin = SepfsBin();
  if (bin.empty()) return false;
  std::vector<std::string> argv{bin, "mount", "-f"};
  if (!options.empty()) {
    argv.push_back("-o");
    argv.push_back(Join(options, ","));
  }
  argv.push_back(store_);
  argv.push_back(mnt_);
  UniqueFd logfd(::open(log_path_.c_str(),
                        O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!logfd.ok()) {
    *log = std::string("cannot open daemon log: ") + strerror(errno);
    return false;
  }
  std::string banner = "==== " + Join(argv, " ") + "\n";
  (void)!::write(logfd.get(), banner.data(), banner.size());
  off_t log_start = ::lseek(logfd.get(), 0, SEEK_END);
  int spawn_err = 0;
  pid_t pid = Spawn(argv, logfd.get(), logfd.get(), &spawn_err);
  if (pid < 0) {
    *log = "posix_spawn: " + std::string(strerror(spawn_err));
    return false;
  }
  daemon_pid_ = pid;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    if (IsMountpoint(mnt_)) {
      active_options_ = options;
      return true;
    }
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      daemon_pid_ = -1;
      *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      *log = DaemonLog().substr(static_cast<size_t>(log_start));
      return false;
    }
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      daemon_pid_ = -1;
      DetachMount();
      *log = "mount not live after 10 s; daemon killed\n" +
             DaemonLog().substr(static_cast<size_t>(log_start));
      return false;
    }
    SleepMs(10);
  }
}

void MountFixture::Mount(const std::vector<std::string>& extra_options) {
  ASSERT_FALSE(mounted()) << "Mount() while the daemon is running";
  std::vector<std::string> options = mount_options_;
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  int exit_code = -1;
  std::string log;
  ASSERT_TRUE(TryMount(options, &exit_code, &log))
      << "sepfs mount -f failed (exit " << exit_code << "):\n"
      << log;
}

int MountFixture::WaitDaemon(int timeout_s) {
  pid_t pid = daemon_pid_.load();
  if (pid <= 0) return 0;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      daemon_pid_ = -1;
      return r == pid ? status : 0;
    }
    if (Clock::now() > deadline) return -1;
    SleepMs(10);
  }
}

void MountFixture::Unmount() {
  ASSERT_TRUE(mounted()) << "Unmount() without a running daemon";
  int err = 0;
  bool done = false;
  for (int i = 0; i < 100 && !done; ++i) {
    if (::umount2(mnt_.c_str(), 0) == 0) {
      done = true;
    } else {
      err = errno;
      if (err != EBUSY) break;
      SleepMs(100);
    }
  }
  if (!done) {
    ::umount2(mnt_.c_str(), MNT_DETACH);
    ADD_FAILURE() << "umount " << mnt_ << ": " << strerror(err);
  }
  int status = WaitDaemon(120);
  if (status < 0) {
    const std::string threads = DaemonThreads();
    pid_t pid = daemon_pid_.exchange(-1);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    DetachMount();
    FAIL() << "daemon did not exit within 120 s of unmount\n" << DaemonLog() << threads;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "daemon " << DescribeStatus(status) << " after unmount\n"
      << DaemonLog();
  ASSERT_FALSE(IsMountpoint(mnt_));
}

void MountFixture::Remount() {
  std::vector<std::string> options = active_options_;
  ASSERT_NO_FATAL_FAILURE(Unmount());
  std::vector<std::string> saved = mount_options_;
  mount_options_ = options;
  Mount();
  mount_options_ = saved;
}

void MountFixture::KillDaemon() {
  pid_t pid = daemon_pid_.exchange(-1);
  ASSERT_GT(pid, 0) << "KillDaemon() without a running daemon";
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << strerror(errno);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  DetachMount();
  ASSERT_FALSE(IsMountpoint(mnt_)) << "dead mount still attached at " << mnt_;
}

int MountFixture::SignalDaemon(int sig) {
  const pid_t pid = daemon_pid_.load();
  if (pid <= 0) {
    ADD_FAILURE() << "SignalDaemon() without a running daemon";
    return -1;
  }
  if (::kill(pid, sig) != 0) {
    ADD_FAILURE() << "kill: " << strerror(errno);
    return -1;
  }
  const int status = WaitDaemon(120);
  if (status < 0) {
    ADD_FAILURE() << "daemon did not exit within 120 s of signal " << sig << "\n"
                  << DaemonThreads();
    KillDaemon();
    return -1;
  }
  DetachMount();
  return status;
}

void MountFixture::DetachMount() {
  if (!IsMountpoint(mnt_)) return;
  if (::umount2(mnt_.c_str(), MNT_DETACH) != 0) {
    RunCommand({"/usr/bin/fusermount3", "-uz", mnt_}, 30);
  }
}

CmdResult MountFixture::FsckResult(const std::vector<std::string>& extra) {
  std::vector<std::string> args{"fsck"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(store_);
  return RunSepfs(args, 300);
}

void MountFixture::Fsck() {
  CmdResult r = FsckResult();
  EXPECT_EQ(r.exit_code, 0) << "sepfs fsck " << store_ << ": " << r.Describe();
}

}  // namespace sepfs::mounttest
