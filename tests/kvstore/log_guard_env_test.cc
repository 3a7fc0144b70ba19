// LogGuardEnv: a failed write-ahead log stays failed, a closed one is
// synced, other files pass through; and MetaStore, which relies on it to
// let writers into LevelDB together, commits concurrent synced writes with
// fewer log syncs than writes.
#include "kvstore/log_guard_env.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvstore/leveldb_fault_env.h"
#include "kvstore/meta_store.h"
#include "vlog/fault_env.h"
#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

// What the guard passes down: counts calls, fails the appends it is told to
// and can make log syncs slow.
struct Calls {
  std::atomic<int> appends{0}, syncs{0}, closes{0}, log_syncs{0};
  std::atomic<int> fail_appends{0};  // the next this many appends fail
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
    if (s.ok()) *r = new ScriptedFile(*r, c_, IsLevelDbLogFile(f));
    return s;
  }

 private:
  Calls* c_;
};

TEST(LogGuardEnv, KnowsLevelDbLogNames) {
  EXPECT_TRUE(IsLevelDbLogFile("/s/meta/000123.log"));
  EXPECT_TRUE(IsLevelDbLogFile("000005.log"));
  for (const char* not_log : {"/s/meta/LOG", "/s/meta/LOG.old", "/s/meta/000005.ldb",
                              "/s/meta/MANIFEST-000002", "/s/meta/abc.log", "/s/meta/.log",
                              "/s/meta/000005.dbtmp", "/s/log/000005.ldb"}) {
    EXPECT_FALSE(IsLevelDbLogFile(not_log)) << not_log;
  }
}

TEST(LogGuardEnv, AFailedLogStaysFailedAndALeftOneIsSynced) {
  testing::TempDir tmp;
  Calls calls;
  ScriptedEnv scripted(&calls);
  LogGuardEnv env(&scripted);
  leveldb::WritableFile* raw = nullptr;
  ASSERT_TRUE(env.NewWritableFile(tmp.path() + "/000007.log", &raw).ok());
  std::unique_ptr<leveldb::WritableFile> log(raw);
  ASSERT_TRUE(log->Append("first").ok());
  calls.fail_appends = 1;
  leveldb::Status failed = log->Append("torn");
  ASSERT_FALSE(failed.ok());
  const int appends = calls.appends, syncs = calls.syncs;
  // Nothing reaches the file after the failure; everything reports it.
  EXPECT_EQ(log->Append("after").ToString(), failed.ToString());
  EXPECT_EQ(log->Flush().ToString(), failed.ToString());
  EXPECT_EQ(log->Sync().ToString(), failed.ToString());
  EXPECT_EQ(calls.appends, appends);
  EXPECT_EQ(calls.syncs, syncs);
  EXPECT_EQ(log->Close().ToString(), failed.ToString());
  EXPECT_EQ(calls.closes, 1);  // closed all the same

  ASSERT_TRUE(env.NewWritableFile(tmp.path() + "/000008.log", &raw).ok());
  log.reset(raw);
  ASSERT_TRUE(log->Append("record").ok());
  int before = calls.syncs;
  EXPECT_TRUE(log->Close().ok());
  EXPECT_EQ(calls.syncs, before + 1);  // synced on the way out
  log.reset();
  EXPECT_EQ(calls.syncs, before + 1);  // once

  // LevelDB 1.23 deletes the log it switches away from without Close.
  ASSERT_TRUE(env.NewWritableFile(tmp.path() + "/000009.log", &raw).ok());
  log.reset(raw);
  ASSERT_TRUE(log->Append("record").ok());
  before = calls.syncs;
  log.reset();
  EXPECT_EQ(calls.syncs, before + 1);
  EXPECT_TRUE(env.lost_log().ok());
  // Nothing appended since the last sync: nothing to do.
  ASSERT_TRUE(env.NewWritableFile(tmp.path() + "/000010.log", &raw).ok());
  log.reset(raw);
  ASSERT_TRUE(log->Append("record").ok());
  ASSERT_TRUE(log->Sync().ok());
  before = calls.syncs;
  log.reset();
  EXPECT_EQ(calls.syncs, before);
}

TEST(LogGuardEnv, OtherFilesPassThrough) {
  testing::TempDir tmp;
  Calls calls;
  ScriptedEnv scripted(&calls);
  LogGuardEnv env(&scripted);
  leveldb::WritableFile* raw = nullptr;
  ASSERT_TRUE(env.NewWritableFile(tmp.path() + "/000009.ldb", &raw).ok());
  std::unique_ptr<leveldb::WritableFile> table(raw);
  calls.fail_appends = 1;
  EXPECT_FALSE(table->Append("x").ok());
  EXPECT_TRUE(table->Append("y").ok());  // not latched: LevelDB handles tables
  const int syncs = calls.syncs;
  EXPECT_TRUE(table->Close().ok());
  EXPECT_EQ(calls.syncs, syncs);  // and not synced at close
}

// Eight synced writes at once while each log sync takes 50 ms: LevelDB's
// writer queue commits the waiting ones together (one MetaStore mutex
// around LevelDB's write used to make that eight syncs).
TEST(LogGuardEnv, ConcurrentSyncedWritesShareLogSyncs) {
  testing::TempDir tmp;
  Calls calls;
  ScriptedEnv scripted(&calls);
  MetaOptions o;
  o.create_if_missing = true;
  o.env = &scripted;
  std::unique_ptr<MetaStore> store;
  ASSERT_TRUE(MetaStore::Open(tmp.path() + "/meta", o, &store).ok());
  calls.sync_delay_ms = 50;
  const int log_syncs = calls.log_syncs;
  constexpr int kWriters = 8;
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; t++) {
    writers.emplace_back([&, t] {
      Batch b;
      b.Put("k" + std::to_string(t), "v");
      EXPECT_TRUE(store->Write(&b, /*sync=*/true).ok());
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_LE(calls.log_syncs - log_syncs, kWriters / 2);
  EXPECT_GE(calls.log_syncs - log_syncs, 1);
  calls.sync_delay_ms = 0;
  for (int t = 0; t < kWriters; t++) {
    std::string v;
    EXPECT_TRUE(store->Get("k" + std::to_string(t), &v).ok()) << t;
  }
}

// Table files take a second to create: a memtable LevelDB switched away
// from stays in memory (and in its old log only) meanwhile.
// Above the fault model, which serializes the calls it sees.
class SlowTablesEnv : public leveldb::EnvWrapper {
 public:
  explicit SlowTablesEnv(leveldb::Env* target) : leveldb::EnvWrapper(target) {}
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".ldb") == 0) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return target()->NewWritableFile(f, r);
  }
};

// What MetaStore::Sync relies on: unsynced writes that span a log switch
// (64 KiB memtables) while the old memtable is not yet in a table, then one
// Sync, then a power loss that drops every unsynced byte. The writes in the
// old log survive: LevelDB syncs only the current log for a synced write,
// and the guard synced the log LevelDB switched away from (1.23 deletes it
// without Close).
TEST(LogGuardEnv, SyncCoversLogsLevelDbSwitchedAwayFrom) {
  testing::TempDir tmp;
  FaultModel model(tmp.Sub("scratch"));
  constexpr int kKeys = 520;  // one switch at about 450 keys (64 KiB)
  {
    MetaOptions o;  // created outside the model: durable from its view
    o.create_if_missing = true;
    std::unique_ptr<MetaStore> store;
    ASSERT_TRUE(MetaStore::Open(tmp.path() + "/meta", o, &store).ok());
  }
  {
    LevelDbFaultEnv env(nullptr, &model);
    SlowTablesEnv slow(&env);
    MetaOptions o;
    o.write_buffer_bytes = 64 << 10;
    o.env = &slow;
    std::unique_ptr<MetaStore> store;
    ASSERT_TRUE(MetaStore::Open(tmp.path() + "/meta", o, &store).ok());
    const std::string value(100, 'v');
    for (int i = 0; i < kKeys; i++) {
      Batch b;
      b.Put("k" + std::to_string(i), value);
      ASSERT_TRUE(store->Write(&b, /*sync=*/false).ok()) << i;
    }
    ASSERT_TRUE(store->Sync().ok());
    model.PowerLoss();  // before the old memtable reaches a table
  }
  ASSERT_TRUE(model.DropUnsyncedData().ok());
  MetaOptions o;
  std::unique_ptr<MetaStore> store;
  Status opened = MetaStore::Open(tmp.path() + "/meta", o, &store);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  int missing = 0, first_missing = kKeys;
  for (int i = 0; i < kKeys; i++) {
    std::string v;
    if (!store->Get("k" + std::to_string(i), &v).ok()) {
      missing++;
      first_missing = std::min(first_missing, i);
    }
  }
  // The new log's directory entry: LevelDB never syncs the directory for
  // a log (only for a MANIFEST), so this POSIX-strict model drops the new
  // log whole, while ext4 journals the entry with the log's first fsync.
  // What must survive is the old log: every key up to the switch.
  EXPECT_EQ(missing, kKeys - first_missing) << "not a suffix";
  EXPECT_LT(missing, kKeys / 2);
}

}  // namespace
}  // namespace sepfs::kv
