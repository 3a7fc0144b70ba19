// ScriptedEnv: a leveldb::EnvWrapper for tests that counts what reaches
// LevelDB's writable files, fails the appends and log syncs it is told to,
// and can make write-ahead log syncs slow (to show which synced writes
// share one, and what waits for a sync).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "kvstore/log_guard_env.h"
#include "leveldb/env.h"

namespace sepfs::testing {

// What the guard passes down: counts calls, fails the appends it is told to
// and can make log syncs slow.
struct Calls {
  std::atomic<int> appends{0}, syncs{0}, closes{0}, log_syncs{0};
  std::atomic<int> fail_appends{0};  // the next this many appends fail
  std::atomic<int> fail_log_syncs{0};  // the next this many log syncs fail
  std::atomic<int> sync_delay_ms{0};
};

class ScriptedFile final : public leveldb::WritableFile {
 public:
  ScriptedFile(leveldb::WritableFile* f, Calls* c, bool log) : f_(f), c_(c), log_(log) {}
  leveldb::Status Append(const leveldb::Slice& d) override {
    c_->appends++;
    if (c_->fail_appends > 0) {
      c_->fail_appends--;
      return leveldb::Status::IOError("scripted", "append failed");
    }
    return f_->Append(d);
  }
  leveldb::Status Flush() override { return f_->Flush(); }
  leveldb::Status Sync() override {
    c_->syncs++;
    if (log_) {
      c_->log_syncs++;
      std::this_thread::sleep_for(std::chrono::milliseconds(c_->sync_delay_ms.load()));
      if (c_->fail_log_syncs > 0) {
        c_->fail_log_syncs--;
        return leveldb::Status::IOError("scripted", "sync failed");
      }
    }
    return f_->Sync();
  }
  leveldb::Status Close() override {
    c_->closes++;
    return f_->Close();
  }

 private:
  std::unique_ptr<leveldb::WritableFile> f_;
  Calls* c_;
  bool log_;
};

class ScriptedEnv : public leveldb::EnvWrapper {
 public:
  explicit ScriptedEnv(Calls* c) : leveldb::EnvWrapper(leveldb::Env::Default()), c_(c) {}
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::Status s = target()->NewWritableFile(f, r);
    if (s.ok()) *r = new ScriptedFile(*r, c_, kv::IsLevelDbLogFile(f));
    return s;
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::Status s = target()->NewAppendableFile(f, r);
    if (s.ok()) *r = new ScriptedFile(*r, c_, kv::IsLevelDbLogFile(f));
    return s;
  }

 private:
  Calls* c_;
};

}  // namespace sepfs::testing
