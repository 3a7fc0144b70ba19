// Everything the namespace and the data hold survives unmount + mount: the
// tree, file types, modes, owners, link counts, nanosecond mtimes, xattrs,
// contents, and a sparse file larger than 4 GiB.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

struct Entry {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  nlink_t nlink = 0;
  off_t size = 0;
  dev_t rdev = 0;
  struct timespec mtime {};
  struct timespec ctime {};
  std::map<std::string, std::string> xattrs;
  std::string content;  // checksum of a file, target of a symlink
  ino_t ino = 0;        // only compared within one snapshot

  std::string Describe() const {
    std::ostringstream os;
    os << "mode=" << std::oct << mode << std::dec << " uid=" << uid
       << " gid=" << gid << " nlink=" << nlink << " size=" << size
       << " rdev=" << major(rdev) << ":" << minor(rdev)
       << " mtime=" << mtime.tv_sec << "." << mtime.tv_nsec
       << " ctime=" << ctime.tv_sec << "." << ctime.tv_nsec
       << " xattrs=" << xattrs.size() << " content=" << content;
    return os.str();
  }
  bool SameAs(const Entry& o) const {
    return mode == o.mode && uid == o.uid && gid == o.gid &&
           nlink == o.nlink && size == o.size && rdev == o.rdev &&
           mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
           ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec &&
           xattrs == o.xattrs && content == o.content;
  }
};

std::map<std::string, std::string> Xattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  char names[65536];
  ssize_t n = ::llistxattr(path.c_str(), names, sizeof(names));
  EXPECT_GE(n, 0) << path << ": " << strerror(errno);
  for (ssize_t i = 0; i < n;) {
    std::string name(names + i);
    char value[65536];
    ssize_t v = ::lgetxattr(path.c_str(), name.c_str(), value, sizeof(value));
    EXPECT_GE(v, 0) << path << " " << name << ": " << strerror(errno);
    out[name] = v >= 0 ? std::string(value, static_cast<size_t>(v)) : "<error>";
    i += static_cast<ssize_t>(name.size()) + 1;
  }
  return out;
}

// Walks the tree under root (relative paths, root itself as ".").
void Snapshot(const std::string& root, const std::string& rel,
              std::map<std::string, Entry>* out) {
  const std::string path = rel == "." ? root : root + "/" + rel;
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << strerror(errno);
  Entry e;
  e.mode = st.st_mode;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.nlink = st.st_nlink;
  e.size = S_ISDIR(st.st_mode) ? 0 : st.st_size;  // dir sizes are free-form
  e.rdev = (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) ? st.st_rdev : 0;
  e.mtime = st.st_mtim;
  e.ctime = st.st_ctim;
  e.ino = st.st_ino;
  if (!S_ISLNK(st.st_mode)) e.xattrs = Xattrs(path);
  if (S_ISREG(st.st_mode)) {
    std::string data = ReadFile(path);
    e.content = std::to_string(data.size()) + ":" +
                std::to_string(Checksum(data));
  } else if (S_ISLNK(st.st_mode)) {
    char buf[8192];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
    EXPECT_GE(n, 0);
    e.content = std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }
  (*out)[rel] = e;
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = ::opendir(path.c_str());
  ASSERT_NE(d, nullptr) << path;
  std::vector<std::string> children;
  while (struct dirent* de = ::readdir(d)) {
    std::string name = de->d_name;
    if (name != "." && name != "..") children.push_back(name);
  }
  ::closedir(d);
  for (const std::string& c : children) {
    ASSERT_NO_FATAL_FAILURE(
        Snapshot(root, rel == "." ? c : rel + "/" + c, out));
  }
}

void ExpectSameTree(const std::map<std::string, Entry>& a,
                    const std::map<std::string, Entry>& b) {
  for (const auto& [path, e] : a) {
    auto it = b.find(path);
    if (it == b.end()) {
      ADD_FAILURE() << path << " is missing";
      continue;
    }
    EXPECT_TRUE(e.SameAs(it->second)) << path << "\n  before: " << e.Describe()
                                      << "\n  after:  "
                                      << it->second.Describe();
  }
  for (const auto& [path, e] : b) {
    EXPECT_TRUE(a.count(path)) << path << " appeared: " << e.Describe();
  }
}

using PersistTest = MountFixture;

TEST_F(PersistTest, WholeTreeSurvivesRemount) {
  auto p = [this](const std::string& rel) { return P(rel); };
  // Directories, nested, with odd modes and owners.
  for (const char* d : {"a", "a/b", "a/b/c", "a/b/c/d", "empty", "sticky",
                        "owned"}) {
    ASSERT_SYS_OK(::mkdir(p(d).c_str(), 0755));
  }
  ASSERT_SYS_OK(::chmod(p("sticky").c_str(), 01777));
  ASSERT_SYS_OK(::chown(p("owned").c_str(), 1234, 5678));
  // Files of many sizes (tiny ones may live inline in the metadata).
  const size_t sizes[] = {0, 1, 100, 4096, 5000, 65536, 70000, (1 << 20) + 3};
  int i = 0;
  for (size_t n : sizes) {
    std::string name = "a/b/file" + std::to_string(i);
    ASSERT_NO_FATAL_FAILURE(WriteFile(p(name), RandomBytes(n, 200 + i)));
    ++i;
  }
  ASSERT_NO_FATAL_FAILURE(WriteFile(p("owned/f"), "owned", 0640));
  ASSERT_SYS_OK(::chown(p("owned/f").c_str(), 1234, 5678));
  ASSERT_NO_FATAL_FAILURE(WriteFile(p("suid"), "s", 0755));
  ASSERT_SYS_OK(::chmod(p("suid").c_str(), 04755));
  ASSERT_NO_FATAL_FAILURE(WriteFile(p("a/b/c/d/deep"), RandomBytes(3000, 1)));
  // Sparse file.
  {
    UniqueFd fd(::open(p("sparse").c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_TRUE(fd.ok());
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), "tail", 4, 50 << 20));
  }
  // Links and special files.
  ASSERT_SYS_OK(::symlink("a/b/file3", p("sym").c_str()));
  ASSERT_SYS_OK(
      ::symlink(std::string(3000, 'L').c_str(), p("longsym").c_str()));
  ASSERT_SYS_OK(::link(p("a/b/file4").c_str(), p("hard1").c_str()));
  ASSERT_SYS_OK(::link(p("a/b/file4").c_str(), p("a/hard2").c_str()));
  ASSERT_SYS_OK(::mkfifo(p("fifo").c_str(), 0620));
  ASSERT_SYS_OK(::mknod(p("chr").c_str(), S_IFCHR | 0600, makedev(4, 64)));
  ASSERT_SYS_OK(::mknod(p("blk").c_str(), S_IFBLK | 0660, makedev(259, 3)));
  ASSERT_SYS_OK(::mknod(p("sock").c_str(), S_IFSOCK | 0755, 0));
  // Xattrs.
  ASSERT_SYS_OK(::setxattr(p("a/b/file1").c_str(), "user.one", "1", 1, 0));
  ASSERT_SYS_OK(::setxattr(p("a/b/file1").c_str(), "user.bin",
                           RandomBytes(300, 5).data(), 300, 0));
  ASSERT_SYS_OK(::setxattr(p("a").c_str(), "user.dir", "d", 1, 0));
  ASSERT_SYS_OK(::setxattr(p("empty").c_str(), "trusted.t", "t", 1, 0));
  // Exact timestamps, including nanoseconds and times before 1970.
  struct timespec ts[2] = {{1500000000, 123456789}, {1600000000, 987654321}};
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, p("a/b/file2").c_str(), ts, 0));
  struct timespec old[2] = {{-100, 1}, {-86400 * 365, 999999999}};
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, p("a/b/file5").c_str(), old, 0));
  ASSERT_SYS_OK(
      ::utimensat(AT_FDCWD, p("sym").c_str(), ts, AT_SYMLINK_NOFOLLOW));
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, p("empty").c_str(), ts, 0));
  // A removed file and a renamed dir leave no trace.
  ASSERT_NO_FATAL_FAILURE(WriteFile(p("gone"), RandomBytes(100000, 6)));
  ASSERT_SYS_OK(::unlink(p("gone").c_str()));
  ASSERT_SYS_OK(::mkdir(p("old").c_str(), 0700));
  ASSERT_NO_FATAL_FAILURE(WriteFile(p("old/in"), "in"));
  ASSERT_SYS_OK(::rename(p("old").c_str(), p("a/new").c_str()));

  UniqueFd root(::open(mnt().c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_SYS_OK(::syncfs(root.get()));
  root.Reset();
  std::map<std::string, Entry> before;
  ASSERT_NO_FATAL_FAILURE(Snapshot(mnt(), ".", &before));
  ASSERT_EQ(before.size(), 30u);
  EXPECT_EQ(before["a/b/file2"].mtime.tv_nsec, 987654321);
  EXPECT_EQ(before["a/b/file5"].mtime.tv_sec, -86400 * 365);

  for (int round = 0; round < 2; ++round) {
    ASSERT_NO_FATAL_FAILURE(Unmount());
    Fsck();
    ASSERT_NO_FATAL_FAILURE(Mount());
    std::map<std::string, Entry> after;
    ASSERT_NO_FATAL_FAILURE(Snapshot(mnt(), ".", &after));
    ExpectSameTree(before, after);
    // Hard links are still one inode.
    EXPECT_EQ(after["hard1"].ino, after["a/b/file4"].ino);
    EXPECT_EQ(after["a/hard2"].ino, after["a/b/file4"].ino);
    EXPECT_EQ(after["hard1"].nlink, 3u);
  }
  // The tree is still usable: new entries next to the old ones.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("a/b/c/later"), "later"));
  EXPECT_TRUE(SameBytes(ReadFile(P("a/b/c/d/deep")), RandomBytes(3000, 1)));
  ASSERT_SYS_OK(::unlink(P("hard1").c_str()));
  EXPECT_TRUE(SameBytes(ReadFile(P("a/hard2")), RandomBytes(5000, 204)));
}

// With the writeback cache the kernel keeps a file's mtime and ctime and
// sends them in a SETATTR; pages written back after it (an mmap's or a
// copy_file_range's, at close) must not replace them with the time they
// reached the daemon; nor the WRITE of a write(2) that came in the same
// tick of the kernel's clock as an earlier one already written back (the
// kernel sends no times then). Times set while the file is open, too.
TEST_F(PersistTest, WriteBackKeepsTheTimesTheKernelShowed) {
  const std::string data = RandomBytes(100000, 31);
  {
    UniqueFd fd(::open(P("utime-open").c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_SYS_OK(fd.get());
    ASSERT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
    struct timespec old[2] = {{1000000000, 123}, {1000000000, 456}};
    ASSERT_SYS_OK(::futimens(fd.get(), old));
  }
  {
    UniqueFd fd(::open(P("mapped").c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_SYS_OK(fd.get());
    ASSERT_SYS_OK(::ftruncate(fd.get(), 65536));
    void* m = ::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    ASSERT_NE(m, MAP_FAILED) << strerror(errno);
    std::memcpy(static_cast<char*>(m) + 100, data.data(), 5000);
    ASSERT_SYS_OK(::munmap(m, 65536));
  }
  {
    // The second write falls in the same tick of the kernel's clock as the
    // first: no new times to send, so only its WRITE reaches the daemon.
    UniqueFd fd(::open(P("rewritten").c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_SYS_OK(fd.get());
    ASSERT_EQ(::write(fd.get(), data.data(), 1000), 1000);
    ASSERT_SYS_OK(::fsync(fd.get()));
    ASSERT_EQ(::write(fd.get(), data.data(), 1000), 1000);
  }
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("source"), data));
  {
    UniqueFd in(::open(P("source").c_str(), O_RDONLY));
    UniqueFd out(::open(P("copied").c_str(), O_CREAT | O_WRONLY, 0644));
    ASSERT_SYS_OK(in.get());
    ASSERT_SYS_OK(out.get());
    ASSERT_EQ(::copy_file_range(in.get(), nullptr, out.get(), nullptr, data.size(), 0),
              static_cast<ssize_t>(data.size()));
  }
  {
    // fallocate right after an O_TRUNC open: the kernel stamps both in the
    // same tick, so it sends no SETATTR for the fallocate's times (found by
    // tests/fsx, seed 5025). The same for a hole punched then.
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("allocated"), ""));
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("punched"), data));
    UniqueFd fd(::open(P("allocated").c_str(), O_WRONLY | O_TRUNC));
    ASSERT_SYS_OK(fd.get());
    ASSERT_SYS_OK(::fallocate(fd.get(), 0, 0, 169));
    UniqueFd pf(::open(P("punched").c_str(), O_WRONLY | O_TRUNC));
    ASSERT_SYS_OK(pf.get());
    ASSERT_EQ(::write(pf.get(), data.data(), 20000), 20000);
    ASSERT_SYS_OK(::fsync(pf.get()));
    ASSERT_SYS_OK(::fallocate(pf.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192));
  }
  const std::vector<std::string> names = {"utime-open", "mapped",    "copied",
                                          "rewritten",  "allocated", "punched"};
  std::map<std::string, struct stat> before;
  for (const std::string& n : names) ASSERT_SYS_OK(::stat(P(n).c_str(), &before[n]));
  EXPECT_EQ(before["utime-open"].st_mtim.tv_sec, 1000000000);
  ASSERT_NO_FATAL_FAILURE(Remount());
  for (const std::string& n : names) {
    struct stat st;
    ASSERT_SYS_OK(::stat(P(n).c_str(), &st));
    EXPECT_EQ(st.st_mtim.tv_sec, before[n].st_mtim.tv_sec) << n;
    EXPECT_EQ(st.st_mtim.tv_nsec, before[n].st_mtim.tv_nsec) << n;
    EXPECT_EQ(st.st_ctim.tv_sec, before[n].st_ctim.tv_sec) << n;
    EXPECT_EQ(st.st_ctim.tv_nsec, before[n].st_ctim.tv_nsec) << n;
  }
  EXPECT_TRUE(SameBytes(ReadFile(P("copied")), data));
}

TEST_F(PersistTest, SparseFileBeyond4GiB) {
  constexpr off_t kMiB = 1 << 20;
  constexpr off_t kGiB = 1LL << 30;
  // 20 chunks of 1 MiB spread over 5 GiB; some straddle the 2 GiB and 4 GiB
  // boundaries and the 32-bit block-number boundary of 4 KiB blocks.
  std::vector<off_t> offsets = {0,
                                3 * kMiB + 17,
                                kGiB / 3,
                                kGiB - kMiB / 2,
                                kGiB + kMiB + 12345,
                                2 * kGiB - kMiB / 2,
                                2 * kGiB + kMiB + 4096,
                                2 * kGiB + 300 * kMiB,
                                (5 * kGiB) / 2,
                                3 * kGiB - 1,
                                3 * kGiB + kGiB / 2,
                                4 * kGiB - kMiB / 2 - 3,
                                4 * kGiB + kMiB,
                                4 * kGiB + 64 * kMiB,
                                4 * kGiB + kGiB / 4,
                                4 * kGiB + kGiB / 2 + 7,
                                4 * kGiB + 3 * kGiB / 4,
                                5 * kGiB - 10 * kMiB,
                                5 * kGiB - 3 * kMiB,
                                5 * kGiB - kMiB};
  const off_t size = 5 * kGiB;
  {
    UniqueFd fd(::open(P("big").c_str(), O_CREAT | O_RDWR, 0644));
    ASSERT_TRUE(fd.ok());
    for (size_t i = 0; i < offsets.size(); ++i) {
      std::string chunk = RandomBytes(kMiB, 300 + i);
      ASSERT_NO_FATAL_FAILURE(
          PwriteAll(fd.get(), chunk.data(), chunk.size(), offsets[i]));
    }
    ASSERT_SYS_OK(::fsync(fd.get()));
  }
  auto verify = [&](const char* when) {
    UniqueFd fd(::open(P("big").c_str(), O_RDONLY));
    ASSERT_TRUE(fd.ok());
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_size, size) << when;
    for (size_t i = 0; i < offsets.size(); ++i) {
      std::string got = PreadAll(fd.get(), kMiB, offsets[i]);
      EXPECT_EQ(Checksum(got), Checksum(RandomBytes(kMiB, 300 + i)))
          << when << ": chunk at " << offsets[i];
    }
    // Holes between the chunks read zeros.
    for (off_t hole : {2 * kMiB, kGiB / 2, 2 * kGiB + 100 * kMiB,
                       4 * kGiB + 32 * kMiB, 5 * kGiB - 5 * kMiB}) {
      EXPECT_TRUE(
          SameBytes(PreadAll(fd.get(), 8192, hole), std::string(8192, '\0')))
          << when << ": hole at " << hole;
    }
    char c;
    EXPECT_EQ(::pread(fd.get(), &c, 1, size), 0);
  };
  ASSERT_NO_FATAL_FAILURE(verify("before remount"));
  ASSERT_NO_FATAL_FAILURE(Remount());
  ASSERT_NO_FATAL_FAILURE(verify("after remount"));
  // Truncating below 2 GiB drops everything beyond.
  ASSERT_SYS_OK(::truncate(P("big").c_str(), 2 * kGiB));
  {
    UniqueFd fd(::open(P("big").c_str(), O_RDONLY));
    std::string tail = PreadAll(fd.get(), kMiB, 2 * kGiB - kMiB / 2);
    EXPECT_EQ(tail.size(), static_cast<size_t>(kMiB / 2));
    EXPECT_TRUE(SameBytes(tail, RandomBytes(kMiB, 305).substr(0, kMiB / 2)));
  }
  ASSERT_SYS_OK(::truncate(P("big").c_str(), 4 * kGiB + 2 * kMiB));
  {
    UniqueFd fd(::open(P("big").c_str(), O_RDONLY));
    EXPECT_TRUE(SameBytes(PreadAll(fd.get(), kMiB, 4 * kGiB + kMiB),
              std::string(kMiB, '\0')));
  }
  ASSERT_NO_FATAL_FAILURE(Unmount());
  Fsck();
}

}  // namespace
}  // namespace sepfs::mounttest
