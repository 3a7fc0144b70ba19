// MemoryOverlayEnv: a LevelDB Env that reads a directory's files from a
// target Env and never writes to it. Files LevelDB writes (a new log, the
// table its recovery makes of the old log, a new MANIFEST and CURRENT,
// compaction output) live in memory; removing or renaming a target file
// hides it. Reads see the overlay first: a file written here, else the
// target's file unless hidden. Everything written is lost when the Env goes.
//
// For opening the metadata of a store on read-only media (a read-only mount
// of the store, fsck without --repair): LevelDB's DB::Open always writes,
// which a read-only file system refuses. Memory grows with what LevelDB
// writes: the recovered log as a table, and any compaction it starts, so
// the owner calls RefuseNewFiles once the open is done: a compaction that
// reads would start later then fails at its first file (LevelDB keeps the
// error and compacts no more; reads go on), as does a write that needs a
// new log.
//
// LockFile never touches the target (its lock file could not be created
// there): the lock it hands out only keeps this process from opening the
// same database twice. The caller holds the store's own lock.
//
// Thread safety: all methods may be called concurrently; a file written
// here is read only after LevelDB finished writing it, as LevelDB does.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "leveldb/env.h"

namespace sepfs::kv {

class MemoryOverlayEnv : public leveldb::EnvWrapper {
 public:
  explicit MemoryOverlayEnv(leveldb::Env* target) : leveldb::EnvWrapper(target) {}
  ~MemoryOverlayEnv() override;

  leveldb::Status NewSequentialFile(const std::string& f, leveldb::SequentialFile** r) override;
  leveldb::Status NewRandomAccessFile(const std::string& f,
                                      leveldb::RandomAccessFile** r) override;
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override;
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override;
  bool FileExists(const std::string& f) override;
  leveldb::Status GetChildren(const std::string& dir, std::vector<std::string>* r) override;
  leveldb::Status RemoveFile(const std::string& f) override;
  leveldb::Status CreateDir(const std::string& dir) override;
  leveldb::Status RemoveDir(const std::string& dir) override;
  leveldb::Status GetFileSize(const std::string& f, uint64_t* size) override;
  leveldb::Status RenameFile(const std::string& src, const std::string& target) override;
  leveldb::Status LockFile(const std::string& f, leveldb::FileLock** lock) override;
  leveldb::Status UnlockFile(leveldb::FileLock* lock) override;
  leveldb::Status NewLogger(const std::string& f, leveldb::Logger** r) override;

  // From now on NewWritableFile and NewAppendableFile fail (IOError), so
  // the memory held stays what was written so far, plus appends to files
  // already open.
  void RefuseNewFiles();

  // Bytes of the files kept in memory.
  uint64_t MemoryBytes() const;

  struct File;  // a file kept in memory

 private:
  // The file f names in memory, or null (mu_ held).
  std::shared_ptr<File> Find(const std::string& f) const;
  // f exists in the target and is not hidden (mu_ held).
  bool InTarget(const std::string& f) const;
  // The whole of target file f, copied into a new in-memory file.
  leveldb::Status CopyIn(const std::string& f, std::shared_ptr<File>* out);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<File>> files_;  // guarded by mu_
  std::set<std::string> hidden_;                        // target files removed or replaced
  std::set<std::string> locked_;                        // names LockFile handed out
  bool refuse_new_files_ = false;                       // guarded by mu_
};

}  // namespace sepfs::kv
