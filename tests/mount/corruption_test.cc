// Damage an unmounted store the way disks and people do — flipped bytes in a
// segment, a truncated segment, a deleted segment, a damaged LevelDB table —
// then: the mount reports it clearly or reads fail with EIO (never wrong
// bytes); `sepfs fsck` exits 4; `sepfs fsck --repair` exits 1 and says what
// it changed; `sepfs fsck` then exits 0; the store mounts and every block
// that was not damaged reads back, damaged blocks read as zeros.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

constexpr size_t kBlock = 64 * 1024;
constexpr size_t kSegHeader = 64;
constexpr size_t kRecHeader = 48;
constexpr uint32_t kRecMagic = 0x43455256;

uint64_t Le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
  return v;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One vLog record, found by walking the segment files (docs/vlog-format.md).
struct Record {
  std::string file;
  uint64_t offset = 0, data_len = 0, ino = 0, block = 0, seq = 0;
};

std::vector<std::string> ListDir(const std::string& dir, const std::string& prefix,
                                 const std::string& suffix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  EXPECT_NE(d, nullptr) << dir;
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0 && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(dir + "/" + n);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The newest record of every (inode, block).
std::map<std::pair<uint64_t, uint64_t>, Record> NewestRecords(const std::string& store) {
  std::map<std::pair<uint64_t, uint64_t>, Record> out;
  for (const std::string& seg : ListDir(store + "/vlog", "seg-", ".vlog")) {
    std::string data;
    EXPECT_EQ(ReadFileErrno(seg, &data), 0) << seg;
    size_t at = kSegHeader;
    while (at + kRecHeader <= data.size() && Le(data, at, 4) == kRecMagic) {
      Record r{seg, at, Le(data, at + 8, 4), Le(data, at + 16, 8), Le(data, at + 24, 8),
               Le(data, at + 32, 8)};
      auto& slot = out[{r.ino, r.block}];
      if (r.seq >= slot.seq) slot = r;
      at += kRecHeader + r.data_len;
    }
  }
  return out;
}

class CorruptionTest : public MountFixture {
 protected:
  CorruptionTest() {
    mkfs_args_ = {"--segment-size=1M"};
    watchdog_seconds_ = 240;
  }

  // Files f0..f{n-1} of `blocks` 64 KiB blocks each (the last one short).
  void WriteFiles(int n, size_t blocks) {
    for (int i = 0; i < n; i++) {
      const std::string name = "f" + std::to_string(i);
      files_[name] = RandomBytes(blocks * kBlock - 1000, 100 + i);
      ASSERT_NO_FATAL_FAILURE(WriteFile(P(name), files_[name]));
      struct stat st;
      ASSERT_SYS_OK(::stat(P(name).c_str(), &st));
      inos_[name] = st.st_ino;
    }
    ::sync();
  }

  // Unmounts, lets fsck's open turn LevelDB's log into a table, and names
  // the largest table of the store's metadata.
  void UnmountAndFindLargestTable(std::string* path, off_t* size) {
    ASSERT_NO_FATAL_FAILURE(Unmount());
    Fsck();
    *size = 0;
    for (const std::string& t : ListDir(store() + "/meta", "", ".ldb")) {
      struct stat st;
      ASSERT_SYS_OK(::stat(t.c_str(), &st));
      if (st.st_size > *size) {
        *path = t;
        *size = st.st_size;
      }
    }
  }

  // Marks every block whose newest record satisfies pred as lost.
  template <typename Pred>
  void MarkLost(Pred pred) {
    for (const auto& [key, rec] : NewestRecords(store())) {
      if (pred(rec)) lost_.insert(key);
    }
  }

  std::string Expected(const std::string& name) {
    std::string want = files_[name];
    for (size_t b = 0; b * kBlock < want.size(); b++) {
      if (lost_.count({inos_[name], b})) {
        const size_t end = std::min(want.size(), (b + 1) * kBlock);
        std::fill(want.begin() + b * kBlock, want.begin() + end, '\0');
      }
    }
    return want;
  }
  bool Damaged(const std::string& name) { return Expected(name) != files_[name]; }

  // Mounted, damaged: damaged files fail with EIO, the others read back.
  void ExpectEioNeverWrongBytes() {
    int damaged = 0;
    for (const auto& [name, data] : files_) {
      std::string got;
      const int err = ReadFileErrno(P(name), &got);
      if (Damaged(name)) {
        damaged++;
        EXPECT_EQ(ErrName(err), ErrName(EIO)) << name << " is damaged";
      } else {
        EXPECT_EQ(err, 0) << name;
        EXPECT_TRUE(SameBytes(got, data)) << name;
      }
    }
    EXPECT_GT(damaged, 0) << "the damage hit no file";
  }

  // fsck 4, repair 1 (naming every damaged file), fsck 0, mount, read back.
  void RepairAndCheck() {
    CmdResult r = FsckResult();
    EXPECT_EQ(r.exit_code, 4) << "fsck must report the damage\n" << r.Describe();
    r = FsckResult({"--repair"});
    EXPECT_EQ(r.exit_code, 1) << "fsck --repair must correct it\n" << r.Describe();
    for (const auto& [name, data] : files_) {
      if (Damaged(name)) {
        EXPECT_TRUE(Contains(r.out, "inode " + std::to_string(inos_[name]) + " (/" + name +
                                        "): dropped"))
            << name << " not reported\n"
            << r.Describe();
      }
    }
    Fsck();
    ASSERT_NO_FATAL_FAILURE(Mount());
    for (const auto& [name, data] : files_) {
      std::string got;
      EXPECT_EQ(ReadFileErrno(P(name), &got), 0) << name;
      EXPECT_TRUE(SameBytes(got, Expected(name))) << name;
    }
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("new"), "still writable"));
    EXPECT_EQ(ReadFile(P("new")), "still writable");
    ASSERT_NO_FATAL_FAILURE(Unmount());
    Fsck();
  }

  std::map<std::string, std::string> files_;
  std::map<std::string, uint64_t> inos_;
  std::set<std::pair<uint64_t, uint64_t>> lost_;
};

TEST_F(CorruptionTest, FlippedBytesInASegment) {
  ASSERT_NO_FATAL_FAILURE(WriteFiles(4, 6));
  ASSERT_NO_FATAL_FAILURE(Unmount());
  const uint64_t victim = inos_["f1"];
  MarkLost([&](const Record& r) { return r.ino == victim && r.block == 3; });
  ASSERT_EQ(lost_.size(), 1u);
  const Record rec = NewestRecords(store())[{victim, 3}];
  UniqueFd fd(::open(rec.file.c_str(), O_RDWR));
  ASSERT_TRUE(fd.ok());
  std::string bytes = PreadAll(fd.get(), 16, rec.offset + kRecHeader + 5000);
  for (char& b : bytes) b = static_cast<char>(b ^ 0x5A);
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), bytes.data(), bytes.size(),
                                    rec.offset + kRecHeader + 5000));
  fd.Reset();

  ASSERT_NO_FATAL_FAILURE(Mount());
  ExpectEioNeverWrongBytes();
  ASSERT_NO_FATAL_FAILURE(Unmount());
  ASSERT_NO_FATAL_FAILURE(RepairAndCheck());
}

TEST_F(CorruptionTest, TruncatedSegment) {
  ASSERT_NO_FATAL_FAILURE(WriteFiles(4, 8));  // 2 MiB: several 1 MiB segments
  ASSERT_NO_FATAL_FAILURE(Unmount());
  const Record cut = NewestRecords(store())[{inos_["f2"], 2}];
  const uint64_t at = cut.offset + 100;
  MarkLost([&](const Record& r) {
    return r.file == cut.file && r.offset + kRecHeader + r.data_len > at;
  });
  ASSERT_SYS_OK(::truncate(cut.file.c_str(), static_cast<off_t>(at)));

  ASSERT_NO_FATAL_FAILURE(Mount());
  ExpectEioNeverWrongBytes();
  ASSERT_NO_FATAL_FAILURE(Unmount());
  ASSERT_NO_FATAL_FAILURE(RepairAndCheck());
}

TEST_F(CorruptionTest, DeletedSegment) {
  ASSERT_NO_FATAL_FAILURE(WriteFiles(4, 8));
  ASSERT_NO_FATAL_FAILURE(Unmount());
  const std::string gone = NewestRecords(store())[{inos_["f1"], 0}].file;
  MarkLost([&](const Record& r) { return r.file == gone; });
  ASSERT_SYS_OK(::unlink(gone.c_str()));

  ASSERT_NO_FATAL_FAILURE(Mount());
  ExpectEioNeverWrongBytes();
  ASSERT_NO_FATAL_FAILURE(Unmount());
  ASSERT_NO_FATAL_FAILURE(RepairAndCheck());
}

// Enough metadata for a LevelDB table of many blocks; bytes flipped in the
// middle of the largest table destroy one block of keys. The mount either
// refuses clearly or reads fail (EIO/ENOENT), never wrong bytes; repair
// rebuilds the LevelDB, then cleans up what the lost keys left behind.
// A LevelDB table cut short: fsck calls it damage (it said "IO error:
// Invalid argument" and the repair failed the same way), the repair
// rebuilds the metadata store (the table's keys are lost) and says that
// --salvage can get the files back; with it, every file reads back, from
// its path or from lost+found/#INODE.
TEST_F(CorruptionTest, TruncatedLevelDbTableIsRepairedAndSalvaged) {
  constexpr int kFiles = 200;
  std::map<std::string, std::pair<ino_t, std::string>> files;
  for (int i = 0; i < kFiles; i++) {
    const std::string name = "f" + std::to_string(i);
    const std::string data = RandomBytes(kBlock + 5000 + i, 300 + i);  // tail not inline
    ASSERT_NO_FATAL_FAILURE(WriteFile(P(name), data));
    struct stat st;
    ASSERT_SYS_OK(::stat(P(name).c_str(), &st));
    files[name] = {st.st_ino, data};
  }
  std::string largest;
  off_t largest_size = 0;
  ASSERT_NO_FATAL_FAILURE(UnmountAndFindLargestTable(&largest, &largest_size));
  ASSERT_GT(largest_size, 8 * 1024) << largest;
  ASSERT_SYS_OK(::truncate(largest.c_str(), largest_size / 2));

  CmdResult r = FsckResult();
  EXPECT_EQ(r.exit_code, 4) << "fsck must report the damage\n" << r.Describe();
  EXPECT_TRUE(Contains(r.out, "truncated table")) << r.Describe();
  r = FsckResult({"--repair"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "leveldb::RepairDB")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "--repair --salvage")) << r.Describe();
  r = FsckResult({"--repair", "--salvage"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "salvaged inode")) << r.Describe();
  Fsck();

  ASSERT_NO_FATAL_FAILURE(Mount());
  int at_path = 0, salvaged = 0;
  for (const auto& [name, file] : files) {
    std::string got;
    if (ReadFileErrno(P(name), &got) == 0) {
      at_path++;
    } else {
      ASSERT_EQ(ReadFileErrno(P("lost+found/#" + std::to_string(file.first)), &got), 0) << name;
      salvaged++;
    }
    EXPECT_TRUE(got == file.second) << name << ": " << got.size() << " bytes read back";
  }
  EXPECT_GT(salvaged, 0) << at_path << " files at their path";
}

TEST_F(CorruptionTest, DamagedLevelDbTable) {
  constexpr int kDirs = 4, kPerDir = 1500;
  std::map<std::string, std::string> small;
  for (int d = 0; d < kDirs; d++) {
    ASSERT_SYS_OK(::mkdir(P("d" + std::to_string(d)).c_str(), 0755));
    for (int i = 0; i < kPerDir; i++) {
      const std::string name = "d" + std::to_string(d) + "/file-" + std::to_string(i);
      std::string data = "contents of " + name + " " + RandomBytes(64, d * kPerDir + i);
      std::replace(data.begin(), data.end(), '\0', 'z');
      UniqueFd fd(::open(P(name).c_str(), O_CREAT | O_WRONLY, 0644));
      ASSERT_TRUE(fd.ok()) << name << ": " << strerror(errno);
      ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), data.data(), data.size(), 0));
      small[name] = data;
    }
  }
  std::string largest;
  off_t largest_size = 0;
  ASSERT_NO_FATAL_FAILURE(UnmountAndFindLargestTable(&largest, &largest_size));
  ASSERT_FALSE(largest.empty()) << "no LevelDB table";
  ASSERT_GT(largest_size, 64 * 1024) << largest;
  {
    UniqueFd fd(::open(largest.c_str(), O_RDWR));
    ASSERT_TRUE(fd.ok());
    std::string bytes = PreadAll(fd.get(), 64, largest_size / 2);
    for (char& b : bytes) b = static_cast<char>(~b);
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), bytes.data(), bytes.size(), largest_size / 2));
  }

  int exit_code = 0;
  std::string log;
  if (TryMount({}, &exit_code, &log)) {
    for (const auto& [name, data] : small) {
      std::string got;
      const int err = ReadFileErrno(P(name), &got);
      if (err == 0) {
        EXPECT_TRUE(got == data) << "WRONG BYTES from " << name;
      } else {
        EXPECT_TRUE(err == EIO || err == ENOENT) << name << ": " << ErrName(err);
      }
    }
    ASSERT_NO_FATAL_FAILURE(Unmount());
  } else {
    EXPECT_TRUE(Contains(log, "orrupt")) << "mount must say why it failed:\n" << log;
  }

  CmdResult r = FsckResult();
  EXPECT_EQ(r.exit_code, 4) << "fsck must report the damage\n" << r.Describe();
  r = FsckResult({"--repair"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "leveldb::RepairDB")) << r.Describe();
  Fsck();

  ASSERT_NO_FATAL_FAILURE(Mount());
  int intact = 0, zeroed = 0, gone = 0;
  for (const auto& [name, data] : small) {
    std::string got;
    const int err = ReadFileErrno(P(name), &got);
    if (err == ENOENT) {
      gone++;  // its entry was in the lost block (the inode is in lost+found)
      continue;
    }
    ASSERT_EQ(err, 0) << name << ": " << ErrName(err);
    if (got == data) {
      intact++;
    } else {
      // Only a lost block pointer: the block is a hole now.
      EXPECT_EQ(got, std::string(data.size(), '\0')) << "WRONG BYTES from " << name;
      zeroed++;
    }
  }
  EXPECT_GE(intact, kDirs * kPerDir * 9 / 10)
      << "intact " << intact << ", zeroed " << zeroed << ", gone " << gone << "\n"
      << r.out;
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("new"), "still writable"));
  ASSERT_NO_FATAL_FAILURE(Unmount());
  Fsck();
}

}  // namespace
}  // namespace sepfs::mounttest
