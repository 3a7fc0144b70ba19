#include "fs/daemon.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <leveldb/db.h>

#include "fs/bdi.h"
#include "fs/cpu_latency.h"
#include "fs/file_limit.h"
#include "fs/filesystem.h"
#include "fs/fuse_ops.h"
#include "fs/fuse_uring.h"
#include "fs/mountinfo.h"
#include "fs/stop_signals.h"
#include "vlog/fd.h"

namespace sepfs::fs {

namespace {

// An existing empty directory, outside the store and not where a sepfs
// mount already is; *dev: its device (the file system below the mount to
// come).
Status CheckMountpoint(const std::string& mnt, const std::string& store, dev_t* dev) {
  struct stat st;
  if (::stat(mnt.c_str(), &st) != 0) return Status::FromErrno(errno, mnt + ": mountpoint");
  if (!S_ISDIR(st.st_mode)) return Status::FromErrno(ENOTDIR, mnt + ": mountpoint");
  *dev = st.st_dev;
  const std::string real_mnt = ResolvedPath(mnt), real_store = ResolvedPath(store);
  if (real_mnt == real_store || real_mnt.starts_with(real_store + "/")) {
    // The daemon's own files would then be reached through the mount it serves.
    return Status::InvalidArgument(mnt + ": the mountpoint is inside the store " + store);
  }
  // Stacked, it would hide that mount, and `sepfs stats`/`gc` of either
  // store would reach the top one.
  if (MountInfo m; SepfsMountAt(real_mnt, &m)) {
    return Status::FromErrno(EBUSY, mnt + ": a sepfs store (" + m.source +
                                        ") is mounted there already");
  }
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(mnt.c_str()), ::closedir);
  if (!d) return Status::FromErrno(errno, mnt + ": mountpoint");
  while (struct dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) {
      return Status::FromErrno(ENOTEMPTY, mnt + ": mountpoint is not empty");
    }
  }
  return Status::OK();
}

// Tells the waiting parent how start-up went (background mode).
class StartupPipe {
 public:
  StartupPipe() = default;
  ~StartupPipe() {
    if (fd_ >= 0) ::close(fd_);
  }
  void Set(int fd) { fd_ = fd; }
  void Report(char code) {
    if (fd_ < 0) return;
    (void)!::write(fd_, &code, 1);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The options the user passed on to libfuse and the kernel, as one list
// for messages (not the ones sepfs adds).
std::string PassedOptions(const MountRequest& req) {
  std::string passed;
  for (const auto& o : req.options.passthrough) passed += (passed.empty() ? "" : ",") + o;
  return passed;
}

void DetachStdio(const std::string& store) {
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  const std::string log = store + "/sepfs.log";
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
}

// The kernel caps FUSE readahead at the bdi default (128 KiB) whatever
// max_readahead says, and throttles writers once the mount holds 1% of the
// dirty-page limit (fs/bdi.h). Best effort: without root the kernel's
// settings stay, which costs speed, not correctness.
void TuneBdi(const std::string& mountpoint, const MountOptions& o) {
  std::string dir;
  Status st = FindMountBdi(mountpoint, &dir);
  if (st.ok()) st = SetBdiKnob(dir, "read_ahead_kb", 1024);
  if (st.ok() && o.max_dirty_ratio > 0) st = SetBdiKnob(dir, "max_ratio", o.max_dirty_ratio);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: note: kernel writeback settings of %s kept: %s\n",
                 mountpoint.c_str(), st.ToString().c_str());
  }
}

// Appends opt to libfuse's comma-separated option list, whose parser takes
// a backslash as an escape: libfuse's own escaper protects the commas and
// backslashes of a store path (fsname=) or of an option the user escaped
// (ParseMountOptions unescaped it). False when out of memory.
bool AppendOption(const std::string& opt, std::string* out) {
  char* raw = nullptr;
  const int rc = fuse_opt_add_opt_escaped(&raw, opt.c_str());
  std::unique_ptr<char, void (*)(void*)> escaped(raw, std::free);
  if (rc != 0) return false;
  if (!out->empty()) *out += ",";
  *out += escaped.get();
  return true;
}

// Before a stop by signal, while the session still serves: what the kernel
// caches dirty for files of this mount reaches the daemon. syncfs sends it
// in large writes but need not wait for them on FUSE; dropping each file's
// pages then waits for writes in flight and writes out whatever is still
// dirty (the kernel writes a dirty page back before it drops it). syncfs
// only when the mount on top of the mountpoint is this store's (not one
// stacked on it, nor the directory underneath after an unmount).
void DrainKernelWrites(struct fuse_session* se, Filesystem* fs, const MountRequest& req,
                       const std::string& mountpoint, const StopSignals& stop) {
  try {
    if (MountInfo m; SepfsMountAt(mountpoint, &m) && m.source == req.store) {
      Fd root(::open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (root.get() >= 0) (void)::syncfs(root.get());
    }
    for (uint64_t ino : fs->KernelHeldFiles()) {
      if (stop.LoopGone()) break;  // the connection is gone
      (void)fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
    }
  } catch (const std::exception& e) {  // out of memory: stop without it
    std::fprintf(stderr, "sepfs: %s: before the stop: %s\n", req.store.c_str(), e.what());
  }
}

struct SessionDeleter {
  void operator()(struct fuse_session* se) const { fuse_session_destroy(se); }
};

int Serve(const MountRequest& req, StartupPipe* pipe) {
  CpuLatencyRequest cpu_latency;
  if (req.options.cpu_latency) {
    Status st = cpu_latency.Hold(*req.options.cpu_latency);
    if (!st.ok()) {
      std::fprintf(stderr, "sepfs: cannot mount %s: -o cpu_latency: %s\n", req.store.c_str(),
                   st.ToString().c_str());
      return 1;
    }
  }
  FsOptions fo;
  fo.flush_interval_sec = req.options.flush_interval;
  fo.read_only = req.options.read_only;
  fo.store.meta_cache_bytes = static_cast<size_t>(req.options.cache_mb) << 20;
  fo.store.direct_io = req.options.direct_io;
  fo.store.recycle_segments = req.options.recycle_segments;
  fo.store.lock_wait_sec = kCommandLockWait;  // a daemon of the last umount may still be writing
  fo.store.pin_directory = true;  // a store renamed while mounted stays the one used
  fo.prefetch_seq = req.options.prefetch_seq;
  fo.prefetch_dir = req.options.prefetch_dir;
  fo.prefetch_threads = req.options.prefetch_threads;
  fo.data_cache_bytes = static_cast<uint64_t>(req.options.data_cache_mb) << 20;
  fo.checkpoint_bytes = static_cast<uint64_t>(req.options.checkpoint_mb) << 20;
  fo.gc = req.options.gc;
  fo.gc_picker = req.options.gc_picker;
  fo.gc_streams = static_cast<int>(req.options.gc_streams);
  std::unique_ptr<Filesystem> fs;
  Status st = Filesystem::Open(req.store, fo, &fs);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: cannot mount %s: %s\n", req.store.c_str(),
                 st.ToString().c_str());
    return 1;
  }

  std::vector<std::string> argv_s = {"sepfs"};
  if (req.debug) argv_s.push_back("-d");
  std::string opts;
  bool ok = AppendOption("fsname=" + req.store, &opts) && AppendOption("subtype=sepfs", &opts) &&
            AppendOption("max_read=" + std::to_string(req.options.max_read), &opts);
  if (req.options.default_permissions) ok = ok && AppendOption("default_permissions", &opts);
  for (const auto& o : req.options.passthrough) ok = ok && AppendOption(o, &opts);
  if (!ok) {
    std::fprintf(stderr, "sepfs: cannot mount %s: out of memory\n", req.store.c_str());
    return 1;
  }
  argv_s.push_back("-o");
  argv_s.push_back(opts);
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  FuseContext ctx;
  ctx.fs = fs.get();
  ctx.options = req.options;
  ctx.wire.offer_killpriv_v2 = req.options.killpriv_v2;
  std::unique_ptr<struct fuse_session, SessionDeleter> se(
      fuse_session_new(&args, SepfsFuseOps(), sizeof(struct fuse_lowlevel_ops), &ctx));
  fuse_opt_free_args(&args);
  ctx.session = se.get();
  if (!se) {
    // libfuse has said which ones above; name the options the user passed
    // on to it, not the ones sepfs adds.
    const std::string passed = PassedOptions(req);
    std::fprintf(stderr,
                 "sepfs: cannot mount %s: FUSE refused an option among '%s', the ones sepfs"
                 " passed on to it (named above); 'sepfs mount --help' lists sepfs's own\n",
                 req.store.c_str(), passed.c_str());
    return 1;
  }
  // Resolved before the mount: afterwards resolving it would ask this daemon,
  // which does not serve yet, for the root's attributes.
  const std::string real_mountpoint = ResolvedPath(req.mountpoint);
  std::unique_ptr<StopSignals> stop;
  st = StopSignals::Install(
      [&](const StopSignals& signals) {
        DrainKernelWrites(se.get(), fs.get(), req, real_mountpoint, signals);
        fuse_session_exit(se.get());
      },
      &stop);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: cannot mount %s: %s\n", req.store.c_str(),
                 st.ToString().c_str());
    return 1;
  }
  if (fuse_session_mount(se.get(), req.mountpoint.c_str()) != 0) {
    // libfuse has said how above; say where to look.
    std::string why = "/dev/fuse cannot be opened: is the fuse module loaded?";
    if (::access("/dev/fuse", R_OK | W_OK) == 0) {
      const std::string passed = PassedOptions(req);
      why = passed.empty() ? "the kernel refused the mount"
                           : "the kernel refused the mount or one of the options passed on "
                             "to it: '" + passed + "'";
    }
    std::fprintf(stderr, "sepfs: cannot mount %s on %s (%s)\n", req.store.c_str(),
                 req.mountpoint.c_str(), why.c_str());
    return 1;
  }
  if (int err = InstallWireShim(se.get()); err != 0) {
    std::fprintf(stderr, "sepfs: cannot mount %s: device I/O shim: %s\n", req.store.c_str(),
                 std::strerror(-err));
    fuse_session_unmount(se.get());
    return 1;
  }
  std::unique_ptr<FuseUring> uring;  // joined before the session goes
  if (req.options.io_uring) {
    FuseUring::Options uo;
    // Enough for waiting handlers (fsync) on each CPU, without thousands
    // of threads on large machines.
    uo.threads_per_queue = std::min(req.options.threads, kMaxUringThreadsPerQueue);
    uo.idle_handoff = req.options.idle_handoff;
    uo.max_write = req.options.max_write;
    st = FuseUring::Prepare(se.get(), fuse_session_fd(se.get()), &ctx.wire, uo, &uring);
    if (st.ok()) st = uring->Launch();
    if (st.ok()) {
      ctx.wire.transport = uring.get();
    } else {
      std::fprintf(stderr, "sepfs: %s: requests go through /dev/fuse only\n",
                   st.ToString().c_str());
      uring.reset();
    }
  }
  TuneBdi(real_mountpoint, req.options);
  if (Status n = fs->store()->NoteMount(real_mountpoint); !n.ok()) {
    std::fprintf(stderr, "sepfs: %s: cannot note the mount in the lock file: %s\n",
                 req.store.c_str(), fs->store()->Shown(n).c_str());
  }
  pipe->Report(0);
  if (!req.foreground) DetachStdio(req.store);

  struct fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 0);
  fuse_loop_cfg_set_max_threads(cfg, req.options.threads);
  fuse_loop_cfg_set_idle_threads(cfg, req.options.threads);
  stop->LoopStarts();
  int rc = fuse_session_loop_mt(se.get(), cfg);
  fuse_loop_cfg_destroy(cfg);
  stop->LoopEnded();
  fuse_session_unmount(se.get());
  if (uring) uring->Stop();
  st = fs->Close();
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: closing %s: %s\n", req.store.c_str(), st.ToString().c_str());
    return 1;
  }
  // The loop returns 0 when a stop signal (or the unmount) ended it, or
  // -errno.
  return rc < 0 ? 1 : 0;
}

// glibc gives threads up to 8 malloc arenas per CPU, and each keeps the
// dirty blocks freed into it: with the io_uring threads the daemon held
// 690-775 MiB instead of 540 on fileserver. One arena per CPU (at least 2)
// keeps it within its caches (bench/RESULTS.md).
void LimitMallocArenas() {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  (void)mallopt(M_ARENA_MAX, static_cast<int>(std::max(2L, cpus)));
}

// The daemon reports success once the mount is made; the kernel's INIT
// request comes after, and libfuse ends the daemon when it refuses the
// reply (a mismatched max_read, for one): the daemon unmounts and exits.
// A statfs waits for the handshake and fails with ECONNREFUSED when it
// failed (ENOTCONN once the connection is gone); if it comes after the
// unmount instead, it reaches the directory underneath, which the device
// number tells apart from the mount (below: the mountpoint's st_dev before
// the mount). Messages of the daemon after its report go to
// STORE/sepfs.log (DetachStdio).
bool HandshakeDone(const MountRequest& req, dev_t below) {
  struct statfs sf;
  int rc;
  do {
    rc = ::statfs(req.mountpoint.c_str(), &sf);
  } while (rc != 0 && errno == EINTR);
  const char* why = nullptr;
  if (rc != 0 && (errno == ECONNREFUSED || errno == ENOTCONN)) {
    why = std::strerror(errno);
  } else if (struct stat st; rc == 0 && ::stat(req.mountpoint.c_str(), &st) == 0 &&
                             st.st_dev == below) {
    why = "the daemon unmounted";
  }
  if (why == nullptr) return true;
  std::fprintf(stderr,
               "sepfs: cannot mount %s on %s: the FUSE handshake failed (%s); the daemon's "
               "messages are in %s/sepfs.log\n",
               req.store.c_str(), req.mountpoint.c_str(), why, req.store.c_str());
  return false;
}

}  // namespace

int Mount(const MountRequest& req) {
  dev_t below = 0;  // the mountpoint's device before the mount (HandshakeDone)
  Status st = CheckMountpoint(req.mountpoint, req.store, &below);
  const auto& pass = req.options.passthrough;
  auto passed = [&pass](const char* o) {
    return std::find(pass.begin(), pass.end(), o) != pass.end();
  };
  if (st.ok() && !req.options.default_permissions &&
      (passed("allow_other") || passed("allow_root"))) {
    // sepfs leaves permission checks to the kernel (default_permissions).
    st = Status::InvalidArgument(
        "nodefault_permissions with allow_other or allow_root would let other users past all "
        "permission checks (sepfs does not check them itself)");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs: cannot mount %s: %s\n", req.store.c_str(),
                 st.ToString().c_str());
    return 1;
  }
  RaiseFileLimit();
  LimitMallocArenas();
  StartupPipe pipe;
  if (!req.foreground && !req.debug) {
    // Fork before any thread exists; the parent reports the outcome.
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      std::perror("sepfs: pipe");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("sepfs: fork");
      return 1;
    }
    if (pid > 0) {
      ::close(fds[1]);
      char code = 1;
      ssize_t n;
      do {
        n = ::read(fds[0], &code, 1);
      } while (n < 0 && errno == EINTR);
      ::close(fds[0]);
      if (n != 1 || code != 0) return 1;
      return HandshakeDone(req, below) ? 0 : 1;
    }
    ::close(fds[0]);
    pipe.Set(fds[1]);
    ::setsid();
    if (::chdir("/") != 0) return 1;
  }
  int rc = Serve(req, &pipe);
  pipe.Report(static_cast<char>(rc == 0 ? 0 : 1));
  return rc;
}

std::string LibraryVersions() {
  return std::string("libfuse ") + fuse_pkgversion() + ", LevelDB " +
         std::to_string(leveldb::kMajorVersion) + "." + std::to_string(leveldb::kMinorVersion);
}

}  // namespace sepfs::fs
