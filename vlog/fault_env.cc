#include "vlog/fault_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace sepfs {

struct FaultModel::Node {
  uint64_t id = 0;
  bool is_dir = false;
  std::string path;     // where the file is now; "" once really deleted
  bool parked = false;  // path is in the scratch directory
  uint64_t size = 0;    // logical bytes written
  uint64_t synced = 0;  // durable prefix
  int durable_refs = 0; // durable directory entries naming this node
  struct Undo {
    uint64_t off;
    std::string bytes;
  };
  std::vector<Undo> undo;  // old synced bytes overwritten since the last Sync
  std::string placed_at;   // DropUnsyncedData bookkeeping
};

struct FaultModel::Dir {
  std::string path;
  std::map<std::string, NodeRef> current;  // what the directory holds now
  std::map<std::string, NodeRef> durable;  // as of its last SyncDir
};

namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

const char* OpName(int op) {
  switch (op) {
    case static_cast<int>(FaultOp::kRead):
      return "read";
    case static_cast<int>(FaultOp::kWrite):
      return "write";
    case static_cast<int>(FaultOp::kSync):
      return "sync";
  }
  return "call";
}

constexpr int kNoOp = -1;  // a call that no failure spec counts

Status Errno(int err, const std::string& path, const char* what) {
  return Status::FromErrno(err, path + ": " + what);
}

uint64_t RealSize(const std::string& path, bool* exists) {
  struct stat st;
  *exists = ::stat(path.c_str(), &st) == 0;
  return *exists ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

FaultModel::FaultModel(std::string scratch_dir) : scratch_(std::move(scratch_dir)) {
  std::error_code ec;
  std::filesystem::create_directories(scratch_, ec);
}

FaultModel::~FaultModel() = default;

// ---- failure injection and power state ---------------------------------------

void FaultModel::FailNth(FaultOp op, FaultScope scope, uint64_t n, int err, uint64_t count,
                         std::string path_substr) {
  std::lock_guard<std::mutex> l(mu_);
  fails_.push_back(FailSpec{op, scope, n > 0 ? n - 1 : 0, count == 0 ? UINT64_MAX : count, err,
                            std::move(path_substr)});
}

void FaultModel::ClearFailures() {
  std::lock_guard<std::mutex> l(mu_);
  fails_.clear();
}

uint64_t FaultModel::injected() const {
  std::lock_guard<std::mutex> l(mu_);
  return injected_;
}

void FaultModel::PowerLoss() {
  std::lock_guard<std::mutex> l(mu_);
  power_lost_ = true;
}

void FaultModel::PowerLossAfter(uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  power_loss_countdown_ = n;
}

bool FaultModel::power_lost() const {
  std::lock_guard<std::mutex> l(mu_);
  return power_lost_;
}

uint64_t FaultModel::Count(FaultOp op, FaultScope scope) const {
  std::lock_guard<std::mutex> l(mu_);
  return counts_[static_cast<int>(scope)][static_cast<int>(op)];
}

uint64_t FaultModel::mutations() const {
  std::lock_guard<std::mutex> l(mu_);
  return mutations_;
}

std::string FaultModel::Summary() const {
  std::lock_guard<std::mutex> l(mu_);
  auto c = [&](FaultScope s, FaultOp o) {
    return std::to_string(counts_[static_cast<int>(s)][static_cast<int>(o)]);
  };
  return "mutations=" + std::to_string(mutations_) + " writes(vlog/lsm)=" +
         c(FaultScope::kVlog, FaultOp::kWrite) + "/" + c(FaultScope::kLevelDb, FaultOp::kWrite) +
         " syncs(vlog/lsm)=" + c(FaultScope::kVlog, FaultOp::kSync) + "/" +
         c(FaultScope::kLevelDb, FaultOp::kSync) + " injected=" + std::to_string(injected_) +
         " dropped=" + std::to_string(dropped_) + (power_lost_ ? " power=lost" : " power=on");
}

Status FaultModel::Enter(FaultScope s, int op, bool mutation, const std::string& path,
                         bool* dropped) {
  *dropped = false;
  if (mutation) {
    ++mutations_;
    if (!power_lost_ && power_loss_countdown_ > 0 && --power_loss_countdown_ == 0) {
      power_lost_ = true;
    }
    if (power_lost_) {
      ++dropped_;
      *dropped = true;
      return Status::OK();
    }
  }
  if (op == kNoOp) return Status::OK();
  ++counts_[0][op];
  ++counts_[static_cast<int>(s)][op];
  int err = 0;
  for (FailSpec& f : fails_) {
    if (static_cast<int>(f.op) != op || f.count == 0) continue;
    if (f.scope != FaultScope::kAny && f.scope != s) continue;
    if (!f.path_substr.empty() && path.find(f.path_substr) == std::string::npos) continue;
    if (f.skip > 0) {
      --f.skip;
      continue;
    }
    if (f.count != UINT64_MAX) --f.count;
    if (err == 0) err = f.err;
  }
  if (err == 0) return Status::OK();
  ++injected_;
  return Status::FromErrno(err, path + ": injected " + OpName(op) + " fault");
}

// ---- directories and nodes ------------------------------------------------------

FaultModel::Dir& FaultModel::TrackDir(const std::string& dir) {
  auto it = dirs_.find(dir);
  if (it != dirs_.end()) return *it->second;
  auto d = std::make_unique<Dir>();
  d->path = dir;
  if (DIR* dp = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(dp)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      const std::string p = dir + "/" + name;
      if (::lstat(p.c_str(), &st) != 0) continue;
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
      auto n = std::make_shared<Node>();
      n->id = next_node_id_++;
      n->is_dir = S_ISDIR(st.st_mode);
      n->path = p;
      n->size = n->synced = n->is_dir ? 0 : static_cast<uint64_t>(st.st_size);
      n->durable_refs = 1;
      nodes_.push_back(n);
      d->current[name] = n;
      d->durable[name] = n;
    }
    ::closedir(dp);
  }
  return *dirs_.emplace(dir, std::move(d)).first->second;
}

// The node named by path, or nullptr when nothing is there. A regular file
// the model has not seen (created behind its back) is adopted as durable.
FaultModel::NodeRef FaultModel::Lookup(const std::string& path) {
  Dir& d = TrackDir(DirName(path));
  const std::string name = BaseName(path);
  auto it = d.current.find(name);
  if (it != d.current.end()) return it->second;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
    return nullptr;
  }
  auto n = std::make_shared<Node>();
  n->id = next_node_id_++;
  n->is_dir = S_ISDIR(st.st_mode);
  n->path = path;
  n->size = n->synced = n->is_dir ? 0 : static_cast<uint64_t>(st.st_size);
  nodes_.push_back(n);
  d.current[name] = n;
  if (d.durable.emplace(name, n).second) n->durable_refs++;
  return n;
}

std::string FaultModel::Parked(const Node& n) const {
  return scratch_ + "/node-" + std::to_string(n.id);
}

void FaultModel::SetDurable(Dir& d) {
  for (auto& [name, n] : d.durable) n->durable_refs--;
  for (auto& [name, n] : d.durable) {
    if (n->durable_refs == 0 && n->parked) {
      ::unlink(n->path.c_str());  // its removal is durable now
      n->path.clear();
      n->parked = false;
    }
  }
  d.durable = d.current;
  for (auto& [name, n] : d.durable) n->durable_refs++;
}

Status FaultModel::SaveUndo(const NodeRef& node, uint64_t off, uint64_t len) {
  if (off >= node->synced || len == 0) return Status::OK();
  len = std::min(len, node->synced - off);
  int fd = ::open(node->path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, node->path, "fault model: open to save undo bytes");
  std::string old(len, '\0');
  ssize_t got = ::pread(fd, old.data(), len, static_cast<off_t>(off));
  ::close(fd);
  if (got < 0) return Errno(errno, node->path, "fault model: pread of undo bytes");
  old.resize(static_cast<size_t>(got));
  node->undo.push_back(Node::Undo{off, std::move(old)});
  return Status::OK();
}

// ---- hooks ------------------------------------------------------------------

Status FaultModel::OpenForWrite(FaultScope s, const std::string& path, bool truncate,
                                const RealOp& real, bool* dropped, NodeRef* node) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& d = TrackDir(DirName(path));
  NodeRef n = Lookup(path);
  const bool mutation = n == nullptr || truncate;
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, mutation, path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(real());
  if (n == nullptr) {
    n = std::make_shared<Node>();
    n->id = next_node_id_++;
    n->path = path;
    nodes_.push_back(n);
    d.current[BaseName(path)] = n;
  } else if (truncate) {
    n->size = n->synced = 0;
    n->undo.clear();
  }
  *node = n;
  return Status::OK();
}

Status FaultModel::WriteAt(FaultScope s, const NodeRef& node, uint64_t off, uint64_t n,
                           const RealOp& real, bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  SEPFS_RETURN_IF_ERROR(
      Enter(s, static_cast<int>(FaultOp::kWrite), true, node->path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(SaveUndo(node, off, n));
  Status st = real();
  node->size = std::max(node->size, off + n);  // a failed write may be partial
  return st;
}

Status FaultModel::Append(FaultScope s, const NodeRef& node, uint64_t n, const RealOp& real,
                          bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  SEPFS_RETURN_IF_ERROR(
      Enter(s, static_cast<int>(FaultOp::kWrite), true, node->path, dropped));
  if (*dropped) return Status::OK();
  Status st = real();
  node->size += n;
  return st;
}

Status FaultModel::Sync(FaultScope s, const NodeRef& node, bool also_dir, const RealOp& real,
                        bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  SEPFS_RETURN_IF_ERROR(Enter(s, static_cast<int>(FaultOp::kSync), true, node->path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(real());
  node->synced = node->size;
  node->undo.clear();
  if (also_dir && !node->parked && !node->path.empty()) SetDurable(TrackDir(DirName(node->path)));
  return Status::OK();
}

Status FaultModel::Truncate(FaultScope s, const NodeRef& node, uint64_t size, const RealOp& real,
                            bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, true, node->path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(real());
  node->size = size;
  node->synced = std::min(node->synced, size);
  return Status::OK();
}

Status FaultModel::Punch(FaultScope s, const NodeRef& node, uint64_t off, uint64_t len,
                         const RealOp& real, bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  SEPFS_RETURN_IF_ERROR(
      Enter(s, static_cast<int>(FaultOp::kWrite), true, node->path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(SaveUndo(node, off, len));
  return real();
}

Status FaultModel::Remove(FaultScope s, const std::string& path, const RealOp& real,
                          bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& d = TrackDir(DirName(path));
  NodeRef n = Lookup(path);
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, true, path, dropped));
  if (*dropped) return Status::OK();
  if (n == nullptr || n->is_dir) return real();
  if (n->durable_refs > 0) {
    const std::string parked = Parked(*n);
    if (::rename(path.c_str(), parked.c_str()) != 0) {
      return Errno(errno, path, "fault model: park removed file");
    }
    n->path = parked;
    n->parked = true;
  } else {
    SEPFS_RETURN_IF_ERROR(real());
    n->path.clear();
  }
  d.current.erase(BaseName(path));
  return Status::OK();
}

Status FaultModel::Rename(FaultScope s, const std::string& from, const std::string& to,
                          const RealOp& real, bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& df = TrackDir(DirName(from));
  Dir& dt = TrackDir(DirName(to));
  NodeRef nf = Lookup(from);
  NodeRef nt = Lookup(to);
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, true, from, dropped));
  if (*dropped) return Status::OK();
  if (nf == nullptr || nf == nt) return real();
  bool linked = false;
  if (nt != nullptr && !nt->is_dir && nt->durable_refs > 0) {
    // Keep the replaced file: an unsynced rename may be rolled back.
    const std::string parked = Parked(*nt);
    if (::link(to.c_str(), parked.c_str()) != 0) {
      return Errno(errno, to, "fault model: keep rename target");
    }
    linked = true;
  }
  Status st = real();
  if (!st.ok()) {
    if (linked) ::unlink(Parked(*nt).c_str());
    return st;
  }
  if (nt != nullptr) {
    if (linked) {
      nt->path = Parked(*nt);
      nt->parked = true;
    } else if (!nt->is_dir) {
      nt->path.clear();
    }
  }
  df.current.erase(BaseName(from));
  dt.current[BaseName(to)] = nf;
  nf->path = to;
  return Status::OK();
}

Status FaultModel::MakeDir(FaultScope s, const std::string& path, const RealOp& real,
                           bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& d = TrackDir(DirName(path));
  NodeRef n = Lookup(path);
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, true, path, dropped));
  if (*dropped) {
    // Not a change when it exists: keep EEXIST so callers behave as before.
    if (n != nullptr) return Errno(EEXIST, path, "mkdir");
    return Status::OK();
  }
  SEPFS_RETURN_IF_ERROR(real());
  n = std::make_shared<Node>();
  n->id = next_node_id_++;
  n->is_dir = true;
  n->path = path;
  nodes_.push_back(n);
  d.current[BaseName(path)] = n;
  return Status::OK();
}

Status FaultModel::RemoveDir(FaultScope s, const std::string& path, const RealOp& real,
                             bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& d = TrackDir(DirName(path));
  (void)Lookup(path);
  SEPFS_RETURN_IF_ERROR(Enter(s, kNoOp, true, path, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(real());
  d.current.erase(BaseName(path));
  return Status::OK();
}

Status FaultModel::SyncDir(FaultScope s, const std::string& dir, const RealOp& real,
                           bool* dropped) {
  std::lock_guard<std::mutex> l(mu_);
  Dir& d = TrackDir(dir);
  SEPFS_RETURN_IF_ERROR(Enter(s, static_cast<int>(FaultOp::kSync), true, dir, dropped));
  if (*dropped) return Status::OK();
  SEPFS_RETURN_IF_ERROR(real());
  SetDurable(d);
  return Status::OK();
}

Status FaultModel::CheckRead(FaultScope s, const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  bool dropped;
  return Enter(s, static_cast<int>(FaultOp::kRead), false, path, &dropped);
}

// ---- crash --------------------------------------------------------------------

void FaultModel::set_real_syncs(bool on) { real_syncs_ = on; }

bool FaultModel::real_syncs() const { return real_syncs_; }

Status FaultModel::DropUnsyncedData(DropMode mode, uint64_t seed) {
  std::lock_guard<std::mutex> l(mu_);
  std::mt19937_64 rng(seed);
  std::string problems;
  auto problem = [&](const std::string& p, const std::string& what) {
    if (!problems.empty()) problems += "; ";
    problems += p + ": " + what + (errno ? std::string(" (") + std::strerror(errno) + ")" : "");
  };
  // A: every file goes to the scratch directory, rewound to its synced bytes.
  for (const NodeRef& n : nodes_) {
    if (n->is_dir || n->path.empty()) continue;
    const std::string parked = Parked(*n);
    if (!n->parked) {
      if (::rename(n->path.c_str(), parked.c_str()) != 0) {
        if (errno != ENOENT) problem(n->path, "cannot move aside");
        n->path.clear();
        continue;
      }
      n->path = parked;
      n->parked = true;
    }
    errno = 0;
    int fd = ::open(parked.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      problem(parked, "cannot open");
      continue;
    }
    for (auto it = n->undo.rbegin(); it != n->undo.rend(); ++it) {
      if (::pwrite(fd, it->bytes.data(), it->bytes.size(), static_cast<off_t>(it->off)) !=
          static_cast<ssize_t>(it->bytes.size())) {
        problem(parked, "cannot restore overwritten bytes");
      }
    }
    bool exists;
    const uint64_t real = RealSize(parked, &exists);
    uint64_t keep = n->synced;
    if (mode == DropMode::kRandomPrefix && real > n->synced && rng() % 2 == 0) {
      keep = n->synced + rng() % (real - n->synced + 1);
    }
    if (real < n->synced) {
      errno = 0;
      problem(parked, "shorter (" + std::to_string(real) + ") than its synced length " +
                          std::to_string(n->synced));
    } else if (real > keep && ::ftruncate(fd, static_cast<off_t>(keep)) != 0) {
      problem(parked, "cannot truncate");
    }
    ::close(fd);
  }
  // B: directories that must exist, then the durable entries.
  std::vector<Dir*> dirs;
  for (auto& [path, d] : dirs_) dirs.push_back(d.get());
  std::sort(dirs.begin(), dirs.end(),
            [](const Dir* a, const Dir* b) { return a->path.size() < b->path.size(); });
  for (Dir* d : dirs) {
    for (auto& [name, n] : d->durable) {
      if (n->is_dir && d->current.count(name) == 0) {
        ::mkdir((d->path + "/" + name).c_str(), 0700);
      }
    }
  }
  for (Dir* d : dirs) {
    struct stat st;
    if (::stat(d->path.c_str(), &st) != 0) continue;  // its own entry was not durable
    for (auto& [name, n] : d->durable) {
      if (n->is_dir) continue;
      const std::string target = d->path + "/" + name;
      errno = 0;
      if (!n->placed_at.empty()) {
        if (::link(n->placed_at.c_str(), target.c_str()) != 0) problem(target, "cannot link");
      } else if (n->path.empty()) {
        problem(target, "durable file was lost (deleted without a way back)");
      } else if (::rename(n->path.c_str(), target.c_str()) != 0) {
        problem(target, "cannot put back");
      } else {
        n->placed_at = target;
      }
    }
  }
  // C: files with no durable name are gone.
  for (const NodeRef& n : nodes_) {
    if (!n->is_dir && n->parked && n->placed_at.empty()) ::unlink(n->path.c_str());
  }
  // D: directories whose creation was not durable.
  for (Dir* d : dirs) {
    for (auto& [name, n] : d->current) {
      if (n->is_dir && d->durable.count(name) == 0) {
        std::error_code ec;
        std::filesystem::remove_all(d->path + "/" + name, ec);
      }
    }
  }
  ResetLocked();
  if (!problems.empty()) return Status::IOError("fault model: " + problems);
  return Status::OK();
}

void FaultModel::Reset() {
  std::lock_guard<std::mutex> l(mu_);
  ResetLocked();
}

void FaultModel::ResetLocked() {
  fails_.clear();
  power_lost_ = false;
  power_loss_countdown_ = 0;
  dirs_.clear();
  nodes_.clear();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_, ec)) {
    std::filesystem::remove_all(e.path(), ec);
  }
}

// ---- FaultInjectionEnv -----------------------------------------------------------

namespace {

// A file opened after power loss: nothing reaches the disk.
class NullFile final : public File {
 public:
  explicit NullFile(std::string path) : path_(std::move(path)) {}
  Status Read(uint64_t, size_t, char*, size_t* got) override {
    *got = 0;
    return Status::OK();
  }
  Status Write(uint64_t, std::string_view) override { return Status::OK(); }
  Status Sync() override { return Status::OK(); }
  Status Size(uint64_t* size) override {
    *size = 0;
    return Status::OK();
  }
  Status Truncate(uint64_t) override { return Status::OK(); }
  Status PunchHole(uint64_t, uint64_t) override { return Status::OK(); }
  void Advise(uint64_t, uint64_t, int) override {}
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
};

class FaultFile final : public File {
 public:
  // node is nullptr for files opened read-only.
  FaultFile(FaultModel* model, std::unique_ptr<File> f, FaultModel::NodeRef node)
      : model_(model), f_(std::move(f)), node_(std::move(node)) {}

  Status Read(uint64_t off, size_t n, char* buf, size_t* got) override {
    Status st = model_->CheckRead(FaultScope::kVlog, f_->path());
    if (!st.ok()) {
      *got = 0;
      return st;
    }
    return f_->Read(off, n, buf, got);
  }
  Status ReadV(uint64_t off, std::span<const iovec> iov, size_t* got) override {
    Status st = model_->CheckRead(FaultScope::kVlog, f_->path());
    if (!st.ok()) {
      *got = 0;
      return st;
    }
    return f_->ReadV(off, iov, got);
  }
  Status Write(uint64_t off, std::string_view data) override {
    if (node_ == nullptr) return f_->Write(off, data);
    bool dropped;
    return model_->WriteAt(
        FaultScope::kVlog, node_, off, data.size(), [&] { return f_->Write(off, data); },
        &dropped);
  }
  Status Sync() override {
    if (node_ == nullptr) return f_->Sync();
    bool dropped;
    return model_->Sync(
        FaultScope::kVlog, node_, false,
        [&] { return model_->real_syncs() ? f_->Sync() : Status::OK(); }, &dropped);
  }
  Status Size(uint64_t* size) override { return f_->Size(size); }
  Status Truncate(uint64_t size) override {
    if (node_ == nullptr) return f_->Truncate(size);
    bool dropped;
    return model_->Truncate(
        FaultScope::kVlog, node_, size, [&] { return f_->Truncate(size); }, &dropped);
  }
  Status PunchHole(uint64_t off, uint64_t len) override {
    if (node_ == nullptr) return f_->PunchHole(off, len);
    bool dropped;
    return model_->Punch(
        FaultScope::kVlog, node_, off, len, [&] { return f_->PunchHole(off, len); }, &dropped);
  }
  void Advise(uint64_t off, uint64_t len, int advice) override { f_->Advise(off, len, advice); }
  const std::string& path() const override { return f_->path(); }

 private:
  FaultModel* const model_;
  std::unique_ptr<File> f_;
  const FaultModel::NodeRef node_;
};

}  // namespace

Status FaultInjectionEnv::OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) {
  std::unique_ptr<File> f;
  if (m == OpenMode::kRead) {
    SEPFS_RETURN_IF_ERROR(target()->OpenFile(p, m, &f));
    *out = std::make_unique<FaultFile>(model_, std::move(f), nullptr);
    return Status::OK();
  }
  bool dropped;
  FaultModel::NodeRef node;
  SEPFS_RETURN_IF_ERROR(model_->OpenForWrite(
      FaultScope::kVlog, p, /*truncate=*/false, [&] { return target()->OpenFile(p, m, &f); },
      &dropped, &node));
  if (dropped) {
    *out = std::make_unique<NullFile>(p);
  } else {
    *out = std::make_unique<FaultFile>(model_, std::move(f), std::move(node));
  }
  return Status::OK();
}

Status FaultInjectionEnv::CreateDir(const std::string& p) {
  bool dropped;
  return model_->MakeDir(FaultScope::kVlog, p, [&] { return target()->CreateDir(p); }, &dropped);
}

Status FaultInjectionEnv::RemoveFile(const std::string& p) {
  bool dropped;
  return model_->Remove(FaultScope::kVlog, p, [&] { return target()->RemoveFile(p); }, &dropped);
}

Status FaultInjectionEnv::RemoveDir(const std::string& p) {
  bool dropped;
  return model_->RemoveDir(FaultScope::kVlog, p, [&] { return target()->RemoveDir(p); },
                           &dropped);
}

Status FaultInjectionEnv::RenameFile(const std::string& f, const std::string& t,
                                     RenameMode m) {
  bool dropped;
  return model_->Rename(FaultScope::kVlog, f, t, [&] { return target()->RenameFile(f, t, m); },
                        &dropped);
}

Status FaultInjectionEnv::SyncDir(const std::string& d) {
  bool dropped;
  return model_->SyncDir(
      FaultScope::kVlog, d,
      [&] { return model_->real_syncs() ? target()->SyncDir(d) : Status::OK(); }, &dropped);
}

}  // namespace sepfs
