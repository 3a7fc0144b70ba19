// sepfs: the command-line tool. mkfs, mount, fsck, stats and gc of a store.
// Installed also as mkfs.sepfs and fsck.sepfs (dispatched on argv[0]), and
// callable as `sepfs STORE MOUNTPOINT -o OPTS` by the fuse3 mount helper.
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/limits.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fs/daemon.h"
#include "fs/file_limit.h"
#include "fs/filesystem.h"
#include "fs/fsck.h"
#include "fs/mountinfo.h"
#include "fs/repair.h"
#include "fs/store.h"
#include "kvstore/records.h"

namespace {

using sepfs::Status;
namespace fs = sepfs::fs;

constexpr const char* kUsage =
    "usage: sepfs COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  mkfs [--force] [--block-size=BYTES] [--segment-size=BYTES] [--capacity=BYTES]\n"
    "       [--inline-max=BYTES] STORE\n"
    "  mount [-f] [-d] [-o OPT[,OPT...]] STORE MOUNTPOINT\n"
    "  fsck [--repair [--salvage]] STORE\n"
    "  stats STORE_OR_MOUNTPOINT\n"
    "  gc [--min-garbage=PCT] STORE_OR_MOUNTPOINT\n"
    "  version\n"
    "  help\n"
    "\n"
    "Run 'sepfs COMMAND --help' for the options of a command.\n";

constexpr const char* kMkfsUsage =
    "usage: sepfs mkfs [--force] [--block-size=BYTES] [--segment-size=BYTES]\n"
    "                  [--capacity=BYTES] [--inline-max=BYTES] STORE\n"
    "Creates a new sepfs store in the directory STORE (created if missing, mode 0700).\n"
    "  --force             overwrite an existing store (a directory holding anything\n"
    "                      else is refused; lost+found is left alone)\n"
    "  --block-size=N      logical file block size (power of two, 4 KiB..4 MiB; default 64 KiB)\n"
    "  --segment-size=N    vLog segment size (1 MiB..2 GiB; default 64 MiB)\n"
    "  --capacity=N        size limit of the store, at least 16 segments (default: the\n"
    "                      free space below)\n"
    "  --inline-max=N      blocks of at most N bytes keep their data in the metadata LSM\n"
    "                      instead of the vLog (0..64 KiB, at most half a block; default\n"
    "                      4 KiB, or a quarter of a smaller block)\n"
    "Sizes accept K, M, G suffixes (powers of 1024).\n";

constexpr const char* kMountUsage =
    "usage: sepfs mount [-f] [-d] [-o OPT[,OPT...]] STORE MOUNTPOINT\n"
    "Mounts the store at MOUNTPOINT (an existing empty directory).\n"
    "  -f   stay in the foreground (default: detach once the mount is live)\n"
    "  -d   debug: trace FUSE requests (implies -f)\n"
    "  -o   options: allow_other, ro, nowriteback, nokillpriv, flush_on_close, noreaddirplus,\n"
    "       noparallel_dirops, nodefault_permissions (not with allow_other/allow_root),\n"
    "       max_write=BYTES (65536-1048576), max_read=BYTES (4096-1048576, at most max_write),\n"
    "       max_dirty_ratio=PCT (0-50, default 40), attr_timeout=SEC, entry_timeout=SEC,\n"
    "       flush_interval=SEC, cache_mb=N, threads=N,\n"
    "       cpu_latency=US (hold a CPU wake-up latency request while mounted; 0 keeps\n"
    "       idle CPUs polling: faster round trips, more power; default: none),\n"
    "       gc=hotcold|wisckey|off, gc_picker=greedy|cost-benefit|oldest,\n"
    "       gc_streams=4|2 (hotcold: streams by expected lifetime, or hot and cold only),\n"
    "       noprefetch_seq, noprefetch_dir, prefetch_threads=N, data_cache_mb=N,\n"
    "       checkpoint_mb=N (vLog MiB between recovery checkpoints, default 256),\n"
    "       and the generic FUSE/mount options\n"
    "Unmount with 'umount MOUNTPOINT' or 'fusermount3 -u MOUNTPOINT'.\n";

constexpr const char* kFsckUsage =
    "usage: sepfs fsck [--repair [--salvage]] STORE\n"
    "Checks an unmounted store: every block pointer against its vLog record, the\n"
    "namespace (entries, reachability, link counts), xattrs, symlinks, counters.\n"
    "Without --repair nothing is changed.\n"
    "  --repair   fix what the check finds and print each change: bad block pointers\n"
    "             are dropped (the blocks become holes), bad entries deleted,\n"
    "             unreachable inodes moved to /lost+found, link counts set, orphans\n"
    "             reclaimed, counters rewritten, a damaged segment header rewritten\n"
    "             (its records verify one by one), a renamed segment file named\n"
    "             back, a segment file of another store (or one with a damaged\n"
    "             header no pointer names) moved to STORE/set-aside-segments, a\n"
    "             corrupt LevelDB rebuilt\n"
    "             (leveldb::RepairDB), a lost superblock written back from its\n"
    "             copy or rebuilt; then checks again (-a, -p, -y: the same;\n"
    "             -n: check only, refused with any of them)\n"
    "  --salvage  with --repair: files whose metadata was lost are rebuilt from the\n"
    "             vLog's records (each names its inode and block) into /lost+found\n"
    "             as #INODE, mode 0600; files deleted whose space GC has not yet\n"
    "             reclaimed come back too; small files kept inline in the metadata\n"
    "             cannot be salvaged\n"
    "Exit status as e2fsck: 0 no errors, 1 errors corrected, 4 errors left\n"
    "uncorrected, 8 operational error, 16 usage error.\n";

constexpr int kFsckUsageError = 16;  // as e2fsck

constexpr const char* kStatsUsage =
    "usage: sepfs stats STORE_OR_MOUNTPOINT\n"
    "Prints space used, live and garbage bytes per segment class, record counts and\n"
    "cache statistics of a store, through its mount when it is mounted.\n";

constexpr const char* kGcUsage =
    "usage: sepfs gc [--min-garbage=PCT] STORE_OR_MOUNTPOINT\n"
    "Runs a garbage-collection pass now: every vLog segment of which at least PCT\n"
    "percent is garbage (deleted or overwritten data) is collected: its live blocks\n"
    "are copied to a new segment, then it is deleted. A mounted store is collected\n"
    "by its daemon. Prints what it collected, the garbage it left, and the store's\n"
    "space by segment class.\n"
    "  --min-garbage=PCT  0-100, default 20 (at most 4 bytes copied per byte freed);\n"
    "                     0 collects every segment holding any garbage\n";

bool WantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

bool ParseSize(const std::string& text, uint64_t* out) {
  // strtoull alone skips blanks, takes a sign (" -1" is 2^64-1) and
  // saturates on overflow.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE) return false;
  std::string suffix(end);
  uint64_t mul = 1;
  if (suffix == "K" || suffix == "k") {
    mul = 1ull << 10;
  } else if (suffix == "M" || suffix == "m") {
    mul = 1ull << 20;
  } else if (suffix == "G" || suffix == "g") {
    mul = 1ull << 30;
  } else if (!suffix.empty()) {
    return false;
  }
  if (v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

int Fail(const std::string& msg, const char* usage = nullptr) {
  std::fprintf(stderr, "sepfs: %s\n", msg.c_str());
  if (usage) std::fputs(usage, stderr);
  return 1;
}

int CmdMkfs(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return std::fputs(kMkfsUsage, stdout), 0;
  fs::MkfsOptions o;
  std::string store;
  // The size options, each with what takes its value (false: out of range).
  const std::map<std::string, std::function<bool(uint64_t)>> sizes = {
      {"--block-size",
       [&](uint64_t v) {
         if (v > UINT32_MAX) return false;
         o.block_size = static_cast<uint32_t>(v);
         return true;
       }},
      {"--segment-size",
       [&](uint64_t v) {
         o.segment_size = v;
         return true;
       }},
      {"--capacity",
       [&](uint64_t v) {
         o.capacity = v;
         return true;
       }},
      {"--inline-max",
       [&](uint64_t v) {
         if (v > UINT32_MAX) return false;
         o.inline_max = static_cast<uint32_t>(v);
         return true;
       }},
  };
  std::set<std::string> given;  // a size given twice is a mistake, not an override
  for (const auto& a : args) {
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const auto size = sizes.find(name);
    if (size != sizes.end() && !given.insert(name).second) {
      return Fail(name + " given twice", kMkfsUsage);
    }
    if (size != sizes.end() && eq != std::string::npos) {
      uint64_t v;
      if (!ParseSize(a.substr(eq + 1), &v) || !size->second(v)) return Fail("bad " + a, kMkfsUsage);
    } else if (a == "--force" || a == "-f") {
      o.force = true;
    } else if (!a.empty() && a[0] == '-') {
      return Fail("unknown option " + a, kMkfsUsage);
    } else if (store.empty()) {
      store = a;
    } else {
      return Fail("too many arguments", kMkfsUsage);
    }
  }
  if (store.empty()) return Fail("missing STORE", kMkfsUsage);
  Status st = fs::Mkfs(store, o);
  if (!st.ok()) return Fail("mkfs " + store + ": " + st.ToString());
  std::printf("created sepfs store %s (block size %u, segment size %llu, inline max %u)\n",
              store.c_str(), o.block_size, static_cast<unsigned long long>(o.segment_size),
              o.inline_max.value_or(sepfs::kv::DefaultInlineMax(o.block_size)));
  return 0;
}

int CmdMount(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return std::fputs(kMountUsage, stdout), 0;
  fs::MountRequest req;
  std::vector<std::string> pos;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "-f") {
      req.foreground = true;
    } else if (a == "-d") {
      req.debug = req.foreground = true;
    } else if (a == "-o" || (a.rfind("-o", 0) == 0 && a.size() > 2)) {
      std::string text = a.size() > 2 ? a.substr(2) : "";
      if (a == "-o") {
        if (i + 1 >= args.size()) return Fail("-o needs an argument", kMountUsage);
        text = args[++i];
      }
      Status st = fs::ParseMountOptions(text, &req.options);
      if (!st.ok()) return Fail(st.ToString(), kMountUsage);
    } else if (!a.empty() && a[0] == '-') {
      return Fail("unknown option " + a, kMountUsage);
    } else {
      pos.push_back(a);
    }
  }
  if (pos.size() != 2) return Fail("need STORE and MOUNTPOINT", kMountUsage);
  req.store = fs::ResolvedPath(pos[0]);
  req.mountpoint = fs::ResolvedPath(pos[1]);
  return fs::Mount(req);
}

std::string FsckSummary(const std::string& store, const fs::FsckReport& rep) {
  const std::string verdict =
      rep.errors.empty() ? "clean" : std::to_string(rep.errors.size()) + " errors";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%s: %llu inodes (%llu directories, %llu others), %llu entries, %llu block "
                "pointers (%llu inline, %llu MiB verified), %llu segments: %s",
                store.c_str(), static_cast<unsigned long long>(rep.inodes),
                static_cast<unsigned long long>(rep.dirs),
                static_cast<unsigned long long>(rep.files),
                static_cast<unsigned long long>(rep.dentries),
                static_cast<unsigned long long>(rep.pointers),
                static_cast<unsigned long long>(rep.inline_blocks),
                static_cast<unsigned long long>(rep.data_bytes_checked >> 20),
                static_cast<unsigned long long>(rep.segments), verdict.c_str());
  return buf;
}

void PrintFsckReport(const fs::FsckReport& rep, const char* error_label) {
  for (const auto& n : rep.notes) std::printf("note: %s\n", n.c_str());
  for (const auto& e : rep.errors) std::printf("%s: %s\n", error_label, e.c_str());
}

int CmdFsck(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return std::fputs(kFsckUsage, stdout), 0;
  std::string store;
  bool repair = false, check_only = false;
  fs::RepairOptions repair_options;
  for (const auto& a : args) {
    // fsck(8) passes -a/-p/-y to repair without asking, -n to only check.
    if (a == "--repair" || a == "-a" || a == "-p" || a == "-y") {
      repair = true;
      continue;
    }
    if (a == "-n") {
      check_only = true;
      continue;
    }
    if (a == "--salvage") {
      repair_options.salvage = true;
      continue;
    }
    if (a == "-f" || a == "-C0") continue;
    if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "sepfs: unknown option %s\n%s", a.c_str(), kFsckUsage);
      return kFsckUsageError;
    }
    if (!store.empty()) {
      std::fprintf(stderr, "sepfs fsck: one store at a time (got %s and %s)\n%s", store.c_str(),
                   a.c_str(), kFsckUsage);
      return kFsckUsageError;
    }
    store = a;
  }
  if (store.empty()) {
    std::fputs(kFsckUsage, stderr);
    return kFsckUsageError;
  }
  if (repair_options.salvage && !repair) {
    std::fprintf(stderr, "sepfs fsck: --salvage is part of a repair: use --repair --salvage\n%s",
                 kFsckUsage);
    return kFsckUsageError;
  }
  if (repair && check_only) {
    std::fprintf(stderr, "sepfs fsck: -n (change nothing) and a repair option contradict\n%s",
                 kFsckUsage);
    return kFsckUsageError;
  }
  if (fs::MountInfo m; fs::SepfsMountAt(fs::ResolvedPath(store), &m)) {
    std::fprintf(stderr,
                 "sepfs fsck: %s is where the store %s is mounted; fsck checks a store "
                 "directory that is not mounted (umount %s, then sepfs fsck %s)\n",
                 store.c_str(), m.source.c_str(), store.c_str(), m.source.c_str());
    return kFsckUsageError;
  }
  auto progress = [](const std::string& line) {
    std::fprintf(stderr, "sepfs fsck: %s\n", line.c_str());
  };
  fs::RaiseFileLimit();
  if (repair) {
    fs::RepairReport rep;
    fs::StoreOptions ro;
    ro.lock_wait_sec = fs::kCommandLockWait;
    Status st = fs::Repair(store, ro, &rep, progress, repair_options);
    PrintFsckReport(rep.before, "ERROR");
    for (const auto& c : rep.changes) std::printf("repair: %s\n", c.c_str());
    std::fflush(stdout);
    if (!st.ok()) {
      std::fprintf(stderr, "sepfs fsck: %s: repair failed: %s\n", store.c_str(),
                   st.ToString().c_str());
      return 8;
    }
    for (const auto& e : rep.after.errors) std::printf("UNCORRECTED: %s\n", e.c_str());
    std::printf("%s\n", FsckSummary(store + " after repair", rep.after).c_str());
    std::printf("%s: %zu changes made\n", store.c_str(), rep.changes.size());
    if (rep.salvageable > 0) {
      std::printf("%s: the vLog holds data of %llu files whose inode record was lost: "
                  "sepfs fsck --repair --salvage %s brings it back (into /lost+found; data "
                  "deleted before the damage may come back too)\n",
                  store.c_str(), static_cast<unsigned long long>(rep.salvageable),
                  store.c_str());
    }
    if (!rep.after.errors.empty()) return 4;
    return rep.changed() || !rep.before.errors.empty() ? 1 : 0;
  }
  std::unique_ptr<fs::Store> s;
  fs::StoreOptions so;
  so.read_only = true;  // a check changes nothing
  so.lock_wait_sec = fs::kCommandLockWait;
  so.allow_set_aside_segments = true;  // a finding
  Status st = fs::Store::Open(store, so, &s);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs fsck: %s\n", st.ToString().c_str());
    if (st.IsCorruption()) {
      std::printf("ERROR: %s\n%s: cannot be opened (run sepfs fsck --repair)\n",
                  st.ToString().c_str(), store.c_str());
      return 4;
    }
    return 8;
  }
  fs::FsckReport rep;
  st = fs::Fsck(s.get(), &rep, progress);
  if (!st.ok()) {
    std::fprintf(stderr, "sepfs fsck: %s: %s\n", store.c_str(), st.ToString().c_str());
    return 8;
  }
  PrintFsckReport(rep, "ERROR");
  std::printf("%s\n", FsckSummary(store, rep).c_str());
  if (!rep.errors.empty()) std::printf("%s: run sepfs fsck --repair to fix\n", store.c_str());
  return rep.errors.empty() ? 0 : 4;
}

// A mounted sepfs answers through a virtual xattr of its root: true with
// the statistics in *out if `path` is such a root (the text has a fixed
// number of lines, far below the 64 KiB a getxattr(2) can return).
// Otherwise false, with *hint set when `path` lies on a FUSE mount: if it
// cannot be opened as a store either and does not look like one, "not the
// root of a sepfs mount" says more than the store's error (a store may
// well sit on another FUSE file system, so the hint never stops the
// attempt, and a damaged store there gets its own error).
bool ReadMountStats(const std::string& path, std::string* out, std::string* hint) {
  hint->clear();
  out->resize(XATTR_SIZE_MAX);
  ssize_t n = ::getxattr(path.c_str(), "sepfs.stats", out->data(), out->size());
  if (n >= 0) {
    out->resize(static_cast<size_t>(n));
    return true;
  }
  out->clear();
  constexpr long kFuseMagic = 0x65735546;  // FUSE_SUPER_MAGIC
  struct statfs sf {};
  if (::statfs(path.c_str(), &sf) == 0 && sf.f_type == kFuseMagic) {
    *hint = path + ": not the root of a sepfs mount (give the mountpoint or the store)";
  }
  return false;
}

// Stats of the mount that serves path: path itself when it is a mount's
// root, or the mount point of the store path names when its daemon answers
// (*mount is set to the one that did). A store whose daemon is gone (a dead
// mount answers ENOTCONN) is left to Filesystem::Open, as is any path that
// no live mount serves.
bool ReadServingMountStats(const std::string& path, std::string* mount, std::string* out,
                           std::string* hint) {
  if (ReadMountStats(path, out, hint)) {
    *mount = path;
    return true;
  }
  const std::string point = fs::StoreMountPoint(path);
  std::string ignored;
  if (point.empty() || !ReadMountStats(point, out, &ignored)) return false;
  *mount = point;
  return true;
}

int CmdStats(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return std::fputs(kStatsUsage, stdout), 0;
  if (args.size() != 1) return Fail("need STORE_OR_MOUNTPOINT", kStatsUsage);
  const std::string& path = args[0];
  std::string mount, text, why;
  if (ReadServingMountStats(path, &mount, &text, &why)) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  fs::RaiseFileLimit();
  fs::FsOptions o;
  o.read_only = true;
  o.store.lock_wait_sec = fs::kCommandLockWait;
  std::unique_ptr<fs::Filesystem> f;
  Status st = fs::Filesystem::Open(path, o, &f);
  if (!st.ok()) {
    if (st.err() == EBUSY) return Fail("stats " + st.ToString());
    if (!why.empty() && !fs::LooksLikeStore(sepfs::Env::Default(), path)) return Fail("stats " + why);
    return Fail("stats " + path + ": " + st.ToString());
  }
  std::fputs(f->StatsText().c_str(), stdout);
  return 0;
}

// The sections of `sepfs stats` text that say where the space went: a
// section is its title line at column 0 and the indented lines after it.
void PrintSpaceSections(const std::string& stats) {
  for (std::string_view title : {"space:\n", "segments by class:\n"}) {
    size_t at = stats.rfind(title, 0) == 0 ? 0 : stats.find("\n" + std::string(title));
    if (at == std::string::npos) continue;
    if (stats[at] == '\n') at++;
    size_t end = stats.find('\n', at);
    while (end != std::string::npos && end + 1 < stats.size() && stats[end + 1] == ' ') {
      end = stats.find('\n', end + 1);
    }
    std::fputs(stats.substr(at, end == std::string::npos ? end : end + 1 - at).c_str(), stdout);
  }
}

// The store a mount serves, from the first line of its stats ("store DIR").
std::string StoreOfStats(const std::string& stats) {
  constexpr std::string_view kStore = "store ";
  if (stats.rfind(kStore, 0) != 0) return "";
  return stats.substr(kStore.size(), stats.find('\n') - kStore.size());
}

int CmdGc(const std::vector<std::string>& args) {
  if (WantsHelp(args)) return std::fputs(kGcUsage, stdout), 0;
  double ratio = fs::kOnDemandMinGarbageRatio;
  std::string percent = "20";
  std::vector<std::string> rest;
  for (const auto& a : args) {
    if (a.rfind("--min-garbage=", 0) == 0) {
      percent = a.substr(std::strlen("--min-garbage="));
      if (!fs::ParseGarbagePercent(percent, &ratio)) {
        return Fail("--min-garbage takes a percentage from 0 to 100, not '" + percent + "'",
                    kGcUsage);
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return Fail("unknown option " + a, kGcUsage);
    } else {
      rest.push_back(a);
    }
  }
  if (rest.size() != 1) return Fail("need STORE_OR_MOUNTPOINT", kGcUsage);
  const std::string& path = rest[0];
  std::string mount, s, why;
  if (ReadServingMountStats(path, &mount, &s, &why)) {
    std::printf("sepfs gc: collecting %s (mounted) ...\n", mount.c_str());
    std::fflush(stdout);
    if (::setxattr(mount.c_str(), "sepfs.gc", percent.data(), percent.size(), 0) != 0) {
      // An errno is all that crosses the mount; the daemon logged the rest.
      const int err = errno;
      const std::string store = StoreOfStats(s);
      return Fail("gc " + mount + ": " + std::strerror(err) + " (the daemon's log says why: " +
                  (store.empty() ? "STORE" : store) +
                  "/sepfs.log, or its standard error when it runs with -f)");
    }
    if (!ReadMountStats(mount, &s, &why)) return 0;
    constexpr std::string_view kLast = "  last sepfs gc";
    const size_t last = s.find(kLast);
    if (last == std::string::npos) {
      std::printf("sepfs gc: the daemon of %s predates --min-garbage: it collected every"
                  " segment holding garbage\n", mount.c_str());
    } else {
      const size_t from = s.find_first_not_of(' ', last + kLast.size());
      std::printf("sepfs gc: %s\n", s.substr(from, s.find('\n', from) - from).c_str());
    }
    PrintSpaceSections(s);
    return 0;
  }
  fs::RaiseFileLimit();
  fs::FsOptions o;
  o.gc = "off";  // no background thread; the pass below runs in the foreground
  o.store.lock_wait_sec = fs::kCommandLockWait;
  std::unique_ptr<fs::Filesystem> f;
  Status st = fs::Filesystem::Open(path, o, &f);
  if (!st.ok()) {
    if (st.err() == EBUSY) return Fail("gc " + st.ToString());
    if (!why.empty() && !fs::LooksLikeStore(sepfs::Env::Default(), path)) return Fail("gc " + why);
    return Fail("gc " + path + ": " + st.ToString());
  }
  st = f->RunGc(ratio,
                [](const std::string& line) { std::printf("sepfs gc: %s\n", line.c_str()); },
                nullptr);
  const std::string summary = f->GcSummary();
  if (!summary.empty()) std::printf("sepfs gc: %s\n", summary.c_str());
  if (st.ok()) PrintSpaceSections(f->StatsText());
  Status cst = f->Close();
  if (!st.ok()) return Fail("gc " + path + ": " + st.ToString());
  if (!cst.ok()) return Fail("gc " + path + ": " + cst.ToString());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // LevelDB creates its files with mode 0644; a store holds everyone's
  // bytes, so everything this process creates is owner-only.
  ::umask(077);
  std::string prog = argv[0];
  prog = prog.substr(prog.find_last_of('/') + 1);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (prog == "mkfs.sepfs") return CmdMkfs(args);
  if (prog == "fsck.sepfs") return CmdFsck(args);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 1;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "mkfs") return CmdMkfs(rest);
  if (cmd == "mount") return CmdMount(rest);
  if (cmd == "fsck") return CmdFsck(rest);
  if (cmd == "stats") return CmdStats(rest);
  if (cmd == "gc") return CmdGc(rest);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version" || cmd == "-V") {
    std::printf("sepfs %s (store format %u; %s)\n", SEPFS_VERSION,
                sepfs::kv::kMetaFormatVersion, fs::LibraryVersions().c_str());
    return 0;
  }
  // `mount -t fuse.sepfs STORE MNT` runs `sepfs STORE MNT -o OPTS`.
  if (!cmd.empty() && cmd[0] != '-' && args.size() >= 2) return CmdMount(args);
  std::fprintf(stderr, "sepfs: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 1;
}
