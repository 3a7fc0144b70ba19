// gcbench: GC workloads on a directory (a mounted sepfs or a plain dir),
// plain POSIX system calls only. Driven by bench/gc-bench; see
// bench/README.md ("GC benchmark").
//
//   gcbench load   DIR --bytes=N [--min=64K] [--max=1M] [--block=64K] [--seed=S] [--state=F]
//   gcbench update DIR --bytes=N [--zipf=0.99] [--seed=S] [--reader] [--fsync-every=64M]
//                      [--state=F]
//   gcbench check  DIR [--state=F]
//   gcbench photos DIR --count=N [--min=16K] [--max=10M] [--seed=S]
//   gcbench delete DIR [--fraction=0.5] [--seed=S]
//
// load/update/check work on DIR/gcb/f<id> and a state file (default
// DIR/gcbench.state; gc-bench keeps it outside the store). Every block of
// `block` bytes (the last one of a file may be shorter) holds a 16-byte
// header (file id u32, block number u32, version u64, little endian) and
// then bytes that are a pure function of those three numbers. load writes
// version 0 everywhere; update overwrites Zipf-chosen blocks with a new
// global version number each time and records the last version of every
// block in the state file; check re-reads every block and verifies that it
// holds exactly that version (a lost GC relocation, a resurrected old block
// or a torn block all show up). Blocks whose write or fsync failed are
// "ambiguous": check accepts any version between the last one known synced
// and the last one attempted.
//
// photos/delete work on DIR/photos/p<n> (numbering continues after the
// largest existing p<n>), each file written whole (1 MiB writes) and
// fsync'd. Failures with ENOSPC are counted per file, never fatal.
//
// Every command ends with one line "RESULT <command> key=value ..." for
// scripts, after human-readable lines on stderr.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "gcbench: %s\n", msg.c_str());
  std::exit(2);
}

[[noreturn]] void DieErrno(const std::string& what) { Die(what + ": " + std::strerror(errno)); }

uint64_t ParseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) Die("bad size '" + s + "'");
  uint64_t mul = 1;
  std::string suf = end;
  if (suf == "" || suf == "B") {
  } else if (suf == "K" || suf == "k" || suf == "KiB") {
    mul = 1ull << 10;
  } else if (suf == "M" || suf == "m" || suf == "MiB") {
    mul = 1ull << 20;
  } else if (suf == "G" || suf == "g" || suf == "GiB") {
    mul = 1ull << 30;
  } else if (suf == "T" || suf == "t" || suf == "TiB") {
    mul = 1ull << 40;
  } else {
    Die("bad size suffix in '" + s + "'");
  }
  return static_cast<uint64_t>(v * static_cast<double>(mul));
}

struct Args {
  std::string cmd, dir, state;
  uint64_t bytes = 0, min = 0, max = 0, block = 64 << 10, count = 0;
  uint64_t fsync_every = 64ull << 20;
  double zipf = 0.99, fraction = 0.5;
  uint64_t seed = 1;
  bool reader = false;
  bool have_min = false, have_max = false;
};

Args ParseArgs(int argc, char** argv) {
  if (argc < 3) {
    Die("usage: gcbench load|update|check|photos|delete DIR [options] (see bench/gcbench.cc)");
  }
  Args a;
  a.cmd = argv[1];
  a.dir = argv[2];
  for (int i = 3; i < argc; i++) {
    std::string s = argv[i];
    const size_t eq = s.find('=');
    const std::string k = s.substr(0, eq), v = eq == std::string::npos ? "" : s.substr(eq + 1);
    if (k == "--bytes") a.bytes = ParseSize(v);
    else if (k == "--min") a.min = ParseSize(v), a.have_min = true;
    else if (k == "--max") a.max = ParseSize(v), a.have_max = true;
    else if (k == "--block") a.block = ParseSize(v);
    else if (k == "--count") a.count = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--fsync-every") a.fsync_every = ParseSize(v);
    else if (k == "--zipf") a.zipf = std::strtod(v.c_str(), nullptr);
    else if (k == "--fraction") a.fraction = std::strtod(v.c_str(), nullptr);
    else if (k == "--seed") a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--state") a.state = v;
    else if (k == "--reader") a.reader = true;
    else Die("unknown option " + s);
  }
  if (a.state.empty()) a.state = a.dir + "/gcbench.state";
  if (a.block < 16 || a.block > (64u << 20)) Die("--block must be 16 B..64 MiB");
  return a;
}

// ---- block contents ------------------------------------------------------

uint64_t SplitMix(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<char>(v >> (8 * i));
}
void Put64(char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Fills buf[0, len) with the content of (file, block, version).
void FillBlock(char* buf, size_t len, uint32_t file, uint32_t block, uint64_t version) {
  char hdr[16];
  Put32(hdr, file);
  Put32(hdr + 4, block);
  Put64(hdr + 8, version);
  std::memcpy(buf, hdr, std::min<size_t>(16, len));
  uint64_t x = (static_cast<uint64_t>(file) << 32 | block) ^ (version * 0xd1b54a32d192ed03ull);
  size_t i = 16;
  for (; i + 8 <= len; i += 8) {
    const uint64_t r = SplitMix(&x);
    std::memcpy(buf + i, &r, 8);
  }
  if (i < len) {
    const uint64_t r = SplitMix(&x);
    std::memcpy(buf + i, &r, len - i);
  }
}

// ---- state file ----------------------------------------------------------

struct FileInfo {
  uint64_t size = 0;
  uint64_t first = 0;  // index of its block 0 in the global block arrays
  uint64_t nblocks = 0;
};

struct State {
  uint64_t block = 0;
  std::vector<FileInfo> files;
  std::vector<uint64_t> ver;     // last version written (attempted)
  std::vector<uint64_t> synced;  // last version known durable; == ver unless ambiguous
  uint64_t next_version = 1;

  void Layout() {
    uint64_t n = 0;
    for (auto& f : files) {
      f.nblocks = (f.size + block - 1) / block;
      f.first = n;
      n += f.nblocks;
    }
    ver.assign(n, 0);
    synced.assign(n, 0);
  }
};

uint64_t Fnv(const void* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// Text format: header line, one line per file, then the blocks whose
// version is not 0 ("idx ver synced"), then "end <fnv>".
void SaveState(const std::string& path, const State& s) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) DieErrno("create " + tmp);
  uint64_t h = Fnv(&s.block, 8);
  std::fprintf(f, "gcbench-state 1 block %" PRIu64 " files %zu blocks %zu next %" PRIu64 "\n",
               s.block, s.files.size(), s.ver.size(), s.next_version);
  for (const auto& fi : s.files) {
    std::fprintf(f, "%" PRIu64 "\n", fi.size);
    h = Fnv(&fi.size, 8, h);
  }
  for (size_t i = 0; i < s.ver.size(); i++) {
    if (s.ver[i] == 0 && s.synced[i] == 0) continue;
    std::fprintf(f, "b %zu %" PRIu64 " %" PRIu64 "\n", i, s.ver[i], s.synced[i]);
    h = Fnv(&s.ver[i], 8, Fnv(&s.synced[i], 8, h));
  }
  std::fprintf(f, "end %016" PRIx64 "\n", h);
  if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) DieErrno("write " + tmp);
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) DieErrno("rename " + tmp);
}

State LoadState(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) DieErrno("open state " + path + " (run gcbench load first)");
  State s;
  size_t nfiles = 0, nblocks = 0;
  if (std::fscanf(f, "gcbench-state 1 block %" SCNu64 " files %zu blocks %zu next %" SCNu64,
                  &s.block, &nfiles, &nblocks, &s.next_version) != 4) {
    Die("bad state file " + path);
  }
  uint64_t h = Fnv(&s.block, 8);
  s.files.resize(nfiles);
  for (auto& fi : s.files) {
    if (std::fscanf(f, "%" SCNu64, &fi.size) != 1) Die("truncated state file " + path);
    h = Fnv(&fi.size, 8, h);
  }
  s.Layout();
  if (s.ver.size() != nblocks) Die("state file block count mismatch");
  char tag[8];
  while (std::fscanf(f, "%7s", tag) == 1) {
    if (std::strcmp(tag, "end") == 0) {
      uint64_t want = 0;
      if (std::fscanf(f, "%" SCNx64, &want) != 1 || want != h) Die("state file checksum mismatch");
      std::fclose(f);
      return s;
    }
    size_t i = 0;
    uint64_t v = 0, sy = 0;
    if (std::strcmp(tag, "b") != 0 || std::fscanf(f, "%zu %" SCNu64 " %" SCNu64, &i, &v, &sy) != 3 ||
        i >= s.ver.size()) {
      Die("bad block line in state file");
    }
    s.ver[i] = v;
    s.synced[i] = sy;
    h = Fnv(&s.ver[i], 8, Fnv(&s.synced[i], 8, h));
  }
  Die("state file has no end line (update interrupted?)");
}

std::string DataDir(const Args& a) { return a.dir + "/gcb"; }
std::string FileName(const Args& a, size_t id) {
  char b[32];
  std::snprintf(b, sizeof(b), "/f%07zu", id);
  return DataDir(a) + b;
}

void RaiseFdLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

bool IsNoSpace(int e) { return e == ENOSPC || e == EDQUOT; }

// Writes all of buf at off; returns 0 or errno.
int PwriteAll(int fd, const char* buf, size_t len, off_t off) {
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, buf, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    buf += n;
    len -= static_cast<size_t>(n);
    off += n;
  }
  return 0;
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  if (i > 0) i--;
  return v[std::min(i, v.size() - 1)];
}

// ---- load ----------------------------------------------------------------

int CmdLoad(const Args& a) {
  const uint64_t mn = a.have_min ? a.min : 64 << 10, mx = a.have_max ? a.max : 1 << 20;
  if (a.bytes == 0 || mn == 0 || mn > mx) Die("load needs --bytes=N and 0 < --min <= --max");
  if (::mkdir(DataDir(a).c_str(), 0755) != 0) DieErrno("mkdir " + DataDir(a) + " (not empty?)");
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<uint64_t> size_dist(mn, mx);
  State s;
  s.block = a.block;
  std::vector<char> buf(a.block);
  uint64_t total = 0, nospace = 0, other_err = 0;
  double max_file = 0;
  const auto t0 = Clock::now();
  while (total < a.bytes) {
    const uint64_t size = std::min(size_dist(rng), a.bytes - total);
    const uint32_t id = static_cast<uint32_t>(s.files.size());
    const auto tf = Clock::now();
    const std::string name = FileName(a, id);
    const int fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) DieErrno("create " + name);
    int err = 0;
    for (uint64_t off = 0, b = 0; off < size && !err; off += a.block, b++) {
      const size_t len = std::min<uint64_t>(a.block, size - off);
      FillBlock(buf.data(), len, id, static_cast<uint32_t>(b), 0);
      err = PwriteAll(fd, buf.data(), len, static_cast<off_t>(off));
    }
    if (!err && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && !err) err = errno;
    if (err) {
      // The file set must be exact for update/check: give up on this file's
      // bytes but keep it in the set with size 0 (truncated).
      if (IsNoSpace(err)) nospace++; else other_err++;
      std::fprintf(stderr, "gcbench load: %s: %s\n", name.c_str(), std::strerror(err));
      if (::truncate(name.c_str(), 0) != 0) DieErrno("truncate " + name);
      s.files.push_back({0, 0, 0});
      if (nospace + other_err > 16) Die("load: too many failures, stopping");
      total += size;
      continue;
    }
    max_file = std::max(max_file, Since(tf));
    s.files.push_back({size, 0, 0});
    total += size;
  }
  const double secs = Since(t0);
  s.Layout();
  SaveState(a.state, s);
  std::fprintf(stderr, "gcbench load: %zu files, %" PRIu64 " bytes in %.1f s (%.1f MB/s)\n",
               s.files.size(), total, secs, total / secs / 1e6);
  std::printf("RESULT load files=%zu bytes=%" PRIu64 " seconds=%.3f mbps=%.2f "
              "max_file_ms=%.1f enospc=%" PRIu64 " errors=%" PRIu64 "\n",
              s.files.size(), total, secs, total / secs / 1e6, max_file * 1e3, nospace, other_err);
  return (nospace + other_err) ? 1 : 0;
}

// ---- update --------------------------------------------------------------

// Zipf(theta) over ranks 0..n-1 (rank 0 hottest): inverse CDF by binary search.
class Zipf {
 public:
  Zipf(uint64_t n, double theta) : cdf_(n) {
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) {
      sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
      cdf_[i] = sum;
    }
    for (auto& c : cdf_) c /= sum;
  }
  uint64_t Sample(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    return std::min<uint64_t>(it - cdf_.begin(), cdf_.size() - 1);
  }

 private:
  std::vector<double> cdf_;
};

int CmdUpdate(const Args& a) {
  if (a.bytes == 0) Die("update needs --bytes=N");
  State s = LoadState(a.state);
  if (a.block != s.block) Die("--block differs from the block size of the load");
  const uint64_t nb = s.ver.size();
  if (nb == 0) Die("nothing loaded");
  // Global block index -> file.
  std::vector<uint32_t> owner(nb);
  for (uint32_t f = 0; f < s.files.size(); f++) {
    for (uint64_t b = 0; b < s.files[f].nblocks; b++) owner[s.files[f].first + b] = f;
  }
  RaiseFdLimit();
  std::vector<int> fds(s.files.size(), -1);
  for (size_t f = 0; f < fds.size(); f++) {
    if (s.files[f].nblocks == 0) continue;
    fds[f] = ::open(FileName(a, f).c_str(), O_RDWR);
    if (fds[f] < 0) DieErrno("open " + FileName(a, f));
  }
  std::mt19937_64 rng(a.seed * 7919 + 17);
  const Zipf zipf(nb, a.zipf);
  std::vector<uint64_t> perm(nb);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, read_bytes{0}, read_errors{0};
  std::thread reader;
  if (a.reader) {
    reader = std::thread([&] {
      std::mt19937_64 r(a.seed * 31 + 5);
      std::vector<char> rb(s.block);
      std::uniform_int_distribution<uint64_t> pick(0, nb - 1);
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t g = pick(r);
        const uint32_t f = owner[g];
        const uint64_t b = g - s.files[f].first;
        const ssize_t n = ::pread(fds[f], rb.data(), s.block, static_cast<off_t>(b * s.block));
        if (n < 0) {
          read_errors++;
        } else {
          reads++;
          read_bytes += static_cast<uint64_t>(n);
        }
      }
    });
  }

  std::vector<char> buf(s.block);
  std::vector<double> lat;
  lat.reserve(a.bytes / s.block + 16);
  std::vector<uint64_t> dirty_blocks;
  std::vector<char> file_dirty(s.files.size(), 0);
  std::vector<uint32_t> dirty_files;
  uint64_t written = 0, since_sync = 0, nospace = 0, other_err = 0, fsyncs = 0;
  double max_fsync = 0, max_round = 0;
  auto sync_round = [&] {
    const auto tr = Clock::now();
    for (uint32_t f : dirty_files) {
      const auto t = Clock::now();
      const int rc = ::fsync(fds[f]);
      const int e = errno;
      max_fsync = std::max(max_fsync, Since(t));
      fsyncs++;
      if (rc != 0) {
        if (IsNoSpace(e)) nospace++; else other_err++;
        std::fprintf(stderr, "gcbench update: fsync %s: %s\n", FileName(a, f).c_str(),
                     std::strerror(e));
        file_dirty[f] = 2;  // blocks of this file since the last good sync stay ambiguous
      }
    }
    for (uint64_t g : dirty_blocks) {
      if (file_dirty[owner[g]] == 1) s.synced[g] = s.ver[g];
    }
    for (uint32_t f : dirty_files) file_dirty[f] = 0;
    dirty_blocks.clear();
    dirty_files.clear();
    max_round = std::max(max_round, Since(tr));
    since_sync = 0;
  };
  const auto t0 = Clock::now();
  double last_report = 0;
  uint64_t last_written = 0;
  while (written < a.bytes) {
    const uint64_t g = perm[zipf.Sample(rng)];
    const uint32_t f = owner[g];
    const uint64_t b = g - s.files[f].first;
    const uint64_t off = b * s.block;
    const size_t len = std::min<uint64_t>(s.block, s.files[f].size - off);
    const uint64_t v = s.next_version++;
    FillBlock(buf.data(), len, f, static_cast<uint32_t>(b), v);
    const auto t = Clock::now();
    const int err = PwriteAll(fds[f], buf.data(), len, static_cast<off_t>(off));
    lat.push_back(Since(t));
    s.ver[g] = v;  // attempted: even a failed write may have landed in part
    if (err) {
      if (IsNoSpace(err)) nospace++; else other_err++;
      if (nospace + other_err <= 10) {
        std::fprintf(stderr, "gcbench update: pwrite %s: %s\n", FileName(a, f).c_str(),
                     std::strerror(err));
      }
    }
    if (!file_dirty[f]) {
      file_dirty[f] = 1;
      dirty_files.push_back(f);
    }
    if (err) file_dirty[f] = 2;
    dirty_blocks.push_back(g);
    written += len;
    since_sync += len;
    if (since_sync >= a.fsync_every) sync_round();
    const double el = Since(t0);
    if (el - last_report >= 10) {
      std::fprintf(stderr, "gcbench update: %.0f s: %" PRIu64 " MiB written, %.1f MB/s now\n", el,
                   written >> 20, (written - last_written) / (el - last_report) / 1e6);
      last_report = el;
      last_written = written;
    }
  }
  sync_round();
  const double secs = Since(t0);
  stop = true;
  if (reader.joinable()) reader.join();
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  SaveState(a.state, s);
  const double max_write = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  std::fprintf(stderr,
               "gcbench update: %" PRIu64 " bytes in %.1f s (%.1f MB/s), write p99 %.2f ms, "
               "longest write %.1f ms, longest fsync %.1f ms, reader %" PRIu64 " reads\n",
               written, secs, written / secs / 1e6, Pct(lat, 99) * 1e3, max_write * 1e3,
               max_fsync * 1e3, reads.load());
  std::printf("RESULT update bytes=%" PRIu64 " seconds=%.3f mbps=%.2f writes=%zu "
              "p50_write_ms=%.3f p99_write_ms=%.3f max_write_ms=%.1f fsyncs=%" PRIu64
              " max_fsync_ms=%.1f max_fsync_round_ms=%.1f reads=%" PRIu64
              " read_mbps=%.2f read_errors=%" PRIu64 " enospc=%" PRIu64 " errors=%" PRIu64 "\n",
              written, secs, written / secs / 1e6, lat.size(), Pct(lat, 50) * 1e3,
              Pct(lat, 99) * 1e3, max_write * 1e3, fsyncs, max_fsync * 1e3, max_round * 1e3,
              reads.load(), read_bytes.load() / secs / 1e6, read_errors.load(), nospace,
              other_err);
  return (nospace + other_err + read_errors.load()) ? 1 : 0;
}

// ---- check ---------------------------------------------------------------

int CmdCheck(const Args& a) {
  State s = LoadState(a.state);
  std::vector<char> got(s.block), want(s.block);
  uint64_t bad = 0, blocks = 0, bytes = 0, ambiguous = 0, stale = 0, future = 0, torn = 0;
  auto report = [&](const std::string& msg) {
    if (++bad <= 20) std::fprintf(stderr, "gcbench check: %s\n", msg.c_str());
  };
  const auto t0 = Clock::now();
  for (uint32_t f = 0; f < s.files.size(); f++) {
    const FileInfo& fi = s.files[f];
    const std::string name = FileName(a, f);
    const int fd = ::open(name.c_str(), O_RDONLY);
    if (fd < 0) {
      report(name + ": " + std::strerror(errno));
      continue;
    }
    struct stat st{};
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) != fi.size) {
      report(name + ": size " + std::to_string(st.st_size) + ", expected " + std::to_string(fi.size));
    }
    for (uint64_t b = 0; b < fi.nblocks; b++) {
      const uint64_t g = fi.first + b, off = b * s.block;
      const size_t len = std::min<uint64_t>(s.block, fi.size - off);
      size_t have = 0;
      while (have < len) {
        const ssize_t n = ::pread(fd, got.data() + have, len - have, static_cast<off_t>(off + have));
        if (n <= 0) break;
        have += static_cast<size_t>(n);
      }
      blocks++;
      bytes += have;
      char where[96];
      std::snprintf(where, sizeof(where), "%s block %" PRIu64 " (offset %" PRIu64 ")", name.c_str(), b,
                    off);
      if (have != len) {
        report(std::string(where) + ": short read " + std::to_string(have) + " of " +
               std::to_string(len) + (errno ? std::string(" (") + std::strerror(errno) + ")" : ""));
        continue;
      }
      const uint64_t v = len >= 16 ? Get64(got.data() + 8) : s.ver[g];
      const bool hdr_ok = len < 16 || (Get32(got.data()) == f && Get32(got.data() + 4) == b);
      const bool amb = s.synced[g] != s.ver[g];
      ambiguous += amb;
      const bool version_ok = amb ? (v >= s.synced[g] && v <= s.ver[g]) : v == s.ver[g];
      if (!hdr_ok || !version_ok) {
        char m[160];
        if (!hdr_ok) {
          torn++;
          std::snprintf(m, sizeof(m), ": header says file %u block %u version %" PRIu64,
                        Get32(got.data()), Get32(got.data() + 4), v);
        } else {
          (v < s.synced[g] ? stale : future)++;
          std::snprintf(m, sizeof(m), ": version %" PRIu64 ", expected %" PRIu64 "%s", v, s.ver[g],
                        v < s.synced[g] ? " (an older version: lost update / resurrected block)" : "");
        }
        report(std::string(where) + m);
        continue;
      }
      FillBlock(want.data(), len, f, static_cast<uint32_t>(b), v);
      if (std::memcmp(got.data(), want.data(), len) != 0) {
        torn++;
        report(std::string(where) + ": header ok (version " + std::to_string(v) +
               ") but the payload differs");
      }
    }
    ::close(fd);
  }
  const double secs = Since(t0);
  std::fprintf(stderr, "gcbench check: %" PRIu64 " blocks (%" PRIu64 " bytes) in %.1f s: %s\n", blocks,
               bytes, secs, bad ? (std::to_string(bad) + " BAD").c_str() : "all ok");
  std::printf("RESULT check blocks=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f bad=%" PRIu64
              " stale=%" PRIu64 " future=%" PRIu64 " torn=%" PRIu64 " ambiguous=%" PRIu64 " result=%s\n",
              blocks, bytes, secs, bad, stale, future, torn, ambiguous, bad ? "FAIL" : "ok");
  return bad ? 1 : 0;
}

// ---- photos / delete -----------------------------------------------------

std::string PhotoDir(const Args& a) { return a.dir + "/photos"; }

// name -> size of DIR/photos/p<n>.
std::map<uint64_t, uint64_t> ListPhotos(const Args& a) {
  std::map<uint64_t, uint64_t> out;
  DIR* d = ::opendir(PhotoDir(a).c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != 'p') continue;
    char* end = nullptr;
    const uint64_t n = std::strtoull(e->d_name + 1, &end, 10);
    if (!end || *end) continue;
    struct stat st{};
    if (::fstatat(dirfd(d), e->d_name, &st, 0) == 0) out[n] = static_cast<uint64_t>(st.st_size);
  }
  ::closedir(d);
  return out;
}

std::string PhotoName(const Args& a, uint64_t n) {
  char b[32];
  std::snprintf(b, sizeof(b), "/p%08" PRIu64, n);
  return PhotoDir(a) + b;
}

int CmdPhotos(const Args& a) {
  const uint64_t mn = a.have_min ? a.min : 16 << 10, mx = a.have_max ? a.max : 10 << 20;
  if (a.count == 0 || mn == 0 || mn > mx) Die("photos needs --count=N and 0 < --min <= --max");
  if (::mkdir(PhotoDir(a).c_str(), 0755) != 0 && errno != EEXIST) DieErrno("mkdir " + PhotoDir(a));
  const auto existing = ListPhotos(a);
  const uint64_t start = existing.empty() ? 0 : existing.rbegin()->first + 1;
  std::mt19937_64 rng(a.seed * 1000003 + start);
  std::uniform_int_distribution<uint64_t> size_dist(mn, mx);
  std::vector<char> buf(1 << 20);
  uint64_t x = a.seed;
  for (size_t i = 0; i + 8 <= buf.size(); i += 8) {
    const uint64_t r = SplitMix(&x);
    std::memcpy(buf.data() + i, &r, 8);
  }
  uint64_t ok = 0, nospace = 0, other_err = 0, bytes = 0, bytes_failed = 0;
  double max_file = 0;
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < a.count; i++) {
    const uint64_t size = size_dist(rng);
    const std::string name = PhotoName(a, start + i);
    const auto tf = Clock::now();
    const int fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    int err = fd < 0 ? errno : 0;
    for (uint64_t off = 0; off < size && !err; off += buf.size()) {
      buf[0] = static_cast<char>(i);  // not all files identical
      err = PwriteAll(fd, buf.data(), std::min<uint64_t>(buf.size(), size - off),
                      static_cast<off_t>(off));
    }
    if (!err && ::fsync(fd) != 0) err = errno;
    if (fd >= 0 && ::close(fd) != 0 && !err) err = errno;
    max_file = std::max(max_file, Since(tf));
    if (err) {
      if (IsNoSpace(err)) nospace++; else other_err++;
      bytes_failed += size;
      if (nospace + other_err <= 10) {
        std::fprintf(stderr, "gcbench photos: %s: %s\n", name.c_str(), std::strerror(err));
      }
      ::unlink(name.c_str());  // a partial photo is useless; give its space back
      if (other_err > 100) Die("photos: too many errors other than ENOSPC");
      continue;
    }
    ok++;
    bytes += size;
  }
  const double secs = Since(t0);
  std::fprintf(stderr,
               "gcbench photos: %" PRIu64 " of %" PRIu64 " files, %" PRIu64
               " bytes in %.1f s (%.1f MB/s), %" PRIu64 " ENOSPC\n",
               ok, a.count, bytes, secs, bytes / secs / 1e6, nospace);
  std::printf("RESULT photos files=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f mbps=%.2f "
              "max_file_ms=%.1f enospc=%" PRIu64 " enospc_bytes=%" PRIu64 " errors=%" PRIu64 "\n",
              ok, bytes, secs, bytes / secs / 1e6, max_file * 1e3, nospace, bytes_failed, other_err);
  return (nospace + other_err) ? 1 : 0;
}

int CmdDelete(const Args& a) {
  if (a.fraction < 0 || a.fraction > 1) Die("--fraction must be in [0,1]");
  const auto existing = ListPhotos(a);
  std::vector<std::pair<uint64_t, uint64_t>> v(existing.begin(), existing.end());
  std::mt19937_64 rng(a.seed * 65537 + 3);
  std::shuffle(v.begin(), v.end(), rng);
  const size_t n = static_cast<size_t>(std::llround(a.fraction * v.size()));
  uint64_t bytes = 0, errors = 0;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < n; i++) {
    if (::unlink(PhotoName(a, v[i].first).c_str()) != 0) {
      errors++;
      std::fprintf(stderr, "gcbench delete: %s: %s\n", PhotoName(a, v[i].first).c_str(),
                   std::strerror(errno));
      continue;
    }
    bytes += v[i].second;
  }
  const double secs = Since(t0);
  std::fprintf(stderr, "gcbench delete: %zu of %zu files (%" PRIu64 " bytes) in %.2f s\n", n,
               v.size(), bytes, secs);
  std::printf("RESULT delete files=%zu of=%zu bytes=%" PRIu64 " seconds=%.3f files_per_sec=%.1f "
              "errors=%" PRIu64 "\n",
              n - errors, v.size(), bytes, secs, secs > 0 ? (n - errors) / secs : 0.0, errors);
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Args a = ParseArgs(argc, argv);
  if (a.cmd == "load") return CmdLoad(a);
  if (a.cmd == "update") return CmdUpdate(a);
  if (a.cmd == "check" || a.cmd == "verify") return CmdCheck(a);
  if (a.cmd == "photos") return CmdPhotos(a);
  if (a.cmd == "delete") return CmdDelete(a);
  Die("unknown command " + a.cmd);
}
