// POSIX namespace and metadata semantics of a mounted sepfs, each with its
// error cases.
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "mount_fixture.h"

namespace sepfs::mounttest {
namespace {

struct stat Lstat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << strerror(errno);
  return st;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Names in a directory (without . and ..) mapped to d_type.
std::map<std::string, unsigned char> ListDir(const std::string& path) {
  std::map<std::string, unsigned char> out;
  DIR* d = ::opendir(path.c_str());
  EXPECT_NE(d, nullptr) << path << ": " << strerror(errno);
  if (d == nullptr) return out;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    EXPECT_TRUE(out.emplace(name, e->d_type).second) << "duplicate " << name;
  }
  EXPECT_EQ(errno, 0) << "readdir " << path;
  ::closedir(d);
  return out;
}

long RenameAt2(const std::string& from, const std::string& to,
               unsigned flags) {
  return ::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                   flags);
}

bool TsLess(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}
bool TsEq(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

// One errno expectation of a table-driven test.
struct ErrCase {
  const char* what;
  std::function<long()> op;
  int want;  // 0: must succeed
};

void RunErrCases(const std::vector<ErrCase>& cases) {
  for (const ErrCase& c : cases) {
    errno = 0;
    long r = c.op();
    int err = r < 0 ? errno : 0;
    EXPECT_EQ(ErrName(err), c.want == 0 ? ErrName(0) : ErrName(c.want))
        << c.what;
  }
}

using PosixTest = MountFixture;

TEST_F(PosixTest, CreateWriteReadClose) {
  const std::string f = P("file");
  UniqueFd fd(::open(f.c_str(), O_CREAT | O_RDWR, 0640));
  ASSERT_TRUE(fd.ok()) << strerror(errno);
  const std::string data = RandomBytes(300000, 1);
  ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), data.data(), data.size(), 0));
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), data.size(), 0), data));
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
  EXPECT_EQ(fd.Close(), 0);
  EXPECT_TRUE(SameBytes(ReadFile(f), data));
  // O_RDONLY descriptors cannot write, O_WRONLY cannot read.
  UniqueFd ro(::open(f.c_str(), O_RDONLY));
  ASSERT_TRUE(ro.ok());
  EXPECT_ERRNO(::write(ro.get(), "x", 1), EBADF);
  UniqueFd wo(::open(f.c_str(), O_WRONLY));
  ASSERT_TRUE(wo.ok());
  char c;
  EXPECT_ERRNO(::read(wo.get(), &c, 1), EBADF);
}

TEST_F(PosixTest, NamespaceErrors) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "data"));
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  ASSERT_SYS_OK(::mkdir(P("full").c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("full/child"), "x"));
  auto s = [this](const char* rel) { return P(rel); };
  const std::vector<ErrCase> cases = {
      {"O_CREAT|O_EXCL on existing file",
       [&] { return ::open(s("f").c_str(), O_CREAT | O_EXCL | O_RDWR, 0644); },
       EEXIST},
      {"O_CREAT|O_EXCL on existing dir",
       [&] { return ::open(s("d").c_str(), O_CREAT | O_EXCL | O_RDWR, 0644); },
       EEXIST},
      {"open missing", [&] { return ::open(s("missing").c_str(), O_RDONLY); },
       ENOENT},
      {"open through a file",
       [&] { return ::open(s("f/x").c_str(), O_RDONLY); },
       ENOTDIR},
      {"create in missing dir",
       [&] { return ::open(s("nodir/x").c_str(), O_CREAT | O_RDWR, 0644); },
       ENOENT},
      {"open dir for writing", [&] { return ::open(s("d").c_str(), O_WRONLY); },
       EISDIR},
      {"O_DIRECTORY on a file",
       [&] { return ::open(s("f").c_str(), O_RDONLY | O_DIRECTORY); }, ENOTDIR},
      {"mkdir existing dir", [&] { return ::mkdir(s("d").c_str(), 0755); },
       EEXIST},
      {"mkdir over file", [&] { return ::mkdir(s("f").c_str(), 0755); },
       EEXIST},
      {"rmdir non-empty", [&] { return ::rmdir(s("full").c_str()); },
       ENOTEMPTY},
      {"rmdir a file", [&] { return ::rmdir(s("f").c_str()); }, ENOTDIR},
      {"rmdir missing", [&] { return ::rmdir(s("missing").c_str()); }, ENOENT},
      {"unlink a dir", [&] { return ::unlink(s("d").c_str()); }, EISDIR},
      {"unlink missing", [&] { return ::unlink(s("missing").c_str()); },
       ENOENT},
      {"link a dir", [&] { return ::link(s("d").c_str(), s("dl").c_str()); },
       EPERM},
      {"link onto existing",
       [&] { return ::link(s("f").c_str(), s("full/child").c_str()); }, EEXIST},
      {"link missing",
       [&] { return ::link(s("missing").c_str(), s("l2").c_str()); }, ENOENT},
      {"symlink onto existing",
       [&] { return ::symlink("target", s("f").c_str()); }, EEXIST},
      {"mknod onto existing",
       [&] { return ::mknod(s("f").c_str(), S_IFIFO | 0644, 0); }, EEXIST},
      {"rename missing",
       [&] { return ::rename(s("missing").c_str(), s("x").c_str()); }, ENOENT},
      {"readlink of a file",
       [&] {
         char buf[16];
         return ::readlink(s("f").c_str(), buf, sizeof(buf));
       },
       EINVAL},
  };
  RunErrCases(cases);
  // Nothing above changed the tree.
  EXPECT_EQ(ListDir(mnt()).size(), 3u);
  EXPECT_EQ(ReadFile(P("f")), "data");
  EXPECT_EQ(ReadFile(P("full/child")), "x");
  ASSERT_SYS_OK(::unlink(P("full/child").c_str()));
  EXPECT_SYS_OK(::rmdir(P("full").c_str()));
  EXPECT_FALSE(Exists(P("full")));
}

TEST_F(PosixTest, DirectoryLinkCounts) {
  const nlink_t root0 = Lstat(mnt()).st_nlink;
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  EXPECT_EQ(Lstat(P("d")).st_nlink, 2u);
  EXPECT_EQ(Lstat(mnt()).st_nlink, root0 + 1);
  ASSERT_SYS_OK(::mkdir(P("d/s1").c_str(), 0755));
  ASSERT_SYS_OK(::mkdir(P("d/s2").c_str(), 0755));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("d/file"), "x"));
  ASSERT_SYS_OK(::mkfifo(P("d/fifo").c_str(), 0644));
  EXPECT_EQ(Lstat(P("d")).st_nlink, 4u);
  EXPECT_EQ(Lstat(P("d/s1")).st_nlink, 2u);
  ASSERT_SYS_OK(::rmdir(P("d/s1").c_str()));
  EXPECT_EQ(Lstat(P("d")).st_nlink, 3u);
  // Moving a subdir to another parent moves its ".." link.
  ASSERT_SYS_OK(::mkdir(P("e").c_str(), 0755));
  ASSERT_SYS_OK(::rename(P("d/s2").c_str(), P("e/s2").c_str()));
  EXPECT_EQ(Lstat(P("d")).st_nlink, 2u);
  EXPECT_EQ(Lstat(P("e")).st_nlink, 3u);
  EXPECT_EQ(Lstat(mnt()).st_nlink, root0 + 2);
  // ".." of the moved dir names its new parent.
  EXPECT_EQ(Lstat(P("e/s2/..")).st_ino, Lstat(P("e")).st_ino);
}

TEST_F(PosixTest, ReaddirListsEntriesWithTypes) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "x"));
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  ASSERT_SYS_OK(::symlink("f", P("l").c_str()));
  ASSERT_SYS_OK(::mkfifo(P("p").c_str(), 0644));
  const auto entries = ListDir(mnt());
  const std::map<std::string, unsigned char> want = {
      {"f", DT_REG}, {"d", DT_DIR}, {"l", DT_LNK}, {"p", DT_FIFO}};
  EXPECT_EQ(entries, want);
  // "." and ".." are listed too.
  DIR* d = ::opendir(mnt().c_str());
  ASSERT_NE(d, nullptr);
  std::set<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.insert(e->d_name);
  ::closedir(d);
  EXPECT_TRUE(names.count(".") && names.count(".."));
  EXPECT_TRUE(ListDir(P("d")).empty());
}

TEST_F(PosixTest, MknodAllTypesKeepRdev) {
  struct Case {
    const char* name;
    mode_t type;
    dev_t rdev;
  };
  const Case cases[] = {
      {"reg", S_IFREG, 0},
      {"fifo", S_IFIFO, 0},
      {"sock", S_IFSOCK, 0},
      {"chr", S_IFCHR, makedev(1, 3)},
      {"blk", S_IFBLK, makedev(8, 17)},
      {"chr_big", S_IFCHR, makedev(300, 70000)},
  };
  for (const Case& c : cases) {
    ASSERT_SYS_OK(::mknod(P(c.name).c_str(), c.type | 0640, c.rdev));
  }
  ASSERT_SYS_OK(::mkfifo(P("fifo2").c_str(), 0600));
  for (int pass = 0; pass < 2; ++pass) {
    for (const Case& c : cases) {
      struct stat st = Lstat(P(c.name));
      EXPECT_EQ(st.st_mode & S_IFMT, c.type) << c.name << " pass " << pass;
      EXPECT_EQ(st.st_mode & 07777, 0640u) << c.name;
      if (c.type == S_IFCHR || c.type == S_IFBLK) {
        EXPECT_EQ(major(st.st_rdev), major(c.rdev)) << c.name;
        EXPECT_EQ(minor(st.st_rdev), minor(c.rdev)) << c.name;
      }
      EXPECT_EQ(st.st_size, 0) << c.name;
    }
    EXPECT_TRUE(S_ISFIFO(Lstat(P("fifo2")).st_mode));
    if (pass == 0) {
      ASSERT_NO_FATAL_FAILURE(Remount());
    }
  }
  for (const Case& c : cases) EXPECT_SYS_OK(::unlink(P(c.name).c_str()));
}

TEST_F(PosixTest, Symlinks) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("target"), "payload"));
  ASSERT_SYS_OK(::symlink("target", P("rel").c_str()));
  ASSERT_SYS_OK(::symlink(P("target").c_str(), P("abs").c_str()));
  ASSERT_SYS_OK(::symlink("nowhere", P("dangling").c_str()));
  const std::string long_target(4000, 'z');
  ASSERT_SYS_OK(::symlink(long_target.c_str(), P("long").c_str()));

  char buf[8192];
  ssize_t n = ::readlink(P("rel").c_str(), buf, sizeof(buf));
  ASSERT_EQ(n, 6);
  EXPECT_EQ(std::string(buf, n), "target");
  n = ::readlink(P("long").c_str(), buf, sizeof(buf));
  ASSERT_EQ(n, 4000);
  EXPECT_EQ(std::string(buf, n), long_target);
  // A short buffer truncates without error.
  n = ::readlink(P("rel").c_str(), buf, 3);
  ASSERT_EQ(n, 3);
  EXPECT_EQ(std::string(buf, 3), "tar");

  struct stat st = Lstat(P("rel"));
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, 6);
  EXPECT_EQ(Lstat(P("long")).st_size, 4000);
  struct stat followed {};
  ASSERT_EQ(::stat(P("rel").c_str(), &followed), 0);
  EXPECT_EQ(followed.st_ino, Lstat(P("target")).st_ino);
  EXPECT_EQ(ReadFile(P("rel")), "payload");
  EXPECT_EQ(ReadFile(P("abs")), "payload");
  EXPECT_ERRNO(::stat(P("dangling").c_str(), &followed), ENOENT);
  EXPECT_TRUE(S_ISLNK(Lstat(P("dangling")).st_mode));
  // Creating through a dangling link creates its target.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("dangling"), "new"));
  EXPECT_EQ(ReadFile(P("nowhere")), "new");
  // Unlinking the link leaves the target.
  ASSERT_SYS_OK(::unlink(P("rel").c_str()));
  EXPECT_EQ(ReadFile(P("target")), "payload");
  EXPECT_ERRNO(::symlink("x", P("abs").c_str()), EEXIST);
}

TEST_F(PosixTest, HardLinks) {
  const std::string data = RandomBytes(200000, 2);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("a"), data));
  ASSERT_SYS_OK(::mkdir(P("sub").c_str(), 0755));
  ASSERT_SYS_OK(::link(P("a").c_str(), P("b").c_str()));
  ASSERT_SYS_OK(::link(P("a").c_str(), P("sub/c").c_str()));
  struct stat sa = Lstat(P("a")), sb = Lstat(P("b")), sc = Lstat(P("sub/c"));
  EXPECT_EQ(sa.st_ino, sb.st_ino);
  EXPECT_EQ(sa.st_ino, sc.st_ino);
  EXPECT_EQ(sa.st_nlink, 3u);
  EXPECT_EQ(sb.st_nlink, 3u);
  // Data written through one name is seen through the others.
  {
    UniqueFd fd(::open(P("b").c_str(), O_WRONLY));
    ASSERT_TRUE(fd.ok());
    ASSERT_NO_FATAL_FAILURE(PwriteAll(fd.get(), "HELLO", 5, 1000));
  }
  std::string want = data;
  want.replace(1000, 5, "HELLO");
  EXPECT_TRUE(SameBytes(ReadFile(P("a")), want));
  EXPECT_TRUE(SameBytes(ReadFile(P("sub/c")), want));
  // chmod through one name shows through the others.
  ASSERT_SYS_OK(::chmod(P("a").c_str(), 0600));
  EXPECT_EQ(Lstat(P("sub/c")).st_mode & 07777, 0600u);

  ASSERT_SYS_OK(::unlink(P("a").c_str()));
  EXPECT_FALSE(Exists(P("a")));
  EXPECT_EQ(Lstat(P("b")).st_nlink, 2u);
  EXPECT_TRUE(SameBytes(ReadFile(P("b")), want));
  ASSERT_SYS_OK(::unlink(P("sub/c").c_str()));
  EXPECT_EQ(Lstat(P("b")).st_nlink, 1u);
  EXPECT_TRUE(SameBytes(ReadFile(P("b")), want));
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(Lstat(P("b")).st_nlink, 1u);
  EXPECT_TRUE(SameBytes(ReadFile(P("b")), want));
}

// Fresh directory "name" with files/dirs described by a list of relative
// paths: entries ending in '/' are dirs, others files containing their path.
void MakeTree(MountFixture* fx, const std::string& base,
              const std::vector<std::string>& entries,
              const std::function<std::string(const std::string&)>& p) {
  (void)fx;
  ASSERT_SYS_OK(::mkdir(p(base).c_str(), 0755));
  for (const std::string& e : entries) {
    std::string path = p(base + "/" + e);
    if (e.back() == '/') {
      ASSERT_SYS_OK(::mkdir(path.c_str(), 0755));
    } else {
      ASSERT_NO_FATAL_FAILURE(WriteFile(path, e));
    }
  }
}

TEST_F(PosixTest, RenameCases) {
  auto p = [this](const std::string& rel) { return P(rel); };
  // Plain rename.
  ASSERT_NO_FATAL_FAILURE(MakeTree(this, "t1", {"a"}, p));
  const ino_t ino_a = Lstat(P("t1/a")).st_ino;
  ASSERT_SYS_OK(::rename(P("t1/a").c_str(), P("t1/b").c_str()));
  EXPECT_FALSE(Exists(P("t1/a")));
  EXPECT_EQ(Lstat(P("t1/b")).st_ino, ino_a);
  EXPECT_EQ(ReadFile(P("t1/b")), "a");

  // Over an existing file: the replaced one is gone (its inode unlinked).
  ASSERT_NO_FATAL_FAILURE(MakeTree(this, "t2", {"a", "b"}, p));
  {
    UniqueFd old_b(::open(P("t2/b").c_str(), O_RDONLY));
    ASSERT_TRUE(old_b.ok());
    ASSERT_SYS_OK(::rename(P("t2/a").c_str(), P("t2/b").c_str()));
    struct stat st {};
    ASSERT_EQ(::fstat(old_b.get(), &st), 0);
    EXPECT_EQ(st.st_nlink, 0u);
    EXPECT_EQ(PreadAll(old_b.get(), 10, 0), "b");
  }
  EXPECT_EQ(ReadFile(P("t2/b")), "a");
  EXPECT_EQ(ListDir(P("t2")).size(), 1u);

  // Dir over an empty dir.
  ASSERT_NO_FATAL_FAILURE(MakeTree(this, "t3", {"d1/", "d1/x", "d2/"}, p));
  ASSERT_SYS_OK(::rename(P("t3/d1").c_str(), P("t3/d2").c_str()));
  EXPECT_FALSE(Exists(P("t3/d1")));
  EXPECT_EQ(ReadFile(P("t3/d2/x")), "d1/x");
  EXPECT_EQ(Lstat(P("t3")).st_nlink, 3u);

  // Error cases; none of them may change anything.
  ASSERT_NO_FATAL_FAILURE(MakeTree(
      this, "t4", {"d1/", "d1/x", "d2/", "d2/y", "f", "e/", "d1/sub/"}, p));
  const std::vector<ErrCase> cases = {
      {"dir over non-empty dir",
       [&] { return ::rename(p("t4/d1").c_str(), p("t4/d2").c_str()); },
       ENOTEMPTY},
      {"dir over file",
       [&] { return ::rename(p("t4/e").c_str(), p("t4/f").c_str()); }, ENOTDIR},
      {"file over dir",
       [&] { return ::rename(p("t4/f").c_str(), p("t4/e").c_str()); }, EISDIR},
      {"dir into its own subdir",
       [&] { return ::rename(p("t4/d1").c_str(), p("t4/d1/sub/in").c_str()); },
       EINVAL},
      {"dir onto its own child",
       [&] { return ::rename(p("t4/d1").c_str(), p("t4/d1/sub").c_str()); },
       EINVAL},
      {"into a missing dir",
       [&] { return ::rename(p("t4/f").c_str(), p("t4/nodir/f").c_str()); },
       ENOENT},
  };
  RunErrCases(cases);
  EXPECT_EQ(ReadFile(P("t4/d1/x")), "d1/x");
  EXPECT_EQ(ReadFile(P("t4/d2/y")), "d2/y");
  EXPECT_EQ(ReadFile(P("t4/f")), "f");
  EXPECT_TRUE(S_ISDIR(Lstat(P("t4/e")).st_mode));

  // Renaming onto itself, or onto another hard link of itself, is a no-op.
  ASSERT_NO_FATAL_FAILURE(MakeTree(this, "t5", {"a"}, p));
  ASSERT_SYS_OK(::link(P("t5/a").c_str(), P("t5/b").c_str()));
  EXPECT_SYS_OK(::rename(P("t5/a").c_str(), P("t5/a").c_str()));
  EXPECT_SYS_OK(::rename(P("t5/a").c_str(), P("t5/b").c_str()));
  EXPECT_TRUE(Exists(P("t5/a")));
  EXPECT_TRUE(Exists(P("t5/b")));
  EXPECT_EQ(Lstat(P("t5/b")).st_nlink, 2u);

  // Across directories, replacing a symlink.
  ASSERT_NO_FATAL_FAILURE(MakeTree(this, "t6", {"src/", "src/f", "dst/"}, p));
  ASSERT_SYS_OK(::symlink("whatever", P("t6/dst/f").c_str()));
  ASSERT_SYS_OK(::rename(P("t6/src/f").c_str(), P("t6/dst/f").c_str()));
  EXPECT_TRUE(S_ISREG(Lstat(P("t6/dst/f")).st_mode));
  EXPECT_TRUE(ListDir(P("t6/src")).empty());

  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(ReadFile(P("t1/b")), "a");
  EXPECT_EQ(ReadFile(P("t2/b")), "a");
  EXPECT_EQ(ReadFile(P("t3/d2/x")), "d1/x");
  EXPECT_FALSE(Exists(P("t3/d1")));
  EXPECT_EQ(ReadFile(P("t6/dst/f")), "src/f");
}

TEST_F(PosixTest, Renameat2NoreplaceAndExchange) {
  auto p = [this](const std::string& rel) { return P(rel); };
  ASSERT_NO_FATAL_FAILURE(
      MakeTree(this, "t", {"a", "b", "da/", "da/sub/", "db/", "db/file"}, p));
  EXPECT_ERRNO(RenameAt2(P("t/a"), P("t/b"), RENAME_NOREPLACE), EEXIST);
  EXPECT_EQ(ReadFile(P("t/a")), "a");
  EXPECT_EQ(ReadFile(P("t/b")), "b");
  EXPECT_SYS_OK(RenameAt2(P("t/a"), P("t/c"), RENAME_NOREPLACE));
  EXPECT_FALSE(Exists(P("t/a")));
  EXPECT_EQ(ReadFile(P("t/c")), "a");

  // Two files swap.
  const ino_t ino_b = Lstat(P("t/b")).st_ino;
  const ino_t ino_c = Lstat(P("t/c")).st_ino;
  ASSERT_SYS_OK(RenameAt2(P("t/b"), P("t/c"), RENAME_EXCHANGE));
  EXPECT_EQ(ReadFile(P("t/b")), "a");
  EXPECT_EQ(ReadFile(P("t/c")), "b");
  EXPECT_EQ(Lstat(P("t/b")).st_ino, ino_c);
  EXPECT_EQ(Lstat(P("t/c")).st_ino, ino_b);
  EXPECT_ERRNO(RenameAt2(P("t/b"), P("t/missing"), RENAME_EXCHANGE), ENOENT);
  EXPECT_ERRNO(
      RenameAt2(P("t/b"), P("t/c"), RENAME_EXCHANGE | RENAME_NOREPLACE),
      EINVAL);

  // A dir and a file in different parents swap; the parents' link counts
  // follow the directory.
  EXPECT_EQ(Lstat(P("t/da")).st_nlink, 3u);
  EXPECT_EQ(Lstat(P("t/db")).st_nlink, 2u);
  ASSERT_SYS_OK(RenameAt2(P("t/da/sub"), P("t/db/file"), RENAME_EXCHANGE));
  EXPECT_TRUE(S_ISREG(Lstat(P("t/da/sub")).st_mode));
  EXPECT_EQ(ReadFile(P("t/da/sub")), "db/file");
  EXPECT_TRUE(S_ISDIR(Lstat(P("t/db/file")).st_mode));
  EXPECT_EQ(Lstat(P("t/da")).st_nlink, 2u);
  EXPECT_EQ(Lstat(P("t/db")).st_nlink, 3u);
  EXPECT_EQ(Lstat(P("t/db/file/..")).st_ino, Lstat(P("t/db")).st_ino);

  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(ReadFile(P("t/b")), "a");
  EXPECT_EQ(ReadFile(P("t/c")), "b");
  EXPECT_EQ(Lstat(P("t/da")).st_nlink, 2u);
  EXPECT_EQ(Lstat(P("t/db")).st_nlink, 3u);
}

TEST_F(PosixTest, ChmodChown) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "x", 0644));
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  for (mode_t m : {0600u, 0751u, 04755u, 02755u, 01777u, 0u}) {
    ASSERT_SYS_OK(::chmod(P("f").c_str(), m));
    EXPECT_EQ(Lstat(P("f")).st_mode & 07777, m);
    EXPECT_TRUE(S_ISREG(Lstat(P("f")).st_mode));
  }
  ASSERT_SYS_OK(::chmod(P("d").c_str(), 01700));
  EXPECT_EQ(Lstat(P("d")).st_mode, S_IFDIR | 01700u);
  ASSERT_SYS_OK(::chown(P("f").c_str(), 1000, 2000));
  EXPECT_EQ(Lstat(P("f")).st_uid, 1000u);
  EXPECT_EQ(Lstat(P("f")).st_gid, 2000u);
  ASSERT_SYS_OK(::chown(P("f").c_str(), static_cast<uid_t>(-1), 3000));
  EXPECT_EQ(Lstat(P("f")).st_uid, 1000u);
  EXPECT_EQ(Lstat(P("f")).st_gid, 3000u);
  ASSERT_SYS_OK(::symlink("f", P("l").c_str()));
  ASSERT_SYS_OK(::lchown(P("l").c_str(), 4000, 4001));
  EXPECT_EQ(Lstat(P("l")).st_uid, 4000u);
  EXPECT_EQ(Lstat(P("f")).st_uid, 1000u);
  {
    UniqueFd fd(::open(P("d").c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(fd.ok());
    ASSERT_SYS_OK(::fchmod(fd.get(), 0711));
    ASSERT_SYS_OK(::fchown(fd.get(), 5, 6));
  }
  EXPECT_ERRNO(::chmod(P("missing").c_str(), 0644), ENOENT);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(Lstat(P("f")).st_uid, 1000u);
  EXPECT_EQ(Lstat(P("f")).st_gid, 3000u);
  EXPECT_EQ(Lstat(P("d")).st_mode, S_IFDIR | 0711u);
  EXPECT_EQ(Lstat(P("d")).st_uid, 5u);
  EXPECT_EQ(Lstat(P("d")).st_gid, 6u);
  EXPECT_EQ(Lstat(P("l")).st_gid, 4001u);
}

TEST_F(PosixTest, TruncateGrowAndShrink) {
  const std::string data = RandomBytes(200 * 1024, 3);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), data));
  // Grow: the new range reads zeros.
  ASSERT_SYS_OK(::truncate(P("f").c_str(), 300 * 1024));
  std::string want = data + std::string(100 * 1024, '\0');
  EXPECT_EQ(Lstat(P("f")).st_size, 300 * 1024);
  EXPECT_TRUE(SameBytes(ReadFile(P("f")), want));
  // Shrink mid-block, then grow: nothing of the old tail comes back.
  for (off_t cut : {70001, 65536, 1, 0}) {
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("g"), data));
    UniqueFd fd(::open(P("g").c_str(), O_RDWR));
    ASSERT_TRUE(fd.ok());
    ASSERT_SYS_OK(::ftruncate(fd.get(), cut));
    struct stat st {};
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_size, cut);
    ASSERT_SYS_OK(::ftruncate(fd.get(), 250 * 1024));
    std::string expect = data.substr(0, cut) +
                         std::string(250 * 1024 - cut, '\0');
    EXPECT_TRUE(SameBytes(PreadAll(fd.get(), 300 * 1024, 0), expect))
        << "cut " << cut;
    ASSERT_EQ(fd.Close(), 0);
    EXPECT_TRUE(SameBytes(ReadFile(P("g")), expect)) << "cut " << cut;
  }
  // Truncating to the same size changes nothing.
  ASSERT_SYS_OK(::truncate(P("f").c_str(), 300 * 1024));
  EXPECT_TRUE(SameBytes(ReadFile(P("f")), want));
  EXPECT_ERRNO(::truncate(P("f").c_str(), -1), EINVAL);
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  EXPECT_ERRNO(::truncate(P("d").c_str(), 0), EISDIR);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_TRUE(SameBytes(ReadFile(P("f")), want));
  EXPECT_TRUE(SameBytes(ReadFile(P("g")), std::string(250 * 1024, '\0')));
}

TEST_F(PosixTest, UtimensatNowAndOmit) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "x"));
  struct timespec ts[2] = {{1000000000, 111111111}, {1200000000, 987654321}};
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, P("f").c_str(), ts, 0));
  struct stat st = Lstat(P("f"));
  EXPECT_TRUE(TsEq(st.st_atim, ts[0]));
  EXPECT_TRUE(TsEq(st.st_mtim, ts[1]));
  // UTIME_OMIT keeps mtime while atime changes.
  struct timespec ts2[2] = {{1300000000, 5}, {0, UTIME_OMIT}};
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, P("f").c_str(), ts2, 0));
  st = Lstat(P("f"));
  EXPECT_TRUE(TsEq(st.st_atim, ts2[0]));
  EXPECT_TRUE(TsEq(st.st_mtim, ts[1]));
  // UTIME_NOW sets mtime to the current time and keeps the omitted atime.
  struct timespec before {};
  clock_gettime(CLOCK_REALTIME, &before);
  struct timespec ts3[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, P("f").c_str(), ts3, 0));
  st = Lstat(P("f"));
  EXPECT_TRUE(TsEq(st.st_atim, ts2[0]));
  EXPECT_GE(st.st_mtim.tv_sec, before.tv_sec - 1);
  EXPECT_LE(st.st_mtim.tv_sec, before.tv_sec + 5);
  // A NULL times array sets both to now.
  ASSERT_SYS_OK(::utimensat(AT_FDCWD, P("f").c_str(), nullptr, 0));
  st = Lstat(P("f"));
  EXPECT_GE(st.st_atim.tv_sec, before.tv_sec - 1);
  // Symlink times with AT_SYMLINK_NOFOLLOW.
  ASSERT_SYS_OK(::symlink("f", P("l").c_str()));
  ASSERT_SYS_OK(
      ::utimensat(AT_FDCWD, P("l").c_str(), ts, AT_SYMLINK_NOFOLLOW));
  EXPECT_TRUE(TsEq(Lstat(P("l")).st_mtim, ts[1]));
  EXPECT_FALSE(TsEq(Lstat(P("f")).st_mtim, ts[1]));
  EXPECT_ERRNO(::utimensat(AT_FDCWD, P("missing").c_str(), ts, 0), ENOENT);
}

// Times stamped by the daemon (a create) and by the kernel (a write under
// the writeback cache) come from one clock: a file modified after another
// was created has the later mtime, as make assumes. With the daemon on the
// precise clock and the kernel on its coarse one, 100 of 100 tries inverted.
TEST_F(PosixTest, TimesFollowTheOrderOfChanges) {
  int inversions = 0;
  for (int i = 0; i < 100; i++) {
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("a"), "a"));
    ASSERT_NO_FATAL_FAILURE(WriteFile(P("b"), ""));  // created after a's write
    {
      UniqueFd fd(::open(P("a").c_str(), O_WRONLY | O_APPEND));
      ASSERT_TRUE(fd.ok());
      ASSERT_EQ(::write(fd.get(), "z", 1), 1);  // and a modified after b's create
    }
    if (TsLess(Lstat(P("a")).st_mtim, Lstat(P("b")).st_mtim)) inversions++;
    ASSERT_SYS_OK(::unlink(P("a").c_str()));
    ASSERT_SYS_OK(::unlink(P("b").c_str()));
  }
  EXPECT_EQ(inversions, 0) << "of 100: a file modified later showed the earlier mtime";
}

TEST_F(PosixTest, TimestampsFollowChanges) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "x"));
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  struct stat st0 = Lstat(P("f"));
  Pause();
  {
    UniqueFd fd(::open(P("f").c_str(), O_WRONLY));
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::pwrite(fd.get(), "y", 1, 5), 1);
  }
  struct stat st1 = Lstat(P("f"));
  EXPECT_TRUE(TsLess(st0.st_mtim, st1.st_mtim)) << "write must update mtime";
  EXPECT_TRUE(TsLess(st0.st_ctim, st1.st_ctim)) << "write must update ctime";
  Pause();
  ASSERT_SYS_OK(::chmod(P("f").c_str(), 0600));
  struct stat st2 = Lstat(P("f"));
  EXPECT_TRUE(TsLess(st1.st_ctim, st2.st_ctim)) << "chmod must update ctime";
  EXPECT_TRUE(TsEq(st1.st_mtim, st2.st_mtim)) << "chmod must keep mtime";
  Pause();
  ASSERT_SYS_OK(::truncate(P("f").c_str(), 1));
  struct stat st3 = Lstat(P("f"));
  EXPECT_TRUE(TsLess(st2.st_mtim, st3.st_mtim)) << "truncate must update mtime";

  // Each namespace change updates the parent's mtime and ctime.
  const std::vector<std::pair<const char*, std::function<long()>>> ops = {
      {"create",
       [&] { return ::open(P("d/new").c_str(), O_CREAT | O_WRONLY, 0644); }},
      {"mkdir", [&] { return ::mkdir(P("d/sub").c_str(), 0755); }},
      {"symlink", [&] { return ::symlink("x", P("d/sl").c_str()); }},
      {"link", [&] { return ::link(P("f").c_str(), P("d/hl").c_str()); }},
      {"rename within",
       [&] { return ::rename(P("d/new").c_str(), P("d/new2").c_str()); }},
      {"unlink", [&] { return ::unlink(P("d/new2").c_str()); }},
      {"rmdir", [&] { return ::rmdir(P("d/sub").c_str()); }},
  };
  for (const auto& [what, op] : ops) {
    struct stat before = Lstat(P("d"));
    Pause();
    long r = op();
    ASSERT_GE(r, 0) << what << ": " << strerror(errno);
    if (std::string(what) == "create") ::close(static_cast<int>(r));
    struct stat after = Lstat(P("d"));
    EXPECT_TRUE(TsLess(before.st_mtim, after.st_mtim)) << what;
    EXPECT_TRUE(TsLess(before.st_ctim, after.st_ctim)) << what;
  }
  // Reading a directory or a file leaves mtime alone.
  struct stat d0 = Lstat(P("d"));
  Pause();
  ListDir(P("d"));
  ReadFile(P("f"));
  EXPECT_TRUE(TsEq(d0.st_mtim, Lstat(P("d")).st_mtim));
  EXPECT_TRUE(TsEq(st3.st_mtim, Lstat(P("f")).st_mtim));
}

TEST_F(PosixTest, NameLengthLimit) {
  const std::string ok255(255, 'n');
  const std::string ok255b(254, 'm');
  const std::string bad256(256, 'n');
  ASSERT_NO_FATAL_FAILURE(WriteFile(P(ok255), "long name"));
  EXPECT_EQ(ReadFile(P(ok255)), "long name");
  EXPECT_EQ(ListDir(mnt()).count(ok255), 1u);
  ASSERT_SYS_OK(::mkdir(P(ok255b + "d").c_str(), 0755));
  ASSERT_SYS_OK(::rename(P(ok255).c_str(), P(ok255b + "d/" + ok255).c_str()));
  EXPECT_EQ(ReadFile(P(ok255b + "d/" + ok255)), "long name");
  ASSERT_SYS_OK(::symlink(ok255.c_str(), P(ok255b + "s").c_str()));

  const std::vector<ErrCase> cases = {
      {"create 256",
       [&] { return ::open(P(bad256).c_str(), O_CREAT | O_WRONLY, 0644); },
       ENAMETOOLONG},
      {"mkdir 256", [&] { return ::mkdir(P(bad256).c_str(), 0755); },
       ENAMETOOLONG},
      {"symlink 256", [&] { return ::symlink("x", P(bad256).c_str()); },
       ENAMETOOLONG},
      {"mknod 256",
       [&] { return ::mknod(P(bad256).c_str(), S_IFIFO | 0644, 0); },
       ENAMETOOLONG},
      {"link 256",
       [&] { return ::link(P(ok255b + "s").c_str(), P(bad256).c_str()); },
       ENAMETOOLONG},
      {"rename to 256",
       [&] { return ::rename(P(ok255b + "s").c_str(), P(bad256).c_str()); },
       ENAMETOOLONG},
  };
  RunErrCases(cases);
  struct stat st {};
  errno = 0;
  EXPECT_EQ(::stat(P(bad256).c_str(), &st), -1);
  EXPECT_TRUE(errno == ENAMETOOLONG || errno == ENOENT) << ErrName(errno);
  EXPECT_EQ(ListDir(mnt()).size(), 2u);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(ReadFile(P(ok255b + "d/" + ok255)), "long name");
}

std::set<std::string> ListXattrNames(const std::string& path) {
  std::set<std::string> names;
  ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  EXPECT_GE(n, 0) << strerror(errno);
  if (n <= 0) return names;
  std::string buf(static_cast<size_t>(n), '\0');
  ssize_t m = ::llistxattr(path.c_str(), buf.data(), buf.size());
  EXPECT_EQ(m, n);
  if (m <= 0) return names;
  buf.resize(static_cast<size_t>(m));
  EXPECT_EQ(buf.back(), '\0');
  size_t start = 0;
  while (start < buf.size()) {
    size_t end = buf.find('\0', start);
    if (end == std::string::npos) end = buf.size();
    names.insert(buf.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

std::string GetXattr(const std::string& path, const std::string& name) {
  char buf[70000];
  ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), buf, sizeof(buf));
  EXPECT_GE(n, 0) << name << ": " << strerror(errno);
  return n >= 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST_F(PosixTest, Xattrs) {
  const std::string f = P("f");
  ASSERT_NO_FATAL_FAILURE(WriteFile(f, "x"));
  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  EXPECT_TRUE(ListXattrNames(f).empty());
  const std::string big = RandomBytes(4000, 9);
  ASSERT_SYS_OK(::setxattr(f.c_str(), "user.a", "v1", 2, 0));
  ASSERT_SYS_OK(::setxattr(f.c_str(), "user.big", big.data(), big.size(), 0));
  ASSERT_SYS_OK(::setxattr(f.c_str(), "user.empty", "", 0, 0));
  ASSERT_SYS_OK(::setxattr(f.c_str(), "trusted.t", "root only", 9, 0));
  ASSERT_SYS_OK(::setxattr(P("d").c_str(), "user.dir", "dv", 2, 0));
  // Namespaces ext4 does not store are refused as it refuses them.
  EXPECT_ERRNO(::setxattr(f.c_str(), "foo.bar", "v", 1, 0), EOPNOTSUPP);
  EXPECT_ERRNO(::setxattr(f.c_str(), "noprefix", "v", 1, 0), EOPNOTSUPP);
  EXPECT_ERRNO(::setxattr(f.c_str(), "user.", "v", 1, 0), EINVAL);
  EXPECT_EQ(GetXattr(f, "user.a"), "v1");
  EXPECT_EQ(GetXattr(f, "user.big"), big);
  EXPECT_EQ(GetXattr(f, "user.empty"), "");
  EXPECT_EQ(GetXattr(f, "trusted.t"), "root only");
  EXPECT_EQ(GetXattr(P("d"), "user.dir"), "dv");
  EXPECT_EQ(ListXattrNames(f), (std::set<std::string>{"user.a", "user.big",
                                                      "user.empty",
                                                      "trusted.t"}));
  // Size queries and too-small buffers.
  EXPECT_EQ(::getxattr(f.c_str(), "user.big", nullptr, 0),
            static_cast<ssize_t>(big.size()));
  char small[10];
  EXPECT_ERRNO(::getxattr(f.c_str(), "user.big", small, sizeof(small)), ERANGE);
  ssize_t list_size = ::listxattr(f.c_str(), nullptr, 0);
  EXPECT_EQ(list_size,
            static_cast<ssize_t>(sizeof("user.a") + sizeof("user.big") +
                                 sizeof("user.empty") + sizeof("trusted.t")));
  EXPECT_ERRNO(::listxattr(f.c_str(), small, sizeof(small)), ERANGE);

  const std::vector<ErrCase> cases = {
      {"XATTR_CREATE on existing",
       [&] { return ::setxattr(f.c_str(), "user.a", "z", 1, XATTR_CREATE); },
       EEXIST},
      {"XATTR_REPLACE on missing",
       [&] {
         return ::setxattr(f.c_str(), "user.nope", "z", 1, XATTR_REPLACE);
       },
       ENODATA},
      {"get missing",
       [&] { return ::getxattr(f.c_str(), "user.nope", small, sizeof(small)); },
       ENODATA},
      {"remove missing",
       [&] { return ::removexattr(f.c_str(), "user.nope"); }, ENODATA},
      {"XATTR_REPLACE on existing",
       [&] { return ::setxattr(f.c_str(), "user.a", "v2", 2, XATTR_REPLACE); },
       0},
      {"XATTR_CREATE on new",
       [&] { return ::setxattr(f.c_str(), "user.c", "v3", 2, XATTR_CREATE); },
       0},
  };
  RunErrCases(cases);
  EXPECT_EQ(GetXattr(f, "user.a"), "v2");
  // Overwrite with a shorter value.
  ASSERT_SYS_OK(::setxattr(f.c_str(), "user.big", "s", 1, 0));
  EXPECT_EQ(GetXattr(f, "user.big"), "s");
  ASSERT_SYS_OK(::removexattr(f.c_str(), "user.empty"));
  EXPECT_ERRNO(::getxattr(f.c_str(), "user.empty", small, sizeof(small)),
               ENODATA);
  EXPECT_EQ(ListXattrNames(f),
            (std::set<std::string>{"user.a", "user.big", "user.c",
                                   "trusted.t"}));
  // Xattrs go with the inode: visible through a hard link, gone with it.
  ASSERT_SYS_OK(::link(f.c_str(), P("hl").c_str()));
  EXPECT_EQ(GetXattr(P("hl"), "user.c"), "v3");
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(GetXattr(f, "user.a"), "v2");
  EXPECT_EQ(GetXattr(f, "trusted.t"), "root only");
  EXPECT_EQ(GetXattr(P("d"), "user.dir"), "dv");
  EXPECT_EQ(ListXattrNames(f),
            (std::set<std::string>{"user.a", "user.big", "user.c",
                                   "trusted.t"}));
}

TEST_F(PosixTest, AccessAsRoot) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), "x", 0644));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("x"), "x", 0700));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("none"), "x", 0));
  EXPECT_SYS_OK(::access(P("f").c_str(), F_OK));
  EXPECT_SYS_OK(::access(P("f").c_str(), R_OK | W_OK));
  EXPECT_SYS_OK(::access(P("none").c_str(), R_OK | W_OK));
  EXPECT_SYS_OK(::access(P("x").c_str(), X_OK));
  // Root may execute only what has an execute bit.
  EXPECT_ERRNO(::access(P("f").c_str(), X_OK), EACCES);
  EXPECT_ERRNO(::access(P("missing").c_str(), F_OK), ENOENT);
  EXPECT_SYS_OK(::access(mnt().c_str(), R_OK | W_OK | X_OK));
}

TEST_F(PosixTest, StatfsIsSane) {
  struct statvfs sv {};
  ASSERT_SYS_OK(::statvfs(mnt().c_str(), &sv));
  EXPECT_GT(sv.f_bsize, 0u);
  EXPECT_GT(sv.f_frsize, 0u);
  EXPECT_GT(sv.f_blocks, 0u);
  EXPECT_GE(sv.f_blocks, sv.f_bfree);
  EXPECT_GE(sv.f_bfree, sv.f_bavail);
  EXPECT_GE(sv.f_namemax, 255u);
  // statfs works through any path inside the mount too.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), RandomBytes(4 << 20, 4)));
  struct statvfs sv2 {};
  ASSERT_SYS_OK(::statvfs(P("f").c_str(), &sv2));
  EXPECT_GE(sv2.f_blocks, sv2.f_bfree);
  EXPECT_EQ(sv2.f_bsize, sv.f_bsize);
}

TEST_F(PosixTest, UnlinkWhileOpen) {
  const std::string data = RandomBytes(150000, 5);
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), data));
  UniqueFd fd(::open(P("f").c_str(), O_RDWR));
  ASSERT_TRUE(fd.ok());
  ASSERT_SYS_OK(::unlink(P("f").c_str()));
  EXPECT_FALSE(Exists(P("f")));
  EXPECT_EQ(ListDir(mnt()).count("f"), 0u);
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), data.size(), 0), data));
  const std::string more = RandomBytes(100000, 6);
  ASSERT_NO_FATAL_FAILURE(
      PwriteAll(fd.get(), more.data(), more.size(), 1 << 20));
  EXPECT_SYS_OK(::fsync(fd.get()));
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), more.size(), 1 << 20), more));
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), data.size(), 0), data));
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, (1 << 20) + 100000);
  // A new file of the same name is a different, empty file.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("f"), ""));
  EXPECT_NE(Lstat(P("f")).st_ino, st.st_ino);
  EXPECT_EQ(ReadFile(P("f")), "");
  EXPECT_TRUE(SameBytes(PreadAll(fd.get(), data.size(), 0), data));
  EXPECT_EQ(fd.Close(), 0);
  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(ListDir(mnt()).size(), 1u);
  EXPECT_EQ(ReadFile(P("f")), "");
}

// Permission checks as uid/gid 65534 need allow_other so that other users may
// use the mount at all.
class PermissionTest : public MountFixture {
 protected:
  PermissionTest() { mount_options_ = {"allow_other"}; }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MountFixture::SetUp());
    ASSERT_SYS_OK(::chmod(mnt().c_str(), 0755));
  }
};

// Extended attributes as ext4 handles privilege: trusted.* names are listed
// to root only; the sepfs.gc control name on the root is root only even when
// the root is writable; POSIX ACLs, which sepfs cannot enforce, are refused
// rather than stored and ignored.
TEST_F(PermissionTest, XattrPrivileges) {
  const std::string f = P("f");
  ASSERT_NO_FATAL_FAILURE(WriteFile(f, "x", 0666));
  ASSERT_SYS_OK(::setxattr(f.c_str(), "user.u", "1", 1, 0));
  ASSERT_SYS_OK(::setxattr(f.c_str(), "trusted.t", "2", 1, 0));
  EXPECT_EQ(ListXattrNames(f), (std::set<std::string>{"user.u", "trusted.t"}));
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] {
                    char buf[256];
                    const ssize_t n = ::listxattr(f.c_str(), buf, sizeof(buf));
                    if (n < 0) return errno;
                    return std::string(buf, n) == std::string("user.u\0", 7) ? 0 : 200;
                  }),
            0)
      << "a user must see user.u only (200: other names listed)";

  ASSERT_SYS_OK(::chmod(mnt().c_str(), 0777));
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] { return Errno(::setxattr(mnt().c_str(), "sepfs.gc", "1", 1, 0)); }),
            EPERM);
  EXPECT_SYS_OK(::setxattr(mnt().c_str(), "sepfs.gc", "1", 1, 0));

  // The kernel checks no permission on system.* names: a user could set
  // and remove them on anyone's file. None is stored, for anyone.
  for (uid_t uid : {kNobody, uid_t{0}}) {
    EXPECT_EQ(RunAs(uid, uid == 0 ? 0 : kNogroup,
                    [&] {
                      if (::setxattr(f.c_str(), "system.x", "1", 1, 0) == 0) return 200;
                      if (errno != EOPNOTSUPP) return errno;
                      char buf[8];
                      if (::getxattr(f.c_str(), "system.x", buf, sizeof(buf)) >= 0) return 201;
                      if (errno != EOPNOTSUPP) return errno;
                      return Errno(::removexattr(f.c_str(), "system.x"));
                    }),
              EOPNOTSUPP)
        << "uid " << uid << " (200: set, 201: read back)";
  }

  // user::rw- user:65534:r-- group::r-- mask::r-- other::r-- (version 2).
  std::string acl;
  auto put = [&acl](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++) acl.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (auto [tag, perm, id] : std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>{
           {0x01, 6, 0xffffffff}, {0x02, 4, kNobody}, {0x04, 4, 0xffffffff},
           {0x10, 4, 0xffffffff}, {0x20, 4, 0xffffffff}}) {
    put(tag, 2);
    put(perm, 2);
    put(id, 4);
  }
  const mode_t mode = Lstat(f).st_mode;
  EXPECT_ERRNO(::setxattr(f.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0),
               EOPNOTSUPP);
  EXPECT_ERRNO(::setxattr(P("").c_str(), "system.posix_acl_default", acl.data(), acl.size(), 0),
               EOPNOTSUPP);
  EXPECT_EQ(Lstat(f).st_mode, mode);
  EXPECT_EQ(ListXattrNames(f), (std::set<std::string>{"user.u", "trusted.t"}));
}

TEST_F(PermissionTest, NonRootUserIsChecked) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("secret"), "s", 0600));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("public"), "p", 0644));
  ASSERT_SYS_OK(::mkdir(P("rootdir").c_str(), 0755));
  ASSERT_SYS_OK(::mkdir(P("open").c_str(), 0777));
  ASSERT_SYS_OK(::chmod(P("open").c_str(), 0777));  // past the umask
  auto p = [this](const char* rel) { return P(rel); };
  struct Case {
    const char* what;
    std::function<int()> op;
    int want;
  };
  const std::vector<Case> cases = {
      {"read 0600 root file",
       [&] { return Errno(::open(p("secret").c_str(), O_RDONLY)); }, EACCES},
      {"read 0644 root file",
       [&] { return Errno(::open(p("public").c_str(), O_RDONLY)); }, 0},
      {"write 0644 root file",
       [&] { return Errno(::open(p("public").c_str(), O_WRONLY)); }, EACCES},
      {"create in 0755 root dir",
       [&] {
         return Errno(
             ::open(p("rootdir/new").c_str(), O_CREAT | O_WRONLY, 0644));
       },
       EACCES},
      {"mkdir in 0755 root dir",
       [&] { return Errno(::mkdir(p("rootdir/sub").c_str(), 0755)); }, EACCES},
      {"unlink in 0755 root dir",
       [&] { return Errno(::unlink(p("public").c_str())); }, EACCES},
      {"chmod root file",
       [&] { return Errno(::chmod(p("public").c_str(), 0777)); },
       EPERM},
      {"chown root file",
       [&] { return Errno(::chown(p("public").c_str(), kNobody, kNogroup)); },
       EPERM},
      {"access R_OK 0600",
       [&] { return Errno(::access(p("secret").c_str(), R_OK)); },
       EACCES},
      {"access R_OK 0644",
       [&] { return Errno(::access(p("public").c_str(), R_OK)); },
       0},
      {"access W_OK 0644",
       [&] { return Errno(::access(p("public").c_str(), W_OK)); },
       EACCES},
      {"set trusted xattr",
       [&] {
         return Errno(::setxattr(p("open").c_str(), "trusted.x", "1", 1, 0));
       },
       EPERM},
      {"create in 0777 dir",
       [&] {
         int fd = ::open(p("open/mine").c_str(), O_CREAT | O_WRONLY, 0600);
         if (fd < 0) return errno;
         int r = ::write(fd, "mine", 4) == 4 ? 0 : errno;
         ::close(fd);
         return r;
       },
       0},
      {"chmod own file",
       [&] { return Errno(::chmod(p("open/mine").c_str(), 0640)); },
       0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrName(RunAs(kNobody, kNogroup, c.op)), ErrName(c.want))
        << c.what;
  }
  struct stat st = Lstat(P("open/mine"));
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, kNogroup);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(ReadFile(P("open/mine")), "mine");
  EXPECT_EQ(ReadFile(P("public")), "p");
  EXPECT_FALSE(Exists(P("rootdir/new")));
}

TEST_F(PermissionTest, StickyDirectory) {
  ASSERT_SYS_OK(::mkdir(P("tmp").c_str(), 0777));
  ASSERT_SYS_OK(::chmod(P("tmp").c_str(), 01777));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("tmp/rootfile"), "r", 0666));
  ASSERT_SYS_OK(::chmod(P("tmp/rootfile").c_str(), 0666));  // past the umask
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] { return Errno(::unlink(P("tmp/rootfile").c_str())); }),
            EPERM);
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] {
                    return Errno(::rename(P("tmp/rootfile").c_str(),
                                          P("tmp/stolen").c_str()));
                  }),
            EPERM);
  EXPECT_EQ(ReadFile(P("tmp/rootfile")), "r");
  // The file is writable by others (0666) even though it cannot be removed.
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] {
                    return Errno(::open(P("tmp/rootfile").c_str(), O_WRONLY));
                  }),
            0);
  // A user can remove their own files in the sticky dir.
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] {
                    int fd = ::open(P("tmp/own").c_str(),
                                    O_CREAT | O_WRONLY | O_EXCL, 0644);
                    if (fd < 0) return errno;
                    ::close(fd);
                    return Errno(::unlink(P("tmp/own").c_str()));
                  }),
            0);
  EXPECT_FALSE(Exists(P("tmp/own")));
  // Root may remove anything.
  EXPECT_SYS_OK(::unlink(P("tmp/rootfile").c_str()));
}

TEST_F(PermissionTest, SetgidDirectoryInheritsGroup) {
  ASSERT_SYS_OK(::mkdir(P("sg").c_str(), 0775));
  ASSERT_SYS_OK(::chown(P("sg").c_str(), 0, 1234));
  ASSERT_SYS_OK(::chmod(P("sg").c_str(), 02777));
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("sg/f"), "x", 0644));
  struct stat st = Lstat(P("sg/f"));
  EXPECT_EQ(st.st_gid, 1234u);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_SYS_OK(::mkdir(P("sg/sub").c_str(), 0755));
  st = Lstat(P("sg/sub"));
  EXPECT_EQ(st.st_gid, 1234u);
  EXPECT_TRUE(st.st_mode & S_ISGID) << std::oct << st.st_mode;
  ASSERT_SYS_OK(::mknod(P("sg/fifo").c_str(), S_IFIFO | 0644, 0));
  EXPECT_EQ(Lstat(P("sg/fifo")).st_gid, 1234u);
  // Also for another user creating there.
  EXPECT_EQ(RunAs(kNobody, kNogroup,
                  [&] {
                    int fd =
                        ::open(P("sg/nf").c_str(), O_CREAT | O_WRONLY, 0644);
                    if (fd < 0) return errno;
                    ::close(fd);
                    return Errno(::mkdir(P("sg/nd").c_str(), 0755));
                  }),
            0);
  EXPECT_EQ(Lstat(P("sg/nf")).st_uid, kNobody);
  EXPECT_EQ(Lstat(P("sg/nf")).st_gid, 1234u);
  EXPECT_EQ(Lstat(P("sg/nd")).st_gid, 1234u);
  EXPECT_TRUE(Lstat(P("sg/nd")).st_mode & S_ISGID);
  // Outside the setgid dir, the creator's group applies.
  ASSERT_NO_FATAL_FAILURE(WriteFile(P("plain"), "x"));
  EXPECT_EQ(Lstat(P("plain")).st_gid, 0u);
}

// Writes, truncates and chowns clear set-id bits as on ext4: a user without
// CAP_FSETID loses setuid (and setgid with group execute) when writing or
// truncating; root keeps them; chown clears them for everyone. By default
// the kernel hands this duty to sepfs (FUSE_HANDLE_KILLPRIV_V2, which spares
// a GETXATTR per write); -o nokillpriv leaves it to the kernel. Both must
// behave the same, and the change must be visible at once and persist.
class SetidTest : public MountFixture,
                  public ::testing::WithParamInterface<const char*> {
 protected:
  SetidTest() {
    mount_options_ = {"allow_other"};
    if (std::string(GetParam()) != "default") mount_options_.push_back(GetParam());
  }
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MountFixture::SetUp());
    ASSERT_SYS_OK(::chmod(mnt().c_str(), 0755));
  }
  // A 0777 file with the given set-id bits, written by root.
  void Make(const std::string& rel, mode_t mode) {
    ASSERT_NO_FATAL_FAILURE(WriteFile(P(rel), "data", 0644));
    ASSERT_SYS_OK(::chmod(P(rel).c_str(), mode));
    ASSERT_EQ(Lstat(P(rel)).st_mode & 07777, mode);
  }
  mode_t ModeOf(const std::string& rel) { return Lstat(P(rel)).st_mode & 07777; }
};

TEST_P(SetidTest, WriteTruncateChownKillSetidBits) {
  auto as_user = [](const std::function<int()>& fn) { return RunAs(kNobody, kNogroup, fn); };
  auto append = [this](const std::string& rel) {
    int fd = ::open(P(rel).c_str(), O_WRONLY | O_APPEND);
    if (fd < 0) return errno;
    int r = ::write(fd, "more", 4) == 4 ? 0 : errno;
    ::close(fd);
    return r;
  };
  ASSERT_NO_FATAL_FAILURE(Make("w", 06777));
  EXPECT_EQ(as_user([&] { return append("w"); }), 0);
  EXPECT_EQ(ModeOf("w"), 0777u) << "write by a user";
  EXPECT_EQ(ReadFile(P("w")), "datamore");

  // Setgid without group execute: a writer outside the file's group clears
  // it (Linux since 6.2, setattr_should_drop_sgid; a helper's probe found
  // sepfs keeping it); one in the group keeps it. Without KILLPRIV_V2 the
  // kernel's FUSE code decides, and it keeps the bit either way.
  const bool killpriv = std::string(GetParam()) != "nokillpriv";
  ASSERT_NO_FATAL_FAILURE(Make("sgid-nox", 02767));
  EXPECT_EQ(as_user([&] { return append("sgid-nox"); }), 0);
  EXPECT_EQ(ModeOf("sgid-nox"), killpriv ? 0767u : 02767u) << "write by a non-member";
  ASSERT_NO_FATAL_FAILURE(Make("sgid-nox-member", 02767));
  ASSERT_SYS_OK(::chown(P("sgid-nox-member").c_str(), 0, kNogroup));
  ASSERT_SYS_OK(::chmod(P("sgid-nox-member").c_str(), 02767));
  EXPECT_EQ(as_user([&] { return append("sgid-nox-member"); }), 0);
  EXPECT_EQ(ModeOf("sgid-nox-member"), 02767u) << "write by a member of the file's group";

  ASSERT_NO_FATAL_FAILURE(Make("t", 06777));
  EXPECT_EQ(as_user([&] { return Errno(::truncate(P("t").c_str(), 1)); }), 0);
  EXPECT_EQ(ModeOf("t"), 0777u) << "truncate by a user";

  ASSERT_NO_FATAL_FAILURE(Make("o", 06777));
  EXPECT_EQ(as_user([&] {
              int fd = ::open(P("o").c_str(), O_WRONLY | O_TRUNC);
              if (fd < 0) return errno;
              ::close(fd);
              return 0;
            }),
            0);
  EXPECT_EQ(ModeOf("o"), 0777u) << "open(O_TRUNC) by a user";
  EXPECT_EQ(Lstat(P("o")).st_size, 0);

  ASSERT_NO_FATAL_FAILURE(Make("r", 06777));
  EXPECT_EQ(append("r"), 0);
  ASSERT_SYS_OK(::truncate(P("r").c_str(), 2));
  EXPECT_EQ(ModeOf("r"), 06777u) << "root keeps set-id bits on write and truncate";

  ASSERT_NO_FATAL_FAILURE(Make("c", 06775));
  ASSERT_SYS_OK(::chown(P("c").c_str(), 1234, 5678));
  EXPECT_EQ(ModeOf("c"), 0775u) << "chown clears set-id bits";
  ASSERT_NO_FATAL_FAILURE(Make("c-same", 06775));
  ASSERT_SYS_OK(::chown(P("c-same").c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(-1)));
  EXPECT_EQ(ModeOf("c-same"), 0775u) << "chown(-1, -1) clears them too, as on ext4";
  ASSERT_NO_FATAL_FAILURE(Make("linked", 06775));
  ASSERT_SYS_OK(::link(P("linked").c_str(), P("link2").c_str()));
  ASSERT_SYS_OK(::unlink(P("link2").c_str()));
  ASSERT_SYS_OK(::rename(P("linked").c_str(), P("linked2").c_str()));
  EXPECT_EQ(ModeOf("linked2"), 06775u) << "link, unlink and rename keep them";

  ASSERT_SYS_OK(::mkdir(P("d").c_str(), 0755));
  ASSERT_SYS_OK(::chmod(P("d").c_str(), 02775));
  ASSERT_SYS_OK(::chown(P("d").c_str(), 1234, 5678));
  EXPECT_EQ(ModeOf("d"), 02775u) << "a directory keeps setgid on chown";

  ASSERT_NO_FATAL_FAILURE(Remount());
  EXPECT_EQ(ModeOf("w"), 0777u);
  EXPECT_EQ(ModeOf("sgid-nox"), killpriv ? 0767u : 02767u);
  EXPECT_EQ(ModeOf("sgid-nox-member"), 02767u);
  EXPECT_EQ(ModeOf("t"), 0777u);
  EXPECT_EQ(ModeOf("o"), 0777u);
  EXPECT_EQ(ModeOf("r"), 06777u);
  EXPECT_EQ(ModeOf("c"), 0775u);
  EXPECT_EQ(ModeOf("c-same"), 0775u);
  EXPECT_EQ(ModeOf("linked2"), 06775u);
  EXPECT_EQ(ModeOf("d"), 02775u);
  EXPECT_EQ(ReadFile(P("w")), "datamore");
}

// fallocate clears them as a write does, in every mode ext4 and sepfs share
// (a helper's probe: a user could punch holes in a setuid file and keep the
// bit; FALLOCATE carries no flag saying the caller lacks CAP_FSETID).
TEST_P(SetidTest, FallocateKillsSetidBits) {
  const std::vector<std::pair<int, std::string>> modes = {
      {0, "extend"}, {FALLOC_FL_KEEP_SIZE, "keep-size"},
      {FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, "punch"}, {FALLOC_FL_ZERO_RANGE, "zero"}};
  auto fallocate_as = [this](uid_t uid, const std::string& rel, int mode) {
    return RunAs(uid, uid == 0 ? 0 : kNogroup, [&] {
      int fd = ::open(P(rel).c_str(), O_WRONLY);
      if (fd < 0) return errno;
      int r = ::fallocate(fd, mode, 0, 8192) == 0 ? 0 : errno;
      ::close(fd);
      return r;
    });
  };
  for (const auto& [mode, name] : modes) {
    ASSERT_NO_FATAL_FAILURE(Make("user-" + name, 06777));
    EXPECT_EQ(fallocate_as(kNobody, "user-" + name, mode), 0) << name;
    EXPECT_EQ(ModeOf("user-" + name), 0777u) << name << " by a user";
    ASSERT_NO_FATAL_FAILURE(Make("root-" + name, 06777));
    EXPECT_EQ(fallocate_as(0, "root-" + name, mode), 0) << name;
    EXPECT_EQ(ModeOf("root-" + name), 06777u) << name << " by root";
  }
  ASSERT_NO_FATAL_FAILURE(Remount());
  for (const auto& [mode, name] : modes) {
    EXPECT_EQ(ModeOf("user-" + name), 0777u) << name << " after a remount";
    EXPECT_EQ(ModeOf("root-" + name), 06777u) << name << " after a remount";
  }
  EXPECT_EQ(Lstat(P("user-extend")).st_size, 8192);
  EXPECT_EQ(ReadFile(P("user-keep-size")), "data");
  EXPECT_EQ(ReadFile(P("user-punch")), std::string(4, '\0'));
}

INSTANTIATE_TEST_SUITE_P(KillprivModes, SetidTest,
                         ::testing::Values("default", "nokillpriv", "nowriteback"));

}  // namespace
}  // namespace sepfs::mounttest
