// fsck --repair (fs/repair.h): build a store with the Filesystem, close it,
// damage it through the Store / MetaStore / segment files, repair, and
// expect the report to name the change, a following check to be clean and
// the surviving data to read back.
#include "fs/repair.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "fs/salvage.h"
#include "fs/superblock_copy.h"
#include "fs_test_util.h"

namespace sepfs::fs::testing {
namespace {

class RepairTest : public FsTest {
 protected:
  vlog::BlockPtr Pointer(uint64_t ino, uint64_t block) {
    auto s = OpenStore();
    vlog::BlockPtr p;
    std::string raw;
    EXPECT_OK(s->meta()->Get(kv::BlockKey(ino, block), &raw));
    EXPECT_OK(kv::DecodeBlockValue(raw, &p));
    return p;
  }

  std::string SegmentPath(uint32_t id) {
    char name[32];
    std::snprintf(name, sizeof(name), "/seg-%08u.vlog", id);
    return VlogDir(store_dir_) + name;
  }

  void FlipByte(const std::string& path, uint64_t offset) {
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
    c ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
    ::close(fd);
  }

  // Runs the repair on the closed store; expects it to leave nothing behind
  // and a following check (and the mount's view) to be clean.
  void RepairClean(RepairReport* rep) {
    ASSERT_FALSE(fs_) << "close the Filesystem first";
    ASSERT_OK(Repair(store_dir_, StoreOptions{}, rep, nullptr));
    for (const auto& e : rep->after.errors) ADD_FAILURE() << "left after repair: " << e;
    FsckReport again;
    RunFsck(&again);
    for (const auto& e : again.errors) ADD_FAILURE() << "fsck after repair: " << e;
    for (const auto& n : again.notes) ADD_FAILURE() << "fsck note after repair: " << n;
  }

  // 200 files in the root, the store closed and opened once more, so that
  // their metadata is in a LevelDB table, and closed; then the largest
  // table (of size s) is cut to new_size(s) bytes.
  void CreateFilesAndCutTheirTable(std::vector<std::pair<uint64_t, std::string>>* files,
                                   const std::function<uint64_t(uint64_t)>& new_size) {
    for (int i = 0; i < 200; i++) {
      files->emplace_back(Create(kRoot, "f" + std::to_string(i)), Payload(i, 5000 + i));
      WriteFile(files->back().first, files->back().second);  // over the inline limit
    }
    CloseFs();
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));  // the log becomes a table
    CloseFs();
    std::string table;
    uint64_t table_size = 0;
    for (const auto& e : std::filesystem::directory_iterator(MetaDir(store_dir_))) {
      if (e.path().extension() == ".ldb" && e.file_size() > table_size) {
        table = e.path().string();
        table_size = e.file_size();
      }
    }
    ASSERT_GT(table_size, 4096u) << table;
    ASSERT_EQ(::truncate(table.c_str(), static_cast<off_t>(new_size(table_size))), 0);
  }

  static std::string Changes(const RepairReport& rep) {
    std::string all;
    for (const auto& c : rep.changes) all += c + "\n";
    return all;
  }

  static bool HasKind(const FsckReport& rep, FsckKind kind) {
    for (const auto& f : rep.findings) {
      if (f.kind == kind) return true;
    }
    return false;
  }

  void WriteFile(uint64_t ino, const std::string& data) {
    ASSERT_OK(fs_->Write(ino, 0, data));
    ASSERT_OK(fs_->Fsync(ino, false));
  }

  // A file `name` in the root holding data, written, and the store closed.
  // Another store (STORE-other), of the same block size, in which file "f"
  // gets inode ino, with blocks 0 and 1 from Payload(seed); *path: its
  // segment file seg.
  void OtherStoresSegment(uint64_t ino, uint32_t seg, int seed, std::string* path) {
    const std::string other = store_dir_ + "-other";
    MkfsOptions mo;
    mo.block_size = block_size();
    ASSERT_OK(Mkfs(other, mo));
    ASSERT_OK(Filesystem::Open(other, fs_options(), &fs_));
    ASSERT_EQ(Create(kRoot, "f"), ino);
    WriteFile(ino, Payload(seed, 2 * block_size()));
    CloseFs();
    *path = VlogDir(other) + "/" + vlog::SegmentFileName(seg);
    ASSERT_TRUE(std::filesystem::exists(*path));
  }

  uint64_t CreateFileAndClose(const std::string& name, const std::string& data) {
    const uint64_t ino = Create(kRoot, name);
    WriteFile(ino, data);
    CloseFs();
    return ino;
  }

  // A file written, the store closed and its segment counters damaged:
  // the check before the repair finds them wrong, the repair rewrites them
  // from a recount, and the file reads back (the Filesystem is open after).
  void ExpectCountersRewritten(const std::function<void(kv::MetaStore*, kv::Batch*)>& damage) {
    const uint64_t f = Create(kRoot, "f");
    const std::string data = Payload(7, 5 * block_size());
    WriteFile(f, data);
    CloseFs();
    Damage(damage);
    RepairReport rep;
    RepairClean(&rep);
    EXPECT_TRUE(HasKind(rep.before, FsckKind::kSegmentCounters));
    EXPECT_NE(Changes(rep).find("rewrote the persisted live counters"), std::string::npos)
        << Changes(rep);
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    EXPECT_TRUE(ReadAll(f) == data);
  }

  // Writes a small file (its block inline), flips a byte of it in
  // LevelDB's log (and, when asked, damages the MANIFEST too, so LevelDB's
  // checked recovery fails and leveldb::RepairDB, which reads logs
  // unchecked, is what runs), repairs, and expects the damaged bytes never
  // to be served. *changes: the report.
  void DamageLogRecordAndRepair(bool damage_manifest, std::string* changes) {
    const uint64_t ino = Create(kRoot, "small");
    const std::string data = Payload(7, 3000);  // a block this small stays inline
    WriteFile(ino, data);
    CloseFs();
    bool flipped = false, manifest = false;
    DIR* d = ::opendir(MetaDir(store_dir_).c_str());
    ASSERT_NE(d, nullptr);
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name, path = MetaDir(store_dir_) + "/" + name;
      if (damage_manifest && name.starts_with("MANIFEST-")) {
        ASSERT_EQ(::truncate(path.c_str(), 9), 0);
        manifest = true;
      }
      if (!name.ends_with(".log")) continue;
      std::ifstream in(path, std::ios::binary);
      const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const size_t at = log.find(data.substr(1000, 64));
      if (at == std::string::npos) continue;
      FlipByte(path, at + 10);
      flipped = true;
    }
    ::closedir(d);
    ASSERT_TRUE(flipped) << "the inline block is in no log";
    ASSERT_EQ(manifest, damage_manifest);
    RepairReport rep;
    ASSERT_OK(Repair(store_dir_, StoreOptions{}, &rep, nullptr));
    for (const auto& e : rep.after.errors) ADD_FAILURE() << "left after repair: " << e;
    *changes = Changes(rep);
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    kv::InodeRecord r;
    Status st = fs_->Lookup(kRoot, "small", &r);
    if (st.ok()) {  // the file may have come back as created, before the write
      EXPECT_EQ(r.ino, ino);
      std::string got;
      Status rs = fs_->Read(r.ino, 0, data.size(), &got);
      if (rs.ok()) {
        EXPECT_TRUE(got == data.substr(0, got.size()))
            << "damaged bytes served (" << got.size() << " bytes read)";
      }
    }
  }
};

// A byte of LevelDB's log damaged inside a record: the repair drops that
// record and never serves its bytes. leveldb::RepairDB reads logs without
// checking them, so the damaged byte of an inline block came back as file
// data and the check after the repair was clean (a helper's probe).
TEST_F(RepairTest, DamagedLogRecordIsDroppedNotServed) {
  std::string changes;
  DamageLogRecordAndRepair(/*damage_manifest=*/false, &changes);
  EXPECT_NE(changes.find("checksum failed"), std::string::npos) << changes;
}

// The same with the MANIFEST damaged too: LevelDB's own recovery cannot
// open the store, so leveldb::RepairDB runs, and it would have served the
// damaged record. The repair blanks it in the log first.
TEST_F(RepairTest, DamagedLogRecordIsBlankedBeforeRepairDb) {
  std::string changes;
  DamageLogRecordAndRepair(/*damage_manifest=*/true, &changes);
  EXPECT_NE(changes.find("blanked 1 records whose checksum failed"), std::string::npos)
      << changes;
  EXPECT_NE(changes.find("leveldb::RepairDB"), std::string::npos) << changes;
}

// LevelDB's log damaged from the batch that created a file on: the repair
// recovers the log without those batches, and the file, fsync'd, lost its
// name and inode. Its data is in the vLog: the repair counts it for
// `--salvage`, as it does after leveldb::RepairDB (it said nothing, and a
// GC after the next mount could take the data for good; a helper's probe).
TEST_F(RepairTest, FilesLostWithDamagedLogRecordsAreCountedForSalvage) {
  std::vector<std::pair<uint64_t, std::string>> before;
  for (int i = 0; i < 3; i++) {
    before.emplace_back(Create(kRoot, "before" + std::to_string(i)), Payload(20 + i, 300000));
    WriteFile(before.back().first, before.back().second);
  }
  CloseFs();
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));  // the log becomes a table
  const uint64_t victim = Create(kRoot, "victim-of-the-damaged-log");
  const std::string data = Payload(30, 300000);
  WriteFile(victim, data);
  ASSERT_OK(fs_->Fsync(victim, false));
  CloseFs();
  // A byte of the victim's create, and the first record of every later
  // 32 KiB block: LevelDB drops a damaged record with the rest of its
  // block, so every batch from the create on is gone.
  int damaged_logs = 0;
  for (const auto& e : std::filesystem::directory_iterator(MetaDir(store_dir_))) {
    if (e.path().extension() != ".log") continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = log.find("victim-of-the-damaged-log");
    if (at == std::string::npos) continue;
    FlipByte(e.path().string(), at);
    for (size_t block = at / 32768 + 1; block * 32768 + 10 < log.size(); block++) {
      FlipByte(e.path().string(), block * 32768 + 10);
    }
    damaged_logs++;
  }
  ASSERT_EQ(damaged_logs, 1);
  RepairReport rep;  // (the checkpoint of the unmount is gone too: notes remain)
  ASSERT_OK(Repair(store_dir_, StoreOptions{}, &rep, nullptr));
  EXPECT_TRUE(rep.after.errors.empty()) << Changes(rep);
  EXPECT_NE(Changes(rep).find("checksum failed"), std::string::npos) << Changes(rep);
  EXPECT_FALSE(rep.leveldb_repaired) << Changes(rep);
  EXPECT_TRUE(rep.meta_records_dropped);
  EXPECT_EQ(rep.salvageable, 1u) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_TRUE(LookupNoRef(kRoot, "victim-of-the-damaged-log", &r).IsNotFound());
  for (const auto& [ino, d] : before) EXPECT_TRUE(ReadAll(ino) == d) << ino;
  CloseFs();
  RepairOptions salvage;
  salvage.salvage = true;
  RepairReport again;
  ASSERT_OK(Repair(store_dir_, StoreOptions{}, &again, nullptr, salvage));
  EXPECT_TRUE(again.after.errors.empty()) << Changes(again);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(victim) == data) << "salvaged under its inode number";
}

// A store without its segment directory (a disk not mounted, a directory
// moved away) is refused by every open, the repair's included. A mount
// made an empty one and served EIO; the repair dropped every pointer into
// it and called the store clean (a helper's probe).
TEST_F(RepairTest, MissingSegmentDirectoryIsRefusedNotRepaired) {
  const uint64_t ino = Create(kRoot, "f");
  const std::string data = Payload(8, 300000);
  WriteFile(ino, data);
  CloseFs();
  const std::string vlog = VlogDir(store_dir_), away = store_dir_ + "/../vlog-away";
  ASSERT_EQ(::rename(vlog.c_str(), away.c_str()), 0);
  std::unique_ptr<Filesystem> fs;
  Status st = Filesystem::Open(store_dir_, fs_options(), &fs);
  EXPECT_EQ(st.err(), ENOENT);
  EXPECT_NE(st.message().find("segment directory is missing"), std::string::npos)
      << st.ToString();
  RepairReport rep;
  EXPECT_EQ(Repair(store_dir_, StoreOptions{}, &rep, nullptr).err(), ENOENT);
  EXPECT_TRUE(rep.changes.empty()) << Changes(rep);
  EXPECT_NE(::access(vlog.c_str(), F_OK), 0);  // no empty one made
  ASSERT_EQ(::rename(away.c_str(), vlog.c_str()), 0);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(ReadAll(ino), data);
}

// A record whose xattr count differs from its names is found and set to
// what the names hold.
TEST_F(RepairTest, WrongXattrCountIsRecounted) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->SetXattr(f, "user.a", "1", 0));
  ASSERT_OK(fs_->SetXattr(f, "user.b", "2", 0));
  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord r;
    ASSERT_OK(meta->GetInode(f, &r));
    r.xattr_list_bytes = 7;
    b->PutInode(r);
  });
  FsckReport check;
  RunFsck(&check);
  EXPECT_TRUE(HasKind(check, FsckKind::kXattrCount));
  RepairReport rep;
  ASSERT_NO_FATAL_FAILURE(RepairClean(&rep));
  EXPECT_NE(Changes(rep).find("xattr names counted as 7 bytes -> 14"), std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  std::string names;
  ASSERT_OK(fs_->ListXattr(f, &names));
  EXPECT_EQ(names, std::string("user.a\0user.b\0", 14));
}

// An orphan (unlinked while open, then a crash) whose count is wrong too is
// reclaimed, not brought back by the recount.
TEST_F(RepairTest, OrphanWithWrongXattrCountStaysReclaimed) {
  const uint64_t f = Create(kRoot, "f");
  ASSERT_OK(fs_->SetXattr(f, "user.a", "1", 0));
  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord r;
    ASSERT_OK(meta->GetInode(f, &r));
    r.nlink = 0;
    r.xattr_list_bytes = 3;
    b->PutInode(r);
    b->DeleteDentry(kRoot, "f");
    b->Put(kv::OrphanKey(f), "");
  });
  RepairReport rep;
  ASSERT_NO_FATAL_FAILURE(RepairClean(&rep));
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kOrphan));
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kXattrCount));
  auto s = OpenStore();
  std::string raw;
  EXPECT_TRUE(s->meta()->Get(kv::InodeKey(f), &raw).IsNotFound());
  EXPECT_TRUE(s->meta()->Get(kv::XattrKey(f, "user.a"), &raw).IsNotFound());
}

TEST_F(RepairTest, CleanStoreIsLeftAlone) {
  const uint64_t f = Create(kRoot, "f");
  WriteFile(f, Payload(1, 100000));
  CloseFs();
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(rep.before.errors.empty());
  EXPECT_FALSE(rep.changed()) << Changes(rep);
  EXPECT_FALSE(rep.leveldb_repaired);
}

TEST_F(RepairTest, FlippedDataByteDropsThatPointerOnly) {
  const uint32_t bs = block_size();
  const uint64_t d = Mkdir(kRoot, "dir");
  const uint64_t f = Create(d, "f");
  const std::string data = Payload(2, 4 * bs);
  WriteFile(f, data);
  const uint64_t other = Create(kRoot, "other");
  const std::string other_data = Payload(3, 2 * bs);
  WriteFile(other, other_data);
  CloseFs();
  const vlog::BlockPtr p = Pointer(f, 1);
  FlipByte(SegmentPath(p.segment), p.offset + vlog::kRecordHeaderSize + 100);

  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kPointerBadRecord));
  // The counters count references, damaged or not: only the pointer is wrong.
  EXPECT_FALSE(HasKind(rep.before, FsckKind::kSegmentCounters));
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("inode " + std::to_string(f) + " (/dir/f): dropped 1 block pointer"),
            std::string::npos)
      << changes;
  EXPECT_NE(changes.find("record does not verify: block 1"), std::string::npos) << changes;
  EXPECT_NE(changes.find("rewrote the persisted live counters"), std::string::npos) << changes;

  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  std::string want = data;
  std::fill(want.begin() + bs, want.begin() + 2 * bs, '\0');
  EXPECT_TRUE(ReadAll(f) == want);
  EXPECT_TRUE(ReadAll(other) == other_data);
  EXPECT_EQ(Attr(f).blocks, 3u * bs / 512);
}

TEST_F(RepairTest, DeletedSegmentTurnsItsBlocksIntoHoles) {
  const uint32_t bs = block_size();
  std::vector<uint64_t> inos;
  std::vector<std::string> datas;
  for (int i = 0; i < 6; i++) {  // 12 MiB over 4 MiB segments
    inos.push_back(Create(kRoot, "f" + std::to_string(i)));
    datas.push_back(Payload(10 + i, 32 * bs));
    WriteFile(inos.back(), datas.back());
  }
  CloseFs();
  const uint32_t victim = Pointer(inos[0], 0).segment;
  // Which blocks lived in the victim segment.
  std::vector<std::vector<bool>> lost(inos.size(), std::vector<bool>(32));
  {
    auto s = OpenStore();
    for (size_t i = 0; i < inos.size(); i++) {
      for (uint64_t b = 0; b < 32; b++) {
        std::string raw;
        vlog::BlockPtr p;
        ASSERT_OK(s->meta()->Get(kv::BlockKey(inos[i], b), &raw));
        ASSERT_OK(kv::DecodeBlockValue(raw, &p));
        lost[i][b] = p.segment == victim;
      }
    }
  }
  ASSERT_EQ(::unlink(SegmentPath(victim).c_str()), 0);

  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kPointerSegmentMissing));
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("segment " + std::to_string(victim) + " missing"), std::string::npos)
      << changes;
  EXPECT_NE(changes.find("inode " + std::to_string(inos[0]) + " (/f0): dropped"),
            std::string::npos)
      << changes;

  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  bool some_intact = false;
  for (size_t i = 0; i < inos.size(); i++) {
    std::string want = datas[i];
    bool intact = true;
    for (uint64_t b = 0; b < 32; b++) {
      if (lost[i][b]) {
        std::fill(want.begin() + b * bs, want.begin() + (b + 1) * bs, '\0');
        intact = false;
      }
    }
    some_intact |= intact;
    EXPECT_TRUE(ReadAll(inos[i]) == want) << "file f" << i;
  }
  EXPECT_TRUE(some_intact);
}

TEST_F(RepairTest, DanglingEntriesAndStrayRecordsAreDeleted) {
  const uint64_t gone = Create(kRoot, "gone");
  WriteFile(gone, Payload(4, 3 * block_size()));
  const uint64_t typed = Create(kRoot, "typed");
  WriteFile(typed, "hello");
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) {
    b->Delete(kv::InodeKey(gone));                               // dangling entry, pointers
    b->PutDentry(kRoot, "typed", kv::DirEntry{typed, S_IFDIR});  // wrong type
    b->Put(kv::XattrKey(999999, "user.x"), "v");                 // xattr of a missing inode
    b->Put(kv::SymlinkKey(999998), "/nowhere");                  // target of a missing inode
    b->PutDentry(12345678, "x", kv::DirEntry{typed, S_IFREG});   // parent missing
  });
  RepairReport rep;
  RepairClean(&rep);
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("deleted entry 'gone' of inode 1 (/): it named missing inode " +
                         std::to_string(gone)),
            std::string::npos)
      << changes;
  EXPECT_NE(changes.find("fixed the type of entry 'typed'"), std::string::npos) << changes;
  EXPECT_NE(changes.find("dropped 3 block pointers"), std::string::npos) << changes;
  EXPECT_NE(changes.find("xattr(999999"), std::string::npos) << changes;
  EXPECT_NE(changes.find("999998"), std::string::npos) << changes;
  EXPECT_NE(changes.find("parent is not an existing directory"), std::string::npos) << changes;

  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  kv::InodeRecord r;
  EXPECT_ERRNO(LookupNoRef(kRoot, "gone", &r), ENOENT);
  EXPECT_EQ(ReadAll(InoOf(kRoot, "typed")), "hello");
  std::vector<DirListEntry> list;
  ASSERT_OK(fs_->ListDir(kRoot, &list));
  for (const auto& e : list) {
    if (e.name == "typed") {
      EXPECT_EQ(e.type, static_cast<uint32_t>(S_IFREG));
    }
  }
}

TEST_F(RepairTest, UnreachableInodesGoToLostFound) {
  const uint64_t d = Mkdir(kRoot, "d");
  const uint64_t x = Create(d, "x");
  WriteFile(x, Payload(5, 70000));
  const uint64_t y = Create(kRoot, "y");
  WriteFile(y, "why");
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* b) {
    b->DeleteDentry(kRoot, "d");
    b->DeleteDentry(kRoot, "y");
  });
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kUnreachable));
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("created /lost+found"), std::string::npos) << changes;
  EXPECT_NE(changes.find("moved to /lost+found/#" + std::to_string(d)), std::string::npos)
      << changes;
  EXPECT_NE(changes.find("moved to /lost+found/#" + std::to_string(y)), std::string::npos)
      << changes;

  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t lf = InoOf(kRoot, "lost+found");
  const kv::InodeRecord lfa = Attr(lf);
  EXPECT_TRUE(S_ISDIR(lfa.mode));
  EXPECT_EQ(lfa.mode & 07777, 0700u);
  EXPECT_EQ(lfa.nlink, 3u);  // . .. and #d
  EXPECT_EQ(Attr(kRoot).nlink, 3u);
  EXPECT_EQ(InoOf(lf, "#" + std::to_string(d)), d);
  EXPECT_EQ(InoOf(d, "x"), x);
  EXPECT_TRUE(ReadAll(x) == Payload(5, 70000));
  EXPECT_EQ(ReadAll(InoOf(lf, "#" + std::to_string(y))), "why");
  EXPECT_EQ(Attr(y).nlink, 1u);
}

TEST_F(RepairTest, DirectoryCycleIsCut) {
  const uint64_t a = Mkdir(kRoot, "a");
  const uint64_t b = Mkdir(a, "b");
  const uint64_t f = Create(b, "f");
  WriteFile(f, "in the cycle");
  CloseFs();
  Damage([&](kv::MetaStore*, kv::Batch* batch) {
    batch->DeleteDentry(kRoot, "a");
    batch->PutDentry(b, "loop", kv::DirEntry{a, S_IFDIR});
  });
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("a directory cycle"), std::string::npos) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t lf = InoOf(kRoot, "lost+found");
  EXPECT_EQ(InoOf(lf, "#" + std::to_string(a)), a);
  EXPECT_EQ(ReadAll(InoOf(InoOf(a, "b"), "f")), "in the cycle");
  EXPECT_EQ(Attr(b).nlink, 2u);
}

TEST_F(RepairTest, WrongLinkCountsAreSet) {
  const uint64_t f = Create(kRoot, "f");
  kv::InodeRecord r;
  ASSERT_OK(fs_->Link(f, kRoot, "g", &r));
  const uint64_t d = Mkdir(kRoot, "d");
  Mkdir(d, "sub");
  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord fr, dr;
    ASSERT_OK(meta->GetInode(f, &fr));
    ASSERT_OK(meta->GetInode(d, &dr));
    fr.nlink = 5;
    dr.nlink = 9;
    b->PutInode(fr);
    b->PutInode(dr);
  });
  RepairReport rep;
  RepairClean(&rep);
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("link count 5 -> 2"), std::string::npos) << changes;
  EXPECT_NE(changes.find("inode " + std::to_string(d) + " (/d): link count 9 -> 3"),
            std::string::npos)
      << changes;
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(Attr(f).nlink, 2u);
  EXPECT_EQ(Attr(d).nlink, 3u);
}

TEST_F(RepairTest, OrphansAreReclaimed) {
  const uint64_t f = Create(kRoot, "f");
  WriteFile(f, Payload(6, 3 * block_size()));
  CloseFs();
  // As after a crash with f unlinked but still open.
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord r;
    ASSERT_OK(meta->GetInode(f, &r));
    r.nlink = 0;
    b->PutInode(r);
    b->DeleteDentry(kRoot, "f");
    b->Put(kv::OrphanKey(f), "");
  });
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kOrphan));
  EXPECT_NE(Changes(rep).find("reclaimed orphan inode " + std::to_string(f) +
                              " (unlinked; 3 block pointers freed)"),
            std::string::npos)
      << Changes(rep);
  auto s = OpenStore();
  std::string raw;
  EXPECT_TRUE(s->meta()->Get(kv::InodeKey(f), &raw).IsNotFound());
  EXPECT_TRUE(s->meta()->Get(kv::BlockKey(f, 0), &raw).IsNotFound());
}

TEST_F(RepairTest, BadSegmentCountersAreRewritten) {
  ASSERT_NO_FATAL_FAILURE(ExpectCountersRewritten([&](kv::MetaStore* meta, kv::Batch* b) {
    std::string raw;
    ASSERT_OK(meta->Get(kv::CounterKey(kSegmentUsageCounter), &raw));
    std::vector<std::pair<uint32_t, uint64_t>> segs;
    ASSERT_OK(DecodeSegmentUsage(raw, &segs));
    std::vector<vlog::SegmentInfo> bad;
    for (const auto& [id, live] : segs) {
      vlog::SegmentInfo s;
      s.id = id;
      s.live_bytes = live + 4096;
      bad.push_back(s);
    }
    b->Put(kv::CounterKey(kSegmentUsageCounter), EncodeSegmentUsage(bad));
  }));
}

// The vLog heads of the checkpoint unreadable: the repair writes them
// from the vLog. It rewrote only the live counts, so every repair ended
// with the error left ("UNCORRECTED", a helper's probe).
TEST_F(RepairTest, UnreadableVlogHeadsAreRewritten) {
  ASSERT_NO_FATAL_FAILURE(ExpectCountersRewritten([&](kv::MetaStore*, kv::Batch* b) {
    b->Put(kv::CounterKey(kVlogHeadsCounter), std::string("\x01\xff", 2));
  }));
  // The store goes on from the rewritten checkpoint.
  const uint64_t g = Create(kRoot, "g");
  WriteFile(g, Payload(10, 3 * block_size()));
  Reopen();
  EXPECT_TRUE(ReadAll(g) == Payload(10, 3 * block_size()));
  CloseFs();
  FsckReport again;
  RunFsck(&again);
  EXPECT_TRUE(again.errors.empty()) << again.errors.front();
}

TEST_F(RepairTest, LostPointersFixTheAllocationCount) {
  const uint64_t f = Create(kRoot, "f");
  WriteFile(f, Payload(8, 2 * block_size() + 1000));  // the last block inline
  CloseFs();
  // An inline block lost with its LevelDB block: only st_blocks tells, and
  // no vLog record holds the bytes (a block with one gets its pointer back:
  // LostPointersOfAFileThatKeptItsInodeAreRestored).
  Damage([&](kv::MetaStore*, kv::Batch* b) { b->DeleteBlock(f, 2); });
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kBlockCount));
  EXPECT_NE(Changes(rep).find("inode " + std::to_string(f) + " (/f): allocation count"),
            std::string::npos)
      << Changes(rep);
}

TEST_F(RepairTest, LostSizeUpdateIsRestoredFromVerifiedBlocks) {
  const uint32_t bs = block_size();
  const std::string data = Payload(9, 3 * bs - 10);
  const uint64_t f = CreateFileAndClose("f", data);
  // As when LevelDB repair resurrects an older inode record.
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    kv::InodeRecord r;
    ASSERT_OK(meta->GetInode(f, &r));
    r.size = 100;
    r.blocks = 0;
    b->PutInode(r);
  });
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kPointerBeyondEof));
  EXPECT_NE(Changes(rep).find("inode " + std::to_string(f) + " (/f): size 100 -> " +
                              std::to_string(data.size())),
            std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == data);
}

// A damaged segment header alone does not lose the records behind it: each
// verifies on its own, so repair gives the segment a new header and the
// file keeps its bytes.
TEST_F(RepairTest, DamagedSegmentHeaderIsRewrittenAndItsRecordsKept) {
  const std::string data = Payload(11, 2 * block_size());
  const uint64_t f = CreateFileAndClose("f", data);
  const uint32_t seg = Pointer(f, 0).segment;
  FlipByte(SegmentPath(seg), 20);  // inside the header's create_time
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kSegmentDamaged));
  EXPECT_FALSE(HasKind(rep.before, FsckKind::kPointerBadRecord));
  EXPECT_NE(Changes(rep).find("rewrote the damaged header of segment " + std::to_string(seg)),
            std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == data);
}

// When the records behind a damaged header are bad too, their pointers are
// dropped (the blocks read as holes), and then the segment is moved out of
// the log (not deleted: what a file with a damaged header is, is not known).
TEST_F(RepairTest, DamagedSegmentIsMovedOutAfterItsBadRecords) {
  const uint64_t f = Create(kRoot, "f");
  WriteFile(f, Payload(11, 2 * block_size()));
  CloseFs();
  const vlog::BlockPtr p0 = Pointer(f, 0), p1 = Pointer(f, 1);
  ASSERT_EQ(p0.segment, p1.segment);
  const uint32_t seg = p0.segment;
  FlipByte(SegmentPath(seg), 20);
  FlipByte(SegmentPath(seg), p0.offset + vlog::kRecordHeaderSize + 7);
  FlipByte(SegmentPath(seg), p1.offset + vlog::kRecordHeaderSize + 7);
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kSegmentDamaged));
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kPointerBadRecord));
  EXPECT_NE(Changes(rep).find("moved segment " + std::to_string(seg) + " to " +
                              SetAsideDir(store_dir_) + "/" + vlog::SegmentFileName(seg) +
                              " (damaged header"),
            std::string::npos)
      << Changes(rep);
  EXPECT_NE(::access(SegmentPath(seg).c_str(), F_OK), 0);
  EXPECT_TRUE(std::filesystem::exists(SetAsideDir(store_dir_) + "/" + vlog::SegmentFileName(seg)));
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == std::string(2 * block_size(), '\0'));
}

// A damaged superblock record made the whole store unmountable while every
// other record was intact (a helper's probe: bad magic, bad block size,
// deleted). The repair writes it back from STORE/superblock, exactly: this
// store's 4 MiB segments would be guessed as 64 MiB.
TEST_F(RepairTest, DamagedSuperblockIsRestoredFromItsCopy) {
  const std::string data = Payload(12, 3 * block_size() + 100);
  const uint64_t f = CreateFileAndClose("f", data);
  kv::Superblock want;
  {
    auto opened = OpenStore();
    ASSERT_TRUE(opened);
    want = opened->super();
  }
  Damage([](kv::MetaStore*, kv::Batch* b) { b->Put(kv::SuperKey(), "not a superblock"); });
  std::unique_ptr<Store> s;
  EXPECT_TRUE(Store::Open(store_dir_, StoreOptions{}, &s).IsCorruption());
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("restored it from " + SuperblockCopyPath(store_dir_)),
            std::string::npos)
      << Changes(rep);
  auto opened = OpenStore();
  ASSERT_TRUE(opened);
  EXPECT_TRUE(opened->super() == want);
  opened.reset();
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == data);
}

// STORE/superblock is checked by fsck, which changes nothing, and written
// by the next open for writing (stores made before it existed have none).
TEST_F(RepairTest, SuperblockCopyIsCheckedAndRewritten) {
  CloseFs();
  kv::Superblock copy;
  ASSERT_OK(ReadSuperblockCopy(Env::Default(), store_dir_, &copy));  // mkfs wrote it
  const std::string path = SuperblockCopyPath(store_dir_);
  auto open_writes_copy = [&] {
    auto s = OpenStore();
    return s && s->superblock_copy_written();
  };
  for (bool damaged : {false, true}) {
    if (damaged) {
      ASSERT_OK(WriteSuperblockCopy(Env::Default(), store_dir_, copy));
      FlipByte(path, 12);
    } else {
      ASSERT_EQ(::unlink(path.c_str()), 0);
    }
    StoreOptions ro;
    ro.read_only = true;
    std::unique_ptr<Store> store;
    ASSERT_OK(Store::Open(store_dir_, ro, &store));
    FsckReport rep;
    ASSERT_OK(Fsck(store.get(), &rep, nullptr));
    EXPECT_TRUE(HasKind(rep, FsckKind::kSuperblockCopy)) << damaged;
    EXPECT_TRUE(rep.errors.empty());
    EXPECT_FALSE(store->superblock_copy_written());
    store.reset();
    kv::Superblock now;
    EXPECT_FALSE(ReadSuperblockCopy(Env::Default(), store_dir_, &now).ok()) << damaged;
    EXPECT_TRUE(open_writes_copy());
    ASSERT_OK(ReadSuperblockCopy(Env::Default(), store_dir_, &now));
    EXPECT_TRUE(now == copy);
    EXPECT_FALSE(open_writes_copy());
  }
  // A directory in the copy's place: the note says to move it, as no
  // open or repair can write the copy there.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  FsckReport rep;
  RunFsck(&rep);
  ASSERT_TRUE(HasKind(rep, FsckKind::kSuperblockCopy));
  EXPECT_NE(rep.notes.back().find("not a file: move it away"), std::string::npos)
      << rep.notes.back();
  EXPECT_FALSE(open_writes_copy());
  ASSERT_EQ(::rmdir(path.c_str()), 0);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
}

// Blocks of 16 KiB: a guess that fell back to the default would misplace
// every block past the first.
class SmallBlockRepairTest : public RepairTest {
 protected:
  uint32_t block_size() const override { return 16 * 1024; }
};

// With the record and its copy both lost, the repair rebuilds the
// superblock from the records: the block size from the block values, and
// every file reads back.
TEST_F(SmallBlockRepairTest, LostSuperblockWithoutCopyIsRebuiltFromTheRecords) {
  const uint64_t big = Create(kRoot, "big"), small = Create(kRoot, "small");
  const std::string big_data = Payload(13, 5 * block_size() + 777);
  const std::string small_data = Payload(14, 1000);  // inline
  WriteFile(big, big_data);
  WriteFile(small, small_data);
  CloseFs();
  Damage([](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::SuperKey()); });
  ASSERT_EQ(::unlink(SuperblockCopyPath(store_dir_).c_str()), 0);
  std::unique_ptr<Store> s;
  EXPECT_FALSE(Store::Open(store_dir_, StoreOptions{}, &s).ok());
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("rebuilt it from the store's records: block size 16 KiB"),
            std::string::npos)
      << Changes(rep);
  EXPECT_NE(Changes(rep).find("wrote it from the superblock record"), std::string::npos)
      << Changes(rep);
  auto opened = OpenStore();
  ASSERT_TRUE(opened);
  const kv::Superblock sb = opened->super();
  opened.reset();
  EXPECT_EQ(sb.block_size, 16u * 1024);
  EXPECT_EQ(sb.segment_size, 64ull << 20);
  EXPECT_EQ(sb.capacity, 0u);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(big) == big_data);
  EXPECT_TRUE(ReadAll(small) == small_data);
}

// A LevelDB table cut short (its index is at its end) failed fsck, the
// repair and the mount with "IO error: ... Invalid argument", and the
// repair never ran leveldb::RepairDB. Now the check reports it as damage
// and the repair rebuilds the metadata store: the table's keys are lost
// (cut inside its data blocks, it is dropped whole and kept under
// meta/lost), the store is consistent and mounts.
TEST_F(RepairTest, TruncatedTableIsRepairedNotAnIoError) {
  std::vector<std::pair<uint64_t, std::string>> files;
  ASSERT_NO_FATAL_FAILURE(CreateFilesAndCutTheirTable(&files, [](uint64_t s) { return s / 2; }));
  FsckReport check;
  RunFsck(&check);
  EXPECT_TRUE(HasKind(check, FsckKind::kMetaCorrupt));
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(rep.leveldb_repaired) << Changes(rep);
  // The table's files are gone from the namespace, their data is not: the
  // repair counts them, and --salvage brings them back under their inode
  // numbers into lost+found.
  EXPECT_GT(rep.salvageable, 0u);
  RepairOptions salvage;
  salvage.salvage = true;
  RepairReport again;
  ASSERT_OK(Repair(store_dir_, StoreOptions{}, &again, nullptr, salvage));
  EXPECT_TRUE(again.after.errors.empty());
  EXPECT_NE(Changes(again).find("salvaged inode"), std::string::npos) << Changes(again);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  for (const auto& [ino, data] : files) EXPECT_TRUE(ReadAll(ino) == data) << ino;
}

// A table cut by one byte lost its footer, and with it (in RepairDB) every
// key it held: every file of the store went to lost+found, or with
// --salvage. Now the table is rebuilt from its data blocks, all intact, and
// every file keeps its name and its data.
TEST_F(RepairTest, TableCutByOneByteKeepsItsKeys) {
  std::vector<std::pair<uint64_t, std::string>> files;
  ASSERT_NO_FATAL_FAILURE(CreateFilesAndCutTheirTable(&files, [](uint64_t s) { return s - 1; }));
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(rep.leveldb_repaired) << Changes(rep);
  EXPECT_NE(Changes(rep).find("intact data blocks from its start"), std::string::npos) << Changes(rep);
  EXPECT_EQ(rep.salvageable, 0u) << Changes(rep);
  EXPECT_EQ(Changes(rep).find("lost+found"), std::string::npos) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  for (size_t i = 0; i < files.size(); i++) {
    EXPECT_EQ(InoOf(kRoot, "f" + std::to_string(i)), files[i].first);
    EXPECT_TRUE(ReadAll(files[i].first) == files[i].second) << i;
  }
}

// Salvage rebuilds a file whose inode record, entry and pointers are gone
// from its vLog records: the newest record of each block (block 0 was
// overwritten), under its inode number, in lost+found, mode 0600. Without
// --salvage, and with no LevelDB damage, nothing is looked for.
TEST_F(RepairTest, SalvageRebuildsAFileWhoseMetadataWasLost) {
  const uint64_t f = Create(kRoot, "f"), kept = Create(kRoot, "kept");
  std::string data = Payload(15, 3 * block_size() + 5000);  // a tail over the inline limit
  WriteFile(f, data);
  const std::string newer = Payload(16, 1000);
  ASSERT_OK(fs_->Write(f, 10, newer));
  ASSERT_OK(fs_->Fsync(f, false));
  data.replace(10, newer.size(), newer);
  const std::string kept_data = Payload(17, block_size() + 5);
  WriteFile(kept, kept_data);
  CloseFs();
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    b->Delete(kv::InodeKey(f));
    b->Delete(kv::DentryKey(kRoot, "f"));
    ASSERT_OK(meta->ScanPrefix(kv::BlockPrefix(f), [&](std::string_view key, std::string_view) {
      b->Delete(key);
      return true;
    }));
  });
  RepairReport plain;
  RepairClean(&plain);
  EXPECT_EQ(plain.salvageable, 0u);
  EXPECT_EQ(Changes(plain).find("salvaged"), std::string::npos) << Changes(plain);
  RepairOptions salvage;
  salvage.salvage = true;
  RepairReport rep;
  ASSERT_OK(Repair(store_dir_, StoreOptions{}, &rep, nullptr, salvage));
  EXPECT_TRUE(rep.after.errors.empty());
  EXPECT_NE(Changes(rep).find("salvaged inode " + std::to_string(f) + ": 4 blocks"),
            std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t lf = InoOf(kRoot, "lost+found");
  EXPECT_EQ(InoOf(lf, "#" + std::to_string(f)), f);
  EXPECT_EQ(Attr(f).mode, S_IFREG | 0600u);
  EXPECT_TRUE(ReadAll(f) == data) << ReadAll(f).size() << " vs " << data.size();
  EXPECT_TRUE(ReadAll(kept) == kept_data);
  CloseFs();
  RepairReport after;
  RepairClean(&after);  // a second salvage finds nothing more
  EXPECT_FALSE(after.changed()) << Changes(after);
}

// A damaged mode byte turned a file into a directory, a symlink or a
// device, and the repair trusted it: every block pointer was dropped and
// every entry retyped (a helper's probe). When the entries naming the
// inode say file and its block records verify, the mode is set back to a
// regular file's, a hard link included, and the data stays.
TEST_F(RepairTest, DamagedModeOfAFileIsSetBackNotItsData) {
  for (uint32_t wrong : {uint32_t{S_IFDIR}, uint32_t{S_IFLNK}, uint32_t{S_IFCHR}}) {
    if (!fs_) {
      ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    }
    const std::string name = "f" + std::to_string(wrong);
    const uint64_t f = Create(kRoot, name, S_IFREG | 0640);
    kv::InodeRecord r;
    ASSERT_OK(fs_->Link(f, kRoot, name + "-link", &r));
    fs_->Forget(f, 1);
    const std::string data = Payload(18, 3 * block_size() + 5000);
    WriteFile(f, data);
    CloseFs();
    Damage([&](kv::MetaStore* meta, kv::Batch* b) {
      kv::InodeRecord rec;
      ASSERT_OK(meta->GetInode(f, &rec));
      rec.mode = wrong | 0640;
      b->PutInode(rec);
    });
    RepairReport rep;
    RepairClean(&rep);
    EXPECT_NE(Changes(rep).find("made it a regular file again (permissions 0640 kept)"),
              std::string::npos)
        << Changes(rep);
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    EXPECT_EQ(Attr(f).mode, S_IFREG | 0640u);
    EXPECT_EQ(Attr(f).nlink, 2u);
    EXPECT_EQ(InoOf(kRoot, name + "-link"), f);
    EXPECT_TRUE(ReadAll(f) == data) << wrong;
  }
}

// Salvage resumes after a record that does not verify (it stopped at it,
// and every record after it in the segment was silently left behind, a
// helper's probe), and keeps the block values that survived: an inode
// record lost alone comes back with its pointers as they were.
TEST_F(RepairTest, SalvagePassesOverADamagedRecordAndKeepsSurvivingPointers) {
  std::vector<uint64_t> inos;
  std::vector<std::string> datas;
  for (int i = 0; i < 3; i++) {
    inos.push_back(Create(kRoot, "f" + std::to_string(i)));
    datas.push_back(Payload(20 + i, 2 * block_size()));
    WriteFile(inos.back(), datas.back());
  }
  const uint64_t kept = Create(kRoot, "kept-pointers");
  const std::string kept_data = Payload(30, 2 * block_size() + 6000);
  WriteFile(kept, kept_data);
  CloseFs();
  const vlog::BlockPtr bad = Pointer(inos[1], 0);
  ASSERT_EQ(bad.segment, Pointer(inos[2], 1).segment);
  FlipByte(SegmentPath(bad.segment), bad.offset + vlog::kRecordHeaderSize + 99);
  Damage([&](kv::MetaStore* meta, kv::Batch* b) {
    for (int i = 0; i < 3; i++) {
      b->Delete(kv::InodeKey(inos[i]));
      b->Delete(kv::DentryKey(kRoot, "f" + std::to_string(i)));
      ASSERT_OK(meta->ScanPrefix(kv::BlockPrefix(inos[i]),
                                 [&](std::string_view key, std::string_view) {
                                   b->Delete(key);
                                   return true;
                                 }));
    }
    b->Delete(kv::InodeKey(kept));  // its entry and pointers stay
  });
  RepairOptions salvage;
  salvage.salvage = true;
  RepairReport rep;
  ASSERT_OK(Repair(store_dir_, StoreOptions{}, &rep, nullptr, salvage));
  EXPECT_TRUE(rep.after.errors.empty()) << Changes(rep);
  EXPECT_NE(Changes(rep).find("salvage: 1 vLog records did not verify"), std::string::npos)
      << Changes(rep);
  EXPECT_NE(Changes(rep).find("salvaged inode " + std::to_string(kept) +
                              ": 3 blocks (3 of them still pointed to)"),
            std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(inos[0]) == datas[0]);
  EXPECT_TRUE(ReadAll(inos[2]) == datas[2]) << "the records after the damaged one";
  std::string second = datas[1];
  std::fill(second.begin(), second.begin() + block_size(), '\0');  // its damaged block: a hole
  EXPECT_TRUE(ReadAll(inos[1]) == second);
  EXPECT_TRUE(ReadAll(kept) == kept_data);
}

// A copy from another store (another block size) was trusted: the repair
// then dropped every block of more than 4 KiB, or misplaced them past the
// files' ends, and called the store clean (a helper's probe). A copy whose
// block size contradicts the records is refused, and the superblock
// rebuilt from them.
TEST_F(RepairTest, SuperblockCopyFromAnotherStoreIsRefused) {
  const std::string data = Payload(40, 5 * block_size() + 300);
  const uint64_t f = CreateFileAndClose("f", data);
  // The block size tells the first two apart from this store; the store id
  // in the segment headers tells the third.
  for (uint32_t other_bs : {4096u, 1u << 20, block_size()}) {
    const std::string other = store_dir_ + "-other" + std::to_string(other_bs);
    MkfsOptions mo;
    mo.block_size = other_bs;
    mo.segment_size = 4ull << 20;
    ASSERT_OK(Mkfs(other, mo));
    Damage([](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::SuperKey()); });
    std::filesystem::copy_file(SuperblockCopyPath(other), SuperblockCopyPath(store_dir_),
                               std::filesystem::copy_options::overwrite_existing);
    RepairReport rep;
    RepairClean(&rep);
    EXPECT_NE(Changes(rep).find("its copy contradicts the records"), std::string::npos)
        << Changes(rep);
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    EXPECT_EQ(Attr(f).size, data.size());
    EXPECT_TRUE(ReadAll(f) == data) << other_bs;
    CloseFs();
  }
}

// A store's segment files copied into another store: same inode numbers,
// block numbers and seqs (both stores did the same steps), so every check
// of a record passed and the other store's bytes were served (a helper's
// probe). Each header names its store: the store is refused until repair
// moves the file out, and the blocks it stood for read as holes, never as
// the other store's data.
TEST_F(RepairTest, AnotherStoresSegmentIsRefusedThenMovedOutNeverServed) {
  const uint32_t bs = block_size();
  const std::string mine = Payload(50, 3 * bs);
  const uint64_t f = CreateFileAndClose("f", mine);
  const uint32_t seg = Pointer(f, 0).segment;
  // A second segment of this store, which its repair trusts the uuid by.
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const std::string kept = Payload(52, bs);
  const uint64_t g = CreateFileAndClose("g", kept);
  ASSERT_NE(Pointer(g, 0).segment, seg);
  const std::string other = store_dir_ + "-other";
  MkfsOptions mo;
  mo.block_size = bs;
  mo.segment_size = 4ull << 20;
  ASSERT_OK(Mkfs(other, mo));
  ASSERT_OK(Filesystem::Open(other, fs_options(), &fs_));
  const uint64_t theirs_ino = Create(kRoot, "f");
  ASSERT_EQ(theirs_ino, f);
  WriteFile(theirs_ino, Payload(51, 3 * bs));
  CloseFs();
  const std::string theirs_seg = VlogDir(other) + "/" + vlog::SegmentFileName(seg);
  ASSERT_TRUE(std::filesystem::exists(theirs_seg));
  // One planted under a new id, one in place of this store's own segment.
  const uint32_t planted = seg + 20;
  std::filesystem::copy_file(theirs_seg, SegmentPath(planted));
  std::filesystem::copy_file(theirs_seg, SegmentPath(seg),
                             std::filesystem::copy_options::overwrite_existing);

  std::unique_ptr<Filesystem> refused;
  Status st = Filesystem::Open(store_dir_, fs_options(), &refused);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  for (const std::string& part :
       {std::string("2 segment files are not served"), VlogDir(store_dir_) + "/" +
        vlog::SegmentFileName(seg) + " belongs to another sepfs store",
        std::string("sepfs fsck --repair ") + store_dir_,
        SetAsideDir(store_dir_)}) {
    EXPECT_NE(st.ToString().find(part), std::string::npos) << part << " in " << st.ToString();
  }
  StoreOptions so;
  so.allow_set_aside_segments = true;
  FsckReport check;
  RunFsck(&check, so);
  int foreign = 0;
  for (const auto& finding : check.findings) foreign += finding.kind == FsckKind::kSegmentForeign;
  EXPECT_EQ(foreign, 2);

  RepairReport rep;
  RepairClean(&rep);
  const std::string changes = Changes(rep);
  for (uint32_t id : {seg, planted}) {
    EXPECT_NE(changes.find("moved " + vlog::SegmentFileName(id) + " to " + SetAsideDir(store_dir_) +
                           "/" + vlog::SegmentFileName(id) + " (another store's segment"),
              std::string::npos)
        << changes;
    EXPECT_TRUE(std::filesystem::exists(SetAsideDir(store_dir_) + "/" +
                                        vlog::SegmentFileName(id)))
        << id;
  }
  EXPECT_FALSE(std::filesystem::exists(SegmentPath(planted)));
  EXPECT_NE(changes.find("segment " + std::to_string(seg) + " missing"), std::string::npos)
      << changes;
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(Attr(f).size, mine.size());
  EXPECT_TRUE(ReadAll(f) == std::string(mine.size(), '\0'));  // holes, not their bytes
  EXPECT_TRUE(ReadAll(g) == kept);
}

// A segment file renamed by hand was taken for a damaged segment: the
// repair dropped every pointer into it and deleted it (a helper's probe).
// The mount refuses it, and the repair gives it back the name its header
// gives it before checking anything, so no pointer is lost; a copy whose
// name is taken is moved out.
TEST_F(RepairTest, RenamedSegmentIsNamedBackBeforeTheCheck) {
  const std::string mine = Payload(55, 3 * block_size());
  const uint64_t f = CreateFileAndClose("f", mine);
  const uint32_t seg = Pointer(f, 0).segment;
  const std::string copy = SegmentPath(seg + 31);
  std::filesystem::copy_file(SegmentPath(seg), copy);
  std::filesystem::rename(SegmentPath(seg), SegmentPath(seg + 30));

  std::unique_ptr<Filesystem> refused;
  Status st = Filesystem::Open(store_dir_, fs_options(), &refused);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.ToString().find(vlog::SegmentFileName(seg + 30) +
                               " carries the header of segment " + std::to_string(seg)),
            std::string::npos)
      << st.ToString();
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(HasKind(rep.before, FsckKind::kSegmentMisnamed));
  EXPECT_FALSE(HasKind(rep.before, FsckKind::kPointerSegmentMissing));
  const std::string changes = Changes(rep);
  EXPECT_NE(changes.find("renamed " + vlog::SegmentFileName(seg + 30) + " to " +
                         vlog::SegmentFileName(seg)),
            std::string::npos)
      << changes;
  EXPECT_NE(changes.find("moved " + vlog::SegmentFileName(seg + 31) + " to " +
                         SetAsideDir(store_dir_) + "/"),
            std::string::npos)
      << changes;
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(seg)));
  EXPECT_FALSE(std::filesystem::exists(SegmentPath(seg + 30)));
  EXPECT_FALSE(std::filesystem::exists(copy));
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == mine);
}

// Segments planted from another store can outnumber the store's own; the
// rebuilt superblock took the uuid most headers named, and the repair then
// moved the store's own segments out (a review). The uuid is the one of the
// segments where the block pointers' records verify.
TEST_F(RepairTest, RebuiltUuidIsTheOneThePointersLeadTo) {
  const std::string mine = Payload(56, 2 * block_size());
  const uint64_t f = CreateFileAndClose("f", mine);
  const uint32_t seg = Pointer(f, 0).segment;
  std::string theirs;
  ASSERT_NO_FATAL_FAILURE(OtherStoresSegment(f, seg, 57, &theirs));
  Damage([](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::SuperKey()); });
  std::filesystem::remove(SuperblockCopyPath(store_dir_));
  for (uint32_t i = 1; i <= 3; ++i) std::filesystem::copy_file(theirs, SegmentPath(seg + 20 * i));
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("where the block pointers' records verify"), std::string::npos)
      << Changes(rep);
  for (uint32_t i = 1; i <= 3; ++i) {
    EXPECT_TRUE(std::filesystem::exists(SetAsideDir(store_dir_) + "/" +
                                        vlog::SegmentFileName(seg + 20 * i)));
  }
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == mine);
}

// Rewrites the header of segment file `path` with `edit` applied (a whole
// header, checksum and all).
void EditHeader(const std::string& path, const std::function<void(vlog::SegmentHeader*)>& edit) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  char raw[vlog::kSegmentHeaderSize];
  io.read(raw, sizeof(raw));
  vlog::SegmentHeader h;
  ASSERT_OK(vlog::DecodeSegmentHeader(raw, &h));
  edit(&h);
  vlog::EncodeSegmentHeader(h, raw);
  io.seekp(0);
  io.write(raw, sizeof(raw));
}

// Another store's segment that no pointer of this store leads into is moved
// out even when no segment names this store's uuid (a store whose segments
// were written before store ids, an empty one); but when this store's
// pointers lead into segments that all name another store, the uuid may be
// what is wrong (a review: the repair moved every segment of the store out
// and dropped every pointer): the repair refuses, changing nothing.
TEST_F(RepairTest, SegmentsNamingAnotherStoreAreMovedOnlyIfNoPointerLeadsThere) {
  const std::string mine = Payload(53, 2 * block_size());
  const uint64_t f = CreateFileAndClose("f", mine);
  const uint32_t seg = Pointer(f, 0).segment;
  std::string theirs;
  ASSERT_NO_FATAL_FAILURE(OtherStoresSegment(f, seg, 54, &theirs));
  const std::string planted = SegmentPath(seg + 20);
  std::filesystem::copy_file(theirs, planted);
  // This store's own segment names no store (as one written before ids).
  ASSERT_NO_FATAL_FAILURE(
      EditHeader(SegmentPath(seg), [](vlog::SegmentHeader* h) { h->store_id = {}; }));
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(std::filesystem::exists(SetAsideDir(store_dir_) + "/" +
                                      vlog::SegmentFileName(seg + 20)));
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == mine);
  CloseFs();

  // Now this store's segment names another store, as if the superblock's
  // uuid were the wrong one.
  ASSERT_NO_FATAL_FAILURE(
      EditHeader(SegmentPath(seg), [](vlog::SegmentHeader* h) { h->store_id.fill(0x42); }));
  RepairReport refused;
  Status st = Repair(store_dir_, StoreOptions{}, &refused, nullptr);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.ToString().find("no segment names this store's uuid"), std::string::npos)
      << st.ToString();
  EXPECT_TRUE(refused.changes.empty()) << Changes(refused);
  EXPECT_TRUE(std::filesystem::exists(SegmentPath(seg)));
  ASSERT_NO_FATAL_FAILURE(EditHeader(SegmentPath(seg), [](vlog::SegmentHeader* h) {
    h->store_id = {};  // as before: the store mounts again, nothing lost
  }));
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == mine);
}

// Segment files that took each other's names (swapped by hand, or every id
// shifted by one): each named back in turn, a cycle broken through a new
// id; before, the first whose name was taken was moved out and its
// pointers dropped (a review).
TEST_F(RepairTest, SwappedSegmentsAreNamedBack) {
  const std::string a = Payload(58, 2 * block_size()), b = Payload(59, 2 * block_size());
  const uint64_t fa = CreateFileAndClose("a", a);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  const uint64_t fb = CreateFileAndClose("b", b);
  const uint32_t sa = Pointer(fa, 0).segment, sb = Pointer(fb, 0).segment;
  ASSERT_NE(sa, sb);
  std::filesystem::rename(SegmentPath(sa), SegmentPath(sa) + ".tmp");
  std::filesystem::rename(SegmentPath(sb), SegmentPath(sa));
  std::filesystem::rename(SegmentPath(sa) + ".tmp", SegmentPath(sb));
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_FALSE(std::filesystem::exists(SetAsideDir(store_dir_))) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(fa) == a);
  EXPECT_TRUE(ReadAll(fb) == b);
}

// Damage to the store id in this store's own segment header (the magic
// intact) made it look like another store's; the repair would drop every
// pointer into it (a review). Where this store's pointers' records verify,
// the header is rewritten instead.
TEST_F(RepairTest, DamagedStoreIdOfThisStoresSegmentIsRewritten) {
  const std::string mine = Payload(60, 3 * block_size());
  const uint64_t f = CreateFileAndClose("f", mine);
  const uint32_t seg = Pointer(f, 0).segment;
  for (uint64_t at = 32; at < 48; ++at) FlipByte(SegmentPath(seg), at);
  std::unique_ptr<Filesystem> refused;
  Status st = Filesystem::Open(store_dir_, fs_options(), &refused);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.ToString().find("by the store id in its damaged header"), std::string::npos)
      << st.ToString();
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("rewrote the damaged header of segment " + std::to_string(seg) +
                              " (the store id in it was another's"),
            std::string::npos)
      << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == mine);
}

// A sparse file's blocks and a file of one short block fit block sizes of
// 32 KiB as well as 64 KiB; the guess took 32 KiB and moved the data of
// the sparse file to half its offsets (a helper's probe). It prefers the
// default when the records allow it.
TEST_F(RepairTest, GuessedBlockSizePrefersTheDefaultForSparseFiles) {
  const uint64_t sparse = Create(kRoot, "sparse"), small = Create(kRoot, "small");
  const std::string chunk = Payload(41, 4096);
  for (uint64_t off : {0ull, 1ull << 20, 5ull << 20, 40ull << 20}) {
    ASSERT_OK(fs_->Write(sparse, off, chunk));
  }
  SetSize(sparse, 64ull << 20);
  ASSERT_OK(fs_->Fsync(sparse, false));
  WriteFile(small, Payload(42, 20000));
  CloseFs();
  Damage([](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::SuperKey()); });
  ASSERT_EQ(::unlink(SuperblockCopyPath(store_dir_).c_str()), 0);
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("block size 64 KiB"), std::string::npos) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  for (uint64_t off : {0ull, 1ull << 20, 5ull << 20, 40ull << 20}) {
    std::string got;
    ASSERT_OK(fs_->Read(sparse, off, chunk.size(), &got));
    EXPECT_TRUE(got == chunk) << off;
  }
}

// With the superblock, its copy and the root directory all lost (one
// table held them), the segments still say it is a sepfs store: the
// superblock is rebuilt and the root made again with the entries it had
// (they were deleted, and every file went to lost+found: a helper's
// probe). It said "superblock missing (not a sepfs store?)", so --salvage
// could not run either.
TEST_F(RepairTest, LostRootAndSuperblockAreRebuiltFromTheSegments) {
  const std::string data = Payload(43, 2 * block_size() + 7000);
  const uint64_t f = CreateFileAndClose("f", data);
  const std::string uuid = OpenStore()->super().uuid;  // the segments name it
  Damage([](kv::MetaStore*, kv::Batch* b) {
    b->Delete(kv::SuperKey());
    b->Delete(kv::InodeKey(1));
  });
  ASSERT_EQ(::unlink(SuperblockCopyPath(store_dir_).c_str()), 0);
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_NE(Changes(rep).find("rebuilt it from the store's records"), std::string::npos)
      << Changes(rep);
  EXPECT_NE(Changes(rep).find("uuid " + uuid + " (what "), std::string::npos) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_EQ(InoOf(kRoot, "f"), f);
  EXPECT_TRUE(ReadAll(f) == data);
}

// A file that kept its inode record but lost block pointers (they were in
// a table RepairDB dropped) read as zeros there, with its data intact in
// the vLog, even with --salvage (a helper's probe). Salvage points the
// blocks inside its size back to their records; a plain repair still
// leaves holes.
TEST_F(RepairTest, LostPointersOfAFileThatKeptItsInodeAreRestored) {
  const std::string data = Payload(44, 3 * block_size() + 9000);
  const uint64_t f = CreateFileAndClose("f", data);
  // With or without --salvage: the plain repair rewrote the allocation
  // count, the only sign of the loss, and left the block zeros, so the
  // --salvage its message suggested found nothing to restore.
  for (bool salvage : {false, true}) {
    Damage([&](kv::MetaStore*, kv::Batch* b) { b->Delete(kv::BlockKey(f, 1)); });
    RepairOptions options;
    options.salvage = salvage;
    RepairReport rep;
    ASSERT_OK(Repair(store_dir_, StoreOptions{}, &rep, nullptr, options));
    EXPECT_TRUE(rep.after.errors.empty()) << Changes(rep);
    EXPECT_EQ(rep.salvageable, 0u);
    EXPECT_NE(Changes(rep).find("pointed 1 blocks inside its size"), std::string::npos)
        << Changes(rep);
    ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
    EXPECT_TRUE(ReadAll(f) == data) << salvage;
    CloseFs();
  }
}

// LevelDB's CURRENT lost: every open said "not a sepfs store (no
// meta/CURRENT; run sepfs mkfs)", advice that would cost the data, and
// the repair refused the store too. Opens now say to repair, and the
// repair rebuilds the index with leveldb::RepairDB.
TEST_F(RepairTest, MissingCurrentFileIsRepairedNotCalledANewStore) {
  const std::string data = Payload(45, 2 * block_size() + 100);
  const uint64_t f = CreateFileAndClose("f", data);
  ASSERT_EQ(::unlink((MetaDir(store_dir_) + "/CURRENT").c_str()), 0);
  std::unique_ptr<Store> s;
  Status st = Store::Open(store_dir_, StoreOptions{}, &s);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.ToString().find("sepfs fsck --repair"), std::string::npos) << st.ToString();
  RepairReport rep;
  RepairClean(&rep);
  EXPECT_TRUE(rep.leveldb_repaired) << Changes(rep);
  ASSERT_OK(Filesystem::Open(store_dir_, fs_options(), &fs_));
  EXPECT_TRUE(ReadAll(f) == data);
}

}  // namespace
}  // namespace sepfs::fs::testing
