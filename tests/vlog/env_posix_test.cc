#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "vlog/env.h"
#include "vlog/whole_file.h"

namespace sepfs {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Sets the umask for the scope.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t m) : old_(::umask(m)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

class EnvPosixTest : public ::testing::Test {
 protected:
  Env* env_ = Env::Default();
  testing::TempDir tmp_;
  std::string Path(const std::string& name) { return tmp_.path() + "/" + name; }
};

TEST_F(EnvPosixTest, DefaultIsASingleton) { EXPECT_EQ(Env::Default(), Env::Default()); }

TEST_F(EnvPosixTest, ModesAreOwnerOnlyWhateverTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{0277}, mode_t{0777}}) {
    ScopedUmask um(mask);
    const std::string tag = std::to_string(mask);
    std::unique_ptr<File> f;
    ASSERT_TRUE(env_->OpenFile(Path("create" + tag), OpenMode::kCreate, &f).ok());
    EXPECT_EQ(ModeOf(Path("create" + tag)), 0600u) << tag;
    ASSERT_TRUE(env_->OpenFile(Path("excl" + tag), OpenMode::kCreateExclusive, &f).ok());
    EXPECT_EQ(ModeOf(Path("excl" + tag)), 0600u) << tag;
    ASSERT_TRUE(env_->CreateDir(Path("dir" + tag)).ok());
    EXPECT_EQ(ModeOf(Path("dir" + tag)), 0700u) << tag;
    std::unique_ptr<FileLock> lock;
    ASSERT_TRUE(env_->LockFile(Path("lock" + tag), &lock).ok());
    EXPECT_EQ(ModeOf(Path("lock" + tag)), 0600u) << tag;
  }
}

// Scatters `data` read back at off over pieces of the given sizes through
// f->ReadV and returns what landed, in order, and *got.
std::string ScatterRead(File* f, uint64_t off, const std::vector<size_t>& sizes, size_t* got) {
  std::vector<std::string> bufs;
  for (size_t n : sizes) bufs.emplace_back(n, '#');
  std::vector<iovec> iov;
  for (std::string& b : bufs) iov.push_back({b.data(), b.size()});
  EXPECT_TRUE(f->ReadV(off, iov, got).ok());
  std::string all;
  for (const std::string& b : bufs) all += b;
  return all;
}

// A File that reads through its target one Read at a time: the default
// ReadV (what every wrapper that overrides Read gets).
class ReadOnlyForwarder final : public File {
 public:
  explicit ReadOnlyForwarder(File* t) : t_(t) {}
  Status Read(uint64_t off, size_t n, char* buf, size_t* got) override {
    reads++;
    return t_->Read(off, n, buf, got);
  }
  Status Write(uint64_t, std::string_view) override { return Status::IOError("read only"); }
  Status Sync() override { return Status::OK(); }
  Status Size(uint64_t* size) override { return t_->Size(size); }
  Status Truncate(uint64_t) override { return Status::IOError("read only"); }
  Status PunchHole(uint64_t, uint64_t) override { return Status::IOError("read only"); }
  void Advise(uint64_t, uint64_t, int) override {}
  const std::string& path() const override { return t_->path(); }
  int reads = 0;

 private:
  File* t_;
};

TEST_F(EnvPosixTest, ReadVScattersAcrossManyPiecesAndStopsAtEndOfFile) {
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("scatter"), OpenMode::kCreate, &f).ok());
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 23);
  ASSERT_TRUE(f->Write(0, data).ok());
  // More pieces than one preadv takes (IOV_MAX is 1024), some empty.
  std::vector<size_t> sizes;
  size_t total = 0;
  for (size_t i = 0; total < 250000; ++i) {
    const size_t n = i % 7 == 3 ? 0 : 1 + (i * 37) % 200;
    sizes.push_back(n);
    total += n;
  }
  ASSERT_GT(sizes.size(), 2048u);
  size_t got = 0;
  EXPECT_EQ(ScatterRead(f.get(), 1000, sizes, &got), data.substr(1000, total));
  EXPECT_EQ(got, total);
  // Past the end: the pieces after the file's last byte keep their contents.
  std::string tail = ScatterRead(f.get(), data.size() - 10, {4, 4, 4, 4}, &got);
  EXPECT_EQ(got, 10u);
  EXPECT_EQ(tail, data.substr(data.size() - 10) + "######");
  // The default ReadV, through Read.
  ReadOnlyForwarder fw(f.get());
  EXPECT_EQ(ScatterRead(&fw, 5, {3, 0, 100, 7}, &got), data.substr(5, 110));
  EXPECT_EQ(got, 110u);
  EXPECT_EQ(fw.reads, 4);
  EXPECT_EQ(ScatterRead(&fw, data.size() - 2, {1, 4, 4}, &got), data.substr(data.size() - 2) + "###" + "####");
  EXPECT_EQ(got, 2u);
}

TEST_F(EnvPosixTest, WriteReadSizeTruncate) {
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("f"), OpenMode::kCreate, &f).ok());
  EXPECT_EQ(f->path(), Path("f"));
  const std::string data = testing::Payload(1, 300000);
  ASSERT_TRUE(f->Write(100, data).ok());
  uint64_t size = 0;
  ASSERT_TRUE(f->Size(&size).ok());
  EXPECT_EQ(size, 300100u);
  std::string back(data.size(), '\0');
  size_t got = 0;
  ASSERT_TRUE(f->Read(100, back.size(), back.data(), &got).ok());
  EXPECT_EQ(got, data.size());
  EXPECT_EQ(back, data);
  // Short only at end of file.
  ASSERT_TRUE(f->Read(300000, 500, back.data(), &got).ok());
  EXPECT_EQ(got, 100u);
  EXPECT_EQ(std::string(back.data(), 100), data.substr(299900));
  ASSERT_TRUE(f->Sync().ok());
  ASSERT_TRUE(f->Truncate(1000).ok());
  ASSERT_TRUE(f->Size(&size).ok());
  EXPECT_EQ(size, 1000u);
  f->Advise(0, 0, POSIX_FADV_SEQUENTIAL);
}

// Direct writes land in the file without leaving pages in the page cache
// (the test directory is on a disk file system, which takes O_DIRECT), and
// ordinary reads see them, also over bytes written before through the cache.
TEST_F(EnvPosixTest, WriteDirectBypassesThePageCache) {
  constexpr size_t kBlock = File::kDirectAlign;
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("d"), OpenMode::kCreate, &f).ok());
  ASSERT_TRUE(f->Write(0, std::string(100, 'h')).ok());  // cached, then overwritten
  const std::string data = testing::Payload(7, 64 * kBlock);
  void* mem = nullptr;
  ASSERT_EQ(::posix_memalign(&mem, kBlock, data.size()), 0);
  std::unique_ptr<char, decltype(&std::free)> aligned(static_cast<char*>(mem), &std::free);
  std::memcpy(aligned.get(), data.data(), data.size());
  ASSERT_TRUE(f->WriteDirect(0, std::string_view(aligned.get(), data.size())).ok());
  uint64_t size = 0;
  ASSERT_TRUE(f->Size(&size).ok());
  EXPECT_EQ(size, data.size());

  // Block 0 held a cached page from the buffered write; no other is cached.
  EXPECT_EQ(testing::ResidentPages(Path("d"), kBlock, data.size()), 0u);

  std::string back(data.size(), '\0');
  size_t got = 0;
  ASSERT_TRUE(f->Read(0, back.size(), back.data(), &got).ok());
  EXPECT_EQ(got, data.size());
  EXPECT_TRUE(back == data);
  // A second direct write over part of the file, then an unaligned tail.
  std::memset(aligned.get(), 'z', 2 * kBlock);
  ASSERT_TRUE(f->WriteDirect(kBlock, std::string_view(aligned.get(), 2 * kBlock)).ok());
  ASSERT_TRUE(f->Read(0, back.size(), back.data(), &got).ok());
  EXPECT_TRUE(back == data.substr(0, kBlock) + std::string(2 * kBlock, 'z') + data.substr(3 * kBlock));
}

TEST_F(EnvPosixTest, ReadDirectBypassesThePageCacheAndStopsAtEndOfFile) {
  constexpr size_t kBlock = File::kDirectAlign;
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("r"), OpenMode::kCreate, &f).ok());
  const std::string data = testing::Payload(9, 40 * kBlock + 123);  // unaligned end
  ASSERT_TRUE(f->Write(0, data).ok());
  ASSERT_TRUE(f->Sync().ok());
  f->Advise(0, 0, POSIX_FADV_DONTNEED);
  ASSERT_EQ(testing::ResidentPages(Path("r"), 0, data.size()), 0u);
  // Not yet written back: a direct read still sees it.
  ASSERT_TRUE(f->Write(5 * kBlock, std::string(10, 'Q')).ok());
  std::string want = data;
  want.replace(5 * kBlock, 10, std::string(10, 'Q'));

  void* mem = nullptr;
  const size_t n = 48 * kBlock;  // past the end of the file
  ASSERT_EQ(::posix_memalign(&mem, kBlock, n), 0);
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(mem), &std::free);
  size_t got = 0;
  ASSERT_TRUE(f->ReadDirect(0, n, buf.get(), &got).ok());
  ASSERT_EQ(got, data.size());
  EXPECT_TRUE(std::string(buf.get(), got) == want);
  // Only the page the buffered write dirtied is cached.
  EXPECT_LE(testing::ResidentPages(Path("r"), 0, data.size()), 1u);
  // From an aligned offset in the middle.
  ASSERT_TRUE(f->ReadDirect(8 * kBlock, 4 * kBlock, buf.get(), &got).ok());
  ASSERT_EQ(got, 4 * kBlock);
  EXPECT_TRUE(std::string(buf.get(), got) == want.substr(8 * kBlock, 4 * kBlock));
  // At the end of the file: nothing.
  ASSERT_TRUE(f->ReadDirect(41 * kBlock, kBlock, buf.get(), &got).ok());
  EXPECT_EQ(got, 0u);
}

TEST_F(EnvPosixTest, PunchHoleReadsZeros) {
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("f"), OpenMode::kCreate, &f).ok());
  ASSERT_TRUE(f->Write(0, std::string(3 * 4096, 'x')).ok());
  ASSERT_TRUE(f->PunchHole(4096, 4096).ok());
  std::string back(3 * 4096, '\0');
  size_t got;
  ASSERT_TRUE(f->Read(0, back.size(), back.data(), &got).ok());
  ASSERT_EQ(got, back.size());
  EXPECT_EQ(back.substr(0, 4096), std::string(4096, 'x'));
  EXPECT_EQ(back.substr(4096, 4096), std::string(4096, '\0'));
  EXPECT_EQ(back.substr(8192), std::string(4096, 'x'));
  uint64_t size;
  ASSERT_TRUE(f->Size(&size).ok());
  EXPECT_EQ(size, 3u * 4096);
}

TEST_F(EnvPosixTest, OpenModes) {
  std::unique_ptr<File> f;
  Status st = env_->OpenFile(Path("missing"), OpenMode::kRead, &f);
  EXPECT_EQ(st.err(), ENOENT);
  EXPECT_NE(st.message().find(Path("missing")), std::string::npos);
  EXPECT_NE(st.message().find("open"), std::string::npos);
  EXPECT_EQ(env_->OpenFile(Path("missing"), OpenMode::kReadWrite, &f).err(), ENOENT);

  ASSERT_TRUE(env_->OpenFile(Path("a"), OpenMode::kCreate, &f).ok());
  ASSERT_TRUE(f->Write(0, "hello").ok());
  f.reset();
  // kCreate opens an existing file without truncating it.
  ASSERT_TRUE(env_->OpenFile(Path("a"), OpenMode::kCreate, &f).ok());
  uint64_t size;
  ASSERT_TRUE(f->Size(&size).ok());
  EXPECT_EQ(size, 5u);
  EXPECT_EQ(env_->OpenFile(Path("a"), OpenMode::kCreateExclusive, &f).err(), EEXIST);

  ASSERT_TRUE(env_->OpenFile(Path("a"), OpenMode::kRead, &f).ok());
  st = f->Write(0, "x");
  EXPECT_EQ(st.err(), EBADF);
  EXPECT_NE(st.message().find(Path("a")), std::string::npos);
}

TEST_F(EnvPosixTest, DirectoryOperations) {
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  Status st = env_->CreateDir(Path("d"));
  EXPECT_EQ(st.err(), EEXIST);
  EXPECT_NE(st.message().find("mkdir"), std::string::npos);
  std::unique_ptr<File> f;
  ASSERT_TRUE(env_->OpenFile(Path("d/x"), OpenMode::kCreate, &f).ok());
  ASSERT_TRUE(env_->OpenFile(Path("d/y"), OpenMode::kCreate, &f).ok());
  std::vector<std::string> names;
  ASSERT_TRUE(env_->ListDir(Path("d"), &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(env_->Exists(Path("d/x")).ok());
  EXPECT_TRUE(env_->Exists(Path("d/z")).IsNotFound());
  ASSERT_TRUE(env_->RenameFile(Path("d/x"), Path("d/z"), RenameMode::kReplace).ok());
  EXPECT_TRUE(env_->Exists(Path("d/z")).ok());
  EXPECT_EQ(env_->RenameFile(Path("d/x"), Path("d/w"), RenameMode::kReplace).err(), ENOENT);
  // kNoReplace leaves a file that has the name alone.
  EXPECT_EQ(env_->RenameFile(Path("d/z"), Path("d/y"), RenameMode::kNoReplace).err(), EEXIST);
  EXPECT_TRUE(env_->Exists(Path("d/z")).ok());
  ASSERT_TRUE(env_->RenameFile(Path("d/z"), Path("d/v"), RenameMode::kNoReplace).ok());
  ASSERT_TRUE(env_->RenameFile(Path("d/v"), Path("d/z"), RenameMode::kNoReplace).ok());
  ASSERT_TRUE(env_->SyncDir(Path("d")).ok());
  EXPECT_EQ(env_->RemoveDir(Path("d")).err(), ENOTEMPTY);
  ASSERT_TRUE(env_->RemoveFile(Path("d/z")).ok());
  ASSERT_TRUE(env_->RemoveFile(Path("d/y")).ok());
  EXPECT_EQ(env_->RemoveFile(Path("d/y")).err(), ENOENT);
  ASSERT_TRUE(env_->RemoveDir(Path("d")).ok());
  EXPECT_EQ(env_->ListDir(Path("d"), &names).err(), ENOENT);
  EXPECT_EQ(env_->SyncDir(Path("d")).err(), ENOENT);
}

TEST_F(EnvPosixTest, LockFileTwiceIsBusy) {
  std::unique_ptr<FileLock> a, b;
  ASSERT_TRUE(env_->LockFile(Path("LOCK"), &a).ok());
  Status st = env_->LockFile(Path("LOCK"), &b);
  EXPECT_EQ(st.err(), EBUSY);
  EXPECT_NE(st.message().find("already mounted"), std::string::npos);
  EXPECT_NE(st.message().find(Path("LOCK")), std::string::npos);
  EXPECT_EQ(b, nullptr);
  a.reset();
  EXPECT_TRUE(env_->LockFile(Path("LOCK"), &b).ok());
}

// The lock is on the lock file's directory too: removing or replacing it
// while it is held lets nobody else in (a helper's probe deleted a mounted
// store's LOCK files and mounted it twice).
TEST_F(EnvPosixTest, LockHoldsWhenItsFileIsRemovedOrReplaced) {
  std::unique_ptr<FileLock> a, b;
  ASSERT_TRUE(env_->LockFile(Path("LOCK"), &a).ok());
  ASSERT_EQ(::unlink(Path("LOCK").c_str()), 0);
  Status st = env_->LockFile(Path("LOCK"), &b);
  EXPECT_EQ(st.err(), EBUSY) << st.ToString();
  EXPECT_NE(st.ToString().find("removed or replaced"), std::string::npos) << st.ToString();
  EXPECT_FALSE(b);
  ASSERT_EQ(::rename(Path("LOCK").c_str(), Path("LOCK.old").c_str()), 0);  // the new one
  { std::ofstream(Path("LOCK")) << "someone else's"; }
  EXPECT_EQ(env_->LockFile(Path("LOCK"), &b).err(), EBUSY);
  // Another lock file in another directory is not held.
  ASSERT_EQ(::mkdir(Path("sub").c_str(), 0700), 0);
  std::unique_ptr<FileLock> c;
  EXPECT_TRUE(env_->LockFile(Path("sub/LOCK"), &c).ok());
  a.reset();
  EXPECT_TRUE(env_->LockFile(Path("LOCK"), &b).ok());
}

// A lock file is never reached through a link (it would be created or
// chmod'ed wherever the link points), nor is anything but a regular file.
TEST_F(EnvPosixTest, LockFileRefusesLinksAndNonFiles) {
  const std::string target = Path("target");
  {
    std::unique_ptr<File> f;
    ASSERT_TRUE(env_->OpenFile(target, OpenMode::kCreate, &f).ok());
  }
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  ASSERT_EQ(::symlink(target.c_str(), Path("LOCK").c_str()), 0);
  ASSERT_EQ(::symlink(Path("nowhere").c_str(), Path("LOCK2").c_str()), 0);
  std::unique_ptr<FileLock> lock;
  Status st = env_->LockFile(Path("LOCK"), &lock);
  EXPECT_EQ(st.err(), ELOOP) << st.ToString();
  EXPECT_EQ(env_->LockFile(Path("LOCK2"), &lock).err(), ELOOP);
  EXPECT_EQ(lock, nullptr);
  struct stat sb {};
  ASSERT_EQ(::stat(target.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u) << "the link's target was chmod'ed";
  EXPECT_NE(::access(Path("nowhere").c_str(), F_OK), 0) << "created through a dangling link";
  ASSERT_EQ(::mkfifo(Path("FIFO").c_str(), 0600), 0);
  EXPECT_EQ(env_->LockFile(Path("FIFO"), &lock).err(), EINVAL);
}

TEST_F(EnvPosixTest, FreeSpace) {
  uint64_t avail = 0, total = 0;
  ASSERT_TRUE(env_->FreeSpace(tmp_.path(), &avail, &total).ok());
  EXPECT_GT(total, 0u);
  EXPECT_LE(avail, total);
  EXPECT_EQ(env_->FreeSpace(Path("nope"), &avail, &total).err(), ENOENT);
}

// vlog/whole_file.h: a file read whole (bounded), and replaced whole
// through a temporary name that never survives.
TEST_F(EnvPosixTest, WholeFileReadAndReplaced) {
  const std::string path = Path("f"), tmp = Path("f.tmp");
  ASSERT_TRUE(ReplaceWholeFile(env_, path, tmp, "first contents").ok());
  std::string got;
  ASSERT_TRUE(ReadWholeFile(env_, path, &got).ok());
  EXPECT_EQ(got, "first contents");
  ASSERT_TRUE(ReplaceWholeFile(env_, path, tmp, "second").ok());
  ASSERT_TRUE(ReadWholeFile(env_, path, &got, 6).ok());
  EXPECT_EQ(got, "second");
  EXPECT_EQ(env_->Exists(tmp).err(), ENOENT);
  EXPECT_EQ(ReadWholeFile(env_, path, &got, 5).err(), EFBIG);
  // A directory in the file's place: the rename fails, the temporary goes.
  ASSERT_EQ(::mkdir(Path("d").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(Path("d/x").c_str(), 0700), 0);
  EXPECT_FALSE(ReplaceWholeFile(env_, Path("d"), tmp, "data").ok());
  EXPECT_EQ(env_->Exists(tmp).err(), ENOENT);
}

}  // namespace
}  // namespace sepfs
