#include "fs/mount_options.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace sepfs::fs {

namespace {

// A number of seconds from min to kMaxSeconds; strtod alone would also take
// inf, nan, 1e300 and leading blanks.
bool ParseSeconds(const std::string& v, double min, double* out) {
  // Decimal only: strtod would also read hex (0x10, 0x1p4) and exponents
  // (1e-400, which underflows to 0).
  const size_t digits = static_cast<size_t>(std::count_if(
      v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }));
  const size_t dots = static_cast<size_t>(std::count(v.begin(), v.end(), '.'));
  if (digits == 0 || dots > 1 || digits + dots != v.size()) return false;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (!end || *end != '\0' || !std::isfinite(x) || x < min || x > kMaxSeconds) return false;
  *out = x;
  return true;
}

std::string SecondsRange(double min) {
  std::ostringstream out;
  out << "seconds from " << min << " to " << std::fixed << std::setprecision(0) << kMaxSeconds;
  return out.str();
}

bool ParseUnsigned(const std::string& v, unsigned long long max, unsigned* out) {
  // Digits only: strtoull would also take a sign and leading blanks.
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (errno == ERANGE || !end || *end != '\0' || x > max) return false;
  *out = static_cast<unsigned>(x);
  return true;
}

// The options of a -o list, split and unescaped as libfuse does
// (fuse_opt.c): a comma ends an option unless a backslash comes before it;
// a backslash takes the next character as it is, or three octal digits
// (the first 0-3) as one byte. sepfs checks the options as libfuse will
// see them (allow\_other is allow_other), and the daemon escapes them
// again on the way to libfuse.
std::vector<std::string> SplitOptions(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c == '\\' && i + 1 < text.size()) {
      const char* d = text.c_str() + i + 1;
      if (d[0] >= '0' && d[0] <= '3' && d[1] >= '0' && d[1] <= '7' && d[2] >= '0' && d[2] <= '7') {
        cur += static_cast<char>((d[0] - '0') * 64 + (d[1] - '0') * 8 + (d[2] - '0'));
        i += 3;
      } else {
        cur += d[0];
        i += 1;
      }
    } else {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

}  // namespace

unsigned DefaultFuseThreads() {
  // The CPUs this process may run on (a cpuset or taskset limits them).
  cpu_set_t set;
  const unsigned cpus = ::sched_getaffinity(0, sizeof(set), &set) == 0
                            ? static_cast<unsigned>(CPU_COUNT(&set))
                            : std::thread::hardware_concurrency();  // 0 when unknown
  return std::clamp(2 * cpus, 4u, 32u);
}

Status ParseMountOptions(const std::string& text, MountOptions* o) {
  // Options of mount(8)/fstab that mean nothing to a FUSE daemon.
  static const std::set<std::string> kIgnored = {"defaults", "auto", "noauto", "user",
                                                 "nouser", "users", "_netdev", "nofail", "rw"};
  for (const std::string& opt : SplitOptions(text)) {
    if (opt.empty() || kIgnored.count(opt)) continue;
    // An escaped NUL (\000) ends the option in libfuse's C strings: what
    // sepfs checked would not be what libfuse acts on.
    if (const size_t nul = opt.find('\0'); nul != std::string::npos) {
      return Status::InvalidArgument("mount option '" + opt.substr(0, nul) +
                                     "...' holds an escaped NUL byte");
    }
    // libfuse would take a leading '-' as a command-line flag (-r: ro).
    if (opt[0] == '-') {
      return Status::InvalidArgument("mount option '" + opt +
                                     "' is a flag, not a mount option (-o takes name[=value],...)");
    }
    const size_t eq = opt.find('=');
    const std::string key = opt.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : opt.substr(eq + 1);
    bool ok = true;
    std::string accepted;  // said in the message when the value is refused
    if (opt == "nowriteback") {
      o->writeback_cache = false;
    } else if (opt == "flush_on_close") {
      o->flush_on_close = true;
    } else if (opt == "open_requests") {
      o->open_requests = true;
    } else if (opt == "buffered_vlog") {
      o->direct_io = false;
    } else if (opt == "nokillpriv") {
      o->killpriv_v2 = false;
    } else if (opt == "noio_uring") {
      o->io_uring = false;
    } else if (opt == "io_uring") {
      o->io_uring = true;
    } else if (opt == "noidle_handoff") {
      o->idle_handoff = false;
    } else if (opt == "noreaddirplus") {
      o->readdirplus = false;
    } else if (opt == "noparallel_dirops") {
      o->parallel_dirops = false;
    } else if (opt == "nodefault_permissions") {
      o->default_permissions = false;
    } else if (opt == "default_permissions") {
      o->default_permissions = true;
    } else if (key == "max_write") {
      // libfuse reads each request into a buffer of max_write plus a page: a
      // SETXATTR of a 64 KiB value (the kernel's limit) must fit.
      ok = ParseUnsigned(val, 1u << 20, &o->max_write) && o->max_write >= 65536;
      accepted = "65536 to 1048576 bytes";
    } else if (key == "max_read") {
      ok = ParseUnsigned(val, 1u << 20, &o->max_read_asked) && o->max_read_asked >= 4096;
      accepted = "4096 to 1048576 bytes";
    } else if (key == "max_dirty_ratio") {
      ok = ParseUnsigned(val, 50, &o->max_dirty_ratio);
    } else if (key == "recycle_segments") {
      ok = ParseUnsigned(val, 64, &o->recycle_segments);
    } else if (key == "cpu_latency") {
      unsigned us = 0;
      ok = ParseUnsigned(val, 1000000, &us);
      o->cpu_latency = us;
      accepted = "0 to 1000000 microseconds";
    } else if (key == "attr_timeout" || key == "entry_timeout") {
      ok = ParseSeconds(val, 0, key == "attr_timeout" ? &o->attr_timeout : &o->entry_timeout);
      accepted = SecondsRange(0);
    } else if (key == "flush_interval") {
      ok = ParseSeconds(val, kMinFlushInterval, &o->flush_interval);
      accepted = SecondsRange(kMinFlushInterval);
    } else if (key == "cache_mb") {
      ok = ParseUnsigned(val, 1u << 16, &o->cache_mb) && o->cache_mb > 0;
    } else if (opt == "noprefetch_seq") {
      o->prefetch_seq = false;
    } else if (opt == "noprefetch_dir") {
      o->prefetch_dir = false;
    } else if (key == "prefetch_threads") {
      ok = ParseUnsigned(val, 256, &o->prefetch_threads) && o->prefetch_threads > 0;
    } else if (key == "data_cache_mb") {
      ok = ParseUnsigned(val, 1u << 20, &o->data_cache_mb);
    } else if (key == "checkpoint_mb") {
      ok = ParseUnsigned(val, 1u << 20, &o->checkpoint_mb) && o->checkpoint_mb > 0;
    } else if (key == "gc") {
      o->gc = val;
      ok = val == "hotcold" || val == "wisckey" || val == "off";
    } else if (key == "gc_picker") {
      o->gc_picker = val;
      ok = val == "greedy" || val == "cost-benefit" || val == "oldest";
    } else if (key == "gc_streams") {
      ok = ParseUnsigned(val, 4, &o->gc_streams) && (o->gc_streams == 2 || o->gc_streams == 4);
    } else if (key == "threads") {
      ok = ParseUnsigned(val, 256, &o->threads) && o->threads > 0;
    } else if (key == "fsname" || key == "subtype") {
      // The mount is named after its store: commands find a mounted store
      // by it (StoreMountPoint), and df and mount(8) show it.
      return Status::InvalidArgument("mount option '" + opt +
                                     "' is set by sepfs itself (the store's path, type sepfs)");
    } else {
      if (opt == "ro") o->read_only = true;
      o->passthrough.push_back(opt);
    }
    if (!ok) {
      return Status::InvalidArgument("bad value in mount option '" + opt + "'" +
                                     (accepted.empty() ? "" : " (" + accepted + ")"));
    }
  }
  // No request is larger than max_write: libfuse sizes the kernel's max_pages
  // by it, so a larger max_read would be cut to it anyway.
  // Computed from what was asked each time, so that options given in
  // several -o arguments end the same as in one.
  o->max_read = std::min(o->max_read_asked, o->max_write);
  return Status::OK();
}

}  // namespace sepfs::fs
