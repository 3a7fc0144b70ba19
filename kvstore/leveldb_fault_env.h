// LevelDbFaultEnv: LevelDB's side of the fault model (vlog/fault_env.h).
//
// A leveldb::EnvWrapper whose writable files (NewWritableFile,
// NewAppendableFile: Append / Flush / Sync / Close) and directory changes
// (RenameFile, RemoveFile, CreateDir, RemoveDir) report to a FaultModel
// shared with the vLog's FaultInjectionEnv, so failures can be counted across
// both and one power loss drops the unsynced state of both.
//
// What LevelDB 1.23 calls, and so what is modelled:
//  * the write-ahead log (NNNNNN.log) gets Append + Flush per record and
//    Sync only for WriteOptions::sync writes;
//  * tables (NNNNNN.ldb) are written, Synced and Closed before the
//    MANIFEST edit that names them;
//  * MANIFEST-NNNNNN is Synced after every edit, and PosixWritableFile::Sync
//    then also fsyncs the directory (SyncDirIfManifest): modelled as a
//    SyncDir of the database directory;
//  * CURRENT is replaced by writing NNNNNN.dbtmp (Append, Sync, Close) and
//    RenameFile onto CURRENT, with no directory fsync of its own: the rename
//    becomes durable with the next MANIFEST sync;
//  * the info LOG is made by NewLogger behind the Env (not modelled).
// Reads (sequential and random-access files) are passed through; failures
// of kind FaultOp::kRead are injected in NewRandomAccessFile reads.
// Injected errors are leveldb::Status::IOError(path, strerror(err)), which
// kv::FromLevelDb maps back to err.
#pragma once

#include <string>

#include "leveldb/env.h"
#include "vlog/fault_env.h"

namespace sepfs::kv {

class LevelDbFaultEnv : public leveldb::EnvWrapper {
 public:
  // target: nullptr for leveldb::Env::Default().
  LevelDbFaultEnv(leveldb::Env* target, FaultModel* model);
  ~LevelDbFaultEnv() override;
  FaultModel* model() const { return model_; }

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override;
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override;
  leveldb::Status NewRandomAccessFile(const std::string& f,
                                      leveldb::RandomAccessFile** r) override;
  leveldb::Status RemoveFile(const std::string& f) override;
  leveldb::Status CreateDir(const std::string& d) override;
  leveldb::Status RemoveDir(const std::string& d) override;
  leveldb::Status RenameFile(const std::string& s, const std::string& t) override;

 private:
  leveldb::Status OpenWritable(const std::string& f, bool truncate, leveldb::WritableFile** r);
  FaultModel* const model_;
};

}  // namespace sepfs::kv
