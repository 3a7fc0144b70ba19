// File data semantics of a mounted sepfs: partial-block writes, append,
// truncate-on-open, EOF, sync calls, fallocate, SEEK_DATA/SEEK_HOLE and
// honest st_blocks. Every test runs with the kernel writeback cache on
// (default) and off (-o nowriteback).
#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

constexpr off_t kKiB = 1024;
constexpr off_t kMiB = 1024 * 1024;

class DataTest : public MountFixture,
                 public ::testing::WithParamInterface<const char*> {
 protected:
  DataTest() {
    if (std::string(GetParam()) != "default") mount_options_ = {GetParam()};
  }

  void SetUp() override {
    MountFixture::SetUp();
    if (HasFatalFailure() || std::string(GetParam()) != "io_uring") return;
    // These tests are only about io_uring if it carries them (it needs the
    // kernel's fuse.enable_uring, which tools/install-deps turns on).
    char buf[64 * 1024];
    const ssize_t n = ::getxattr(mnt().c_str(), "sepfs.stats", buf, sizeof(buf));
    ASSERT_GT(n, 0) << strerror(errno);
    const std::string stats(buf, static_cast<size_t>(n));
    ASSERT_NE(stats.find("fuse transport: io_uring, "), std::string::npos) << stats;
  }

  UniqueFd Open(const std::string& rel, int flags, mode_t mode = 0644) {
    UniqueFd fd(::open(P(rel).c_str(), flags | O_CLOEXEC, mode));
    EXPECT_TRUE(fd.ok()) << rel << ": " << strerror(errno);
    return fd;
  }

  // Checks rel against want through one read pass with odd chunk sizes.
  void ExpectContent(const std::string& rel, const std::string& want) {
    UniqueFd fd = Open(rel, O_RDONLY);
    ASSERT_TRUE(fd.ok());
    std::string got;
    std::vector<size_t> chunks = {1, 4095, 65536, 100000, 1 << 20, 7};
    char* buf = new char[1 << 20];
    for (size_t i = 0;; ++i) {
      ssize_t n = ::read(fd.get(), buf, chunks[i % chunks.size()]);
      ASSERT_GE(n, 0) << strerror(errno);
      if (n == 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    delete[] buf;
    ASSERT_EQ(got.size(), want.size()) << rel;
    if (got != want) {
      size_t i = 0;
      while (got[i] == want[i]) ++i;
      FAIL() << rel << ": first difference at byte " << i;
    }
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_size, static_cast<off_t>(want.size()));
  }
};

INSTANTIATE_TEST_SUITE_P(Modes, DataTest,
                         ::testing::Values("default", "nowriteback", "open_requests",
                                           "buffered_vlog", "io_uring"));

// The counter `key` of the daemon's statistics (sepfs stats).
uint64_t StatsCounter(const std::string& mnt, const std::string& key) {
  char buf[64 * 1024];
  const ssize_t n = ::getxattr(mnt.c_str(), "sepfs.stats", buf, sizeof(buf));
  EXPECT_GT(n, 0) << strerror(errno);
  const std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << text;
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
}
uint64_t HandlesOpened(const std::string& mnt) { return StatsCounter(mnt, "file handles opened"); }

// By default the kernel opens an existing file by itself (no OPEN round
// trip, no handle of the daemon's); -o open_requests asks the daemon.
TEST_P(DataTest, OpensOfExistingFilesReachTheDaemonOnlyWhenAsked) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "abc"));
  const uint64_t before = HandlesOpened(mnt());
  for (int i = 0; i < 10; ++i) ASSERT_NO_FATAL_FAILURE(ExpectContent("f", "abc"));
  const uint64_t opened = HandlesOpened(mnt()) - before;
  EXPECT_EQ(opened, std::string(GetParam()) == "open_requests" ? 10u : 0u);
  // A create makes a handle only when the kernel sends RELEASEs.
  { UniqueFd c = Open("new", O_CREAT | O_WRONLY); }
  EXPECT_EQ(HandlesOpened(mnt()) - before,
            opened + (std::string(GetParam()) == "open_requests" ? 1u : 0u));
}

// A listing of an unchanged directory comes from the kernel's cache of it;
// every change made through the mount (create, unlink, rename in and out)
// shows in the next listing.
TEST_P(DataTest, UnchangedDirectoriesAreListedFromTheKernelsCache) {
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  ASSERT_SYS_OK(::mkdir(P("e").c_str(), 0755));
  for (const char* n : {"a", "b", "c"}) ASSERT_NO_FATAL_FAILURE(WriteFile(P(std::string("d/") + n), n));
  auto names = [&](const std::string& rel) {
    std::set<std::string> out;
    DIR* dir = ::opendir(P(rel).c_str());
    EXPECT_NE(dir, nullptr) << strerror(errno);
    if (dir == nullptr) return out;
    while (struct dirent* e = ::readdir(dir)) out.insert(e->d_name);
    ::closedir(dir);
    return out;
  };
  using Names = std::set<std::string>;
  EXPECT_EQ(names("d"), (Names{".", "..", "a", "b", "c"}));
  const uint64_t before = StatsCounter(mnt(), "directory listings");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(names("d"), (Names{".", "..", "a", "b", "c"}));
  EXPECT_EQ(StatsCounter(mnt(), "directory listings"), before);

  ASSERT_NO_FATAL_FAILURE(WriteFile(P("d/new"), "n"));
  EXPECT_EQ(names("d"), (Names{".", "..", "a", "b", "c", "new"}));
  ASSERT_SYS_OK(::unlink(P("d/a").c_str()));
  EXPECT_EQ(names("d"), (Names{".", "..", "b", "c", "new"}));
  ASSERT_SYS_OK(::rename(P("d/b").c_str(), P("e/b").c_str()));
  EXPECT_EQ(names("d"), (Names{".", "..", "c", "new"}));
  EXPECT_EQ(names("e"), (Names{".", "..", "b"}));
  ASSERT_SYS_OK(::rename(P("e/b").c_str(), P("d/b2").c_str()));
  EXPECT_EQ(names("d"), (Names{".", "..", "b2", "c", "new"}));
  EXPECT_EQ(names("e"), (Names{".", ".."}));
  EXPECT_GT(StatsCounter(mnt(), "directory listings"), before);
}

// Readdir keeps no handle: the replies of one pass over a large directory
// resume in the listing kept for it, so the daemon lists it once, however
// many replies the pass takes and whatever else is listed in between; the
// next pass comes from the kernel's cache.
TEST_P(DataTest, LargeDirectoryIsListedOncePerPass) {
  ASSERT_SYS_OK(::mkdir(P("big").c_str(), 0755));
  const std::string pad(60, 'p');
  constexpr int kFiles = 4000;  // about 0.8 MB of readdirplus replies
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = P("big/" + pad + std::to_string(i));
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
    ::close(fd);
  }
  ASSERT_SYS_OK(::mkdir(P("other").c_str(), 0755));
  auto list = [&](const std::string& rel, int every, const std::function<void()>& between) {
    std::map<std::string, int> seen;
    DIR* dir = ::opendir(P(rel).c_str());
    EXPECT_NE(dir, nullptr) << strerror(errno);
    if (dir == nullptr) return seen;
    while (struct dirent* e = ::readdir(dir)) {
      if (++seen[e->d_name] == 1 && seen.size() % every == 0) between();
    }
    ::closedir(dir);
    return seen;
  };
  // Every 500 entries (more than one reply), another directory changes and
  // is listed: a listing the daemon takes between two replies of the pass.
  int others = 0;
  auto list_other = [&] {
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("other/o" + std::to_string(others++)), "o"));
    EXPECT_EQ(list("other", 1 << 30, [] {}).size(), size_t(others) + 2);
  };
  for (int round = 0; round < 2; ++round) {
    const uint64_t before = StatsCounter(mnt(), "directory listings");
    const int others_before = others;
    std::map<std::string, int> seen = list("big", 500, list_other);
    EXPECT_EQ(StatsCounter(mnt(), "directory listings") - before,
              uint64_t(others - others_before) + (round == 0 ? 1 : 0))
        << round;
    EXPECT_EQ(seen.size(), size_t{kFiles} + 2) << round;
    for (int i = 0; i < kFiles; ++i) EXPECT_EQ(seen[pad + std::to_string(i)], 1) << i;
  }
}

// The ".." of a directory moved to another parent names the new parent, also
// when the kernel cached the directory's listing before the move.
TEST_P(DataTest, ListingOfAMovedDirectoryNamesItsNewParent) {
  for (const char* d : {"a", "b", "a/sub"}) ASSERT_SYS_OK(::mkdir(P(d).c_str(), 0755));
  auto dotdot = [&](const std::string& rel) -> ino_t {
    DIR* dir = ::opendir(P(rel).c_str());
    EXPECT_NE(dir, nullptr) << strerror(errno);
    if (dir == nullptr) return 0;
    ino_t ino = 0;
    while (struct dirent* e = ::readdir(dir)) {
      if (std::string(e->d_name) == "..") ino = e->d_ino;
    }
    ::closedir(dir);
    return ino;
  };
  struct stat a {}, b {};
  ASSERT_SYS_OK(::stat(P("a").c_str(), &a));
  ASSERT_SYS_OK(::stat(P("b").c_str(), &b));
  EXPECT_EQ(dotdot("a/sub"), a.st_ino);
  EXPECT_EQ(dotdot("a/sub"), a.st_ino);  // from the kernel's cache
  DIR* before = ::opendir(P("a/sub").c_str());  // open across the move
  ASSERT_NE(before, nullptr);
  ASSERT_SYS_OK(::rename(P("a/sub").c_str(), P("b/sub").c_str()));
  EXPECT_EQ(dotdot("b/sub"), b.st_ino);
  EXPECT_EQ(dotdot("b/sub"), b.st_ino);
  ::rewinddir(before);
  ino_t seen = 0;
  while (struct dirent* e = ::readdir(before)) {
    if (std::string(e->d_name) == "..") seen = e->d_ino;
  }
  ::closedir(before);
  EXPECT_EQ(seen, b.st_ino);
}

// Listings that go on while the directory changes and another handle lists
// it anew, with the kernel's cache of listings in between: every entry that
// is not removed is returned exactly once. Deleting what readdir returns
// until it returns nothing empties the directory.
TEST_P(DataTest, ListingsThatGoOnWhileTheDirectoryChanges) {
  ASSERT_SYS_OK(::mkdir(P("big").c_str(), 0755));
  constexpr int kFiles = 3000;
  for (int i = 0; i < kFiles; ++i) {
    UniqueFd fd = Open("big/file-with-a-long-name-" + std::to_string(i), O_CREAT | O_WRONLY);
    ASSERT_TRUE(fd.ok());
  }
  // Cache the listing, then read it through a second handle while a third
  // removes every even-numbered file after the first batch was read.
  DIR* warm = ::opendir(P("big").c_str());
  ASSERT_NE(warm, nullptr);
  while (::readdir(warm) != nullptr) {
  }
  ::closedir(warm);
  DIR* dir = ::opendir(P("big").c_str());
  ASSERT_NE(dir, nullptr);
  std::map<std::string, int> seen;
  for (int i = 0; i < 100; ++i) {
    struct dirent* e = ::readdir(dir);
    ASSERT_NE(e, nullptr);
    seen[e->d_name]++;
  }
  for (int i = 0; i < kFiles; i += 2) {
    ASSERT_SYS_OK(::unlink(P("big/file-with-a-long-name-" + std::to_string(i)).c_str()));
  }
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("big/added"), "x"));
  // A new listing from the start refills the kernel's cache; the first
  // handle then goes on from that cache or from the daemon, at its offset.
  DIR* other = ::opendir(P("big").c_str());
  ASSERT_NE(other, nullptr);
  while (::readdir(other) != nullptr) {
  }
  ::closedir(other);
  while (struct dirent* e = ::readdir(dir)) seen[e->d_name]++;
  ::closedir(dir);
  for (int i = 1; i < kFiles; i += 2) {
    EXPECT_EQ(seen["file-with-a-long-name-" + std::to_string(i)], 1) << i;
  }
  for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;

  // Remove what readdir returns, as rm -r does, until nothing is left.
  dir = ::opendir(P("big").c_str());
  ASSERT_NE(dir, nullptr);
  while (struct dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") ASSERT_SYS_OK(::unlink(P("big/" + name).c_str()));
  }
  ::closedir(dir);
  EXPECT_EQ(::rmdir(P("big").c_str()), 0) << strerror(errno);
}

// A listing resumed at a saved offset by a handle opened after a change
// (seekdir after reopening, as NFS and SMB servers resume listings) names
// only what exists: the kernel checks its cached listing for changes only
// when a reader starts at offset 0, so it served the names from before
// (a helper's probe: 19 of 19 entries renamed away since).
TEST_P(DataTest, ListingResumedByANewHandleAfterAChangeIsCurrent) {
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  constexpr int kFiles = 20;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("d/f" + std::to_string(i)), "x"));
  }
  // One way of changing the directory per round; each starts from a full
  // listing that leaves it in the kernel's cache.
  ASSERT_SYS_OK(::mkdir(P("e").c_str(), 0755));
  auto at = [this](const std::string& prefix, int i) { return P(prefix + std::to_string(i)); };
  const std::vector<std::function<void(int)>> changes = {
      [&](int i) { ASSERT_SYS_OK(::rename(at("d/f", i).c_str(), at("d/g", i).c_str())); },
      [&](int i) { ASSERT_NO_FATAL_FAILURE(WriteFile(at("d/h", i), "y")); },
      [&](int i) { ASSERT_SYS_OK(::unlink(at("d/g", i).c_str())); },
      [&](int i) { ASSERT_SYS_OK(::mkdir(at("d/m", i).c_str(), 0755)); },
      [&](int i) { ASSERT_SYS_OK(::symlink("h", at("d/s", i).c_str())); },
      [&](int i) { ASSERT_SYS_OK(::link(at("d/h", i).c_str(), at("d/l", i).c_str())); },
      [&](int i) { ASSERT_SYS_OK(::rmdir(at("d/m", i).c_str())); },
      [&](int i) { ASSERT_SYS_OK(::rename(at("d/h", i).c_str(), at("e/h", i).c_str())); },
  };
  for (size_t round = 0; round < changes.size(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    DIR* dir = ::opendir(P("d").c_str());
    ASSERT_NE(dir, nullptr);
    long saved = -1;
    while (struct dirent* e = ::readdir(dir)) {
      if (saved < 0 && e->d_name[0] != '.') saved = ::telldir(dir);
    }
    ::closedir(dir);
    ASSERT_GE(saved, 0);
    for (int i = 0; i < kFiles; ++i) ASSERT_NO_FATAL_FAILURE(changes[round](i));
    dir = ::opendir(P("d").c_str());
    ASSERT_NE(dir, nullptr);
    ::seekdir(dir, saved);
    std::set<std::string> resumed;
    while (struct dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      struct stat st;
      EXPECT_EQ(::lstat(P("d/" + name).c_str(), &st), 0) << name << " is listed but gone";
      resumed.insert(name);
    }
    ::closedir(dir);
    // What a listing from the start names past the saved offset (offsets
    // are the entries' own cookies, in order), read last: it refreshes the
    // kernel's cache.
    std::set<std::string> want;
    dir = ::opendir(P("d").c_str());
    ASSERT_NE(dir, nullptr);
    while (struct dirent* e = ::readdir(dir)) {
      if (e->d_off > saved) want.insert(e->d_name);
    }
    ::closedir(dir);
    EXPECT_FALSE(want.empty());  // 20 names or more, in hash order
    EXPECT_EQ(resumed, want);
  }
}

// Created, written, closed and unlinked files give their space back while
// mounted, also once the kernel opens files itself and sends no RELEASE.
TEST_P(DataTest, UnlinkedCreatedFilesAreReclaimedWhileMounted) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("old"), "x"));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("old", "x"));  // the first OPEN
  const uint64_t before = StatsCounter(mnt(), "orphans reclaimed");
  constexpr uint64_t kFiles = 5;
  for (uint64_t i = 0; i < kFiles; ++i) {
    const std::string name = "t" + std::to_string(i);
    ASSERT_NO_FATAL_FAILURE(WriteFile(P(name), RandomBytes(100000, 30 + i)));
    ASSERT_SYS_OK(::unlink(P(name).c_str()));
  }
  // The kernel forgets an unlinked inode soon after, not at once.
  uint64_t reclaimed = 0;
  for (int t = 0; t < 200; ++t) {
    reclaimed = StatsCounter(mnt(), "orphans reclaimed") - before;
    if (reclaimed >= kFiles) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(reclaimed, kFiles);
}

// The daemon reads into one reused buffer per worker thread: holes, short
// tail blocks and not-yet-flushed blocks must come back as zeros, never as
// bytes of an earlier read. Fill the buffers with noise first.
TEST_P(DataTest, HolesReadAsZerosAfterOtherReads) {
  const std::string noise = RandomBytes(8 << 20, 77);
  {
    UniqueFd fd = Open("noise", O_CREAT | O_WRONLY | O_TRUNC);
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), noise.data(), noise.size(), 0));
  }
  ASSERT_NO_FATAL_FAILURE(Remount());
  for (int i = 0; i < 3; i++) ASSERT_NO_FATAL_FAILURE(ExpectContent("noise", noise));

  // Blocks: data, a hole, a partly written block, a hole, a short tail.
  std::string want(5 * 65536 + 1000, '\0');
  auto put = [&](int fd, size_t off, const std::string& d) {
    PwriteAll(fd, d.data(), d.size(), static_cast<off_t>(off));
    want.replace(off, d.size(), d);
  };
  {
    UniqueFd fd = Open("sparse", O_CREAT | O_WRONLY | O_TRUNC);
    ASSERT_NO_FATAL_FAILURE(put(fd.get(), 0, RandomBytes(65536, 1)));
    ASSERT_NO_FATAL_FAILURE(put(fd.get(), 2 * 65536 + 300, RandomBytes(5000, 2)));
    ASSERT_NO_FATAL_FAILURE(put(fd.get(), 5 * 65536, RandomBytes(1000, 3)));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("sparse", want));  // still in the dirty cache
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(ExpectContent("noise", noise));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("sparse", want));  // from the vLog
  UniqueFd fd = Open("sparse", O_RDONLY);
  EXPECT_EQ(PreadAll(fd.get(), 70000, 65536), want.substr(65536, 70000));
}

TEST_P(DataTest, PartialBlockOverwritesMerge) {
  struct Case {
    off_t offset;
    size_t len;
  };
  const Case cases[] = {
      {70000, 100},         // inside one block
      {0, 1},               // first byte
      {65530, 20},          // straddles a 64 KiB boundary
      {131071, 2},          // straddles the next one
      {4095, 4098},         // straddles two 4 KiB boundaries
      {200 * kKiB - 10, 1000},  // extends the file
      {300 * kKiB, 5},      // leaves a hole, then extends
  };
  std::string model = RandomBytes(200 * kKiB, 11);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), model));
  uint64_t seed = 100;
  for (const Case& c : cases) {
    std::string patch = RandomBytes(c.len, ++seed);
    {
      UniqueFd fd = Open("f", O_WRONLY);
      ASSERT_NO_FATAL_FAILURE(
          PwriteAll(fd.get(), patch.data(), patch.size(), c.offset));
    }
    size_t end = static_cast<size_t>(c.offset) + c.len;
    if (model.size() < end) model.resize(end, '\0');
    model.replace(static_cast<size_t>(c.offset), c.len, patch);
    ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model)) << "offset " << c.offset;
  }
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model));
}

TEST_P(DataTest, AppendAndTruncOnOpen) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "start"));
  {
    UniqueFd a = Open("f", O_WRONLY | O_APPEND);
    UniqueFd b = Open("f", O_WRONLY | O_APPEND);
    ASSERT_EQ(::write(a.get(), "-a1", 3), 3);
    ASSERT_EQ(::write(b.get(), "-b1", 3), 3);
    ASSERT_EQ(::write(a.get(), "-a2", 3), 3);
    // Seeking does not defeat O_APPEND.
    ASSERT_EQ(::lseek(b.get(), 0, SEEK_SET), 0);
    ASSERT_EQ(::write(b.get(), "-b2", 3), 3);
    EXPECT_EQ(::lseek(b.get(), 0, SEEK_CUR), 17);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", "start-a1-b1-a2-b2"));
  // Large appends across blocks.
  std::string model = "start-a1-b1-a2-b2";
  {
    UniqueFd a = Open("f", O_WRONLY | O_APPEND);
    for (int i = 0; i < 5; ++i) {
      std::string chunk = RandomBytes(70000 + i, 20 + i);
      ASSERT_NO_FATAL_FAILURE(
          PwriteAll(a.get(), chunk.data(), chunk.size(), 0));
      model += chunk;
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model));
  // O_TRUNC empties the file; a shorter rewrite leaves no old bytes.
  {
    UniqueFd t = Open("f", O_WRONLY | O_TRUNC);
    struct stat st {};
    ASSERT_EQ(::fstat(t.get(), &st), 0);
    EXPECT_EQ(st.st_size, 0);
    ASSERT_EQ(::write(t.get(), "short", 5), 5);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", "short"));
  { UniqueFd t = Open("f", O_RDWR | O_TRUNC); }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", ""));
  // O_CREAT|O_TRUNC on a new file.
  { UniqueFd t = Open("g", O_CREAT | O_WRONLY | O_TRUNC); }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("g", ""));
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", ""));
}

TEST_P(DataTest, ReadsAtAndPastEof) {
  const std::string data = RandomBytes(100000, 30);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), data));
  UniqueFd fd = Open("f", O_RDONLY);
  char buf[4096];
  EXPECT_EQ(::pread(fd.get(), buf, sizeof(buf), 100000), 0);
  EXPECT_EQ(::pread(fd.get(), buf, sizeof(buf), 100001), 0);
  EXPECT_EQ(::pread(fd.get(), buf, sizeof(buf), 1LL << 40), 0);
  // A read crossing EOF returns what there is.
  ASSERT_EQ(::pread(fd.get(), buf, sizeof(buf), 100000 - 10), 10);
  EXPECT_EQ(std::string(buf, 10), data.substr(100000 - 10));
  ASSERT_EQ(::lseek(fd.get(), 0, SEEK_END), 100000);
  EXPECT_EQ(::read(fd.get(), buf, sizeof(buf)), 0);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("empty"), ""));
  UniqueFd e = Open("empty", O_RDONLY);
  EXPECT_EQ(::read(e.get(), buf, sizeof(buf)), 0);
}

TEST_P(DataTest, LargeAndTinyWritesMixed) {
  std::string model;
  {
    UniqueFd fd = Open("f", O_CREAT | O_WRONLY | O_TRUNC);
    const size_t sizes[] = {1, 1 << 20, 1, 3, 65536, (1 << 20) + 7, 1,
                            4095, 1, 1 << 20, 2, 131072, 1};
    uint64_t seed = 40;
    for (size_t n : sizes) {
      std::string chunk = RandomBytes(n, ++seed);
      size_t done = 0;
      while (done < n) {
        ssize_t w = ::write(fd.get(), chunk.data() + done, n - done);
        ASSERT_GT(w, 0) << strerror(errno);
        done += static_cast<size_t>(w);
      }
      model += chunk;
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model));
  // Random overwrites of random sizes, some past EOF.
  std::mt19937_64 rng(7);
  {
    UniqueFd fd = Open("f", O_RDWR);
    for (int i = 0; i < 200; ++i) {
      size_t len = (i % 10 == 0) ? 1 + rng() % (1 << 20) : 1 + rng() % 3000;
      size_t off = rng() % (model.size() + 100000);
      std::string patch = RandomBytes(len, 1000 + i);
      ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), patch.data(), len, off));
      if (model.size() < off + len) model.resize(off + len, '\0');
      model.replace(off, len, patch);
      if (i % 50 == 49) {
        ASSERT_TRUE(
            SameBytes(PreadAll(fd.get(), model.size() + 10, 0), model))
            << i;
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model));
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(ExpectContent("f", model));
}

TEST_P(DataTest, SyncCallsSucceed) {
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  UniqueFd fd = Open("d/f", O_CREAT | O_RDWR);
  const std::string data = RandomBytes(300000, 50);
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), data.data(), data.size(), 0));
  EXPECT_SYS_OK(::fsync(fd.get()));
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), "x", 1, 5));
  EXPECT_SYS_OK(::fdatasync(fd.get()));
  EXPECT_SYS_OK(::fsync(fd.get()));  // nothing dirty
  EXPECT_SYS_OK(::syncfs(fd.get()));
  UniqueFd dir = Open("d", O_RDONLY | O_DIRECTORY);
  EXPECT_SYS_OK(::fsync(dir.get()));
  EXPECT_SYS_OK(::fdatasync(dir.get()));
  UniqueFd root(::open(mnt().c_str(), O_RDONLY | O_DIRECTORY));
  EXPECT_SYS_OK(::fsync(root.get()));
  UniqueFd ro = Open("d/f", O_RDONLY);
  EXPECT_SYS_OK(::fsync(ro.get()));
  EXPECT_EQ(fd.Close(), 0);
}

TEST_P(DataTest, Fallocate) {
  // Default mode on an empty file: the size grows, the range reads zeros.
  {
    UniqueFd fd = Open("a", O_CREAT | O_RDWR);
    ASSERT_SYS_OK(::fallocate(fd.get(), 0, 0, kMiB));
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_size, kMiB);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("a", std::string(kMiB, '\0')));

  // Default mode over existing data keeps the data and extends.
  const std::string data = RandomBytes(200 * kKiB, 60);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("b"), data));
  {
    UniqueFd fd = Open("b", O_RDWR);
    ASSERT_SYS_OK(::fallocate(fd.get(), 0, 100 * kKiB, kMiB));
  }
  std::string want_b =
      data + std::string(100 * kKiB + kMiB - data.size(), '\0');
  ASSERT_NO_FATAL_FAILURE(ExpectContent("b", want_b));

  // KEEP_SIZE beyond EOF leaves the size alone.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("c"), data));
  {
    UniqueFd fd = Open("c", O_RDWR);
    ASSERT_SYS_OK(::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, 4 * kMiB));
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("c", data));

  // PUNCH_HOLE|KEEP_SIZE zeroes the range (unaligned and aligned), the rest
  // stays, the size stays.
  const std::string big = RandomBytes(kMiB, 61);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("d"), big));
  std::string want_d = big;
  struct Punch {
    off_t offset, len;
  };
  for (Punch p : {Punch{100000, 200000}, Punch{0, 64 * kKiB},
                  Punch{kMiB - 10, 100}, Punch{512 * kKiB, 128 * kKiB}}) {
    UniqueFd fd = Open("d", O_RDWR);
    ASSERT_SYS_OK(::fallocate(fd.get(),
                              FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              p.offset, p.len));
    off_t end = std::min<off_t>(p.offset + p.len, kMiB);
    want_d.replace(p.offset, end - p.offset, std::string(end - p.offset, '\0'));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("d", want_d));
  {
    UniqueFd fd = Open("d", O_RDWR);
    // The kernel insists on KEEP_SIZE with PUNCH_HOLE.
    EXPECT_ERRNO(::fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE, 0, 10),
                 EOPNOTSUPP);
    EXPECT_ERRNO(::fallocate(fd.get(), 0, 0, 0), EINVAL);
    UniqueFd ro = Open("d", O_RDONLY);
    EXPECT_ERRNO(::fallocate(ro.get(), 0, 0, 10), EBADF);
  }

  // ZERO_RANGE zeroes the range, cached pages not yet written back
  // included; past the size it extends the file unless KEEP_SIZE. It was
  // refused with EOPNOTSUPP (ext4 does it).
  std::string want_e = RandomBytes(kMiB, 62);
  {
    UniqueFd fd = Open("e", O_CREAT | O_RDWR);
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), want_e.data(), want_e.size(), 0));
    ASSERT_SYS_OK(::fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, 300000, 70000));
    want_e.replace(300000, 70000, std::string(70000, '\0'));
    ASSERT_SYS_OK(
        ::fallocate(fd.get(), FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, kMiB - 100, kMiB));
    want_e.replace(kMiB - 100, 100, std::string(100, '\0'));
    struct stat st {};
    ASSERT_SYS_OK(::fstat(fd.get(), &st));
    EXPECT_EQ(st.st_size, kMiB);
    ASSERT_SYS_OK(::fallocate(fd.get(), FALLOC_FL_ZERO_RANGE, kMiB + 5, 1000));
    want_e.resize(kMiB + 1005, '\0');
    ASSERT_SYS_OK(::fstat(fd.get(), &st));
    EXPECT_EQ(st.st_size, static_cast<off_t>(want_e.size()));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectContent("e", want_e));

  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(ExpectContent("a", std::string(kMiB, '\0')));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("b", want_b));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("c", data));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("d", want_d));
  ASSERT_NO_FATAL_FAILURE(ExpectContent("e", want_e));
}

// Every offset the kernel accepts (below 2^63 - 1 for any FUSE mount) is
// stored: with the writeback cache a daemon limit below the kernel's failed
// the WRITE at writeback, after pwrite had returned success.
TEST_P(DataTest, WritesUpToTheKernelsLargestOffset) {
  const std::string tail = RandomBytes(100, 72), mid = RandomBytes(4096, 73);
  const off_t mid_at = (1ll << 62) - 100;
  {
    UniqueFd fd = Open("huge", O_CREAT | O_RDWR);
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), mid.data(), mid.size(), mid_at));
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), tail.data(), tail.size(), LLONG_MAX - 100));
    // A range past 2^63 - 1 is the VFS's to refuse (EINVAL here).
    EXPECT_EQ(::pwrite(fd.get(), "x", 1, LLONG_MAX), -1);
    EXPECT_EQ(fd.Close(), 0);
  }
  ASSERT_NO_FATAL_FAILURE(Remount());
  UniqueFd fd = Open("huge", O_RDONLY);
  struct stat st {};
  ASSERT_SYS_OK(::fstat(fd.get(), &st));
  EXPECT_EQ(st.st_size, LLONG_MAX);
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), tail.size(), LLONG_MAX - 100), tail));
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), mid.size(), mid_at), mid));
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), 100, mid_at - 100), std::string(100, '\0')));
}

// The kernel sends SEEK_DATA/SEEK_HOLE without writing back its dirty pages,
// so sepfs answers none: the kernel answers from its own size in every mode
// (the whole file is data, as POSIX allows), and holes read as zeros.
TEST_P(DataTest, SeekAnswersTheWholeFileAsData) {
  const std::string chunk = RandomBytes(kMiB, 70);
  UniqueFd fd = Open("sparse", O_CREAT | O_RDWR);
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), chunk.data(), kMiB, 0));
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), chunk.data(), kMiB, 10 * kMiB));
  ASSERT_SYS_OK(::fsync(fd.get()));
  const off_t size = 11 * kMiB;
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_DATA), 0);
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_HOLE), size);
  EXPECT_EQ(::lseek(fd.get(), 5 * kMiB, SEEK_DATA), 5 * kMiB);
  EXPECT_EQ(::lseek(fd.get(), 10 * kMiB + 5, SEEK_HOLE), size);
  EXPECT_ERRNO(::lseek(fd.get(), size, SEEK_DATA), ENXIO);
  EXPECT_ERRNO(::lseek(fd.get(), size, SEEK_HOLE), ENXIO);
  EXPECT_ERRNO(::lseek(fd.get(), size + kMiB, SEEK_DATA), ENXIO);
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), 4096, 5 * kMiB), std::string(4096, '\0')));
  ASSERT_SYS_OK(::ftruncate(fd.get(), 20 * kMiB));
  EXPECT_EQ(::lseek(fd.get(), 12 * kMiB, SEEK_DATA), 12 * kMiB);
  EXPECT_EQ(::lseek(fd.get(), 12 * kMiB, SEEK_HOLE), 20 * kMiB);
}

// Data one process wrote and has not flushed is data for another's
// SEEK_DATA/SEEK_HOLE (what `cp` asks before copying): it was a hole, or
// ENXIO past the size the daemon knew, and `cp` made a copy of zeros.
TEST_P(DataTest, SeekSeesDataStillInTheKernel) {
  const std::string data = RandomBytes(24000, 71);
  UniqueFd writer = Open("log", O_CREAT | O_WRONLY);
  ASSERT_EQ(::write(writer.get(), data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  UniqueFd reader = Open("log", O_RDONLY);
  EXPECT_EQ(::lseek(reader.get(), 0, SEEK_DATA), 0);
  EXPECT_EQ(::lseek(reader.get(), 0, SEEK_HOLE), static_cast<off_t>(data.size()));
  EXPECT_EQ(::lseek(reader.get(), 20000, SEEK_DATA), 20000);
  EXPECT_ERRNO(::lseek(reader.get(), 24000, SEEK_DATA), ENXIO);
  EXPECT_TRUE(SameBytes(PreadAll(reader.get(), data.size(), 0), data));
}

// Likewise bytes stored through a shared mapping and not yet written back,
// with or without the writeback cache: SEEK_DATA found no data in a file
// whose blocks were all holes under -o nowriteback.
TEST_P(DataTest, SeekSeesDataOfASharedMapping) {
  UniqueFd fd = Open("mapped", O_CREAT | O_RDWR);
  ASSERT_SYS_OK(::ftruncate(fd.get(), kMiB));
  void* m = ::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(m, MAP_FAILED) << strerror(errno);
  std::memcpy(static_cast<char*>(m) + 512 * kKiB, "hello", 5);
  UniqueFd reader = Open("mapped", O_RDONLY);
  const off_t data = ::lseek(reader.get(), 0, SEEK_DATA);
  EXPECT_GE(data, 0) << strerror(errno);
  EXPECT_LE(data, 512 * kKiB) << "SEEK_DATA skipped the mapped bytes";
  EXPECT_GT(::lseek(reader.get(), data < 0 ? 0 : data, SEEK_HOLE), 512 * kKiB);
  EXPECT_EQ(PreadAll(reader.get(), 5, 512 * kKiB), "hello");
  ASSERT_SYS_OK(::munmap(m, kMiB));
}

// st_blocks may be refreshed only after the attribute timeout; give it a few
// seconds to reach the expected range.
blkcnt_t BlocksEventually(const std::string& path, blkcnt_t at_least) {
  struct stat st {};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << strerror(errno);
    if (st.st_blocks >= at_least ||
        std::chrono::steady_clock::now() > deadline) {
      return st.st_blocks;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TEST_P(DataTest, StBlocksIsHonest) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("dense"), RandomBytes(kMiB, 80)));
  {
    UniqueFd fd = Open("dense", O_RDONLY);
    ASSERT_SYS_OK(::fsync(fd.get()));
  }
  EXPECT_GE(BlocksEventually(P("dense"), 2048), 2048);

  {
    UniqueFd fd = Open("sparse", O_CREAT | O_RDWR);
    ASSERT_SYS_OK(::ftruncate(fd.get(), 1LL << 30));
    const std::string chunk = RandomBytes(64 * kKiB, 81);
    ASSERT_NO_FATAL_FAILURE(
        PwriteAll(fd.get(), chunk.data(), chunk.size(), 512 * kMiB));
    ASSERT_SYS_OK(::fsync(fd.get()));
  }
  blkcnt_t sparse = BlocksEventually(P("sparse"), 128);
  EXPECT_GE(sparse, 128) << "64 KiB of data is at least 128 sectors";
  EXPECT_LE(sparse, 8 * kMiB / 512) << "a 1 GiB sparse file with 64 KiB of "
                                       "data must not count its holes";
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("empty"), ""));
  struct stat st {};
  ASSERT_EQ(::stat(P("empty").c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_GE(BlocksEventually(P("dense"), 2048), 2048);
  blkcnt_t sparse2 = BlocksEventually(P("sparse"), 128);
  EXPECT_LE(sparse2, 8 * kMiB / 512);
}

}  // namespace
}  // namespace sepfs::mounttest
