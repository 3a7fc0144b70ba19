// metabench: metadata benchmark for sepfs (and any other POSIX directory).
//
//   metabench DIR [--files=50000] [--dirs=50] [--size=4096] [--threads=1]
//
// Creates DIR/metabench-<pid>/ with --dirs subdirectories and spreads
// --files files over them (file i lives in directory i % dirs), then runs
// these phases in order, each over all files:
//
//   create  open(O_CREAT|O_EXCL) + write --size bytes + close
//   stat    stat(2) every file by path
//   ls-l    what `ls -l` does: opendir/readdir each directory and fstatat(2)
//           every entry
//   read    open + read to EOF (size checked) + close
//   rename  rename every file to a new name in the same directory
//   unlink  unlink every file
//
// and prints one line per phase: `phase ops seconds ops_per_sec`.
// With --threads=N the files (or, for ls-l, the directories) are split
// round-robin between N threads. The directory tree is removed at the end.
// Exit status: 0 on success (and for --help), 1 on any failed system call
// (message on stderr), 2 on bad usage.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct Options {
  std::string dir;
  uint64_t files = 50000;
  uint64_t dirs = 50;
  uint64_t size = 4096;
  uint64_t threads = 1;
};

// Records the first error of a phase; later errors are dropped so the
// message points at the root cause.
class ErrorSink {
 public:
  void Report(const std::string& what, const std::string& path, int err) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return;
    message_ = what + " " + path + ": " + std::strerror(err);
    failed_.store(true);
  }
  bool failed() const { return failed_.load(); }
  const std::string& message() const { return message_; }

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::string message_;
};

[[noreturn]] void Usage(const char* msg) {
  if (msg != nullptr) std::fprintf(stderr, "metabench: %s\n", msg);
  std::fprintf(stderr,
               "usage: metabench DIR [--files=N] [--dirs=N] [--size=BYTES] "
               "[--threads=N]\n");
  std::exit(msg == nullptr ? 0 : 2);
}

bool ParseUint(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

Options ParseArgs(int argc, char** argv) {
  Options opts;
  struct Flag {
    std::string_view prefix;
    uint64_t* value;
  };
  const Flag flags[] = {{"--files=", &opts.files},
                        {"--dirs=", &opts.dirs},
                        {"--size=", &opts.size},
                        {"--threads=", &opts.threads}};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") Usage(nullptr);
    if (!arg.starts_with("--")) {
      if (!opts.dir.empty()) Usage("more than one DIR given");
      opts.dir = std::string(arg);
      continue;
    }
    bool known = false;
    for (const Flag& flag : flags) {
      if (arg.starts_with(flag.prefix)) {
        if (!ParseUint(arg.substr(flag.prefix.size()), flag.value)) {
          Usage(("bad number in " + std::string(arg)).c_str());
        }
        known = true;
        break;
      }
    }
    if (!known) Usage(("unknown option " + std::string(arg)).c_str());
  }
  if (opts.dir.empty()) Usage("DIR is required");
  if (opts.files == 0 || opts.dirs == 0 || opts.threads == 0) {
    Usage("--files, --dirs and --threads must be positive");
  }
  return opts;
}

class Bench {
 public:
  explicit Bench(Options opts)
      : opts_(std::move(opts)),
        root_(opts_.dir + "/metabench-" + std::to_string(getpid())),
        data_(opts_.size, 'm') {}

  // Runs every phase; returns false after printing the first error.
  bool Run() {
    if (!Setup()) return false;
    bool ok = Phase("create", opts_.files, [this](uint64_t t) { CreateFiles(t); }) &&
              Phase("stat", opts_.files, [this](uint64_t t) { StatFiles(t); }) &&
              PhaseCounted("ls-l", [this](uint64_t t) { return ListDirs(t); }) &&
              Phase("read", opts_.files, [this](uint64_t t) { ReadFiles(t); }) &&
              Phase("rename", opts_.files, [this](uint64_t t) { RenameFiles(t); }) &&
              Phase("unlink", opts_.files, [this](uint64_t t) { UnlinkFiles(t); });
    if (ok) ok = Teardown();
    if (!ok) std::fprintf(stderr, "metabench: %s\n", errors_.message().c_str());
    return ok;
  }

 private:
  std::string DirPath(uint64_t d) const { return root_ + "/d" + std::to_string(d); }
  std::string FilePath(uint64_t i, const char* prefix) const {
    return DirPath(i % opts_.dirs) + "/" + prefix + std::to_string(i);
  }

  bool Setup() {
    if (mkdir(root_.c_str(), 0755) != 0) {
      errors_.Report("mkdir", root_, errno);
      std::fprintf(stderr, "metabench: %s\n", errors_.message().c_str());
      return false;
    }
    for (uint64_t d = 0; d < opts_.dirs; ++d) {
      std::string path = DirPath(d);
      if (mkdir(path.c_str(), 0755) != 0) {
        errors_.Report("mkdir", path, errno);
        std::fprintf(stderr, "metabench: %s\n", errors_.message().c_str());
        return false;
      }
    }
    return true;
  }

  bool Teardown() {
    for (uint64_t d = 0; d < opts_.dirs; ++d) {
      std::string path = DirPath(d);
      if (rmdir(path.c_str()) != 0) errors_.Report("rmdir", path, errno);
    }
    if (rmdir(root_.c_str()) != 0) errors_.Report("rmdir", root_, errno);
    return !errors_.failed();
  }

  // Runs `work(thread_index)` on every thread and prints the phase line.
  bool Phase(const char* name, uint64_t ops, const std::function<void(uint64_t)>& work) {
    return PhaseCounted(name, [&](uint64_t t) {
      work(t);
      return uint64_t{0};
    }, ops);
  }

  // As Phase, but the op count is the sum of what the workers return
  // (plus `fixed_ops`).
  bool PhaseCounted(const char* name, const std::function<uint64_t(uint64_t)>& work,
                    uint64_t fixed_ops = 0) {
    std::atomic<uint64_t> counted{0};
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    workers.reserve(opts_.threads);
    for (uint64_t t = 0; t < opts_.threads; ++t) {
      workers.emplace_back([&, t] { counted += work(t); });
    }
    for (std::thread& w : workers) w.join();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (errors_.failed()) return false;
    uint64_t ops = fixed_ops + counted.load();
    double rate = seconds > 0 ? static_cast<double>(ops) / seconds : 0.0;
    std::printf("%s %llu %.6f %.1f\n", name, static_cast<unsigned long long>(ops), seconds,
                rate);
    std::fflush(stdout);
    return true;
  }

  void CreateFiles(uint64_t t) {
    for (uint64_t i = t; i < opts_.files && !errors_.failed(); i += opts_.threads) {
      std::string path = FilePath(i, "f");
      int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        errors_.Report("create", path, errno);
        return;
      }
      size_t done = 0;
      while (done < data_.size()) {
        ssize_t n = write(fd, data_.data() + done, data_.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          errors_.Report("write", path, n < 0 ? errno : EIO);
          close(fd);
          return;
        }
        done += static_cast<size_t>(n);
      }
      if (close(fd) != 0) {
        errors_.Report("close", path, errno);
        return;
      }
    }
  }

  void StatFiles(uint64_t t) {
    struct stat st;
    for (uint64_t i = t; i < opts_.files && !errors_.failed(); i += opts_.threads) {
      std::string path = FilePath(i, "f");
      if (stat(path.c_str(), &st) != 0) {
        errors_.Report("stat", path, errno);
        return;
      }
    }
  }

  uint64_t ListDirs(uint64_t t) {
    uint64_t entries = 0;
    for (uint64_t d = t; d < opts_.dirs && !errors_.failed(); d += opts_.threads) {
      std::string path = DirPath(d);
      DIR* dir = opendir(path.c_str());
      if (dir == nullptr) {
        errors_.Report("opendir", path, errno);
        return entries;
      }
      int dfd = dirfd(dir);
      struct stat st;
      errno = 0;
      while (struct dirent* ent = readdir(dir)) {
        if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
        if (fstatat(dfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
          errors_.Report("fstatat", path + "/" + ent->d_name, errno);
          closedir(dir);
          return entries;
        }
        ++entries;
        errno = 0;
      }
      if (errno != 0) errors_.Report("readdir", path, errno);
      closedir(dir);
    }
    return entries;
  }

  void ReadFiles(uint64_t t) {
    std::vector<char> buf(opts_.size > 0 ? opts_.size + 1 : 4096);
    for (uint64_t i = t; i < opts_.files && !errors_.failed(); i += opts_.threads) {
      std::string path = FilePath(i, "f");
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        errors_.Report("open", path, errno);
        return;
      }
      uint64_t total = 0;
      for (;;) {
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          errors_.Report("read", path, errno);
          close(fd);
          return;
        }
        if (n == 0) break;
        total += static_cast<uint64_t>(n);
      }
      close(fd);
      if (total != opts_.size) {
        errors_.Report("read (wrong size " + std::to_string(total) + ")", path, EIO);
        return;
      }
    }
  }

  void RenameFiles(uint64_t t) {
    for (uint64_t i = t; i < opts_.files && !errors_.failed(); i += opts_.threads) {
      std::string from = FilePath(i, "f");
      std::string to = FilePath(i, "r");
      if (rename(from.c_str(), to.c_str()) != 0) {
        errors_.Report("rename", from, errno);
        return;
      }
    }
  }

  void UnlinkFiles(uint64_t t) {
    for (uint64_t i = t; i < opts_.files && !errors_.failed(); i += opts_.threads) {
      std::string path = FilePath(i, "r");
      if (unlink(path.c_str()) != 0) {
        errors_.Report("unlink", path, errno);
        return;
      }
    }
  }

  const Options opts_;
  const std::string root_;
  const std::string data_;
  ErrorSink errors_;
};

}  // namespace

int main(int argc, char** argv) {
  Bench bench(ParseArgs(argc, argv));
  return bench.Run() ? 0 : 1;
}
