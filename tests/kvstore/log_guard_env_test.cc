// LogGuardEnv: a failed write-ahead log stays failed, a closed one is
// synced, other files pass through; and MetaStore, which relies on it to
// let writers into LevelDB together, commits concurrent synced writes with
// fewer log syncs than writes.
#include "kvstore/log_guard_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvstore/meta_store.h"
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

TEST(LogGuardEnv, AFailedLogStaysFailedAndAClosedOneIsSynced) {
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
  const int before = calls.syncs;
  EXPECT_TRUE(log->Close().ok());
  EXPECT_EQ(calls.syncs, before + 1);  // synced on the way out
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

}  // namespace
}  // namespace sepfs::kv
