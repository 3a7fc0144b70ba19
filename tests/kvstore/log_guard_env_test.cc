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
#include "tests/scripted_leveldb_env.h"

namespace sepfs::kv {
namespace {

using sepfs::testing::Calls;
using sepfs::testing::ScriptedEnv;

// A new MetaStore in tmp whose LevelDB goes through env.
void OpenScripted(const testing::TempDir& tmp, ScriptedEnv* env,
                  std::unique_ptr<MetaStore>* store) {
  MetaOptions o;
  o.create_if_missing = true;
  o.env = env;
  ASSERT_TRUE(MetaStore::Open(tmp.path() + "/meta", o, store).ok());
}

// Waits (at most 5 s) until a log sync after the first `before` began.
void WaitForLogSyncAfter(const Calls& calls, int before) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (calls.log_syncs == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
}

// The guard over a ScriptedEnv, and its files opened in a temporary
// directory.
class LogGuardTest : public ::testing::Test {
 protected:
  std::unique_ptr<leveldb::WritableFile> Open(const std::string& name) {
    leveldb::WritableFile* raw = nullptr;
    EXPECT_TRUE(env_.NewWritableFile(tmp_.path() + "/" + name, &raw).ok()) << name;
    return std::unique_ptr<leveldb::WritableFile>(raw);
  }
  // One record as LevelDB's log writer adds it: appended, then flushed.
  static bool Record(leveldb::WritableFile* log, const std::string& data) {
    return log->Append(data).ok() && log->Flush().ok();
  }
  testing::TempDir tmp_;
  Calls calls_;
  ScriptedEnv scripted_{&calls_};
  LogGuardEnv env_{&scripted_};
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

TEST_F(LogGuardTest, AFailedLogStaysFailedAndALeftOneIsSynced) {
  std::unique_ptr<leveldb::WritableFile> log = Open("000007.log");
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Append("first").ok());
  calls_.fail_appends = 1;
  leveldb::Status failed = log->Append("torn");
  ASSERT_FALSE(failed.ok());
  const int appends = calls_.appends, syncs = calls_.syncs;
  // Nothing reaches the file after the failure; everything reports it.
  EXPECT_EQ(log->Append("after").ToString(), failed.ToString());
  EXPECT_EQ(log->Flush().ToString(), failed.ToString());
  EXPECT_EQ(log->Sync().ToString(), failed.ToString());
  EXPECT_EQ(calls_.appends, appends);
  EXPECT_EQ(calls_.syncs, syncs);
  EXPECT_TRUE(env_.lost_log().ok());
  EXPECT_EQ(log->Close().ToString(), failed.ToString());
  EXPECT_EQ(calls_.closes, 1);  // closed all the same
  // A log closed with unsynced records lost: later SyncLogs calls say so
  // (newer LevelDB releases Close a log at a switch).
  EXPECT_EQ(env_.lost_log().ToString(), failed.ToString());

  log = Open("000008.log");
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Append("record").ok());
  int before = calls_.syncs;
  EXPECT_TRUE(log->Close().ok());
  EXPECT_EQ(calls_.syncs, before + 1);  // synced on the way out
  log.reset();
  EXPECT_EQ(calls_.syncs, before + 1);  // once

  // LevelDB 1.23 deletes the log it switches away from without Close.
  log = Open("000009.log");
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Append("record").ok());
  before = calls_.syncs;
  log.reset();
  EXPECT_EQ(calls_.syncs, before + 1);
  EXPECT_EQ(env_.lost_log().ToString(), failed.ToString());  // still the first loss only
  // Nothing appended since the last sync: nothing to do.
  log = Open("000010.log");
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Append("record").ok());
  ASSERT_TRUE(log->Sync().ok());
  before = calls_.syncs;
  log.reset();
  EXPECT_EQ(calls_.syncs, before);
}

// SyncLogs syncs each open log that took records since its last sync, and
// nothing else; a deleted log is no longer its concern (it synced itself).
TEST_F(LogGuardTest, SyncLogsSyncsOpenLogsWithNewRecords) {
  std::unique_ptr<leveldb::WritableFile> a = Open("000011.log"), table = Open("000012.ldb");
  ASSERT_TRUE(a && table);
  ASSERT_TRUE(Record(a.get(), "a1"));
  ASSERT_TRUE(table->Append("t").ok());
  int before = calls_.log_syncs;
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 1);
  EXPECT_EQ(calls_.syncs, before + 1);  // not the table
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 1);  // nothing new
  std::unique_ptr<leveldb::WritableFile> b = Open("000013.log");
  ASSERT_TRUE(b);
  ASSERT_TRUE(Record(b.get(), "b1"));
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 2);  // b only
  ASSERT_TRUE(Record(a.get(), "a2"));
  ASSERT_TRUE(Record(b.get(), "b2"));
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 4);  // both
  ASSERT_TRUE(Record(a.get(), "a3"));
  a.reset();  // synced on its way out
  EXPECT_EQ(calls_.log_syncs, before + 5);
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 5);
  // Appended but not flushed (still in LevelDB's buffer when the sync
  // began): the log stays unsynced, and the next SyncLogs syncs it again.
  ASSERT_TRUE(b->Append("b3").ok());
  ASSERT_TRUE(env_.SyncLogs().ok());
  ASSERT_TRUE(b->Flush().ok());
  ASSERT_TRUE(env_.SyncLogs().ok());
  EXPECT_EQ(calls_.log_syncs, before + 7);
  EXPECT_TRUE(table->Close().ok());
}

// SyncLogs does not hold the list of logs through its fsyncs: a new log
// (LevelDB's switch, under its mutex) is registered meanwhile, and a log
// destroyed while SyncLogs syncs it waits for that sync.
TEST_F(LogGuardTest, ALogSwitchDoesNotWaitForSyncLogs) {
  std::unique_ptr<leveldb::WritableFile> a = Open("000015.log");
  ASSERT_TRUE(a);
  ASSERT_TRUE(Record(a.get(), "a1"));
  const int log_syncs = calls_.log_syncs;
  calls_.sync_delay_ms = 300;
  std::atomic<bool> done{false};
  std::thread syncer([&] {
    EXPECT_TRUE(env_.SyncLogs().ok());
    done = true;
  });
  WaitForLogSyncAfter(calls_, log_syncs);
  ASSERT_EQ(calls_.log_syncs, log_syncs + 1);
  std::unique_ptr<leveldb::WritableFile> b = Open("000016.log");
  ASSERT_TRUE(b);
  EXPECT_FALSE(done.load()) << "opening a log waited for SyncLogs";
  a.reset();  // synced on its way out; leaves once SyncLogs is done with it
  syncer.join();
  EXPECT_TRUE(done.load());
  calls_.sync_delay_ms = 0;
  ASSERT_TRUE(Record(b.get(), "b1"));
  ASSERT_TRUE(env_.SyncLogs().ok());
}

// A sync that fails through SyncLogs latches the log like one LevelDB
// asked for: nothing more reaches it, and every later call reports it.
TEST_F(LogGuardTest, AFailedSyncLogsLatchesTheLog) {
  std::unique_ptr<leveldb::WritableFile> log = Open("000014.log");
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Append("record").ok());
  calls_.fail_log_syncs = 1;
  leveldb::Status failed = env_.SyncLogs();
  ASSERT_FALSE(failed.ok());
  const int appends = calls_.appends;
  EXPECT_EQ(log->Append("after").ToString(), failed.ToString());
  EXPECT_EQ(calls_.appends, appends);
  EXPECT_EQ(env_.SyncLogs().ToString(), failed.ToString());
  EXPECT_EQ(log->Close().ToString(), failed.ToString());
}

TEST_F(LogGuardTest, OtherFilesPassThrough) {
  std::unique_ptr<leveldb::WritableFile> table = Open("000009.ldb");
  ASSERT_TRUE(table);
  calls_.fail_appends = 1;
  EXPECT_FALSE(table->Append("x").ok());
  EXPECT_TRUE(table->Append("y").ok());  // not latched: LevelDB handles tables
  const int syncs = calls_.syncs;
  EXPECT_TRUE(table->Close().ok());
  EXPECT_EQ(calls_.syncs, syncs);  // and not synced at close
}

// Eight synced writes at once while each log sync takes 50 ms: LevelDB's
// writer queue commits the waiting ones together (one MetaStore mutex
// around LevelDB's write used to make that eight syncs).
TEST(LogGuardEnv, ConcurrentSyncedWritesShareLogSyncs) {
  testing::TempDir tmp;
  Calls calls;
  ScriptedEnv scripted(&calls);
  std::unique_ptr<MetaStore> store;
  ASSERT_NO_FATAL_FAILURE(OpenScripted(tmp, &scripted, &store));
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

// MetaStore::Sync syncs the log beside LevelDB's writer queue: it appends
// nothing, and a write that arrives during its (here 300 ms) sync is not
// held up by it. A failed sync fails every later write.
TEST(LogGuardEnv, MetaStoreSyncAppendsNothingAndHoldsNoWriter) {
  testing::TempDir tmp;
  Calls calls;
  ScriptedEnv scripted(&calls);
  std::unique_ptr<MetaStore> store;
  ASSERT_NO_FATAL_FAILURE(OpenScripted(tmp, &scripted, &store));
  Batch first;
  first.Put("a", "1");
  ASSERT_TRUE(store->Write(&first, /*sync=*/false).ok());
  const int appends = calls.appends, log_syncs = calls.log_syncs;
  calls.sync_delay_ms = 300;
  std::atomic<bool> synced{false};
  std::thread syncer([&] {
    EXPECT_TRUE(store->Sync().ok());
    synced = true;
  });
  WaitForLogSyncAfter(calls, log_syncs);
  ASSERT_EQ(calls.log_syncs, log_syncs + 1);
  EXPECT_EQ(calls.appends, appends);  // no empty synced write
  Batch second;
  second.Put("b", "2");
  ASSERT_TRUE(store->Write(&second, /*sync=*/false).ok());
  EXPECT_FALSE(synced.load()) << "the write waited for the sync";
  syncer.join();
  calls.sync_delay_ms = 0;
  ASSERT_TRUE(store->Sync().ok());  // covers the second write
  EXPECT_EQ(calls.log_syncs, log_syncs + 2);
  ASSERT_TRUE(store->Sync().ok());  // nothing new
  EXPECT_EQ(calls.log_syncs, log_syncs + 2);

  Batch third;
  third.Put("c", "3");
  ASSERT_TRUE(store->Write(&third, /*sync=*/false).ok());
  calls.fail_log_syncs = 1;
  Status st = store->Sync();
  EXPECT_EQ(st.err(), EIO) << st.ToString();
  Batch fourth;
  fourth.Put("d", "4");
  EXPECT_FALSE(store->Write(&fourth, /*sync=*/false).ok());
  EXPECT_FALSE(store->Sync().ok());
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
