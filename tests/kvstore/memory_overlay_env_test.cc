#include "kvstore/memory_overlay_env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kvstore/meta_store.h"
#include "tests/kvstore/temp_dir.h"

namespace sepfs::kv {
namespace {

using testing::TempDir;

// Every file under dir: name -> contents, size and mtime.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    struct stat st;
    EXPECT_EQ(::stat(e.path().c_str(), &st), 0);
    out[e.path().filename()] = bytes.str() + "|" + std::to_string(st.st_size) + "|" +
                               std::to_string(st.st_mtim.tv_sec) + "." +
                               std::to_string(st.st_mtim.tv_nsec);
  }
  return out;
}

std::string ReadAll(leveldb::Env* env, const std::string& f) {
  leveldb::SequentialFile* raw = nullptr;
  leveldb::Status s = env->NewSequentialFile(f, &raw);
  if (!s.ok()) return "<" + s.ToString() + ">";
  std::unique_ptr<leveldb::SequentialFile> in(raw);
  std::string out, scratch(7, '\0');  // several reads
  for (;;) {
    leveldb::Slice got;
    EXPECT_TRUE(in->Read(scratch.size(), &got, scratch.data()).ok());
    if (got.empty()) return out;
    out.append(got.data(), got.size());
  }
}

void WriteAll(leveldb::Env* env, const std::string& f, const std::string& data, bool append) {
  leveldb::WritableFile* raw = nullptr;
  ASSERT_TRUE((append ? env->NewAppendableFile(f, &raw) : env->NewWritableFile(f, &raw)).ok());
  std::unique_ptr<leveldb::WritableFile> out(raw);
  ASSERT_TRUE(out->Append(data).ok());
  ASSERT_TRUE(out->Sync().ok());
  ASSERT_TRUE(out->Close().ok());
}

std::vector<std::string> Children(leveldb::Env* env, const std::string& dir) {
  std::vector<std::string> names;
  EXPECT_TRUE(env->GetChildren(dir, &names).ok());
  std::sort(names.begin(), names.end());
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) { return n == "." || n == ".."; }),
              names.end());
  return names;
}

TEST(MemoryOverlayEnvTest, WritesRemovalsAndRenamesStayInMemory) {
  TempDir tmp;
  const std::string dir = tmp.Sub("d");
  std::filesystem::create_directory(dir);
  leveldb::Env* disk = leveldb::Env::Default();
  WriteAll(disk, dir + "/a", "on disk", false);
  WriteAll(disk, dir + "/gone", "removed", false);
  const auto before = Snapshot(dir);

  MemoryOverlayEnv env(disk);
  EXPECT_EQ(ReadAll(&env, dir + "/a"), "on disk");
  WriteAll(&env, dir + "/b", "in memory", false);
  EXPECT_EQ(ReadAll(&env, dir + "/b"), "in memory");
  ASSERT_TRUE(env.RenameFile(dir + "/a", dir + "/c").ok());  // from disk
  EXPECT_FALSE(env.FileExists(dir + "/a"));
  leveldb::SequentialFile* none = reinterpret_cast<leveldb::SequentialFile*>(1);
  EXPECT_TRUE(env.NewSequentialFile(dir + "/a", &none).IsNotFound());
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(ReadAll(&env, dir + "/c"), "on disk");
  WriteAll(&env, dir + "/c", " and more", true);
  EXPECT_EQ(ReadAll(&env, dir + "/c"), "on disk and more");
  uint64_t size = 0;
  ASSERT_TRUE(env.GetFileSize(dir + "/c", &size).ok());
  EXPECT_EQ(size, 16u);
  ASSERT_TRUE(env.RemoveFile(dir + "/gone").ok());
  EXPECT_TRUE(env.RemoveFile(dir + "/gone").IsNotFound());
  EXPECT_TRUE(env.GetFileSize(dir + "/gone", &size).IsNotFound());
  // A file written over a disk file's name hides the disk file for good.
  WriteAll(&env, dir + "/gone", "new", false);
  ASSERT_TRUE(env.RemoveFile(dir + "/gone").ok());
  EXPECT_FALSE(env.FileExists(dir + "/gone"));
  EXPECT_EQ(Children(&env, dir), (std::vector<std::string>{"b", "c"}));
  leveldb::RandomAccessFile* ra = nullptr;
  ASSERT_TRUE(env.NewRandomAccessFile(dir + "/c", &ra).ok());
  std::unique_ptr<leveldb::RandomAccessFile> rf(ra);
  char scratch[16];
  leveldb::Slice got;
  ASSERT_TRUE(rf->Read(8, 100, &got, scratch).ok());
  EXPECT_EQ(got.ToString(), "and more");
  EXPECT_EQ(env.MemoryBytes(), 16u + 9u);
  // Refused from now on: files written so far stay readable.
  env.RefuseNewFiles();
  leveldb::WritableFile* w = nullptr;
  EXPECT_TRUE(env.NewWritableFile(dir + "/d", &w).IsIOError());
  EXPECT_EQ(w, nullptr);
  EXPECT_TRUE(env.NewAppendableFile(dir + "/c", &w).IsIOError());
  EXPECT_FALSE(env.FileExists(dir + "/d"));
  EXPECT_EQ(ReadAll(&env, dir + "/c"), "on disk and more");
  EXPECT_EQ(env.MemoryBytes(), 16u + 9u);

  leveldb::FileLock* lock = nullptr;
  ASSERT_TRUE(env.LockFile(dir + "/LOCK", &lock).ok());
  leveldb::FileLock* again = nullptr;
  EXPECT_FALSE(env.LockFile(dir + "/LOCK", &again).ok());
  ASSERT_TRUE(env.UnlockFile(lock).ok());
  ASSERT_TRUE(env.LockFile(dir + "/LOCK", &lock).ok());
  ASSERT_TRUE(env.UnlockFile(lock).ok());

  EXPECT_EQ(Snapshot(dir), before);  // the disk never changed
}

// A MetaStore opened with writes_in_memory reads the store, and leaves
// every file of its directory as it was. Once open it writes no new file:
// writes go on until the memtable is full and then fail (a review found a
// long read-only mount's memory growing with the compactions LevelDB ran
// in memory).
TEST(MemoryOverlayEnvTest, MetaStoreWithWritesInMemoryChangesNoFile) {
  TempDir tmp;
  const std::string dir = tmp.Sub("meta");
  MetaOptions create;
  create.create_if_missing = true;
  create.write_buffer_bytes = 64 << 10;  // several tables and a log to recover
  {
    std::unique_ptr<MetaStore> store;
    ASSERT_TRUE(MetaStore::Open(dir, create, &store).ok());
    for (int i = 0; i < 3000; i++) {
      Batch b;
      b.Put("k" + std::to_string(i), std::string(100, static_cast<char>('a' + i % 26)));
      ASSERT_TRUE(store->Write(&b, i % 500 == 0).ok());
    }
  }
  const auto before = Snapshot(dir);

  MetaOptions in_memory;
  in_memory.writes_in_memory = true;
  in_memory.write_buffer_bytes = 64 << 10;
  {
    std::unique_ptr<MetaStore> store;
    Status st = MetaStore::Open(dir, in_memory, &store);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::string v;
    for (int i = 0; i < 3000; i += 7) {
      ASSERT_TRUE(store->Get("k" + std::to_string(i), &v).ok()) << i;
      EXPECT_EQ(v, std::string(100, static_cast<char>('a' + i % 26)));
    }
    int written = 0;
    Status wst;
    for (int i = 0; i < 3000 && wst.ok(); i++) {  // 330 KB: past the 64 KiB memtable
      Batch b;
      b.Put("new" + std::to_string(i), std::string(100, 'n'));
      b.Delete("k" + std::to_string(i));
      wst = store->Write(&b, true);
      written += wst.ok();
    }
    // A compaction the open started may fail first (LevelDB then refuses
    // every write): how many got in before is a race.
    EXPECT_EQ(wst.err(), EIO) << wst.ToString();
    EXPECT_LT(written, 3000);
    if (written > 0) {
      ASSERT_TRUE(store->Get("new0", &v).ok());
      EXPECT_TRUE(store->Get("k0", &v).IsNotFound());
    }
    ASSERT_TRUE(store->Get("k2999", &v).ok());  // reads go on
    EXPECT_EQ(v, std::string(100, static_cast<char>('a' + 2999 % 26)));
  }
  EXPECT_EQ(Snapshot(dir), before);

  std::unique_ptr<MetaStore> store;
  ASSERT_TRUE(MetaStore::Open(dir, MetaOptions(), &store).ok());
  std::string v;
  EXPECT_TRUE(store->Get("k5", &v).ok());
  EXPECT_TRUE(store->Get("new0", &v).IsNotFound());
}

}  // namespace
}  // namespace sepfs::kv
