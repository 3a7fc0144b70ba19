// Randomized power-loss test of the Filesystem core (docs/durability.md).
//
// Each case: mkfs, open the Filesystem on fault Envs (one FaultModel for the
// vLog and LevelDB), run a random workload while keeping an in-memory model
// of the namespace and of every file's content, cut the power at a random
// point (mid-operation, at the end, or during Close), destroy the
// Filesystem, drop everything unsynced, optionally crash once more during
// recovery, then check:
//   * fsck of the crashed store reports no errors (orphans are notes);
//   * the recovered namespace equals the model's namespace after some
//     operation k with S <= k <= crash, S being the last successful Fsync,
//     FsyncDir or Close (a durable prefix of namespace changes);
//   * a file fsync'd and not changed since reads back exactly; any other
//     file has a size it had at some point since its last fsync, and each
//     block region holds the bytes of some such version (never wrong bytes);
//   * fsck after the recovered mount is closed reports no errors.
//
// CRASH_POINTS (default 500) cases; CRASH_SEED=s runs only case s (seeds
// are printed for every failure). CRASH_GC=1 runs the garbage collector.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "crash_util.h"

namespace sepfs::crashtest {
namespace {

using fs::DirListEntry;
using fs::Filesystem;
using fs::FsOptions;

constexpr uint32_t kBlock = 4096;

struct MEnt {
  bool dir = false;
  uint64_t ino = 0;
  bool operator==(const MEnt& o) const { return dir == o.dir && ino == o.ino; }
};
using Namespace = std::map<std::string, MEnt>;  // "/a/b" -> entry (root not listed)

struct MFile {
  std::string data;                   // current content
  std::string durable;                // content at the last successful fsync
  bool synced_clean = false;          // fsync'd and unchanged since
  std::vector<std::string> versions;  // every content since the last fsync
  int opens = 0;
};

struct CaseResult {
  bool ok = true;
  std::string failure;
  std::string kind;  // "namespace", "content", "fsck-crashed", "fsck-after", "op", "model"
  bool crashed_mid_op = false, crashed_in_close = false, clean_close = false;
  bool recovery_crash = false;
  bool prefix_drop = false;
  int ops = 0;
  int files_exact = 0, files_loose = 0;
};

std::string Describe(const Namespace& ns) {
  std::ostringstream o;
  for (const auto& [p, e] : ns) o << "  " << p << (e.dir ? "/" : "") << " ino " << e.ino << "\n";
  return o.str();
}

class CrashCase {
 public:
  // drop: 'a' all unsynced bytes lost, 'p' random prefixes kept, 'm' either.
  CrashCase(uint64_t seed, bool gc, char drop) : seed_(seed), gc_(gc), drop_(drop), rng_(seed) {}

  CaseResult Run() {
    TempDir tmp;
    if (tmp.path().empty()) return Fail("model", "no temp dir");
    FaultStore fst(tmp);
    fs::MkfsOptions mo;
    mo.block_size = kBlock;
    mo.segment_size = 1ull << 20;
    Status st = fs::Mkfs(fst.dir(), mo);
    if (!st.ok()) return Fail("model", "mkfs: " + st.ToString());
    FaultModel& model = fst.model();
    model.set_real_syncs(EnvNumber("CRASH_REAL_SYNC", 0) != 0);
    // How the disk treated unsynced bytes: all lost, or a random prefix of
    // each file kept (the LSM log may keep a batch whose vLog records did
    // not make it).
    const FaultModel::DropMode mode =
        drop_ == 'a' || (drop_ == 'm' && rng_() % 2 == 0) ? FaultModel::DropMode::kAll
                                                          : FaultModel::DropMode::kRandomPrefix;
    result_.prefix_drop = mode == FaultModel::DropMode::kRandomPrefix;

    std::unique_ptr<Filesystem> fs;
    st = Filesystem::Open(fst.dir(), fst.FaultOptions(Options()), &fs);
    if (!st.ok()) return Fail("op", "open: " + st.ToString());
    fs_ = fs.get();
    snapshots_.push_back(ns_);

    const int nops = 10 + static_cast<int>(rng_() % 110);
    const int crash_at = static_cast<int>(rng_() % (nops + nops / 4));  // >= nops: at the end
    int last_sync = 0;  // snapshot index that is durable for sure
    int crash_snap = -1;
    for (int i = 0; i < nops; i++) {
      cur_op_ = i;
      if (i == crash_at) model.PowerLossAfter(1 + rng_() % 12);
      std::string what;
      bool was_sync = false;
      int synced_file = -1;
      st = Step(&what, &was_sync, &synced_file);
      result_.ops = i + 1;
      snapshots_.push_back(ns_);
      if (model.power_lost()) {
        crash_snap = i + 1;
        result_.crashed_mid_op = true;
        break;
      }
      if (!st.ok()) return Fail("op", "op " + std::to_string(i) + " " + what + ": " + st.ToString());
      if (was_sync) {
        last_sync = i + 1;
        if (synced_file >= 0) MarkSynced(static_cast<uint64_t>(synced_file));
      }
    }
    if (crash_snap < 0) {
      crash_snap = static_cast<int>(snapshots_.size()) - 1;
      if (rng_() % 3 == 0) {
        model.PowerLossAfter(1 + rng_() % 40);
        result_.crashed_in_close = true;
        st = fs->Close();
        if (!model.power_lost()) {
          if (!st.ok()) return Fail("op", "close: " + st.ToString());
          result_.clean_close = true;
          last_sync = crash_snap;
          for (auto& [ino, f] : files_) MarkSynced(ino);
        }
      }
      model.PowerLoss();
    }
    fs_ = nullptr;
    fs.reset();
    st = model.DropUnsyncedData(mode, rng_());
    if (!st.ok()) return Fail("model", st.ToString());

    if (rng_() % 5 == 0) {
      // A second power loss while the store recovers.
      result_.recovery_crash = true;
      model.PowerLossAfter(1 + rng_() % 30);
      std::unique_ptr<Filesystem> rfs;
      st = Filesystem::Open(fst.dir(), fst.FaultOptions(Options()), &rfs);
      if (!st.ok() && !model.power_lost()) {
        return Fail("op", "open during recovery crash: " + st.ToString());
      }
      model.PowerLoss();
      rfs.reset();
      st = model.DropUnsyncedData(mode, rng_());
      if (!st.ok()) return Fail("model", st.ToString());
    }

    std::string errs = fst.FsckErrors();
    if (!errs.empty()) return Fail("fsck-crashed", "fsck of the crashed store:\n" + errs);

    st = Filesystem::Open(fst.dir(), Options(), &fs);
    if (!st.ok()) return Fail("op", "reopen after crash: " + st.ToString());
    fs_ = fs.get();
    Check(last_sync, crash_snap);
    if (gc_ && result_.ok) {
      // Every segment must stay collectable after recovery (a torn tail
      // left in a sealed segment used to fail every GC of it).
      uint64_t collected = 0;
      st = fs->RunGc(/*min_garbage_ratio=*/0, nullptr, &collected);
      if (!st.ok()) return Fail("gc-after", "gc pass after recovery: " + st.ToString());
      const std::string stats = fs->StatsText();
      if (stats.find(" (0 failed)") == std::string::npos) {
        return Fail("gc-after", "a GC job failed after recovery:\n" + stats);
      }
    }
    st = fs->Close();
    fs_ = nullptr;
    fs.reset();
    if (!result_.ok) return result_;
    if (!st.ok()) return Fail("op", "close after recovery: " + st.ToString());
    errs = fst.FsckErrors();
    if (!errs.empty()) return Fail("fsck-after", "fsck after recovery:\n" + errs);
    return result_;
  }

 private:
  FsOptions Options() const {
    FsOptions o;
    o.flush_interval_sec = 3600;  // the workload decides when data is flushed
    o.store.append_buffer_size = 64 << 10;
    o.gc = gc_ ? "hotcold" : "off";
    o.prefetch_seq = o.prefetch_dir = false;
    return o;
  }

  CaseResult Fail(const std::string& kind, const std::string& msg) {
    if (result_.ok) {
      result_.ok = false;
      result_.kind = kind;
      result_.failure = msg + "\n  workload:\n" + log_.str();
    }
    return result_;
  }

  uint64_t Rand(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::vector<std::string> Paths(bool dirs, bool files) const {
    std::vector<std::string> out;
    for (const auto& [p, e] : ns_) {
      if ((e.dir && dirs) || (!e.dir && files)) out.push_back(p);
    }
    return out;
  }
  std::vector<std::string> Dirs() const {
    auto d = Paths(true, false);
    d.push_back("");  // root
    return d;
  }
  uint64_t InoOf(const std::string& path) const {
    return path.empty() ? Filesystem::kRootIno : ns_.at(path).ino;
  }
  static std::string Parent(const std::string& p) { return p.substr(0, p.rfind('/')); }
  static std::string Name(const std::string& p) { return p.substr(p.rfind('/') + 1); }
  std::string NewName(const std::string& dir) {
    for (;;) {
      std::string p = dir + "/" + (Rand(4) == 0 ? "d" : "f") + std::to_string(Rand(40));
      if (!ns_.count(p)) return p;
    }
  }
  bool Linked(uint64_t ino) const {
    for (const auto& [p, e] : ns_) {
      if (e.ino == ino) return true;
    }
    return false;
  }

  void Changed(MFile& f) {
    f.synced_clean = false;
    f.versions.push_back(f.data);
  }
  void MarkSynced(uint64_t ino) {
    auto it = files_.find(ino);
    if (it == files_.end()) return;
    it->second.durable = it->second.data;
    it->second.synced_clean = true;
    it->second.versions.assign(1, it->second.data);
  }

  std::vector<uint64_t> OpenFiles() const {
    std::vector<uint64_t> out;
    for (const auto& [ino, f] : files_) {
      if (f.opens > 0) out.push_back(ino);
    }
    return out;
  }

  // One random operation. *sync: it was a namespace commit point;
  // *synced_file: the file whose data it made durable.
  Status Step(std::string* what, bool* sync, int* synced_file) {
    const fs::Caller caller{1000, 1000};
    const uint64_t dice = Rand(100);
    const auto open = OpenFiles();
    std::ostringstream w;
    Status st;
    if (dice < 14 || (dice < 45 && open.empty())) {  // create + open
      const auto dirs = Dirs();
      const std::string dir = dirs[Rand(dirs.size())];
      std::string p = NewName(dir);
      p = Parent(p) + "/f" + Name(p).substr(1);
      if (ns_.count(p)) return Status::OK();
      kv::InodeRecord r;
      w << "create " << p;
      st = fs_->Mknod(caller, InoOf(dir), Name(p), S_IFREG | 0644, 0, &r);
      if (st.ok()) {
        fs_->Forget(r.ino, 1);
        st = fs_->OpenFile(r.ino);
        w << " ino " << r.ino;
        ns_[p] = MEnt{false, r.ino};
        MFile& f = files_[r.ino];
        f.versions.assign(1, "");
        if (st.ok()) f.opens++;
      }
    } else if (dice < 19) {  // mkdir
      const auto dirs = Dirs();
      const std::string dir = dirs[Rand(dirs.size())];
      std::string p = NewName(dir);
      p = Parent(p) + "/d" + Name(p).substr(1);
      if (ns_.count(p) || std::count(p.begin(), p.end(), '/') > 4) return Status::OK();
      kv::InodeRecord r;
      w << "mkdir " << p;
      st = fs_->Mknod(caller, InoOf(dir), Name(p), S_IFDIR | 0755, 0, &r);
      if (st.ok()) {
        fs_->Forget(r.ino, 1);
        ns_[p] = MEnt{true, r.ino};
      }
    } else if (dice < 45) {  // write
      const uint64_t ino = open[Rand(open.size())];
      MFile& f = files_[ino];
      const uint64_t off = Rand(std::min<uint64_t>(f.data.size() + 2 * kBlock, 300 << 10));
      const size_t len = Rand(4) == 0 ? 1 + Rand(64 << 10) : 1 + Rand(3 * kBlock);
      std::string data = fs::testing::Payload(rng_(), len);
      w << "write ino " << ino << " [" << off << ", +" << len << ")";
      st = fs_->Write(ino, off, data);
      if (st.ok()) {
        if (f.data.size() < off + len) f.data.resize(off + len, '\0');
        f.data.replace(off, len, data);
        Changed(f);
      }
    } else if (dice < 50) {  // truncate
      const auto paths = Paths(false, true);
      if (paths.empty()) return Status::OK();
      const uint64_t ino = ns_[paths[Rand(paths.size())]].ino;
      MFile& f = files_[ino];
      const uint64_t size = Rand(f.data.size() + 2 * kBlock);
      fs::SetAttrRequest req;
      req.set_size = true;
      req.size = size;
      kv::InodeRecord r;
      w << "truncate ino " << ino << " to " << size;
      st = fs_->SetAttr(ino, req, &r);
      if (st.ok()) {
        f.data.resize(size, '\0');
        Changed(f);
      }
    } else if (dice < 60) {  // fsync
      if (open.empty()) return Status::OK();
      const uint64_t ino = open[Rand(open.size())];
      const bool datasync = Rand(2);
      w << (datasync ? "fdatasync" : "fsync") << " ino " << ino;
      st = fs_->Fsync(ino, datasync);
      *sync = true;
      *synced_file = static_cast<int>(ino);
    } else if (dice < 64 && Rand(3) == 0) {  // vLog head checkpoint (the flusher's)
      w << "checkpoint";
      st = fs_->Checkpoint();
      *sync = true;  // a synced LevelDB write: namespace changes so far are durable
    } else if (dice < 64) {  // fsyncdir
      const auto dirs = Dirs();
      const std::string dir = dirs[Rand(dirs.size())];
      w << "fsyncdir " << (dir.empty() ? "/" : dir);
      st = fs_->FsyncDir(InoOf(dir));
      *sync = true;
    } else if (dice < 72) {  // flush (close(2) of one descriptor) or release
      if (open.empty()) return Status::OK();
      const uint64_t ino = open[Rand(open.size())];
      if (Rand(3) == 0) {
        w << "flush ino " << ino;
        st = fs_->Flush(ino);
      } else {
        w << "release ino " << ino;
        st = fs_->Release(ino);
        files_[ino].opens--;
      }
    } else if (dice < 76) {  // open an existing file
      const auto paths = Paths(false, true);
      if (paths.empty()) return Status::OK();
      const std::string p = paths[Rand(paths.size())];
      kv::InodeRecord r;
      w << "open " << p;
      st = fs_->Lookup(InoOf(Parent(p)), Name(p), &r);
      if (st.ok()) {
        fs_->Forget(r.ino, 1);
        st = fs_->OpenFile(r.ino);
        if (st.ok()) files_[r.ino].opens++;
      }
    } else if (dice < 85) {  // rename
      const bool dir = Rand(5) == 0;
      const auto srcs = Paths(dir, !dir);
      if (srcs.empty()) return Status::OK();
      const std::string src = srcs[Rand(srcs.size())];
      const auto dirs = Dirs();
      const std::string to_dir = dirs[Rand(dirs.size())];
      if (dir && (to_dir == src || to_dir.rfind(src + "/", 0) == 0)) return Status::OK();
      std::string dst = NewName(to_dir);
      if (!dir && Rand(3) == 0) {  // over an existing file
        const auto files = Paths(false, true);
        const std::string victim = files[Rand(files.size())];
        if (ns_[victim].ino != ns_[src].ino) dst = victim;
      }
      w << "rename " << src << " -> " << dst;
      st = fs_->Rename(InoOf(Parent(src)), Name(src), InoOf(Parent(dst)), Name(dst), 0);
      if (st.ok()) {
        Namespace moved;
        for (auto it = ns_.begin(); it != ns_.end();) {
          if (it->first == src || it->first.rfind(src + "/", 0) == 0) {
            moved[dst + it->first.substr(src.size())] = it->second;
            it = ns_.erase(it);
          } else {
            ++it;
          }
        }
        for (auto& [p, e] : moved) ns_[p] = e;
      }
    } else if (dice < 87 && Rand(2) == 0) {  // an xattr set or removed (its count with it)
      const auto paths = Paths(true, true);
      if (paths.empty()) return Status::OK();
      const std::string p = paths[Rand(paths.size())];
      const std::string name = "user.x" + std::to_string(Rand(3));
      if (Rand(3) == 0) {
        w << "removexattr " << p << " " << name;
        st = fs_->RemoveXattr(ns_[p].ino, name);
        if (st.err() == ENODATA) st = Status::OK();
      } else {
        w << "setxattr " << p << " " << name;
        st = fs_->SetXattr(ns_[p].ino, name, std::string(1 + Rand(300), 'v'), 0);
      }
    } else if (dice < 88) {  // link
      const auto files = Paths(false, true);
      if (files.empty()) return Status::OK();
      const std::string src = files[Rand(files.size())];
      const auto dirs = Dirs();
      const std::string dst = NewName(dirs[Rand(dirs.size())]);
      kv::InodeRecord r;
      w << "link " << src << " -> " << dst;
      st = fs_->Link(ns_[src].ino, InoOf(Parent(dst)), Name(dst), &r);
      if (st.ok()) {
        fs_->Forget(r.ino, 1);
        ns_[dst] = ns_[src];
      }
    } else if (dice < 95) {  // unlink
      const auto files = Paths(false, true);
      if (files.empty()) return Status::OK();
      const std::string p = files[Rand(files.size())];
      w << "unlink " << p;
      st = fs_->Unlink(InoOf(Parent(p)), Name(p));
      if (st.ok()) ns_.erase(p);
    } else if (gc_ && Rand(2) == 0) {  // a forced GC pass (flushes dirty data first)
      uint64_t collected = 0;
      st = fs_->RunGc(/*min_garbage_ratio=*/0, nullptr, &collected);
      w << "gc pass (" << collected << " segments)";
    } else {  // rmdir of an empty directory
      std::vector<std::string> empty;
      for (const auto& d : Paths(true, false)) {
        auto it = ns_.upper_bound(d + "/");
        if (it == ns_.end() || it->first.rfind(d + "/", 0) != 0) empty.push_back(d);
      }
      if (empty.empty()) return Status::OK();
      const std::string p = empty[Rand(empty.size())];
      w << "rmdir " << p;
      st = fs_->Rmdir(InoOf(Parent(p)), Name(p));
      if (st.ok()) ns_.erase(p);
    }
    *what = w.str();
    log_ << "    " << cur_op_ << ": " << *what << (st.ok() ? "" : " -> " + st.ToString())
         << "\n";
    return st;
  }

  // Walks the recovered tree.
  Status Walk(uint64_t ino, const std::string& path, Namespace* out) {
    std::vector<DirListEntry> entries;
    SEPFS_RETURN_IF_ERROR(fs_->ListDir(ino, &entries));
    for (const auto& e : entries) {
      if (e.name == "." || e.name == "..") continue;
      const std::string p = path + "/" + e.name;
      const bool dir = S_ISDIR(e.type);
      (*out)[p] = MEnt{dir, e.ino};
      if (dir) SEPFS_RETURN_IF_ERROR(Walk(e.ino, p, out));
    }
    return Status::OK();
  }

  void Check(int last_sync, int crash_snap) {
    Namespace got;
    Status st = Walk(Filesystem::kRootIno, "", &got);
    if (!st.ok()) {
      Fail("namespace", "walking the recovered tree: " + st.ToString());
      return;
    }
    int match = -1;
    for (int k = crash_snap; k >= last_sync; k--) {
      if (snapshots_[k] == got) {
        match = k;
        break;
      }
    }
    if (match < 0) {
      Fail("namespace", "recovered namespace matches no state between the last sync point (after " +
                            std::to_string(last_sync) + " ops) and the crash (after " +
                            std::to_string(crash_snap) + " ops)\n  recovered:\n" + Describe(got) +
                            "  at the last sync point:\n" + Describe(snapshots_[last_sync]) +
                            "  at the crash:\n" + Describe(snapshots_[crash_snap]));
      return;
    }
    std::set<uint64_t> seen;
    for (const auto& [p, e] : got) {
      if (e.dir || !seen.insert(e.ino).second) continue;
      auto it = files_.find(e.ino);
      if (it == files_.end()) {
        Fail("namespace", p + ": unknown inode " + std::to_string(e.ino));
        return;
      }
      const MFile& f = it->second;
      kv::InodeRecord r;
      st = fs_->GetAttr(e.ino, &r);
      std::string data;
      if (st.ok()) st = fs_->Read(e.ino, 0, r.size + 1, &data);
      if (!st.ok()) {
        Fail("content", p + " (ino " + std::to_string(e.ino) + "): read: " + st.ToString());
        return;
      }
      if (f.synced_clean) {
        result_.files_exact++;
        if (data != f.durable) {
          Fail("content", p + " (ino " + std::to_string(e.ino) + "): fsync'd content lost: " +
                              Mismatch(data, f.durable));
          return;
        }
        continue;
      }
      result_.files_loose++;
      std::string why = LooseCheck(data, f, result_.prefix_drop);
      if (!why.empty()) {
        Fail("content", p + " (ino " + std::to_string(e.ino) + "): " + why);
        return;
      }
    }
  }

  static std::string Mismatch(const std::string& got, const std::string& want) {
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) i++;
    return "size " + std::to_string(got.size()) + " (want " + std::to_string(want.size()) +
           "), first difference at byte " + std::to_string(i);
  }

  // Size seen since the last fsync; every block region equal to the same
  // region of some version (bytes past a version's end count as zeros).
  // With random unsynced prefixes kept, a pointer can outlive its record;
  // the mount drops it and the block reads as zeros (docs/durability.md).
  static std::string LooseCheck(const std::string& got, const MFile& f, bool holes_ok) {
    bool size_ok = false;
    for (const auto& v : f.versions) size_ok |= v.size() == got.size();
    if (!size_ok) {
      return "size " + std::to_string(got.size()) + " is none of the " +
             std::to_string(f.versions.size()) + " sizes since the last fsync";
    }
    for (size_t off = 0; off < got.size(); off += kBlock) {
      const size_t n = std::min<size_t>(kBlock, got.size() - off);
      bool ok = false;
      for (const auto& v : f.versions) {
        std::string region(n, '\0');
        if (off < v.size()) v.copy(region.data(), std::min(n, v.size() - off), off);
        if (got.compare(off, n, region) == 0) {
          ok = true;
          break;
        }
      }
      if (!ok && holes_ok) ok = got.find_first_not_of('\0', off) >= off + n;
      if (!ok) {
        return "block at " + std::to_string(off) + " matches none of the " +
               std::to_string(f.versions.size()) + " versions since the last fsync";
      }
    }
    return "";
  }

  const uint64_t seed_;
  const bool gc_;
  const char drop_;
  std::mt19937_64 rng_;
  Filesystem* fs_ = nullptr;
  Namespace ns_;
  std::map<uint64_t, MFile> files_;
  std::vector<Namespace> snapshots_;  // [i]: after i operations
  std::ostringstream log_;
  CaseResult result_;
  int cur_op_ = 0;
};

void RunCases(char drop, bool with_gc = false) {
  const uint64_t only = EnvNumber("CRASH_SEED", 0);
  const uint64_t points = only ? 1 : EnvNumber("CRASH_POINTS", 500);
  const uint64_t base = only ? only : 1;
  const bool gc = with_gc || EnvNumber("CRASH_GC", 0) != 0;
  const auto start = std::chrono::steady_clock::now();
  uint64_t failed = 0, mid_op = 0, in_close = 0, clean_close = 0, recovery = 0, exact = 0,
           loose = 0, ops = 0, prefix = 0;
  std::map<std::string, uint64_t> kinds;
  std::map<std::string, uint64_t> first_seed;
  for (uint64_t i = 0; i < points; i++) {
    const uint64_t seed = base + i;
    SCOPED_TRACE("CRASH_SEED=" + std::to_string(seed));
    CaseResult r = CrashCase(seed, gc, drop).Run();
    prefix += r.prefix_drop;
    mid_op += r.crashed_mid_op;
    in_close += r.crashed_in_close && !r.clean_close;
    clean_close += r.clean_close;
    recovery += r.recovery_crash;
    exact += r.files_exact;
    loose += r.files_loose;
    ops += r.ops;
    if (!r.ok) {
      failed++;
      const std::string kind = r.kind + (r.prefix_drop ? "/prefix" : "/all");
      kinds[kind]++;
      if (!first_seed.count(kind)) first_seed[kind] = seed;
      // Full detail for the first few failures; a line for the rest.
      if (failed <= 3 || only) {
        ADD_FAILURE() << "CRASH_SEED=" << seed << " [" << r.kind
                      << (r.prefix_drop ? ", unsynced prefixes kept" : ", unsynced bytes lost")
                      << "] " << r.failure;
      } else {
        ADD_FAILURE() << "CRASH_SEED=" << seed << " [" << r.kind << "] "
                      << r.failure.substr(0, r.failure.find('\n'));
      }
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "crash summary (%s%s): %llu crash points (seeds %llu..%llu), %llu failed; %llu mid-operation, "
      "%llu during close, %llu after a clean close, %llu with a second crash in recovery, "
      "%llu keeping random unsynced prefixes; %llu ops; files checked: %llu exact (fsync'd), "
      "%llu loose; %.1f s\n",
      drop == 'a'   ? "unsynced bytes lost"
      : drop == 'p' ? "random unsynced prefixes kept"
                    : "either model, per case",
      gc ? ", GC on" : "",
      (unsigned long long)points, (unsigned long long)base,
      (unsigned long long)(base + points - 1), (unsigned long long)failed,
      (unsigned long long)mid_op, (unsigned long long)in_close, (unsigned long long)clean_close,
      (unsigned long long)recovery, (unsigned long long)prefix, (unsigned long long)ops, (unsigned long long)exact,
      (unsigned long long)loose, secs);
  for (const auto& [k, n] : kinds) {
    std::printf("crash failures: %-20s %llu (first CRASH_SEED=%llu)\n", k.c_str(),
                (unsigned long long)n, (unsigned long long)first_seed[k]);
  }
  std::fflush(stdout);
}


// LevelDB's fault model: every byte not synced is lost at power loss.
TEST(CrashTest, RandomPowerLoss) { RunCases('a'); }

// Harsher and closer to a real disk: each file independently keeps a random
// prefix of its unsynced bytes (page cache written back in any order across
// files), so the LSM log may keep a batch whose vLog records were lost.
TEST(CrashTest, RandomPowerLossPartialWriteback) { RunCases('p'); }

// With the garbage collector on and forced GC passes in the workload (both
// power-loss models, chosen per case): relocation, pointer swaps and
// segment deletion interleaved with everything else.
TEST(CrashTest, RandomPowerLossWithGc) { RunCases('m', /*with_gc=*/true); }

// A fresh store of kBlock blocks and 1 MiB segments through fst's fault
// Envs, without GC or timer flushes, for the hand-written crash cases.
FsOptions SmallStoreOptions() {
  FsOptions o;
  o.flush_interval_sec = 3600;
  o.gc = "off";
  return o;
}

// ... with one empty file "f" in the root (its inode in *f).
void OpenSmallStore(FaultStore* fst, std::unique_ptr<Filesystem>* fs, kv::InodeRecord* f) {
  fs::MkfsOptions mo;
  mo.block_size = kBlock;
  mo.segment_size = 1ull << 20;
  ASSERT_OK(fs::Mkfs(fst->dir(), mo));
  ASSERT_OK(Filesystem::Open(fst->dir(), fst->FaultOptions(SmallStoreOptions()), fs));
  ASSERT_OK((*fs)->Mknod(fs::Caller{}, Filesystem::kRootIno, "f", S_IFREG | 0644, 0, f));
}

// Power fails now; every unsynced byte is lost and *fs is gone.
void LosePower(FaultStore* fst, std::unique_ptr<Filesystem>* fs) {
  fst->model().PowerLoss();
  fs->reset();
  ASSERT_OK(fst->model().DropUnsyncedData());
}

// Mounts the store again (after LosePower) and reads the first n bytes of
// the file "f" of OpenSmallStore.
void RemountAndReadF(FaultStore* fst, std::unique_ptr<Filesystem>* fs, uint64_t n,
                     kv::InodeRecord* got, std::string* data) {
  ASSERT_OK(Filesystem::Open(fst->dir(), SmallStoreOptions(), fs));
  ASSERT_OK((*fs)->Lookup(Filesystem::kRootIno, "f", got));
  ASSERT_OK((*fs)->Read(got->ino, 0, n, data));
}

// Drops the lookup of ino, unmounts cleanly, and expects fsck to find
// nothing, not even a note.
void CloseAndExpectClean(FaultStore* fst, std::unique_ptr<Filesystem>* fs, uint64_t ino) {
  (*fs)->Forget(ino, 1);
  ASSERT_OK((*fs)->Close());
  fs->reset();
  fs::FsckReport rep;
  EXPECT_EQ(fst->FsckErrors(&rep), "");
  EXPECT_TRUE(rep.notes.empty());
}

// The harness must catch the bug class "a synced LSM write makes a pointer
// durable before its vLog record": flush a file (vLog written, not synced;
// pointer batch unsynced), then a bare synced LevelDB write, as the old
// FsyncDir and inode-lease code did, then power loss.
// A pointer made durable before its record (here by a bare synced LevelDB
// write after an unsynced flush) must be seen by fsck of the crashed store,
// as a note (the store was not unmounted cleanly), and dropped by the next
// mount: the block reads as zeros, never as an error, and fsck is clean.
TEST(CrashTest, PointerDurableBeforeRecordIsSeenAndDroppedAtMount) {
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  ASSERT_OK(fs->FsyncDir(Filesystem::kRootIno));  // the name is durable
  ASSERT_OK(fs->Write(r.ino, 0, fs::testing::Payload(1, 3 * kBlock)));
  ASSERT_OK(fs->Flush(r.ino));
  // A synced LevelDB write without the vLog sync that MetaStore runs first
  // (as a log LevelDB switches away from is still synced on its own).
  fs->store()->meta()->SetBeforeSync(nullptr);
  kv::Batch bare;
  ASSERT_OK(fs->store()->meta()->Write(&bare, /*sync=*/true));  // pointers durable, records not
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  fs::FsckReport rep;
  EXPECT_EQ(fst.FsckErrors(&rep), "");
  bool noted = false;
  for (const auto& n : rep.notes) noted |= n.find("lost in a crash") != std::string::npos;
  EXPECT_TRUE(noted) << "fsck should note the pointers to lost records";
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, 3 * kBlock, &got, &data));
  // Found through the journal: only f's pointers were checked.
  EXPECT_FALSE(fs->recovery().full_recount);
  EXPECT_EQ(fs->recovery().pointers_checked, 3u);
  EXPECT_EQ(fs->recovery().pointers_dropped, 3u);
  EXPECT_EQ(data, std::string(3 * kBlock, '\0'));
  EXPECT_EQ(got.blocks, 0u);
  CloseAndExpectClean(&fst, &fs, got.ino);
}

// The LevelDB log tail is lost while a record it pointed to survived in the
// vLog (here: the vLog synced on its own, as the page cache may write a
// segment back before the log): the mount scans the vLog past the
// checkpoint heads and installs the overwrite again, because the block's
// pointer is older than the record. The overwrite of a block that had no
// pointer (an append) is not replayed: the size that covered it was lost too.
TEST(CrashTest, RecordWhosePointerBatchWasLostIsReplayed) {
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  const std::string first = fs::testing::Payload(1, 2 * kBlock);
  ASSERT_OK(fs->Write(r.ino, 0, first));
  ASSERT_OK(fs->Fsync(r.ino, false));
  ASSERT_OK(fs->Checkpoint());
  const std::string second = fs::testing::Payload(2, kBlock);
  ASSERT_OK(fs->Write(r.ino, kBlock, second));                            // overwrite
  // An append long enough for a record (not inline data).
  ASSERT_OK(fs->Write(r.ino, 2 * kBlock, fs::testing::Payload(3, kBlock / 2)));
  ASSERT_OK(fs->Flush(r.ino));              // records written, pointer batch unsynced
  ASSERT_OK(fs->store()->vlog()->Sync());  // the records are durable, the batch is not
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  EXPECT_EQ(fst.FsckErrors(), "");
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, 3 * kBlock, &got, &data));
  EXPECT_FALSE(fs->recovery().full_recount);
  EXPECT_EQ(fs->recovery().records_scanned, 2u);
  EXPECT_EQ(fs->recovery().pointers_replayed, 1u);
  EXPECT_EQ(got.size, 2 * kBlock);
  EXPECT_TRUE(data == first.substr(0, kBlock) + second);
  CloseAndExpectClean(&fst, &fs, got.ino);
}

// Any metadata sync (MetaStore::Sync, as GC's quiesce before deleting a
// victim calls it, or a synced write, as GC's pointer swap) makes the
// records of written pointers durable first: a flushed, never fsync'd
// overwrite survives whole, and never turns the fsync'd blocks into holes.
// Found by CRASH_SEED=277 of RandomPowerLossWithGc: the quiesce synced
// LevelDB's log, not the vLog.
void ExpectSyncMakesRecordsDurable(bool synced_write) {
  SCOPED_TRACE(synced_write ? "synced write" : "Sync");
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  const std::string v1 = fs::testing::Payload(8, 3 * kBlock);
  const std::string v2 = fs::testing::Payload(9, 3 * kBlock);
  ASSERT_OK(fs->Write(r.ino, 0, v1));
  ASSERT_OK(fs->Fsync(r.ino, false));
  ASSERT_OK(fs->Write(r.ino, 0, v2));
  ASSERT_OK(fs->Flush(r.ino));  // records written, not synced; pointers in the log
  if (synced_write) {
    kv::Batch b;
    b.Put(kv::CounterKey("test"), "x");
    ASSERT_OK(fs->store()->meta()->Write(&b, /*sync=*/true));
  } else {
    ASSERT_OK(fs->store()->meta()->Sync());
  }
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  EXPECT_EQ(fst.FsckErrors(), "");
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, 3 * kBlock, &got, &data));
  EXPECT_EQ(fs->recovery().pointers_dropped, 0u);
  EXPECT_TRUE(data == v2);  // the sync made the overwrite durable, records and all
  CloseAndExpectClean(&fst, &fs, got.ino);
}

TEST(CrashTest, MetadataSyncMakesTheRecordsOfItsPointersDurable) {
  ExpectSyncMakesRecordsDurable(/*synced_write=*/false);
  ExpectSyncMakesRecordsDurable(/*synced_write=*/true);
}

// Inline data is as durable as the batch it travels in: an fsync'd version
// survives a power loss, a later one that was only flushed does not.
TEST(CrashTest, FsyncedInlineDataSurvivesPowerLoss) {
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  const std::string synced = fs::testing::Payload(5, 700);  // inline: at most kBlock / 4
  ASSERT_OK(fs->Write(r.ino, 0, synced));
  ASSERT_OK(fs->Fsync(r.ino, false));
  ASSERT_OK(fs->Write(r.ino, 0, fs::testing::Payload(6, 900)));
  ASSERT_OK(fs->Flush(r.ino));  // in LevelDB's log, not synced
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  EXPECT_EQ(fst.FsckErrors(), "");
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, kBlock, &got, &data));
  EXPECT_TRUE(data == synced) << data.size();
  CloseAndExpectClean(&fst, &fs, got.ino);
}

// A truncation whose batch a power loss took leaves the file whole, although
// the shortened copy of its cut block survived in the vLog and the old size
// covers it: replayed alone, it turned the bytes past the cut into zeros.
TEST(CrashTest, ShortenedBlockOfALostTruncationIsNotReplayed) {
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  const std::string full = fs::testing::Payload(8, 2 * kBlock);
  ASSERT_OK(fs->Write(r.ino, 0, full));
  ASSERT_OK(fs->Fsync(r.ino, false));
  ASSERT_OK(fs->Checkpoint());
  fs::SetAttrRequest req;
  req.set_size = true;
  req.size = kBlock + kBlock / 2;  // block 1 keeps half a block: a record
  kv::InodeRecord out;
  ASSERT_OK(fs->SetAttr(r.ino, req, &out));  // its batch unsynced
  ASSERT_OK(fs->store()->vlog()->Sync());    // the shortened record durable
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  EXPECT_EQ(fst.FsckErrors(), "");
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, 2 * kBlock, &got, &data));
  EXPECT_EQ(fs->recovery().records_scanned, 1u);
  EXPECT_EQ(fs->recovery().pointers_replayed, 0u);
  EXPECT_EQ(got.size, 2 * kBlock);
  EXPECT_TRUE(data == full);
  CloseAndExpectClean(&fst, &fs, got.ino);
}

// A record cut to inline data and grown again is never replayed over the
// inline value: the cut bytes stay zeros after a power loss, although the
// record survived in the vLog and the size covers it.
TEST(CrashTest, RecordCutToInlineDataIsNotReplayed) {
  TempDir tmp;
  FaultStore fst(tmp);
  std::unique_ptr<Filesystem> fs;
  kv::InodeRecord r;
  ASSERT_NO_FATAL_FAILURE(OpenSmallStore(&fst, &fs, &r));
  ASSERT_OK(fs->Checkpoint());
  const std::string full = fs::testing::Payload(7, kBlock);
  ASSERT_OK(fs->Write(r.ino, 0, full));
  ASSERT_OK(fs->Flush(r.ino));
  ASSERT_OK(fs->store()->vlog()->Sync());  // the record is durable, past the checkpoint
  for (uint64_t size : {uint64_t{500}, uint64_t{kBlock}}) {
    fs::SetAttrRequest req;
    req.set_size = true;
    req.size = size;
    kv::InodeRecord out;
    ASSERT_OK(fs->SetAttr(r.ino, req, &out));
  }
  ASSERT_OK(fs->Fsync(r.ino, false));
  ASSERT_NO_FATAL_FAILURE(LosePower(&fst, &fs));
  EXPECT_EQ(fst.FsckErrors(), "");
  kv::InodeRecord got;
  std::string data;
  ASSERT_NO_FATAL_FAILURE(RemountAndReadF(&fst, &fs, kBlock, &got, &data));
  EXPECT_GE(fs->recovery().records_scanned, 1u);
  EXPECT_EQ(fs->recovery().pointers_replayed, 0u);
  EXPECT_EQ(got.size, kBlock);
  std::string want = full.substr(0, 500);
  want.resize(kBlock, '\0');
  EXPECT_TRUE(data == want);
  CloseAndExpectClean(&fst, &fs, got.ino);
}

}  // namespace
}  // namespace sepfs::crashtest
