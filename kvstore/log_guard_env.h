// LogGuardEnv: what MetaStore needs of LevelDB's write-ahead log files
// (NNNNNN.log) so that writers may enter LevelDB concurrently, where its
// writer queue commits them in groups (one log record and one fsync for
// all the synced writes waiting).
//
//  * A failed Append, Flush or Sync makes every later Append, Flush and Sync
//    of that file fail with the same error. LevelDB's log writer has then
//    advanced past a record it may not have written, and records after it
//    would be framed wrongly; LevelDB latches only a failed Sync itself.
//  * A log LevelDB leaves (Close, or 1.23's plain delete at a memtable
//    switch) is synced first if anything was appended since its last sync.
//    LevelDB syncs only the current log for a synced write, so without this
//    the unsynced records of the old log would not be covered by a later
//    synced write. A sync failing in the delete has no caller to tell:
//    lost_log() reports it.
//  * SyncLogs() syncs every open log from any thread, beside LevelDB's
//    writer queue: MetaStore::Sync makes completed writes durable with it,
//    without an empty synced write that would hold the queue (and every
//    other writer) through the fsync. It syncs through a second handle of
//    each log, so appends go on meanwhile, and without holding the list of
//    logs, so a log switch does not wait for it. A log leaves the list only
//    after its final sync (and once no SyncLogs is syncing it), so a switch
//    in between cannot hide unsynced records.
//
// Other files (tables, MANIFEST, CURRENT) are passed through.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "leveldb/env.h"

namespace sepfs::kv {

class LogGuardEnv : public leveldb::EnvWrapper {
 public:
  explicit LogGuardEnv(leveldb::Env* target) : leveldb::EnvWrapper(target) {}

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override;
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override;

  // The first failed sync of a log being deleted; OK if none.
  leveldb::Status lost_log() const;
  void NoteLostLog(const leveldb::Status& s);

  // Syncs every open log with records appended since its last sync; the
  // first failure (latched by that log, as a failed Sync from LevelDB is),
  // else lost_log().
  leveldb::Status SyncLogs();

  // For the guarded log files themselves.
  void Register(leveldb::WritableFile* log);
  void Unregister(leveldb::WritableFile* log);

 private:
  leveldb::Status Wrap(const std::string& f, leveldb::Status s, leveldb::WritableFile** r);

  mutable std::mutex mu_;
  leveldb::Status lost_;
  struct Entry {
    leveldb::WritableFile* log;
    int pins;  // SyncLogs calls syncing it now: it may not be destroyed
  };
  std::mutex logs_mu_;  // never held through a sync
  std::condition_variable unpinned_;
  std::vector<Entry> logs_;  // open logs, oldest first
};

// True for LevelDB's write-ahead log names (NNNNNN.log, not the info LOG).
bool IsLevelDbLogFile(const std::string& path);

}  // namespace sepfs::kv
