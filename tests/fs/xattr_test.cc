// Extended attributes of the fs core.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include <string>

#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

using XattrTest = FsTest;

TEST_F(XattrTest, SetGetListRemove) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->SetXattr(f, "user.b", "two", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.a", "one", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.empty", "", 0));
  std::string v;
  ASSERT_OK(fs_->GetXattr(f, "user.a", &v));
  EXPECT_EQ(v, "one");
  ASSERT_OK(fs_->GetXattr(f, "user.b", &v));
  EXPECT_EQ(v, "two");
  ASSERT_OK(fs_->GetXattr(f, "user.empty", &v));
  EXPECT_EQ(v, "");
  std::string names;
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names, std::string("user.a\0user.b\0user.empty\0", 25));

  // Overwrite without flags.
  ASSERT_OK(fs_->SetXattr(f, "user.a", "uno", 0));
  ASSERT_OK(fs_->GetXattr(f, "user.a", &v));
  EXPECT_EQ(v, "uno");

  ASSERT_OK(fs_->RemoveXattr(f, "user.a"));
  EXPECT_ERRNO(fs_->GetXattr(f, "user.a", &v), ENODATA);
  EXPECT_ERRNO(fs_->RemoveXattr(f, "user.a"), ENODATA);
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names, std::string("user.b\0user.empty\0", 18));

  // Attributes are per inode.
  const uint64_t g = Create(kRoot, "g");
  ASSERT_OK(fs_->ListXattr(g, &names));
  EXPECT_EQ(names, "");
  EXPECT_ERRNO(fs_->GetXattr(g, "user.b", &v), ENODATA);
}

TEST_F(XattrTest, CreateAndReplaceFlags) {
  const uint64_t f = Create(kRoot, "f");
  EXPECT_ERRNO(fs_->SetXattr(f, "user.x", "v", XATTR_REPLACE), ENODATA);
  std::string v;
  EXPECT_ERRNO(fs_->GetXattr(f, "user.x", &v), ENODATA);
  ASSERT_OK(fs_->SetXattr(f, "user.x", "v1", XATTR_CREATE));
  EXPECT_ERRNO(fs_->SetXattr(f, "user.x", "v2", XATTR_CREATE), EEXIST);
  ASSERT_OK(fs_->GetXattr(f, "user.x", &v));
  EXPECT_EQ(v, "v1");
  ASSERT_OK(fs_->SetXattr(f, "user.x", "v3", XATTR_REPLACE));
  ASSERT_OK(fs_->GetXattr(f, "user.x", &v));
  EXPECT_EQ(v, "v3");
}

TEST_F(XattrTest, Limits) {
  const uint64_t f = Create(kRoot, "f");
  const std::string name255 = "user." + std::string(250, 'n');
  const std::string name256 = name255 + "n";
  ASSERT_EQ(name255.size(), 255u);
  ASSERT_OK(fs_->SetXattr(f, name255, "ok", 0));
  std::string v;
  ASSERT_OK(fs_->GetXattr(f, name255, &v));
  EXPECT_EQ(v, "ok");
  EXPECT_ERRNO(fs_->SetXattr(f, name256, "x", 0), ERANGE);
  EXPECT_ERRNO(fs_->GetXattr(f, name256, &v), ERANGE);
  EXPECT_ERRNO(fs_->RemoveXattr(f, name256), ERANGE);
  EXPECT_ERRNO(fs_->SetXattr(f, "", "x", 0), ERANGE);
  // system.* names are the kernel's to check and sepfs's to know: none is
  // stored (the kernel leaves their permission checks to the file system).
  // Nor any other namespace ext4 does not store; a namespace alone is no name.
  for (const char* n : {"foo.bar", "noprefix", "sepfs.other"}) {
    SCOPED_TRACE(n);
    EXPECT_ERRNO(fs_->SetXattr(f, n, "x", 0), EOPNOTSUPP);
    EXPECT_ERRNO(fs_->GetXattr(f, n, &v), EOPNOTSUPP);
    EXPECT_ERRNO(fs_->RemoveXattr(f, n), EOPNOTSUPP);
  }
  for (const char* n : {"user.", "trusted.", "security."}) {
    SCOPED_TRACE(n);
    EXPECT_ERRNO(fs_->SetXattr(f, n, "x", 0), EINVAL);
  }
  for (const char* n : {"system.x", "system.posix_acl_access", "system.posix_acl_default"}) {
    SCOPED_TRACE(n);
    EXPECT_ERRNO(fs_->SetXattr(f, n, "x", 0), EOPNOTSUPP);
    EXPECT_ERRNO(fs_->GetXattr(f, n, &v), EOPNOTSUPP);
    EXPECT_ERRNO(fs_->RemoveXattr(f, n), EOPNOTSUPP);
  }

  const std::string max_value = Payload(1, 64 * 1024);
  ASSERT_OK(fs_->SetXattr(f, "user.big", max_value, 0));
  ASSERT_OK(fs_->GetXattr(f, "user.big", &v));
  EXPECT_TRUE(v == max_value);
  EXPECT_ERRNO(fs_->SetXattr(f, "user.big", max_value + "x", 0), E2BIG);
  ASSERT_OK(fs_->GetXattr(f, "user.big", &v));
  EXPECT_TRUE(v == max_value);  // the failed set changed nothing
}

// A file's names fit one listxattr(2) reply (XATTR_LIST_MAX, 64 KiB, each
// name with its NUL): a name that would not is refused with ENOSPC, and
// values of names already there can still change.
TEST_F(XattrTest, NamesFitOneListReply) {
  const uint64_t f = Create(kRoot, "f");
  auto name = [](int i) {
    std::string n = "user." + std::to_string(i) + ".";
    return n + std::string(255 - n.size(), 'n');
  };
  int set = 0;
  Status st;
  for (; set < 1000; set++) {
    st = fs_->SetXattr(f, name(set), "v", 0);
    if (!st.ok()) break;
  }
  EXPECT_ERRNO(st, ENOSPC);
  EXPECT_EQ(set, 65536 / 256) << "names of 255 bytes that fit";
  std::string names;
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names.size(), static_cast<size_t>(set) * 256);
  ASSERT_OK(fs_->SetXattr(f, name(0), "changed", XATTR_REPLACE));
  ASSERT_OK(fs_->RemoveXattr(f, name(1)));
  ASSERT_OK(fs_->SetXattr(f, name(set), "v", XATTR_CREATE)) << "room again after a removal";
}

TEST_F(XattrTest, OnDirectoriesSymlinksAndMissingInodes) {
  const uint64_t d = Mkdir(kRoot, "d");
  kv::InodeRecord s;
  ASSERT_OK(fs_->Symlink(caller_, kRoot, "s", "target", &s));
  ASSERT_OK(fs_->SetXattr(d, "user.dir", "D", 0));
  ASSERT_OK(fs_->SetXattr(s.ino, "trusted.link", "S", 0));
  std::string v;
  ASSERT_OK(fs_->GetXattr(d, "user.dir", &v));
  EXPECT_EQ(v, "D");
  ASSERT_OK(fs_->GetXattr(s.ino, "trusted.link", &v));
  EXPECT_EQ(v, "S");
  EXPECT_ERRNO(fs_->SetXattr(987654, "user.x", "v", 0), ENOENT);
}

TEST_F(XattrTest, SetChangesCtimeNotMtime) {
  const uint64_t f = Create(kRoot, "f");
  const kv::InodeRecord before = Attr(f);
  TickClock();
  ASSERT_OK(fs_->SetXattr(f, "user.x", "v", 0));
  const kv::InodeRecord after = Attr(f);
  EXPECT_EQ(after.mtime, before.mtime);
  EXPECT_NE(after.ctime, before.ctime);
}

// Names an older sepfs stored outside the namespaces it stores now can
// still be read and removed (getfattr -d, cp -a and rsync -X list them);
// sepfs's own names are the root's.
TEST_F(XattrTest, NamesStoredOutsideTheNamespacesCanBeReadAndRemoved) {
  const uint64_t f = Create(kRoot, "f");
  kv::Batch b;
  b.Put(kv::XattrKey(f, "foo.bar"), "old");
  ASSERT_OK(fs_->store()->meta()->Write(&b, false));
  std::string v;
  ASSERT_OK(fs_->GetXattr(f, "foo.bar", &v));
  EXPECT_EQ(v, "old");
  ASSERT_OK(fs_->RemoveXattr(f, "foo.bar"));
  EXPECT_ERRNO(fs_->GetXattr(f, "foo.bar", &v), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->RemoveXattr(f, "foo.bar"), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->SetXattr(f, "sepfs.gc", "1", 0), EOPNOTSUPP);
  EXPECT_ERRNO(fs_->GetXattr(f, "sepfs.stats", &v), EOPNOTSUPP);
}

TEST_F(XattrTest, StatsXattrOnRoot) {
  std::string v;
  ASSERT_OK(fs_->GetXattr(kRoot, "sepfs.stats", &v));
  EXPECT_FALSE(v.empty());
  EXPECT_ERRNO(fs_->SetXattr(kRoot, "sepfs.stats", "x", 0), EPERM);
}

TEST_F(XattrTest, PersistAcrossReopen) {
  const uint64_t f = Create(kRoot, "f");
  const uint64_t d = Mkdir(kRoot, "d");
  const std::string big = Payload(2, 60000);
  ASSERT_OK(fs_->SetXattr(f, "user.big", big, 0));
  ASSERT_OK(fs_->SetXattr(f, "user.small", "s", 0));
  ASSERT_OK(fs_->SetXattr(d, "user.gone", "g", 0));
  ASSERT_OK(fs_->RemoveXattr(d, "user.gone"));
  ASSERT_OK(fs_->SetXattr(d, "user.kept", "k", 0));
  Reopen();
  std::string v, names;
  ASSERT_OK(fs_->GetXattr(f, "user.big", &v));
  EXPECT_TRUE(v == big);
  ASSERT_OK(fs_->GetXattr(f, "user.small", &v));
  EXPECT_EQ(v, "s");
  ASSERT_OK(fs_->ListXattr(d, &names));
  EXPECT_EQ(names, std::string("user.kept\0", 10));
  EXPECT_ERRNO(fs_->GetXattr(d, "user.gone", &v), ENODATA);
  ExpectFsckClean();
}

// Store format 5: a record counts its xattr names' bytes (what listxattr
// returns), changed in the batch that adds or removes a name.
TEST_F(XattrTest, RecordsCountTheirNames) {
  EXPECT_EQ(fs_->store()->super().version, kv::kMetaFormatXattrCounts);
  EXPECT_EQ(Attr(kRoot).xattr_list_bytes, 0u);
  const uint64_t f = Create(kRoot, "f");
  EXPECT_EQ(Attr(f).xattr_list_bytes, 0u);
  ASSERT_OK(fs_->SetXattr(f, "user.a", "1", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.bb", "2", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.bb", "22222", 0));  // a new value, no new name
  ASSERT_OK(fs_->SetXattr(f, "user.ccc", "3", XATTR_CREATE));
  EXPECT_ERRNO(fs_->SetXattr(f, "user.ccc", "3", XATTR_CREATE), EEXIST);
  ASSERT_OK(fs_->RemoveXattr(f, "user.a"));
  EXPECT_ERRNO(fs_->RemoveXattr(f, "user.a"), ENODATA);
  std::string names;
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names, std::string("user.bb\0user.ccc\0", 17));
  EXPECT_EQ(Attr(f).xattr_list_bytes, 17u);
  Reopen();
  kv::InodeRecord stored;
  ASSERT_OK(fs_->store()->meta()->GetInode(f, &stored));
  EXPECT_EQ(stored.xattr_list_bytes, 17u);
  ExpectFsckClean();
}

// Scans of a file's xattrs end at the name that completes the count: they
// miss none of its names, even with the deletion markers of the xattrs of
// files deleted after it right behind them, and they do use the count (a
// record that counts only the first name lists only that one).
TEST_F(XattrTest, ScansStopAtTheCountedNames) {
  std::vector<uint64_t> files;
  for (int i = 0; i < 40; i++) {
    const uint64_t f = Create(kRoot, "f" + std::to_string(i));
    files.push_back(f);
    for (int k = 0; k < i % 4; k++) {
      ASSERT_OK(fs_->SetXattr(f, "user.k" + std::to_string(k), "v", 0));
    }
  }
  // Reverse order: each reclaim has the markers of the later files behind it.
  for (size_t i = files.size(); i-- > 4;) {
    ASSERT_OK(fs_->Unlink(kRoot, "f" + std::to_string(i)));
    fs_->Forget(files[i], 1);
  }
  std::string names;
  ASSERT_OK(fs_->ListXattr(files[3], &names));
  EXPECT_EQ(names, std::string("user.k0\0user.k1\0user.k2\0", 24));
  EXPECT_EQ(KeysWithPrefix(std::string(1, kv::kTagXattr)), 0u + 1 + 2 + 3);
  ExpectFsckClean();

  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord r;
    ASSERT_OK(meta->GetInode(files[3], &r));
    r.xattr_list_bytes = 8;  // "user.k0" and its NUL
    b->PutInode(r);
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  ASSERT_OK(fs_->ListXattr(files[3], &names));
  EXPECT_EQ(names, std::string("user.k0\0", 8));
  // The reclaim trusts the count too: the two names it does not cover stay
  // (for fsck to report), the counted one goes.
  ASSERT_OK(fs_->Unlink(kRoot, "f3"));
  fs_->Forget(files[3], 1);
  EXPECT_EQ(KeysWithPrefix(kv::XattrPrefix(files[3])), 2u);
  EXPECT_EQ(KeysWithPrefix(std::string(1, kv::kTagXattr)), 0u + 1 + 2 + 2);
}

// Stores of format 4 and older keep their records at version 1 (which the
// binaries of format 4 read): the count stays unknown, scans go to the end
// of the range, and nothing is missed.
TEST_F(XattrTest, OlderStoresKeepCountsUnknown) {
  CloseFs();
  // As a binary of format 4 made it: the root's record is version 1 too.
  Damage([](kv::MetaStore* meta, kv::Batch* b) {
    kv::Superblock sb;
    ASSERT_OK(meta->GetSuperblock(&sb));
    sb.version = kv::kMetaFormatRecycledSegments;
    b->Put(kv::SuperKey(), kv::EncodeSuperblock(sb));
    kv::InodeRecord root;
    ASSERT_OK(meta->GetInode(kRoot, &root));
    root.xattr_list_bytes = kv::kXattrsUnknown;
    b->PutInode(root);
  });
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t f = Create(kRoot, "f");
  const uint64_t g = Create(kRoot, "g");
  EXPECT_FALSE(Attr(f).xattrs_known());
  ASSERT_OK(fs_->SetXattr(f, "user.a", "1", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.b", "2", 0));
  ASSERT_OK(fs_->SetXattr(g, "user.c", "3", 0));
  ASSERT_OK(fs_->RemoveXattr(f, "user.a"));
  std::string names;
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names, std::string("user.b\0", 7));
  ASSERT_OK(fs_->SetXattr(kRoot, "user.r", "1", 0));
  for (uint64_t ino : {f, kRoot}) {
    std::string raw;
    ASSERT_OK(fs_->store()->meta()->Get(kv::InodeKey(ino), &raw));
    ASSERT_FALSE(raw.empty());
    EXPECT_EQ(raw[0], 1) << "record version of inode " << ino;
  }
  ASSERT_OK(fs_->Unlink(kRoot, "g"));
  fs_->Forget(g, 1);
  ASSERT_OK(fs_->Unlink(kRoot, "f"));
  fs_->Forget(f, 1);
  EXPECT_EQ(KeysWithPrefix(std::string(1, kv::kTagXattr)), 1u) << "the root's";
  ExpectFsckClean();
  EXPECT_EQ(fs_->store()->super().version, kv::kMetaFormatRecycledSegments);
}

}  // namespace
}  // namespace sepfs::fs::testing
