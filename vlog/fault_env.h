// Fault injection for crash and error tests: one FaultModel shared by the
// vLog's Env (FaultInjectionEnv, below) and LevelDB's Env
// (kvstore/leveldb_fault_env.h), after LevelDB's fault_injection_test.
//
// What is modelled (test code only; never linked into the daemon):
//
//  * Per file: bytes written vs bytes synced. A file's durable content is
//    its content as of its last Sync (fdatasync). Writes that overwrite
//    already synced bytes keep an undo copy of the old bytes until the next
//    Sync. Truncation to a smaller size is treated as durable at once (it
//    lowers the synced length); hole punching is treated like a write of
//    zeros (undone by a crash when unsynced).
//  * Per directory: the entries as of its last SyncDir. Files created,
//    renamed or removed since then are undone by a crash: a new file whose
//    name was never dir-synced disappears; an unsynced rename is rolled back
//    (the source name comes back, a replaced target gets its old file back);
//    an unsynced unlink is rolled back (the file is kept in a scratch
//    directory until its removal is dir-synced). Directory creation and
//    removal follow the same rule for the parent directory. LevelDB's
//    PosixWritableFile::Sync() of a MANIFEST file also fsyncs its directory
//    (SyncDirIfManifest in 1.23); the LevelDB wrapper models that.
//  * Files the envs did not create (e.g. LevelDB's LOG, made by NewLogger
//    with fopen) are treated as durable as found and otherwise left alone.
//
// Failure injection: the nth read, write or sync (counted from the call to
// FailNth, optionally only for one Env and only for paths containing a
// substring) returns a chosen errno and has no effect.
//
// Power loss: PowerLoss() (or PowerLossAfter(n) mutating calls) makes every
// later write, sync, create, rename, remove, truncate and directory change
// silently do nothing (return OK). Reads still see the real files. Once the
// users of the envs are destroyed (every file closed), DropUnsyncedData()
// rewinds the real directories to the modelled durable state and Reset()s
// the model, so the store can be reopened with a normal or a fresh fault Env.
//
// Thread safety: all methods may be called concurrently. Mutating calls are
// serialized by the model (test throughput is not a concern).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vlog/env.h"

namespace sepfs {

enum class FaultOp { kRead = 0, kWrite = 1, kSync = 2 };
constexpr int kNumFaultOps = 3;

// Which Env's calls a failure spec counts, and which Env a call comes from.
enum class FaultScope { kAny = 0, kVlog = 1, kLevelDb = 2 };

class FaultModel {
 public:
  // scratch_dir is created if missing; it must be on the same filesystem as
  // the store (unsynced removals are parked there by rename).
  explicit FaultModel(std::string scratch_dir);
  ~FaultModel();
  FaultModel(const FaultModel&) = delete;
  FaultModel& operator=(const FaultModel&) = delete;

  // ---- failure injection
  // Calls of kind op from scope (kAny: either Env) whose path contains
  // path_substr are counted from now; the nth of them and the count - 1
  // following ones (count 0: all following ones) fail with err and have no
  // effect. Several specs may be armed at once.
  void FailNth(FaultOp op, FaultScope scope, uint64_t n, int err, uint64_t count = 1,
               std::string path_substr = "");
  void ClearFailures();
  // Failures returned so far.
  uint64_t injected() const;

  // ---- power loss
  void PowerLoss();
  // The nth mutating call from now (counted across both Envs) is the first
  // one dropped; 0 disarms.
  void PowerLossAfter(uint64_t n);
  bool power_lost() const;
  // Rewinds every directory and file the model saw to its durable state,
  // then Reset()s. Call only when no file opened through the envs is open.
  // Errors describe what could not be restored.
  Status DropUnsyncedData() { return DropUnsyncedData(DropMode::kAll, 0); }
  // How unsynced bytes fare in DropUnsyncedData.
  enum class DropMode {
    kAll,           // every unsynced byte is lost (LevelDB's fault_injection_test)
    kRandomPrefix,  // each file keeps a random prefix of its unsynced appended
                    // bytes, independently of the others (the disk wrote back
                    // some dirty pages of one file and not of another)
  };
  Status DropUnsyncedData(DropMode mode, uint64_t seed);
  // Forgets all files, directories, failures and the power state: what is
  // on disk now counts as durable (e.g. after a clean close).
  void Reset();
  // false: Sync and SyncDir update the model without calling fsync (tests
  // only crash through the model, so real durability does not matter and
  // fsync is slow). LevelDB files are still flushed to the OS. Default true.
  void set_real_syncs(bool on);
  bool real_syncs() const;

  // ---- counters (since construction or Reset)
  uint64_t Count(FaultOp op, FaultScope scope) const;
  uint64_t mutations() const;  // mutating calls of both Envs, dropped ones included
  // One line: counts of mutations, writes, syncs, failures, dropped calls.
  std::string Summary() const;

  // ---- interface for the Env wrappers (not for tests)
  struct Node;
  using NodeRef = std::shared_ptr<Node>;
  using RealOp = std::function<Status()>;

  // Every hook returns an injected error, or OK with *dropped = true when
  // power is lost (the real call must then not be made; some hooks make it
  // themselves, as said), or the result of the real call.
  //
  // Opening a file for writing. create: may create it; truncate: O_TRUNC.
  // real opens it; the model registers the file afterwards.
  Status OpenForWrite(FaultScope s, const std::string& path, bool truncate, const RealOp& real,
                      bool* dropped, NodeRef* node);
  // A positional write (vLog) of n bytes at off.
  Status WriteAt(FaultScope s, const NodeRef& node, uint64_t off, uint64_t n, const RealOp& real,
                 bool* dropped);
  // An append of n bytes at the file's logical end (LevelDB).
  Status Append(FaultScope s, const NodeRef& node, uint64_t n, const RealOp& real, bool* dropped);
  // fdatasync/fsync of the file; also_dir: the real call fsyncs the parent
  // directory too (LevelDB MANIFEST).
  Status Sync(FaultScope s, const NodeRef& node, bool also_dir, const RealOp& real, bool* dropped);
  Status Truncate(FaultScope s, const NodeRef& node, uint64_t size, const RealOp& real,
                  bool* dropped);
  Status Punch(FaultScope s, const NodeRef& node, uint64_t off, uint64_t len, const RealOp& real,
               bool* dropped);
  // real unlinks; when the removal may have to be undone the model parks the
  // file in the scratch directory itself and real is not called.
  Status Remove(FaultScope s, const std::string& path, const RealOp& real, bool* dropped);
  Status Rename(FaultScope s, const std::string& from, const std::string& to, const RealOp& real,
                bool* dropped);
  Status MakeDir(FaultScope s, const std::string& path, const RealOp& real, bool* dropped);
  Status RemoveDir(FaultScope s, const std::string& path, const RealOp& real, bool* dropped);
  Status SyncDir(FaultScope s, const std::string& dir, const RealOp& real, bool* dropped);
  // Failure injection for reads (no state).
  Status CheckRead(FaultScope s, const std::string& path);

 private:
  struct Dir;
  struct FailSpec {
    FaultOp op;
    FaultScope scope;
    uint64_t skip;   // matching calls still to pass
    uint64_t count;  // failures still to return; UINT64_MAX: forever
    int err;
    std::string path_substr;
  };

  // With mu_ held.
  // op: a FaultOp as int, or -1 for calls no failure spec counts.
  Status Enter(FaultScope s, int op, bool mutation, const std::string& path, bool* dropped);
  Dir& TrackDir(const std::string& dir);
  NodeRef Lookup(const std::string& path);
  void SetDurable(Dir& d);
  std::string Parked(const Node& n) const;
  Status SaveUndo(const NodeRef& node, uint64_t off, uint64_t len);
  void ResetLocked();

  const std::string scratch_;
  mutable std::mutex mu_;
  std::vector<FailSpec> fails_;
  bool power_lost_ = false;
  std::atomic<bool> real_syncs_{true};  // read inside hooks: no lock
  uint64_t power_loss_countdown_ = 0;
  uint64_t next_node_id_ = 1;
  std::map<std::string, std::unique_ptr<Dir>> dirs_;
  std::vector<NodeRef> nodes_;
  uint64_t counts_[3][kNumFaultOps] = {};  // [scope][op]; scope kAny = total
  uint64_t mutations_ = 0, dropped_ = 0, injected_ = 0;
};

// The vLog side: an Env whose files report to a FaultModel.
class FaultInjectionEnv : public EnvWrapper {
 public:
  FaultInjectionEnv(Env* target, FaultModel* model) : EnvWrapper(target), model_(model) {}
  FaultModel* model() const { return model_; }

  Status OpenFile(const std::string& p, OpenMode m, std::unique_ptr<File>* out) override;
  Status CreateDir(const std::string& p) override;
  Status RemoveFile(const std::string& p) override;
  Status RemoveDir(const std::string& p) override;
  Status RenameFile(const std::string& f, const std::string& t, RenameMode m) override;
  Status SyncDir(const std::string& d) override;

 private:
  FaultModel* const model_;
};

}  // namespace sepfs
