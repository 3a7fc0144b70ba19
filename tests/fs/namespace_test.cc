// Namespace operations of the fs core: create, lookup, link, unlink, rmdir,
// rename, symlinks, listing, setgid inheritance and timestamps.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

bool Later(const kv::Timespec& a, const kv::Timespec& b) {  // a > b
  return a.sec > b.sec || (a.sec == b.sec && a.nsec > b.nsec);
}

std::vector<std::string> Names(const std::vector<DirListEntry>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.name);
  return out;
}

using NamespaceTest = FsTest;

TEST_F(NamespaceTest, RootAttributes) {
  kv::InodeRecord r = Attr(kRoot);
  EXPECT_EQ(r.ino, kRoot);
  EXPECT_TRUE(S_ISDIR(r.mode));
  EXPECT_EQ(r.nlink, 2u);
}

TEST_F(NamespaceTest, MknodRegularFifoCharDev) {
  kv::InodeRecord f, p, c;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "file", S_IFREG | 0640, 0, &f));
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "fifo", S_IFIFO | 0600, 0, &p));
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "chr", S_IFCHR | 0600, makedev(4, 64), &c));
  EXPECT_TRUE(S_ISREG(f.mode));
  EXPECT_EQ(f.mode & 07777, 0640u);
  EXPECT_EQ(f.nlink, 1u);
  EXPECT_EQ(f.uid, 1000u);
  EXPECT_EQ(f.gid, 1000u);
  EXPECT_EQ(f.size, 0u);
  EXPECT_TRUE(S_ISFIFO(p.mode));
  EXPECT_TRUE(S_ISCHR(c.mode));
  EXPECT_EQ(c.rdev, makedev(4, 64));
  EXPECT_NE(f.ino, p.ino);
  EXPECT_NE(p.ino, c.ino);

  kv::InodeRecord l;
  ASSERT_OK(LookupNoRef(kRoot, "chr", &l));
  EXPECT_EQ(l.ino, c.ino);
  EXPECT_EQ(l.rdev, makedev(4, 64));
  EXPECT_TRUE(S_ISCHR(l.mode));
  ASSERT_OK(LookupNoRef(kRoot, "fifo", &l));
  EXPECT_TRUE(S_ISFIFO(l.mode));
  EXPECT_EQ(l.rdev, 0u);
  EXPECT_EQ(Attr(f.ino), f);
  // Root gained no links from non-directories.
  EXPECT_EQ(Attr(kRoot).nlink, 2u);
}

TEST_F(NamespaceTest, RdevIgnoredForNonDevices) {
  kv::InodeRecord f;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "f", S_IFREG | 0644, makedev(1, 3), &f));
  EXPECT_EQ(f.rdev, 0u);
}

TEST_F(NamespaceTest, MknodRejectsBadType) {
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "x", 0644, 0, &r), EINVAL);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "", S_IFREG | 0644, 0, &r), EINVAL);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "a/b", S_IFREG | 0644, 0, &r), EINVAL);
}

// A link count at the largest st_nlink refuses one more link (EMLINK)
// instead of wrapping to 0, which would take the inode for unlinked.
TEST_F(NamespaceTest, LinkCountsStopAtTheLargestNlink) {
  const uint64_t full = Mkdir(kRoot, "full");
  const uint64_t other = Mkdir(kRoot, "other");
  const uint64_t f = Create(kRoot, "f");
  const uint64_t sub = Mkdir(other, "sub");
  for (uint64_t ino : {full, other, f, sub}) fs_->Forget(ino, 1);
  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    for (uint64_t ino : {full, f}) {
      kv::InodeRecord r;
      ASSERT_OK(meta->GetInode(ino, &r));
      r.nlink = Filesystem::kLinkMax;
      b->PutInode(r);
    }
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Link(f, kRoot, "f2", &r), EMLINK);
  EXPECT_EQ(Attr(f).nlink, Filesystem::kLinkMax);
  EXPECT_ERRNO(fs_->Mknod(Caller{}, full, "d", S_IFDIR | 0755, 0, &r), EMLINK);
  ASSERT_OK(fs_->Mknod(Caller{}, full, "file", S_IFREG | 0644, 0, &r));  // files add none
  EXPECT_ERRNO(fs_->Rename(other, "sub", full, "sub", 0), EMLINK);
  EXPECT_ERRNO(fs_->Rename(full, "file", other, "sub", RENAME_EXCHANGE), EMLINK);
  EXPECT_EQ(Attr(full).nlink, Filesystem::kLinkMax);
  EXPECT_EQ(InoOf(other, "sub"), sub);
}

TEST_F(NamespaceTest, MkdirLinkCounts) {
  const uint64_t d = Mkdir(kRoot, "d");
  kv::InodeRecord r = Attr(d);
  EXPECT_TRUE(S_ISDIR(r.mode));
  EXPECT_EQ(r.nlink, 2u);
  EXPECT_EQ(Attr(kRoot).nlink, 3u);
  const uint64_t sub = Mkdir(d, "sub");
  EXPECT_EQ(Attr(sub).nlink, 2u);
  EXPECT_EQ(Attr(d).nlink, 3u);
  EXPECT_EQ(Attr(kRoot).nlink, 3u);
  Create(d, "file");
  EXPECT_EQ(Attr(d).nlink, 3u);
}

TEST_F(NamespaceTest, CreateExisting) {
  Create(kRoot, "a");
  Mkdir(kRoot, "d");
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "a", S_IFREG | 0644, 0, &r), EEXIST);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "a", S_IFDIR | 0755, 0, &r), EEXIST);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, "d", S_IFREG | 0644, 0, &r), EEXIST);
  EXPECT_ERRNO(fs_->Symlink(caller_, kRoot, "d", "target", &r), EEXIST);
  EXPECT_EQ(Attr(kRoot).nlink, 3u);  // the failed mkdir added nothing
}

TEST_F(NamespaceTest, NameLength) {
  const std::string ok(255, 'n'), too_long(256, 'n');
  kv::InodeRecord r;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, ok, S_IFREG | 0644, 0, &r));
  ASSERT_OK(LookupNoRef(kRoot, ok, &r));
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, too_long, S_IFREG | 0644, 0, &r), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Mknod(caller_, kRoot, too_long, S_IFDIR | 0755, 0, &r), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Symlink(caller_, kRoot, too_long, "t", &r), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Lookup(kRoot, too_long, &r), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Link(r.ino, kRoot, too_long, &r), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Unlink(kRoot, too_long), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Rmdir(kRoot, too_long), ENAMETOOLONG);
  EXPECT_ERRNO(fs_->Rename(kRoot, ok, kRoot, too_long, 0), ENAMETOOLONG);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(kRoot, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{".", "..", ok}));
}

// A directory first seen through readdirplus (never looked up) still
// reports its parent as "..".
TEST_F(NamespaceTest, DotDotOfADirectoryFirstSeenByReadDirPlus) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t sub = Mkdir(d, "sub");
  fs_->Forget(sub, 1);  // evicted: nothing in memory knows its parent now
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_OK(fs_->ReadDirPlus(list, 0, [](const DirListEntry&, const kv::InodeRecord&) {
    return true;
  }));
  std::vector<DirListEntry> sublist;
  ASSERT_OK(fs_->ListDir(sub, &sublist));
  ASSERT_GE(sublist.size(), 2u);
  EXPECT_EQ(sublist[1].name, "..");
  EXPECT_EQ(sublist[1].ino, d);
  fs_->Forget(sub, 1);
}

TEST_F(NamespaceTest, ParentNotADirectory) {
  const uint64_t f = Create(kRoot, "f");
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Mknod(caller_, f, "x", S_IFREG | 0644, 0, &r), ENOTDIR);
  EXPECT_ERRNO(fs_->Mknod(caller_, f, "x", S_IFDIR | 0755, 0, &r), ENOTDIR);
  EXPECT_ERRNO(fs_->Symlink(caller_, f, "x", "t", &r), ENOTDIR);
  const uint64_t g = Create(kRoot, "g");
  EXPECT_ERRNO(fs_->Link(g, f, "x", &r), ENOTDIR);
  EXPECT_ERRNO(fs_->Rename(kRoot, "g", f, "x", 0), ENOTDIR);
  std::vector<DirListEntry> list;
  EXPECT_ERRNO(fs_->ListDir(f, &list), ENOTDIR);
}

TEST_F(NamespaceTest, LookupAndGetAttr) {
  kv::InodeRecord created;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "f", S_IFREG | 0600, 0, &created));
  kv::InodeRecord r;
  ASSERT_OK(LookupNoRef(kRoot, "f", &r));
  EXPECT_EQ(r, created);
  EXPECT_ERRNO(fs_->Lookup(kRoot, "missing", &r), ENOENT);
  EXPECT_ERRNO(fs_->GetAttr(987654, &r), ENOENT);
  // Lookups of a file by other names fail.
  EXPECT_ERRNO(fs_->Lookup(kRoot, "F", &r), ENOENT);
}

TEST_F(NamespaceTest, SymlinkReadlink) {
  const std::string target = "../some/where/else";
  kv::InodeRecord s;
  ASSERT_OK(fs_->Symlink(caller_, kRoot, "link", target, &s));
  EXPECT_TRUE(S_ISLNK(s.mode));
  EXPECT_EQ(s.size, target.size());
  EXPECT_EQ(s.nlink, 1u);
  std::string got;
  ASSERT_OK(fs_->Readlink(s.ino, &got));
  EXPECT_EQ(got, target);
  kv::InodeRecord l;
  ASSERT_OK(LookupNoRef(kRoot, "link", &l));
  EXPECT_EQ(l.ino, s.ino);
  EXPECT_TRUE(S_ISLNK(l.mode));

  const std::string longest(Filesystem::kSymlinkMax, 'x');
  ASSERT_OK(fs_->Symlink(caller_, kRoot, "long", longest, &s));
  ASSERT_OK(fs_->Readlink(s.ino, &got));
  EXPECT_EQ(got, longest);
  EXPECT_ERRNO(fs_->Symlink(caller_, kRoot, "toolong", longest + "x", &s), ENAMETOOLONG);

  EXPECT_ERRNO(fs_->Symlink(caller_, kRoot, "empty", "", &s), ENOENT);
  const uint64_t f = Create(kRoot, "f");
  EXPECT_ERRNO(fs_->Readlink(f, &got), EINVAL);
}

TEST_F(NamespaceTest, RemovedSymlinksLeaveNoTarget) {
  // A reclaim deletes the target key of a symlink only (other inodes have
  // none): symlinks removed while known and after a remount (as orphans,
  // from the record-less path) both go whole, files beside them too.
  auto symlinks = [&] { return KeysWithPrefix(std::string(1, kv::kTagSymlink)); };
  kv::InodeRecord s, kept;
  ASSERT_OK(fs_->Symlink(caller_, kRoot, "a", "target-a", &s));
  ASSERT_OK(fs_->Symlink(caller_, kRoot, "b", "target-b", &kept));
  const uint64_t f = Create(kRoot, "f");
  EXPECT_EQ(symlinks(), 2u);
  ASSERT_OK(fs_->Unlink(kRoot, "a"));
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  fs_->Forget(s.ino, 1);
  fs_->Forget(f, 1);
  EXPECT_EQ(symlinks(), 1u);
  EXPECT_ERRNO(fs_->GetAttr(s.ino, &s), ENOENT);
  ASSERT_OK(fs_->Unlink(kRoot, "b"));  // still referenced: an orphan until the remount
  Reopen();
  EXPECT_EQ(symlinks(), 0u);
  EXPECT_EQ(KeysWithPrefix(std::string(1, kv::kTagInode)), 1u);  // the root
  ExpectFsckClean();
}

TEST_F(NamespaceTest, HardLinks) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t f = Create(kRoot, "f");
  kv::InodeRecord r;
  ASSERT_OK(fs_->Link(f, d, "f2", &r));
  fs_->Forget(f, 1);
  EXPECT_EQ(r.ino, f);
  EXPECT_EQ(r.nlink, 2u);
  EXPECT_EQ(Attr(f).nlink, 2u);
  EXPECT_EQ(InoOf(d, "f2"), f);
  EXPECT_EQ(Attr(d).nlink, 2u);  // a file link adds no directory link
  EXPECT_ERRNO(fs_->Link(f, d, "f2", &r), EEXIST);
  EXPECT_ERRNO(fs_->Link(d, kRoot, "dlink", &r), EPERM);

  ASSERT_OK(fs_->Write(f, 0, "shared"));
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  EXPECT_ERRNO(fs_->Lookup(kRoot, "f", &r), ENOENT);
  EXPECT_EQ(Attr(f).nlink, 1u);
  EXPECT_EQ(ReadAll(InoOf(d, "f2")), "shared");
}

TEST_F(NamespaceTest, UnlinkAndRmdir) {
  const uint64_t d = Mkdir(kRoot, "d");
  Create(d, "inner");
  Create(kRoot, "f");
  EXPECT_ERRNO(fs_->Unlink(kRoot, "d"), EISDIR);
  EXPECT_ERRNO(fs_->Rmdir(kRoot, "f"), ENOTDIR);
  EXPECT_ERRNO(fs_->Rmdir(kRoot, "d"), ENOTEMPTY);
  EXPECT_ERRNO(fs_->Unlink(kRoot, "missing"), ENOENT);
  EXPECT_ERRNO(fs_->Rmdir(kRoot, "missing"), ENOENT);
  EXPECT_EQ(Attr(kRoot).nlink, 3u);

  ASSERT_OK(fs_->Unlink(d, "inner"));
  ASSERT_OK(fs_->Rmdir(kRoot, "d"));
  EXPECT_EQ(Attr(kRoot).nlink, 2u);
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(kRoot, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{".", ".."}));
  // Forget the creation references: the inodes are reclaimed.
  fs_->Forget(d, 1);
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->GetAttr(d, &r), ENOENT);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, NewDirectoriesAreKnownEmpty) {
  // A directory made here is cached from the start: whether it is empty,
  // and what it holds, come from memory, and stay right through changes.
  const uint64_t d = Mkdir(kRoot, "d");
  for (int i = 0; i < 50; i++) Create(d, "f" + std::to_string(i));
  for (int i = 1; i < 50; i++) ASSERT_OK(fs_->Unlink(d, "f" + std::to_string(i)));
  const uint64_t scans = fs_->store()->meta()->stats().scans;
  EXPECT_ERRNO(fs_->Rmdir(kRoot, "d"), ENOTEMPTY);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{".", "..", "f0"}));
  ASSERT_OK(fs_->Unlink(d, "f0"));
  ASSERT_OK(fs_->Rmdir(kRoot, "d"));
  EXPECT_EQ(fs_->store()->meta()->stats().scans, scans);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, CreateInRemovedDirectory) {
  const uint64_t d = Mkdir(kRoot, "d");  // keeps its creation reference
  ASSERT_OK(fs_->Rmdir(kRoot, "d"));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Mknod(caller_, d, "x", S_IFREG | 0644, 0, &r), ENOENT);
  fs_->Forget(d, 1);
}

TEST_F(NamespaceTest, RenamePlain) {
  const uint64_t d1 = Mkdir(kRoot, "d1"), d2 = Mkdir(kRoot, "d2");
  const uint64_t f = Create(d1, "a");
  ASSERT_OK(fs_->Write(f, 0, "payload"));
  ASSERT_OK(fs_->Rename(d1, "a", d1, "b", 0));
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Lookup(d1, "a", &r), ENOENT);
  EXPECT_EQ(InoOf(d1, "b"), f);
  ASSERT_OK(fs_->Rename(d1, "b", d2, "c", 0));
  EXPECT_ERRNO(fs_->Lookup(d1, "b", &r), ENOENT);
  EXPECT_EQ(InoOf(d2, "c"), f);
  EXPECT_EQ(ReadAll(f), "payload");
  EXPECT_EQ(Attr(f).nlink, 1u);
  EXPECT_ERRNO(fs_->Rename(d1, "missing", d2, "x", 0), ENOENT);

  // A directory moving between parents moves a link of its parent.
  const uint64_t sub = Mkdir(d1, "sub");
  EXPECT_EQ(Attr(d1).nlink, 3u);
  ASSERT_OK(fs_->Rename(d1, "sub", d2, "sub", 0));
  EXPECT_EQ(Attr(d1).nlink, 2u);
  EXPECT_EQ(Attr(d2).nlink, 3u);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(sub, &list));
  ASSERT_GE(list.size(), 2u);
  EXPECT_EQ(list[1].name, "..");
  EXPECT_EQ(list[1].ino, d2);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameOverFile) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  ASSERT_OK(fs_->Write(a, 0, "AAA"));
  ASSERT_OK(fs_->Write(b, 0, "BBBBBB"));
  ASSERT_OK(fs_->Rename(kRoot, "a", kRoot, "b", 0));
  EXPECT_EQ(InoOf(kRoot, "b"), a);
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Lookup(kRoot, "a", &r), ENOENT);
  EXPECT_EQ(ReadAll(a), "AAA");
  // The replaced inode is unlinked but still referenced (creation lookup).
  ASSERT_OK(fs_->GetAttr(b, &r));
  EXPECT_EQ(r.nlink, 0u);
  fs_->Forget(b, 1);
  EXPECT_ERRNO(fs_->GetAttr(b, &r), ENOENT);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameOverHardLinkKeepsOtherLink) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  kv::InodeRecord r;
  ASSERT_OK(fs_->Link(b, kRoot, "b2", &r));
  fs_->Forget(b, 1);
  ASSERT_OK(fs_->Rename(kRoot, "a", kRoot, "b", 0));
  EXPECT_EQ(InoOf(kRoot, "b"), a);
  EXPECT_EQ(InoOf(kRoot, "b2"), b);
  EXPECT_EQ(Attr(b).nlink, 1u);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameDirectories) {
  const uint64_t src = Mkdir(kRoot, "src");
  const uint64_t empty = Mkdir(kRoot, "empty");
  const uint64_t full = Mkdir(kRoot, "full");
  Create(full, "x");
  Create(kRoot, "file");
  EXPECT_EQ(Attr(kRoot).nlink, 5u);

  EXPECT_ERRNO(fs_->Rename(kRoot, "src", kRoot, "full", 0), ENOTEMPTY);
  EXPECT_ERRNO(fs_->Rename(kRoot, "src", kRoot, "file", 0), ENOTDIR);
  EXPECT_ERRNO(fs_->Rename(kRoot, "file", kRoot, "empty", 0), EISDIR);
  EXPECT_EQ(InoOf(kRoot, "src"), src);

  ASSERT_OK(fs_->Rename(kRoot, "src", kRoot, "empty", 0));
  EXPECT_EQ(InoOf(kRoot, "empty"), src);
  EXPECT_EQ(Attr(kRoot).nlink, 4u);
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->Lookup(kRoot, "src", &r), ENOENT);
  fs_->Forget(empty, 1);
  EXPECT_ERRNO(fs_->GetAttr(empty, &r), ENOENT);

  // Over an empty directory in another parent.
  const uint64_t target = Mkdir(full, "target");
  EXPECT_EQ(Attr(full).nlink, 3u);
  ASSERT_OK(fs_->Rename(kRoot, "empty", full, "target", 0));
  EXPECT_EQ(Attr(full).nlink, 3u);
  EXPECT_EQ(Attr(kRoot).nlink, 3u);
  EXPECT_EQ(InoOf(full, "target"), src);
  fs_->Forget(target, 1);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameNoReplace) {
  const uint64_t a = Create(kRoot, "a"), b = Create(kRoot, "b");
  EXPECT_ERRNO(fs_->Rename(kRoot, "a", kRoot, "b", RENAME_NOREPLACE), EEXIST);
  EXPECT_EQ(InoOf(kRoot, "a"), a);
  EXPECT_EQ(InoOf(kRoot, "b"), b);
  ASSERT_OK(fs_->Rename(kRoot, "a", kRoot, "c", RENAME_NOREPLACE));
  EXPECT_EQ(InoOf(kRoot, "c"), a);
  EXPECT_ERRNO(fs_->Rename(kRoot, "c", kRoot, "d", RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL);
  EXPECT_ERRNO(fs_->Rename(kRoot, "c", kRoot, "d", 0x100), EINVAL);
}

TEST_F(NamespaceTest, RenameExchangeFiles) {
  const uint64_t a = Create(kRoot, "a");
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t b = Create(d, "b");
  ASSERT_OK(fs_->Rename(kRoot, "a", d, "b", RENAME_EXCHANGE));
  EXPECT_EQ(InoOf(kRoot, "a"), b);
  EXPECT_EQ(InoOf(d, "b"), a);
  EXPECT_EQ(Attr(a).nlink, 1u);
  EXPECT_EQ(Attr(b).nlink, 1u);
  EXPECT_ERRNO(fs_->Rename(kRoot, "a", kRoot, "missing", RENAME_EXCHANGE), ENOENT);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameExchangeDirAndFileAcrossParents) {
  const uint64_t p1 = Mkdir(kRoot, "p1"), p2 = Mkdir(kRoot, "p2");
  const uint64_t dir = Mkdir(p1, "dir");
  Create(dir, "content");
  const uint64_t file = Create(p2, "file");
  EXPECT_EQ(Attr(p1).nlink, 3u);
  EXPECT_EQ(Attr(p2).nlink, 2u);

  ASSERT_OK(fs_->Rename(p1, "dir", p2, "file", RENAME_EXCHANGE));
  EXPECT_EQ(InoOf(p1, "dir"), file);
  EXPECT_EQ(InoOf(p2, "file"), dir);
  EXPECT_EQ(Attr(p1).nlink, 2u);
  EXPECT_EQ(Attr(p2).nlink, 3u);
  EXPECT_EQ(Attr(dir).nlink, 2u);
  EXPECT_EQ(Attr(file).nlink, 1u);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(dir, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{".", "..", "content"}));
  EXPECT_EQ(list[1].ino, p2);
  ASSERT_OK(fs_->ListDir(p1, &list));
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[2].type, static_cast<uint32_t>(S_IFREG));

  // And back again (file -> dir direction).
  ASSERT_OK(fs_->Rename(p1, "dir", p2, "file", RENAME_EXCHANGE));
  EXPECT_EQ(InoOf(p1, "dir"), dir);
  EXPECT_EQ(Attr(p1).nlink, 3u);
  EXPECT_EQ(Attr(p2).nlink, 2u);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameExchangeTwoDirectoriesAcrossParents) {
  const uint64_t p1 = Mkdir(kRoot, "p1"), p2 = Mkdir(kRoot, "p2");
  const uint64_t a = Mkdir(p1, "a"), b = Mkdir(p2, "b");
  Mkdir(a, "inner");
  ASSERT_OK(fs_->Rename(p1, "a", p2, "b", RENAME_EXCHANGE));
  EXPECT_EQ(InoOf(p1, "a"), b);
  EXPECT_EQ(InoOf(p2, "b"), a);
  EXPECT_EQ(Attr(p1).nlink, 3u);
  EXPECT_EQ(Attr(p2).nlink, 3u);
  EXPECT_EQ(Attr(a).nlink, 3u);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(a, &list));
  EXPECT_EQ(list[1].ino, p2);
  ASSERT_OK(fs_->ListDir(b, &list));
  EXPECT_EQ(list[1].ino, p1);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, RenameHardLinksOfSameInodeIsNoOp) {
  const uint64_t f = Create(kRoot, "a");
  kv::InodeRecord r;
  ASSERT_OK(fs_->Link(f, kRoot, "b", &r));
  fs_->Forget(f, 1);
  ASSERT_OK(fs_->Rename(kRoot, "a", kRoot, "b", 0));
  EXPECT_EQ(InoOf(kRoot, "a"), f);
  EXPECT_EQ(InoOf(kRoot, "b"), f);
  EXPECT_EQ(Attr(f).nlink, 2u);
  // Renaming a name onto itself is a no-op too.
  ASSERT_OK(fs_->Rename(kRoot, "a", kRoot, "a", 0));
  EXPECT_EQ(InoOf(kRoot, "a"), f);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, SetgidDirectoryInheritance) {
  const uint64_t d = Mkdir(kRoot, "shared", 02775);
  SetAttrRequest req;
  req.set_gid = true;
  req.gid = 4242;
  req.set_mode = true;
  req.mode = 02775;
  kv::InodeRecord r;
  ASSERT_OK(fs_->SetAttr(d, req, &r));
  EXPECT_EQ(r.gid, 4242u);
  EXPECT_TRUE(r.mode & S_ISGID);

  Caller other{2000, 3000};
  kv::InodeRecord sub, file;
  ASSERT_OK(fs_->Mknod(other, d, "sub", S_IFDIR | 0755, 0, &sub));
  ASSERT_OK(fs_->Mknod(other, d, "file", S_IFREG | 0644, 0, &file));
  EXPECT_EQ(sub.uid, 2000u);
  EXPECT_EQ(sub.gid, 4242u);
  EXPECT_TRUE(sub.mode & S_ISGID);
  EXPECT_EQ(file.uid, 2000u);
  EXPECT_EQ(file.gid, 4242u);
  EXPECT_FALSE(file.mode & S_ISGID);

  // Without setgid the caller's group is used.
  kv::InodeRecord plain;
  ASSERT_OK(fs_->Mknod(other, kRoot, "plain", S_IFDIR | 0755, 0, &plain));
  EXPECT_EQ(plain.gid, 3000u);
  EXPECT_FALSE(plain.mode & S_ISGID);
}

TEST_F(NamespaceTest, TimestampsOnCreate) {
  const kv::InodeRecord before = Attr(kRoot);
  TickClock();
  const uint64_t f = Create(kRoot, "f");
  const kv::InodeRecord after = Attr(kRoot);
  EXPECT_TRUE(Later(after.mtime, before.mtime));
  EXPECT_TRUE(Later(after.ctime, before.ctime));
  const kv::InodeRecord fr = Attr(f);
  EXPECT_EQ(fr.mtime, fr.ctime);

  TickClock();
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  EXPECT_TRUE(Later(Attr(kRoot).mtime, after.mtime));
}

TEST_F(NamespaceTest, SetAttrModeChangesCtimeOnly) {
  const uint64_t f = Create(kRoot, "f");
  const kv::InodeRecord before = Attr(f);
  TickClock();
  SetAttrRequest req;
  req.set_mode = true;
  req.mode = 0600;
  kv::InodeRecord r;
  ASSERT_OK(fs_->SetAttr(f, req, &r));
  EXPECT_EQ(r.mode, static_cast<uint32_t>(S_IFREG | 0600));
  EXPECT_EQ(r.mtime, before.mtime);
  EXPECT_TRUE(Later(r.ctime, before.ctime));
  EXPECT_EQ(Attr(f), r);

  // The type bits cannot be changed by chmod.
  req.mode = S_IFDIR | 0700;
  ASSERT_OK(fs_->SetAttr(f, req, &r));
  EXPECT_TRUE(S_ISREG(r.mode));

  // uid/gid and explicit times.
  SetAttrRequest own;
  own.set_uid = own.set_gid = own.set_mtime = own.set_atime = true;
  own.uid = 7;
  own.gid = 8;
  own.mtime = {1000000000, 123456789};
  own.atime = {999999999, 1};
  ASSERT_OK(fs_->SetAttr(f, own, &r));
  r = Attr(f);
  EXPECT_EQ(r.uid, 7u);
  EXPECT_EQ(r.gid, 8u);
  EXPECT_EQ(r.mtime, (kv::Timespec{1000000000, 123456789}));
  EXPECT_EQ(r.atime, (kv::Timespec{999999999, 1}));
}

TEST_F(NamespaceTest, WriteChangesMtime) {
  const uint64_t f = Create(kRoot, "f");
  const kv::InodeRecord before = Attr(f);
  TickClock();
  ASSERT_OK(fs_->Write(f, 0, "x"));
  const kv::InodeRecord after = Attr(f);
  EXPECT_TRUE(Later(after.mtime, before.mtime));
  EXPECT_EQ(after.size, 1u);
  TickClock();
  ASSERT_OK(fs_->Flush(f));
  // A flush is not a modification.
  EXPECT_EQ(Attr(f).mtime, after.mtime);
  TickClock();
  SetSize(f, 0);
  EXPECT_TRUE(Later(Attr(f).mtime, after.mtime));
}

TEST_F(NamespaceTest, SetAttrSizeOnNonFile) {
  const uint64_t d = Mkdir(kRoot, "d");
  SetAttrRequest req;
  req.set_size = true;
  req.size = 10;
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->SetAttr(d, req, &r), EISDIR);
  kv::InodeRecord fifo;
  ASSERT_OK(fs_->Mknod(caller_, kRoot, "p", S_IFIFO | 0644, 0, &fifo));
  EXPECT_ERRNO(fs_->SetAttr(fifo.ino, req, &r), EINVAL);
}

TEST_F(NamespaceTest, ListDirOrder) {
  const uint64_t d = Mkdir(kRoot, "d");
  for (const char* n : {"zeta", "alpha", "mid", "Beta", "alpha2"}) Create(d, n);
  Mkdir(d, "dir");
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  EXPECT_EQ(Names(list), (std::vector<std::string>{".", "..", "Beta", "alpha", "alpha2", "dir",
                                                   "mid", "zeta"}));
  EXPECT_EQ(list[0].ino, d);
  EXPECT_EQ(list[1].ino, kRoot);
  for (const auto& e : list) {
    if (e.name == "dir" || e.name == "." || e.name == "..") {
      EXPECT_EQ(e.type, static_cast<uint32_t>(S_IFDIR)) << e.name;
    } else {
      EXPECT_EQ(e.type, static_cast<uint32_t>(S_IFREG)) << e.name;
      EXPECT_EQ(e.ino, InoOf(d, e.name));
    }
  }
  ASSERT_OK(fs_->ListDir(kRoot, &list));
  EXPECT_EQ(list[1].ino, kRoot);  // the root is its own parent
}

TEST_F(NamespaceTest, ReadDirPlus) {
  const uint64_t d = Mkdir(kRoot, "d");
  std::vector<uint64_t> inos;
  for (int i = 0; i < 5; i++) {
    inos.push_back(Create(d, "f" + std::to_string(i), S_IFREG | (0600 + i)));
    ASSERT_OK(fs_->Write(inos.back(), 0, std::string(100 * (i + 1), 'x')));
  }
  // Some inodes in memory (flushed or not), others only in the LSM.
  ASSERT_OK(fs_->Flush(inos[1]));
  for (int i = 2; i < 5; i++) fs_->Forget(inos[i], 1);

  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_EQ(list.size(), 7u);
  std::vector<std::pair<std::string, kv::InodeRecord>> seen;
  ASSERT_OK(fs_->ReadDirPlus(list, 0, [&](const DirListEntry& e, const kv::InodeRecord& r) {
    seen.emplace_back(e.name, r);
    return true;
  }));
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[0].first, ".");
  EXPECT_EQ(seen[0].second.ino, d);
  EXPECT_EQ(seen[1].first, "..");
  for (int i = 0; i < 5; i++) {
    const auto& [name, r] = seen[i + 2];
    EXPECT_EQ(name, "f" + std::to_string(i));
    EXPECT_EQ(r.ino, inos[i]);
    EXPECT_EQ(r.mode, static_cast<uint32_t>(S_IFREG | (0600 + i)));
    EXPECT_EQ(r.size, 100u * (i + 1));
    EXPECT_EQ(r.nlink, 1u);
    EXPECT_EQ(r.uid, 1000u);
    EXPECT_GT(r.blocks, 0u);
  }
  // Every entry got one reference: give them back.
  for (uint64_t ino : inos) fs_->Forget(ino, 1);
  for (int i = 0; i < 2; i++) fs_->Forget(inos[i], 1);  // creation references
}

TEST_F(NamespaceTest, ReadDirPlusStopsAndCountsReferences) {
  const uint64_t d = Mkdir(kRoot, "d");
  std::vector<uint64_t> inos;
  for (int i = 0; i < 4; i++) {
    inos.push_back(Create(d, "f" + std::to_string(i)));
    fs_->Forget(inos.back(), 1);  // no references left
  }
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_EQ(list.size(), 6u);
  // Start after "." and accept f0, f1; f2 is refused: the listing stops.
  std::vector<std::string> names;
  ASSERT_OK(fs_->ReadDirPlus(list, 1, [&](const DirListEntry& e, const kv::InodeRecord&) {
    names.push_back(e.name);
    return e.name != "f2";
  }));
  EXPECT_EQ(names, (std::vector<std::string>{"..", "f0", "f1", "f2"}));

  // Accepted entries hold a reference: unlinked, they survive until Forget.
  // Refused and unseen entries hold none: unlinked, they go at once.
  for (int i = 0; i < 4; i++) ASSERT_OK(fs_->Unlink(d, "f" + std::to_string(i)));
  kv::InodeRecord r;
  for (int i = 0; i < 2; i++) {
    ASSERT_OK(fs_->GetAttr(inos[i], &r)) << i;
    EXPECT_EQ(r.nlink, 0u);
  }
  EXPECT_ERRNO(fs_->GetAttr(inos[2], &r), ENOENT);
  EXPECT_ERRNO(fs_->GetAttr(inos[3], &r), ENOENT);
  for (int i = 0; i < 2; i++) {
    fs_->Forget(inos[i], 1);
    EXPECT_ERRNO(fs_->GetAttr(inos[i], &r), ENOENT);
  }
  // Forget of an unknown inode, or of more than held, does not crash.
  fs_->Forget(inos[0], 5);
  fs_->Forget(123456, 1);
  ExpectFsckClean();
}

TEST_F(NamespaceTest, ReadDirPlusOfRemovedEntry) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t f = Create(d, "f");
  fs_->Forget(f, 1);
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_OK(fs_->Unlink(d, "f"));
  int calls = 0;
  ASSERT_OK(fs_->ReadDirPlus(list, 2, [&](const DirListEntry& e, const kv::InodeRecord& r) {
    calls++;
    EXPECT_EQ(e.name, "f");
    EXPECT_EQ(r.ino, 0u);  // removed meanwhile: no attributes
    return true;
  }));
  EXPECT_EQ(calls, 1);
}

// A listing taken before a rename, or before the unlink of a file that is
// still open (so its inode is still cached), names entries that no longer
// name those inodes: they get no attributes and no reference, or the kernel
// would bind the old name to the inode.
TEST_F(NamespaceTest, ReadDirPlusOfAListingOlderThanARenameOrUnlink) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t a = Create(d, "a"), b = Create(d, "b"), c = Create(d, "c");
  ASSERT_OK(fs_->OpenFile(b));
  std::vector<DirListEntry> list;
  uint64_t gen = 0;
  ASSERT_OK(fs_->ListDir(d, &list, &gen));
  ASSERT_OK(fs_->Rename(d, "a", d, "z", 0));
  ASSERT_OK(fs_->Unlink(d, "b"));
  std::map<std::string, uint64_t> got;
  auto collect = [&](const DirListEntry& e, const kv::InodeRecord& r) {
    got[e.name] = r.ino;
    return true;
  };
  ASSERT_OK(fs_->ReadDirPlus(list, 2, collect, gen));
  EXPECT_EQ(got, (std::map<std::string, uint64_t>{{"a", 0}, {"b", 0}, {"c", c}}));
  // A listing of the current namespace is used as it is.
  ASSERT_OK(fs_->ListDir(d, &list, &gen));
  got.clear();
  ASSERT_OK(fs_->ReadDirPlus(list, 2, collect, gen));
  EXPECT_EQ(got, (std::map<std::string, uint64_t>{{"c", c}, {"z", a}}));
  ASSERT_OK(fs_->Release(b));
  fs_->Forget(a, 2);
  fs_->Forget(b, 1);
  fs_->Forget(c, 3);
  kv::InodeRecord r;
  EXPECT_ERRNO(fs_->GetAttr(b, &r), ENOENT);  // no stray reference kept it
  ExpectFsckClean();
}

TEST_F(NamespaceTest, ManyEntriesListAndReadDirPlusWindows) {
  // More than one ReadDirPlus window (256 entries).
  const uint64_t d = Mkdir(kRoot, "d");
  for (int i = 0; i < 600; i++) {
    char name[16];
    std::snprintf(name, sizeof(name), "e%04d", i);
    fs_->Forget(Create(d, name), 1);
  }
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_EQ(list.size(), 602u);
  for (size_t i = 3; i < list.size(); i++) EXPECT_LT(list[i - 1].name, list[i].name);
  size_t n = 0;
  ASSERT_OK(fs_->ReadDirPlus(list, 2, [&](const DirListEntry& e, const kv::InodeRecord& r) {
    EXPECT_EQ(r.ino, e.ino);
    EXPECT_TRUE(S_ISREG(r.mode));
    n++;
    return true;
  }));
  EXPECT_EQ(n, 600u);
  for (size_t i = 2; i < list.size(); i++) fs_->Forget(list[i].ino, 1);
}

// The directory entries kept in memory (fs/dentry_cache.h) answer exactly
// as LevelDB does through any sequence of creates, links, removals and
// renames (plain, no-replace, exchange, across directories), for listings,
// lookups (negative ones too) and the emptiness check of rmdir.
TEST_F(NamespaceTest, CachedEntriesStayExact) {
  const uint64_t a = Mkdir(kRoot, "a"), b = Mkdir(kRoot, "b");
  std::vector<uint64_t> dirs = {kRoot, a, b};
  const std::vector<std::string> pool = {"n0", "n1", "n2", "n3", "n4", "sub0", "sub1"};
  auto truth = [&](uint64_t dir) {
    std::map<std::string, uint64_t> m;
    EXPECT_OK(fs_->store()->meta()->ScanPrefix(
        kv::DentryPrefix(dir), [&](std::string_view key, std::string_view value) {
          uint64_t p;
          std::string_view name;
          kv::DirEntry e;
          EXPECT_TRUE(kv::ParseDentryKey(key, &p, &name));
          EXPECT_OK(kv::DecodeDirEntry(value, &e));
          m[std::string(name)] = e.ino;
          return true;
        }));
    return m;
  };
  auto check = [&](int step) {
    for (uint64_t d : dirs) {
      const auto want = truth(d);
      std::vector<DirListEntry> list;
      ASSERT_OK(fs_->ListDir(d, &list));
      std::map<std::string, uint64_t> got;
      for (size_t i = 2; i < list.size(); i++) got[list[i].name] = list[i].ino;
      ASSERT_EQ(got, want) << "listing of " << d << " after step " << step;
      for (const std::string& n : pool) {
        kv::InodeRecord r;
        const Status st = LookupNoRef(d, n, &r);
        auto it = want.find(n);
        if (it == want.end()) {
          ASSERT_EQ(st.err(), ENOENT) << n << " in " << d << " after step " << step;
        } else {
          ASSERT_OK(st);
          ASSERT_EQ(r.ino, it->second) << n << " in " << d << " after step " << step;
        }
      }
    }
  };
  std::mt19937 rng(20261124);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  check(-1);  // fills the cache for the three directories
  for (int step = 0; step < 1500; step++) {
    const uint64_t d = dirs[pick(3)], d2 = dirs[pick(3)];
    const std::string& n = pool[pick(pool.size())];
    const std::string& n2 = pool[pick(pool.size())];
    kv::InodeRecord r;
    switch (pick(6)) {
      case 0:
        if (fs_->Mknod(caller_, d, n, (n[0] == 's' ? S_IFDIR : S_IFREG) | 0755, 0, &r).ok()) {
          fs_->Forget(r.ino, 1);
          if (n[0] == 's' && pick(2) == 0) {  // list the new directory, so it is cached too
            std::vector<DirListEntry> l;
            ASSERT_OK(fs_->ListDir(r.ino, &l));
          }
        }
        break;
      case 1:
        (void)fs_->Unlink(d, n);
        break;
      case 2:
        (void)fs_->Rmdir(d, n);  // fails with ENOTEMPTY unless the cache says empty right
        break;
      case 3: {
        const unsigned flags = pick(3) == 0 ? RENAME_NOREPLACE : pick(2) == 0 ? RENAME_EXCHANGE : 0;
        (void)fs_->Rename(d, n, d2, n2, flags);
        break;
      }
      case 4:
        if (kv::InodeRecord src; LookupNoRef(d, n, &src).ok() && S_ISREG(src.mode) &&
                                 fs_->Link(src.ino, d2, n2, &r).ok()) {
          fs_->Forget(r.ino, 1);
        }
        break;
      case 5:  // subdirectories of a, b: moved into and out of the checked set by renames
        if (kv::InodeRecord sub; LookupNoRef(d, n, &sub).ok() && S_ISDIR(sub.mode)) {
          if (fs_->Mknod(caller_, sub.ino, "inner", S_IFREG | 0644, 0, &r).ok()) {
            fs_->Forget(r.ino, 1);
          }
          (void)fs_->Rmdir(d, n);  // must fail now: not empty
          ASSERT_OK(LookupNoRef(d, n, &sub)) << "rmdir removed a non-empty directory";
          ASSERT_OK(fs_->Unlink(sub.ino, "inner"));
        }
        break;
    }
    check(step);
  }
  EXPECT_GT(fs_->DentryStats().hits, 10000u);
  // And what LevelDB holds after a reopen (no cache) is what was listed.
  std::map<uint64_t, std::map<std::string, uint64_t>> before;
  for (uint64_t d : dirs) before[d] = truth(d);
  Reopen();
  for (uint64_t d : dirs) EXPECT_EQ(truth(d), before[d]);
  check(1500);
}

// A damaged inode record is that entry's failure, not the listing's: the
// whole directory read EIO (a helper's probe).
TEST_F(NamespaceTest, ListingSurvivesOneDamagedInode) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t good = Create(d, "good"), bad = Create(d, "bad");
  fs_->Forget(good, 1);
  fs_->Forget(bad, 1);
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) {
    b->Put(kv::InodeKey(bad), std::string("\x02\x07", 2));  // truncated
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord dr;
  ASSERT_OK(fs_->Lookup(kRoot, "d", &dr));
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(d, &list));
  ASSERT_EQ(list.size(), 4u);
  std::map<std::string, uint64_t> seen;
  ASSERT_OK(fs_->ReadDirPlus(list, 2, [&](const DirListEntry& e, const kv::InodeRecord& r) {
    seen[e.name] = r.ino;
    return true;
  }));
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen["good"], good);
  EXPECT_EQ(seen["bad"], 0u);  // no attributes
  kv::InodeRecord r;
  EXPECT_FALSE(fs_->Lookup(d, "bad", &r).ok());
  fs_->Forget(good, 1);
}

}  // namespace
}  // namespace sepfs::fs::testing
