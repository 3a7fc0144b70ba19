#include "fs/repair.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "fs/clock.h"
#include "fs/inode.h"
#include "fs/salvage.h"
#include "fs/superblock_copy.h"
#include "fs/superblock_guess.h"
#include "kvstore/ino_alloc.h"
#include "kvstore/leveldb_log_check.h"
#include "kvstore/leveldb_repair.h"
#include "kvstore/leveldb_status.h"
#include "kvstore/leveldb_table_salvage.h"
#include "leveldb/db.h"
#include "leveldb/filter_policy.h"

namespace sepfs::fs {

namespace {

constexpr int kMaxPasses = 32;
constexpr size_t kBatchBytes = 4u << 20;
constexpr int kBloomBitsPerKey = 10;  // as kv::MetaOptions

bool IsPointerKind(FsckKind k) {
  switch (k) {
    case FsckKind::kPointerBad:
    case FsckKind::kPointerNoInode:
    case FsckKind::kPointerNotRegular:
    case FsckKind::kPointerBeyondEof:
    case FsckKind::kPointerSegmentMissing:
    case FsckKind::kPointerBadRecord:
      return true;
    default:
      return false;
  }
}

std::string PointerReason(const FsckFinding& f) {
  switch (f.kind) {
    case FsckKind::kPointerBeyondEof:
      return "record longer than a block";
    case FsckKind::kPointerSegmentMissing:
      return "segment " + std::to_string(f.value) + " missing";
    case FsckKind::kPointerBadRecord:
      return "record does not verify";
    case FsckKind::kPointerNoInode:
      return "the inode is missing";
    case FsckKind::kPointerNotRegular:
      return "not a regular file";
    default:
      return "undecodable pointer";
  }
}

std::string TypeName(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "file";
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    default:
      return "special file";
  }
}

// Repair opens a store holding other stores' segments, to move them out.
StoreOptions ForRepair(StoreOptions o) {
  o.allow_set_aside_segments = true;
  return o;
}

class Repairer {
 public:
  Repairer(std::string dir, const StoreOptions& options, const RepairOptions& repair_options,
           RepairReport* rep, const FsckProgress& progress)
      : dir_(std::move(dir)),
        options_(ForRepair(options)),
        repair_options_(repair_options),
        env_(options.env ? options.env : Env::Default()),
        rep_(rep),
        progress_(progress) {}

  Status Run();

 private:
  Status OpenStore();
  // LevelDB's own recovery of its logs, with paranoid checks off: it checks
  // each log record's checksum and drops those that fail (with the rest of
  // their 32 KiB block), then writes what it kept to a table. RepairDB
  // (1.23) reads logs without checking them: a damaged byte of a record
  // (an inline block's data) came back as that file's data.
  Status RecoverLevelDbLogs();
  Status RepairLevelDb(const std::string& why);
  // Before RepairDB, in one listing of STORE/meta:
  // kv::BlankDamagedLogRecordsInFile on each log and kv::MendDamagedTable on
  // each table, each file changed reported.
  Status MendLevelDbFiles();
  // A superblock record that is missing or does not decode is written from
  // STORE/superblock, or else from GuessSuperblock. Nothing happens when
  // LevelDB does not open (its own recovery comes first), when the record
  // decodes, or when it is of a newer format; nor when nothing suggests a
  // sepfs store (no copy and no root directory).
  Status MendSuperblock();
  // Runs fn with STORE/LOCK held and the options the store opens LevelDB
  // with; `what` (and STORE/meta) is reported as progress and errors.
  Status OnLevelDb(bool paranoid, const std::string& what,
                   const std::function<leveldb::Status(const leveldb::Options&)>& fn);
  void Change(std::string line) {
    if (progress_ && ++changes_since_progress_ >= 10000) {
      changes_since_progress_ = 0;
      progress_(std::to_string(rep_->changes.size()) + " changes made so far");
    }
    rep_->changes.push_back(std::move(line));
  }
  Status Commit(bool force);
  // Applies fixes for the findings of one check; *changed: something was done.
  Status Apply(const FsckReport& r, bool verified, bool* changed);
  // An inode whose mode says it is not a regular file while every entry
  // naming it, and block pointers to records that verify, say it is one (a
  // damaged mode): its type is set back to regular, permission bits kept,
  // before the fixes for those findings would drop its data and retype its
  // entries. It has no entries of its own and no symlink target. The next
  // pass verifies its records. *any: some inode was retyped.
  Status RetypeFiles(const FsckReport& r, bool* any);
  Status Reclaim(uint64_t ino);
  // Deletes the pointers of ino whose block is in drop (every pointer when
  // ino is not a regular file) and sets its allocation count from the rest.
  // Raises its size to min_size (pointers past EOF whose records verify).
  Status FixPointers(uint64_t ino, const std::map<uint64_t, std::string>& drop,
                     uint64_t min_size, uint64_t* dropped, uint64_t* old_blocks,
                     uint64_t* new_blocks, uint64_t* old_size);
  // Moves segment file `id` (set aside, or damaged) to SetAsideDir, under
  // a name no file there has yet; *to: the name.
  Status MoveOut(uint32_t id, std::string* to);
  // Gives renamed segment files the names their headers give them, and
  // opens the store again if any was.
  Status NameSegmentsBack();
  // Segments set aside as other stores' in which this store's block
  // pointers' records verify: one whose damaged header named another store
  // is this store's after all (its header is rewritten); for one whose
  // whole header does, Corruption unless some segment names the
  // superblock's uuid (else the uuid may be what is wrong).
  Status ClaimSetAsideSegments();
  Status LostFound(uint64_t* ino);
  Status MoveToLostFound(uint64_t ino, uint64_t links_seen, const std::string& break_key);
  Status RewriteCounters(bool asked);
  // Inode records (no entry: the passes move them to lost+found) and block
  // pointers for what FindSalvageable found; *any: something was written.
  Status Salvage(const FsckReport& first, bool* any);
  void LearnPaths(const FsckReport& r);
  std::string Describe(uint64_t ino);
  std::string DescribeDentry(std::string_view key);

  const std::string dir_;
  const StoreOptions options_;
  const RepairOptions repair_options_;
  Env* const env_;  // the store's files, LOCK and the logs
  RepairReport* rep_;
  const FsckProgress& progress_;
  std::unique_ptr<Store> store_;
  kv::MetaStore* meta_ = nullptr;
  kv::Batch batch_;
  size_t changes_since_progress_ = 0;
  bool verify_next_pass_ = false;
  bool counters_asked_ = false;
  uint64_t lf_ino_ = 0;
  std::string lf_name_;
  kv::InodeRecord lf_rec_;
  // Where reachable inodes named in the first check live: ino -> (parent, name).
  std::unordered_map<uint64_t, std::pair<uint64_t, std::string>> up_;
};

Status Repairer::OpenStore() {
  store_.reset();
  meta_ = nullptr;
  if (!rep_->leveldb_repaired && LooksLikeDamagedStore(env_, dir_)) {
    FsckFinding f{FsckKind::kMetaCorrupt, true, 0, 0, 0, "", MetaDir(dir_) + "/CURRENT missing"};
    rep_->before.errors.push_back(f.message);
    rep_->before.findings.push_back(std::move(f));
    SEPFS_RETURN_IF_ERROR(RepairLevelDb("its CURRENT file is missing"));
  }
  SEPFS_RETURN_IF_ERROR(MendSuperblock());
  Status st = Store::Open(dir_, options_, &store_);
  if (st.IsCorruption() && !rep_->leveldb_repaired) {
    FsckFinding f{FsckKind::kMetaCorrupt, true, 0, 0, 0, "", "store: " + st.ToString()};
    rep_->before.errors.push_back(f.message);
    rep_->before.findings.push_back(std::move(f));
    if (RecoverLevelDbLogs().ok()) {
      SEPFS_RETURN_IF_ERROR(MendSuperblock());
      st = Store::Open(dir_, options_, &store_);
    }
    if (st.ok()) {
      rep_->meta_records_dropped = true;
      Change("metadata store " + MetaDir(dir_) + ": opening it failed (" +
             rep_->before.errors.back() + "); recovered its logs dropping the records " +
             "whose checksum failed");
    } else {
      SEPFS_RETURN_IF_ERROR(RepairLevelDb("opening it failed (" + st.ToString() + ")"));
      SEPFS_RETURN_IF_ERROR(MendSuperblock());
      st = Store::Open(dir_, options_, &store_);
    }
  }
  SEPFS_RETURN_IF_ERROR(st);
  meta_ = store_->meta();
  if (store_->superblock_copy_written()) {
    Change("superblock copy " + SuperblockCopyPath(dir_) +
           ": it was missing, damaged or out of date; wrote it from the superblock record");
  }
  return Status::OK();
}

Status Repairer::MendSuperblock() {
  std::unique_ptr<FileLock> lock;
  SEPFS_RETURN_IF_ERROR(env_->LockFile(LockPath(dir_), &lock));
  kv::MetaOptions mo;
  mo.env = options_.leveldb_env;
  std::unique_ptr<kv::MetaStore> meta;
  if (!kv::MetaStore::Open(MetaDir(dir_), mo, &meta).ok()) return Status::OK();
  std::string raw;
  kv::Superblock sb;
  Status st = meta->Get(kv::SuperKey(), &raw);
  if (st.ok()) st = kv::DecodeSuperblock(raw, &sb);
  if (st.ok() || st.err() == EPROTONOSUPPORT) return Status::OK();
  if (!st.IsNotFound() && !st.IsCorruption()) return st;
  const std::string damage = st.IsNotFound() ? "the record is missing" : st.ToString();
  // The copy, if its block size fits the records (a copy from another store
  // would drop or misplace every block); else a guess. Corruption met while
  // reading the records waits for LevelDB's repair (this runs again after).
  SuperblockEvidence evidence;
  Status gathered = SuperblockEvidence::Gather(env_, dir_, meta.get(), &evidence);
  if (gathered.IsCorruption()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(gathered);
  std::string line;
  Status copy = ReadSuperblockCopy(env_, dir_, &sb);
  if (copy.ok()) copy = evidence.Check(sb);
  if (copy.ok()) {
    line = "superblock: " + damage + "; restored it from " + SuperblockCopyPath(dir_);
  } else {
    std::string why = "its copy is unusable (" + copy.ToString() + ")";
    if (copy.IsNotFound()) why = "there is no copy (" + SuperblockCopyPath(dir_) + ")";
    if (copy.err() == EINVAL) {
      why = "its copy contradicts the records (" + std::string(copy.message()) + ")";
    }
    std::string how;
    Status guess = evidence.Guess(&sb, &how);
    if (guess.IsNotFound() || guess.IsCorruption()) return Status::OK();
    SEPFS_RETURN_IF_ERROR(guess);
    line = "superblock: " + damage + ", and " + why + "; rebuilt it from the store's records: " +
           how;
  }
  FsckFinding f{FsckKind::kMetaCorrupt, true, 0, 0, 0, kv::SuperKey(), "superblock: " + damage};
  rep_->before.errors.push_back(f.message);
  rep_->before.findings.push_back(std::move(f));
  kv::Batch b;
  b.Put(kv::SuperKey(), kv::EncodeSuperblock(sb));
  SEPFS_RETURN_IF_ERROR(meta->Write(&b, /*sync=*/true));
  Change(std::move(line));
  return Status::OK();
}

Status Repairer::OnLevelDb(bool paranoid, const std::string& what,
                           const std::function<leveldb::Status(const leveldb::Options&)>& fn) {
  std::unique_ptr<FileLock> lock;
  SEPFS_RETURN_IF_ERROR(env_->LockFile(LockPath(dir_), &lock));
  std::unique_ptr<const leveldb::FilterPolicy> filter(
      leveldb::NewBloomFilterPolicy(kBloomBitsPerKey));
  leveldb::Options lo;
  lo.paranoid_checks = paranoid;
  lo.filter_policy = filter.get();
  if (options_.leveldb_env) lo.env = options_.leveldb_env;
  const std::string about = what + " " + MetaDir(dir_);
  if (progress_) progress_(about);
  return kv::FromLevelDb(fn(lo), about);
}

Status Repairer::RecoverLevelDbLogs() {
  return OnLevelDb(/*paranoid=*/false, "recovering the logs of", [&](const leveldb::Options& lo) {
    leveldb::DB* db = nullptr;
    leveldb::Status s = leveldb::DB::Open(lo, MetaDir(dir_), &db);
    delete db;
    return s;
  });
}

Status Repairer::MendLevelDbFiles() {
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env_->ListDir(MetaDir(dir_), &names));
  for (const std::string& name : names) {
    const std::string path = MetaDir(dir_) + "/" + name;
    if (name.ends_with(".log")) {
      uint64_t n = 0;
      SEPFS_RETURN_IF_ERROR(kv::BlankDamagedLogRecordsInFile(env_, path, &n));
      if (n > 0) {
        Change("metadata log " + path + ": blanked " + std::to_string(n) +
               " records whose checksum failed (with the rest of their 32 KiB block)");
      }
    } else if (name.ends_with(".ldb") || name.ends_with(".sst")) {
      kv::TableMend mend;
      SEPFS_RETURN_IF_ERROR(kv::MendDamagedTable(env_, path, &mend));
      if (mend.entries > 0) {
        Change("metadata table " + path + ": its index was lost or damaged; rebuilt it from the " +
               std::to_string(mend.entries) + " keys of its " + std::to_string(mend.blocks) +
               " intact data blocks from its start (any after the damage are lost; the damaged "
               "file was kept as " +
               MetaDir(dir_) + "/lost/" + name + ")");
      }
    }
  }
  return Status::OK();
}

Status Repairer::RepairLevelDb(const std::string& why) {
  // RepairDB converts logs without checking their records: the damaged ones
  // are blanked first; it drops tables whose end is lost: they are rebuilt
  // from their blocks first; and it leaves reads of older versions until a
  // compaction: it gets one (kv::RepairDbInOrder). Paranoid: table blocks
  // whose checksum fails are dropped.
  SEPFS_RETURN_IF_ERROR(OnLevelDb(
      /*paranoid=*/true, "running leveldb::RepairDB on", [&](const leveldb::Options& lo) {
        if (Status st = MendLevelDbFiles(); !st.ok()) {
          return leveldb::Status::IOError(st.ToString());
        }
        return kv::RepairDbInOrder(MetaDir(dir_), lo);
      }));
  rep_->leveldb_repaired = rep_->meta_records_dropped = true;
  Change("metadata store " + MetaDir(dir_) + ": " + why +
         "; rebuilt it with leveldb::RepairDB (keys in damaged blocks are lost, damaged files "
         "were moved to " + MetaDir(dir_) + "/lost)");
  return Status::OK();
}

Status Repairer::Commit(bool force) {
  if (batch_.empty() || (!force && batch_.ApproximateSize() < kBatchBytes)) return Status::OK();
  Status st = meta_->Write(&batch_, /*sync=*/false);
  batch_.Clear();
  return st;
}

void Repairer::LearnPaths(const FsckReport& r) {
  std::set<uint64_t> wanted;
  for (const auto& f : r.findings) {
    if (f.ino) wanted.insert(f.ino);
    uint64_t parent;
    std::string_view name;
    if (kv::ParseDentryKey(f.key, &parent, &name)) wanted.insert(parent);
  }
  if (wanted.empty()) return;
  // Best effort: paths only make the report friendlier.
  (void)meta_->ScanPrefix(std::string(1, kv::kTagDentry),
                          [&](std::string_view key, std::string_view value) {
                            uint64_t parent;
                            std::string_view name;
                            kv::DirEntry e;
                            if (kv::ParseDentryKey(key, &parent, &name) &&
                                kv::DecodeDirEntry(value, &e).ok() &&
                                (e.type == S_IFDIR || wanted.count(e.ino))) {
                              up_.emplace(e.ino, std::make_pair(parent, std::string(name)));
                            }
                            return true;
                          });
}

std::string Repairer::Describe(uint64_t ino) {
  std::string out = "inode " + std::to_string(ino);
  std::string path;
  uint64_t at = ino;
  for (int depth = 0; at != 1 && depth < 4096; depth++) {
    auto it = up_.find(at);
    if (it == up_.end()) return out;
    path = "/" + it->second.second + path;
    at = it->second.first;
  }
  if (at != 1) return out;
  return out + " (" + (path.empty() ? "/" : path) + ")";
}

std::string Repairer::DescribeDentry(std::string_view key) {
  uint64_t parent;
  std::string_view name;
  if (!kv::ParseDentryKey(key, &parent, &name)) return kv::DescribeKey(key);
  return "entry '" + std::string(name) + "' of " + Describe(parent);
}

Status Repairer::Reclaim(uint64_t ino) {
  uint64_t blocks = 0;
  SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(kv::BlockPrefix(ino), [&](std::string_view key,
                                                                     std::string_view) {
    batch_.Delete(key);
    blocks++;
    return true;
  }));
  SEPFS_RETURN_IF_ERROR(
      meta_->ScanPrefix(kv::XattrPrefix(ino), [&](std::string_view key, std::string_view) {
        batch_.Delete(key);
        return true;
      }));
  batch_.Delete(kv::InodeKey(ino));
  batch_.Delete(kv::SymlinkKey(ino));
  batch_.Delete(kv::OrphanKey(ino));
  Change("reclaimed orphan inode " + std::to_string(ino) + " (unlinked; " +
         std::to_string(blocks) + " block pointers freed)");
  return Commit(false);
}

Status Repairer::FixPointers(uint64_t ino, const std::map<uint64_t, std::string>& drop,
                             uint64_t min_size, uint64_t* dropped, uint64_t* old_blocks,
                             uint64_t* new_blocks, uint64_t* old_size) {
  kv::InodeRecord r;
  Status st = meta_->GetInode(ino, &r);
  if (!st.ok() && !st.IsNotFound() && !st.IsCorruption()) return st;
  const bool regular = st.ok() && S_ISREG(r.mode);
  uint64_t sectors = 0;
  *dropped = 0;
  SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(kv::BlockPrefix(ino), [&](std::string_view key,
                                                                     std::string_view value) {
    uint64_t i, block;
    kv::BlockValue v;
    if (!regular || !kv::ParseBlockKey(key, &i, &block) || drop.count(block) ||
        !kv::DecodeBlock(value, &v).ok()) {
      batch_.Delete(key);
      ++*dropped;
    } else {
      sectors += SectorsOf(v.length());
    }
    return true;
  }));
  *old_blocks = regular ? r.blocks : 0;
  *new_blocks = regular ? sectors : 0;
  *old_size = regular ? r.size : 0;
  if (regular && (r.blocks != sectors || r.size < min_size)) {
    r.blocks = sectors;
    r.size = std::max(r.size, min_size);
    batch_.PutInode(r);
  }
  return Status::OK();
}

Status Repairer::LostFound(uint64_t* out) {
  if (lf_ino_) {
    *out = lf_ino_;
    return Status::OK();
  }
  for (int n = 0; n < 100; n++) {
    const std::string name = n == 0 ? "lost+found" : "lost+found." + std::to_string(n);
    kv::DirEntry e;
    Status st = meta_->GetDentry(1, name, &e);
    if (st.ok()) {
      kv::InodeRecord r;
      if (meta_->GetInode(e.ino, &r).ok() && S_ISDIR(r.mode)) {
        lf_ino_ = e.ino;
        lf_name_ = name;
        lf_rec_ = r;
        *out = lf_ino_;
        return Status::OK();
      }
      continue;  // the name is taken by something else
    }
    if (!st.IsNotFound()) return st;
    kv::InodeRecord root;
    SEPFS_RETURN_IF_ERROR(meta_->GetInode(1, &root));
    SEPFS_RETURN_IF_ERROR(Commit(true));  // the allocator writes on its own
    kv::InodeAllocator alloc(meta_);
    SEPFS_RETURN_IF_ERROR(alloc.Init());
    uint64_t ino;
    SEPFS_RETURN_IF_ERROR(alloc.Allocate(1, &ino));
    std::string unused;
    if (!meta_->Get(kv::InodeKey(ino), &unused).IsNotFound()) {
      return Status::Corruption("lost+found: new inode number " + std::to_string(ino) +
                                " is in use (inode counter too low)");
    }
    kv::InodeRecord r;
    r.ino = ino;
    r.mode = S_IFDIR | 0700;
    r.nlink = 2;
    r.atime = r.mtime = r.ctime = Now();
    root.nlink++;
    root.mtime = root.ctime = r.mtime;
    batch_.PutInode(r);
    batch_.PutInode(root);
    batch_.PutDentry(1, name, kv::DirEntry{ino, S_IFDIR});
    SEPFS_RETURN_IF_ERROR(Commit(true));
    Change("created /" + name + " (inode " + std::to_string(ino) + ", mode 0700)");
    lf_ino_ = ino;
    lf_name_ = name;
    lf_rec_ = r;
    *out = ino;
    return Status::OK();
  }
  return Status::FromErrno(EEXIST, "no name for a lost+found directory is free");
}

Status Repairer::MoveToLostFound(uint64_t ino, uint64_t links_seen,
                                 const std::string& break_key) {
  kv::InodeRecord r;
  SEPFS_RETURN_IF_ERROR(meta_->GetInode(ino, &r));
  uint64_t lf = 0;
  SEPFS_RETURN_IF_ERROR(LostFound(&lf));
  std::string name = "#" + std::to_string(ino);
  for (int n = 1;; n++) {
    kv::DirEntry e;
    Status st = meta_->GetDentry(lf, name, &e);
    if (st.IsNotFound()) break;
    SEPFS_RETURN_IF_ERROR(st);
    name = "#" + std::to_string(ino) + "." + std::to_string(n);
  }
  std::string how;
  if (!break_key.empty()) {
    batch_.Delete(break_key);
    links_seen = 0;
    how = " (" + DescribeDentry(break_key) + " removed: a directory cycle)";
  }
  batch_.PutDentry(lf, name, kv::DirEntry{ino, r.mode & S_IFMT});
  if (S_ISDIR(r.mode)) {
    lf_rec_.nlink++;
    batch_.PutInode(lf_rec_);
  } else if (r.nlink != links_seen + 1) {
    r.nlink = static_cast<uint32_t>(links_seen + 1);
    batch_.PutInode(r);
  }
  Change(Describe(ino) + ": " + TypeName(r.mode) + " of " + std::to_string(r.size) +
         " bytes not reachable from the root; moved to /" + lf_name_ + "/" + name + how);
  return Commit(false);
}

Status Repairer::RetypeFiles(const FsckReport& r, bool* any) {
  std::map<uint64_t, std::vector<const FsckFinding*>> pointers;
  for (const auto& f : r.findings) {
    if (f.kind == FsckKind::kPointerNotRegular) pointers[f.ino].push_back(&f);
  }
  if (pointers.empty()) return Status::OK();
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> named;  // ino -> (as file, as other)
  SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(std::string(1, kv::kTagDentry),
                                          [&](std::string_view, std::string_view value) {
                                            kv::DirEntry e;
                                            if (kv::DecodeDirEntry(value, &e).ok() &&
                                                pointers.count(e.ino)) {
                                              auto& [file, other] = named[e.ino];
                                              (e.type == S_IFREG ? file : other)++;
                                            }
                                            return true;
                                          }));
  for (const auto& [ino, found] : pointers) {
    const auto [as_file, as_other] = named[ino];
    kv::InodeRecord rec;
    std::string unused;
    bool children = false;
    if (as_file == 0 || as_other > 0 || !meta_->GetInode(ino, &rec).ok() || S_ISREG(rec.mode) ||
        !meta_->Get(kv::SymlinkKey(ino), &unused).IsNotFound()) {
      continue;
    }
    SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(kv::DentryPrefix(ino),
                                            [&](std::string_view, std::string_view) {
                                              children = true;
                                              return false;
                                            }));
    if (children) continue;
    uint64_t records = 0;
    for (const FsckFinding* f : found) {
      std::string raw;
      kv::BlockValue v;
      if (!meta_->Get(f->key, &raw).ok() || !kv::DecodeBlock(raw, &v).ok()) continue;
      std::string buf(v.length(), '\0');
      records += v.inlined || store_->vlog()->Read(v.ptr, ino, f->block, buf.data()).ok();
    }
    if (records == 0) continue;
    const uint32_t was = rec.mode;
    rec.mode = S_IFREG | (rec.mode & 07777);
    batch_.PutInode(rec);
    char perms[8];
    std::snprintf(perms, sizeof(perms), "%04o", rec.mode & 07777);
    Change(Describe(ino) + ": its mode said " + TypeName(was) + ", while its " +
           std::to_string(as_file) + " entries and " + std::to_string(records) +
           " block records that verify say file: made it a regular file again (permissions " +
           perms + " kept)");
    *any = true;
  }
  return Commit(true);
}

Status Repairer::Apply(const FsckReport& r, bool verified, bool* changed) {
  const size_t before = rep_->changes.size();
  bool retyped = false;
  SEPFS_RETURN_IF_ERROR(RetypeFiles(r, &retyped));
  if (retyped) {  // check again before anything else acts on the old type
    verify_next_pass_ = true;
    *changed = true;
    return Status::OK();
  }
  lf_ino_ = 0;  // re-read: the last pass may have fixed its link count
  bool root_missing = false, unreachable = false;
  std::map<uint64_t, std::map<uint64_t, std::string>> drops;  // ino -> block -> reason
  std::set<uint64_t> block_counts;
  std::map<uint64_t, uint64_t> sizes;  // ino -> size its verified records need
  std::vector<const FsckFinding*> moves;
  for (const auto& f : r.findings) {
    switch (f.kind) {
      case FsckKind::kRootMissing:
        root_missing = true;
        break;
      case FsckKind::kUnreachable:
        unreachable = true;
        moves.push_back(&f);
        break;
      case FsckKind::kInoCounter:
        batch_.Put(f.key, kv::EncodeCounter(f.value));
        Change("inode number counter raised to " + std::to_string(f.value));
        break;
      default:
        break;
    }
  }
  SEPFS_RETURN_IF_ERROR(Commit(true));  // the counter, before any allocation
  if (root_missing) {
    kv::InodeRecord root;
    root.ino = 1;
    root.mode = S_IFDIR | 0755;
    root.nlink = 2;
    root.atime = root.mtime = root.ctime = Now();
    batch_.PutInode(root);
    Change("recreated the root directory (inode 1)");
  }
  for (const auto& f : r.findings) {
    switch (f.kind) {
      case FsckKind::kInodeBad:
        batch_.Delete(f.key);
        Change("deleted undecodable inode record " + kv::DescribeKey(f.key));
        break;
      case FsckKind::kOrphan:
        SEPFS_RETURN_IF_ERROR(Reclaim(f.ino));
        break;
      case FsckKind::kOrphanKeyStale:
        batch_.Delete(f.key);
        Change("deleted orphan entry " + kv::DescribeKey(f.key) + " (no such inode)");
        break;
      case FsckKind::kOrphanLinked:
        batch_.Delete(f.key);
        Change(Describe(f.ino) + ": deleted its orphan entry (it has directory entries)");
        break;
      case FsckKind::kDentryBad:
        batch_.Delete(f.key);
        Change("deleted undecodable directory entry " + kv::DescribeKey(f.key));
        break;
      case FsckKind::kDentryBadParent: {
        uint64_t parent = 0;
        std::string_view name;
        if (root_missing && kv::ParseDentryKey(f.key, &parent, &name) && parent == 1) {
          break;  // the root made again above keeps its entries (next pass checks them)
        }
        batch_.Delete(f.key);
        Change("deleted " + DescribeDentry(f.key) + ": parent is not an existing directory");
        break;
      }
      case FsckKind::kDentryMissingInode:
        batch_.Delete(f.key);
        Change("deleted " + DescribeDentry(f.key) + ": it named missing inode " +
               std::to_string(f.ino));
        break;
      case FsckKind::kDentryNamesRoot:
        batch_.Delete(f.key);
        Change("deleted " + DescribeDentry(f.key) + ": it named the root directory");
        break;
      case FsckKind::kDirExtraEntry:
        batch_.Delete(f.key);
        Change("deleted " + DescribeDentry(f.key) + ": a second entry of directory " +
               Describe(f.ino));
        break;
      case FsckKind::kDentryWrongType:
        batch_.Put(f.key, kv::EncodeDirEntry(kv::DirEntry{f.ino, static_cast<uint32_t>(f.value)}));
        Change("fixed the type of " + DescribeDentry(f.key) + " (" + TypeName(f.value) + ")");
        break;
      case FsckKind::kLinkCount:
        if (root_missing || unreachable) break;  // the moves change the counts
        {
          kv::InodeRecord ir;
          SEPFS_RETURN_IF_ERROR(meta_->GetInode(f.ino, &ir));
          Change(Describe(f.ino) + ": link count " + std::to_string(ir.nlink) + " -> " +
                 std::to_string(f.value));
          ir.nlink = static_cast<uint32_t>(f.value);
          batch_.PutInode(ir);
          SEPFS_RETURN_IF_ERROR(Commit(true));  // later fixes re-read the inode
        }
        break;
      case FsckKind::kBlockCount:
        block_counts.insert(f.ino);
        break;
      case FsckKind::kXattrNoInode:
      case FsckKind::kSymlinkNoInode:
        batch_.Delete(f.key);
        Change("deleted " + kv::DescribeKey(f.key) + " of missing inode " +
               std::to_string(f.ino));
        break;
      case FsckKind::kSymlinkMissing:
        batch_.Delete(kv::InodeKey(f.ino));
        SEPFS_RETURN_IF_ERROR(
            meta_->ScanPrefix(kv::XattrPrefix(f.ino), [&](std::string_view key, std::string_view) {
              batch_.Delete(key);
              return true;
            }));
        Change(Describe(f.ino) + ": symlink without a target deleted");
        break;
      case FsckKind::kXattrCount: {
        // An earlier fix (an orphan's reclaim) may have deleted the inode in
        // the pending batch: a record read past it would come back.
        SEPFS_RETURN_IF_ERROR(Commit(true));
        kv::InodeRecord ir;
        Status st = meta_->GetInode(f.ino, &ir);
        if (st.IsNotFound()) break;  // deleted by an earlier fix
        SEPFS_RETURN_IF_ERROR(st);
        const uint32_t count =
            f.value < kv::kXattrsUnknown ? static_cast<uint32_t>(f.value) : kv::kXattrsUnknown;
        Change(Describe(f.ino) + ": xattr names counted as " +
               std::to_string(ir.xattr_list_bytes) + " bytes -> " + std::to_string(f.value));
        ir.xattr_list_bytes = count;
        batch_.PutInode(ir);
        SEPFS_RETURN_IF_ERROR(Commit(true));
        break;
      }
      case FsckKind::kSymlinkSize: {
        kv::InodeRecord ir;
        SEPFS_RETURN_IF_ERROR(meta_->GetInode(f.ino, &ir));
        Change(Describe(f.ino) + ": symlink size " + std::to_string(ir.size) + " -> " +
               std::to_string(f.value));
        ir.size = f.value;
        batch_.PutInode(ir);
        SEPFS_RETURN_IF_ERROR(Commit(true));
        break;
      }
      case FsckKind::kSegmentCounters:
        counters_asked_ = true;
        break;
      default:
        if (f.kind == FsckKind::kPointerBeyondEof && f.value != 0) {
          sizes[f.ino] = std::max(sizes[f.ino], f.value);
        } else if (IsPointerKind(f.kind)) {
          uint64_t ino, block;
          if (kv::ParseBlockKey(f.key, &ino, &block)) {
            drops[ino].emplace(block, PointerReason(f));
          } else {
            batch_.Delete(f.key);
            Change("deleted undecodable block key " + kv::DescribeKey(f.key));
          }
        }
        break;
    }
    SEPFS_RETURN_IF_ERROR(Commit(false));
  }

  // Pointers, one file at a time (each reads its inode afresh).
  SEPFS_RETURN_IF_ERROR(Commit(true));
  for (uint64_t ino : block_counts) drops[ino];  // recount only
  for (const auto& [ino, size] : sizes) drops[ino];
  for (const auto& [ino, blocks] : drops) {
    uint64_t dropped = 0, old_blocks = 0, new_blocks = 0, old_size = 0;
    const uint64_t min_size = sizes.count(ino) ? sizes[ino] : 0;
    SEPFS_RETURN_IF_ERROR(
        FixPointers(ino, blocks, min_size, &dropped, &old_blocks, &new_blocks, &old_size));
    kv::InodeRecord ir;
    const bool regular = meta_->GetInode(ino, &ir).ok() && S_ISREG(ir.mode);
    if (old_size < min_size) {
      Change(Describe(ino) + ": size " + std::to_string(old_size) + " -> " +
             std::to_string(min_size) + " (blocks past the end verify: the size had been lost)");
    }
    std::string line = Describe(ino) + ": ";
    if (blocks.empty()) {
      if (dropped == 0 && old_blocks == new_blocks) continue;
      line += "allocation count " + std::to_string(old_blocks) + " -> " +
              std::to_string(new_blocks) + " sectors (block pointers were lost)";
    } else {
      std::map<std::string, std::vector<uint64_t>> by_reason;
      for (const auto& [b, why] : blocks) by_reason[why].push_back(b);
      line += "dropped " + std::to_string(dropped) + " block pointer" + (dropped == 1 ? "" : "s");
      for (const auto& [why, list] : by_reason) {
        line += "; " + why + ": block" + (list.size() == 1 ? " " : "s ");
        for (size_t i = 0; i < list.size() && i < 16; i++) {
          line += (i ? "," : "") + std::to_string(list[i]);
        }
        if (list.size() > 16) line += ",... (" + std::to_string(list.size()) + ")";
      }
      if (regular) line += "; the blocks read as zeros now";
    }
    Change(line);
    SEPFS_RETURN_IF_ERROR(Commit(true));
  }
  SEPFS_RETURN_IF_ERROR(Commit(true));

  // Unreachable inodes: those no entry names go to lost+found; when every
  // one is named from inside an unreachable directory (a cycle), the
  // smallest such directory is cut out of it.
  if (unreachable && !root_missing) {
    bool moved = false;
    for (const FsckFinding* f : moves) {
      if (f->value == 0) {
        SEPFS_RETURN_IF_ERROR(MoveToLostFound(f->ino, 0, ""));
        moved = true;
      }
    }
    if (!moved) {
      for (const FsckFinding* f : moves) {
        if (!f->key.empty()) {
          SEPFS_RETURN_IF_ERROR(MoveToLostFound(f->ino, f->value, f->key));
          break;
        }
      }
    }
  }
  SEPFS_RETURN_IF_ERROR(Commit(true));
  SEPFS_RETURN_IF_ERROR(meta_->Sync());

  // Other stores' segments: their records are no data of this store, and
  // the pointers into them (reported as into a missing segment) are dropped
  // above.
  for (const auto& f : r.findings) {
    if (f.kind != FsckKind::kSegmentForeign) continue;
    std::string to;
    Status st = MoveOut(static_cast<uint32_t>(f.value), &to);
    if (st.ok()) {
      Change("moved " + vlog::SegmentFileName(static_cast<uint32_t>(f.value)) + " to " + to +
             " (another store's segment; its records are not this store's data)");
    } else if (progress_) {
      progress_("cannot move foreign segment " + std::to_string(f.value) + ": " + st.ToString());
    }
  }

  // Damaged segment headers (after a verified check, the pointers that
  // remain are exactly those counted live, their records verified one by
  // one): a segment that still holds live records gets a new header, one
  // that holds none is moved out (never deleted: what it is is not known).
  if (verified) {
    for (const auto& f : r.findings) {
      if (f.kind != FsckKind::kSegmentDamaged) continue;
      const auto id = static_cast<uint32_t>(f.value);
      const bool live = r.live.count(id) != 0;
      std::string to;
      Status st = live ? store_->vlog()->RewriteHeader(id) : MoveOut(id, &to);
      if (st.ok()) {
        Change(live ? "rewrote the damaged header of segment " + std::to_string(id) +
                          " (its live records verify)"
                    : "moved segment " + std::to_string(id) + " to " + to +
                          " (damaged header; no pointer names it any more)");
      } else if (progress_) {
        progress_(std::string(live ? "cannot rewrite the header of" : "cannot move out") +
                  " damaged segment " + std::to_string(id) + ": " + st.ToString());
      }
    }
    SEPFS_RETURN_IF_ERROR(store_->vlog()->Sync());
  }
  *changed = rep_->changes.size() != before;
  return Status::OK();
}

Status Repairer::MoveOut(uint32_t id, std::string* shown) {
  const std::string dir = SetAsideDir(store_->io_dir());
  Status st = env_->CreateDir(dir);
  if (!st.ok() && st.err() != EEXIST) return st;
  const std::string name = vlog::SegmentFileName(id);
  std::string to = dir + "/" + name;
  for (int n = 1;; ++n) {
    st = store_->vlog()->MoveOut(id, to);
    if (st.err() != EEXIST) break;
    to = dir + "/" + name + "." + std::to_string(n);
  }
  SEPFS_RETURN_IF_ERROR(st);
  *shown = SetAsideDir(dir_) + to.substr(dir.size());
  return Status::OK();
}

Status Repairer::NameSegmentsBack() {
  using Why = vlog::SetAsideSegment::Why;
  vlog::ValueLog* log = store_->vlog();
  const vlog::StoreId own = StoreIdOf(store_->super());
  bool renamed = false;
  std::set<uint32_t> reported;
  // Names free first, again and again: a file named back frees its old
  // name for the next. Where a name is another renamed file's (a cycle),
  // one of them takes a new id to break it.
  for (bool progress = true; progress;) {
    progress = false;
    std::map<uint32_t, vlog::SetAsideSegment> aside;
    for (const auto& s : log->SetAsideSegments()) aside.emplace(s.id, s);
    const vlog::SetAsideSegment* waiting = nullptr;  // on another renamed file
    for (const auto& [id, s] : aside) {
      if (s.why != Why::kMisnamed) continue;
      const std::string file = vlog::SegmentFileName(id);
      if (reported.insert(id).second) {
        FsckFinding f{FsckKind::kSegmentMisnamed, true, 0, 0, id, "",
                      "segment file " + file + ": " + DescribeSetAside(s, store_->super().uuid)};
        rep_->before.errors.push_back(f.message);
        rep_->before.findings.push_back(std::move(f));
      }
      Status st = log->NameBack(id);
      if (st.ok()) {
        renamed = progress = true;
        Change("renamed " + file + " to " + vlog::SegmentFileName(s.header_id) +
               ", the name its header gives it");
        continue;
      }
      if (st.err() != EEXIST) return st;
      auto holder = aside.find(s.header_id);
      std::string to;
      if (holder != aside.end() && holder->second.why == Why::kMisnamed) {
        if (waiting == nullptr) waiting = &s;
        continue;
      }
      if (holder != aside.end() && s.store_id == own) {
        // Another store's file has the name this store's segment needs:
        // it goes out as it would anyway.
        SEPFS_RETURN_IF_ERROR(MoveOut(holder->first, &to));
        Change("moved " + vlog::SegmentFileName(holder->first) + " to " + to +
               " (another store's segment, in the place of this store's " + file + ")");
      } else {
        SEPFS_RETURN_IF_ERROR(MoveOut(id, &to));
        Change("moved " + file + " to " + to + " (its header names segment " +
               std::to_string(s.header_id) + ", and a file of this store has that name)");
      }
      progress = true;
      break;  // the set-aside list changed
    }
    if (!progress && waiting != nullptr) {
      uint32_t to = 0;
      SEPFS_RETURN_IF_ERROR(log->RenumberMisnamed(waiting->id, &to));
      reported.insert(to);
      Change("renamed " + vlog::SegmentFileName(waiting->id) + " to " +
             vlog::SegmentFileName(to) + " for a while (renamed files had each other's names)");
      progress = true;
    }
  }
  return renamed ? OpenStore() : Status::OK();
}

Status Repairer::ClaimSetAsideSegments() {
  using Why = vlog::SetAsideSegment::Why;
  std::map<uint32_t, vlog::SetAsideSegment> foreign;
  for (const auto& s : store_->vlog()->SetAsideSegments()) {
    if (s.why != Why::kMisnamed) foreign.emplace(s.id, s);
  }
  if (foreign.empty()) return Status::OK();
  // Up to kSamples pointers into each: do their records verify there?
  constexpr int kSamples = 4;
  std::map<uint32_t, std::unique_ptr<File>> files;
  std::map<uint32_t, int> tried, verified;
  SEPFS_RETURN_IF_ERROR(meta_->ScanAllBlocks(
      [&](std::string_view, uint64_t ino, uint64_t block, const kv::BlockValue& v) {
        if (v.inlined || foreign.count(v.ptr.segment) == 0 || tried[v.ptr.segment] >= kSamples) {
          return true;
        }
        tried[v.ptr.segment]++;
        std::unique_ptr<File>& f = files[v.ptr.segment];
        if (f == nullptr &&
            !env_->OpenFile(VlogDir(store_->io_dir()) + "/" +
                                vlog::SegmentFileName(v.ptr.segment),
                            OpenMode::kRead, &f)
                 .ok()) {
          return true;
        }
        verified[v.ptr.segment] += vlog::RecordVerifiesAt(f.get(), v.ptr, ino, block);
        return true;
      }));
  files.clear();
  bool adopted = false;
  const vlog::SetAsideSegment* theirs_with_ours = nullptr;
  for (const auto& [id, s] : foreign) {
    if (verified[id] == 0) continue;
    if (s.why == Why::kForeignDamaged) {
      // The store id in a damaged header was damaged too.
      SEPFS_RETURN_IF_ERROR(store_->vlog()->Adopt(id));
      adopted = true;
      Change("rewrote the damaged header of segment " + std::to_string(id) +
             " (the store id in it was another's, but this store's block pointers' records " +
             "verify in it)");
    } else if (theirs_with_ours == nullptr) {
      theirs_with_ours = &s;
    }
  }
  if (adopted) SEPFS_RETURN_IF_ERROR(OpenStore());
  if (theirs_with_ours == nullptr) return Status::OK();
  // A whole header names another store, and this store's pointers' records
  // verify in it: a store that did the same steps as this one, or this
  // store with the wrong uuid. Some segment naming the uuid settles it.
  const vlog::StoreId own = StoreIdOf(store_->super());
  for (const auto& s : store_->vlog()->Segments()) {
    if (s.store_id == own) return Status::OK();
  }
  return Status::Corruption(
      "no segment names this store's uuid " + store_->super().uuid + ", and this store's " +
      "block pointers lead into " + vlog::SegmentFileName(theirs_with_ours->id) +
      ", which names store " + vlog::StoreIdHex(theirs_with_ours->store_id) +
      ": the superblock's uuid may be what is wrong, so the repair changed nothing (moving " +
      "such segments out would drop the pointers into them); move the segments that are " +
      "not this store's out of " + VlogDir(dir_) + " and run it again");
}

// The persisted counts are the last checkpoint plus the journal entries
// since (fs/live_journal.h). After repairs, or when they disagree with the
// pointers, they are rewritten as a checkpoint of a recount. A store not
// unmounted cleanly loses its checkpoint instead: its journal is what tells
// the mount which pointers may name records a crash took, so the mount does
// a full recount (and drops such pointers).
Status Repairer::RewriteCounters(bool asked) {
  LoadedCounts lc;
  SEPFS_RETURN_IF_ERROR(LoadCounts(meta_, &lc));
  if (!lc.have_checkpoint) return Status::OK();  // the mount recounts
  std::map<uint32_t, uint64_t> live;
  SEPFS_RETURN_IF_ERROR(meta_->ScanAllBlocks(
      [&](std::string_view, uint64_t, uint64_t, const kv::BlockValue& v) {
        if (!v.inlined) live[v.ptr.segment] += v.ptr.record_size();
        return true;
      }));
  if (lc.consistent && lc.live == live && !asked && !rep_->changed()) return Status::OK();
  size_t differ = 0;
  for (const auto& [id, bytes] : live) differ += !lc.live.count(id) || lc.live.at(id) != bytes;
  for (const auto& [id, bytes] : lc.live) differ += !live.count(id);
  SEPFS_RETURN_IF_ERROR(meta_->ScanPrefix(std::string(1, kv::kTagJournal),
                                          [&](std::string_view key, std::string_view) {
                                            batch_.Delete(key);
                                            return true;
                                          }));
  uint64_t clean = 0;
  Status st = meta_->GetCounter("clean", &clean);
  if (!st.ok() && !st.IsNotFound()) return st;
  if (!clean) {
    batch_.Delete(kv::CounterKey(kSegmentUsageCounter));
    batch_.Delete(kv::CounterKey(kVlogHeadsCounter));
    SEPFS_RETURN_IF_ERROR(Commit(true));
    Change("dropped the segment counter checkpoint (not unmounted cleanly): the next mount "
           "recounts every block pointer");
    return Status::OK();
  }
  batch_.Put(kv::CounterKey(kSegmentUsageCounter), EncodeLiveCounts(live));
  if (!lc.consistent) {
    // The heads may be what could not be read: the vLog's, now, at rest.
    VlogHeads heads;
    heads.max_segment = store_->vlog()->MaxSegmentId();
    SEPFS_RETURN_IF_ERROR(store_->vlog()->SyncHeads(&heads.heads));
    batch_.Put(kv::CounterKey(kVlogHeadsCounter), EncodeVlogHeads(heads));
  }
  SEPFS_RETURN_IF_ERROR(Commit(true));
  if (differ > 0 || !lc.consistent || asked) {
    Change("rewrote the persisted live counters from a recount (" + std::to_string(differ) +
           " segments differed)");
  }
  return Status::OK();
}

Status Repairer::Salvage(const FsckReport& first, bool* any) {
  *any = false;
  std::set<uint64_t> lost_pointers;  // allocation counts above what the pointers hold
  for (const auto& f : first.findings) {
    if (f.kind != FsckKind::kBlockCount) continue;
    kv::InodeRecord r;
    if (meta_->GetInode(f.ino, &r).ok() && r.blocks > f.value) lost_pointers.insert(f.ino);
  }
  // Lost pointers of a file that kept its inode are always looked for: the
  // pass that follows rewrites the allocation count, the only sign that
  // they were lost (a later --salvage could no longer find them). Files
  // without an inode come back only when asked.
  if (!repair_options_.salvage && !rep_->meta_records_dropped && lost_pointers.empty()) {
    return Status::OK();
  }
  SalvageScan scan;
  SEPFS_RETURN_IF_ERROR(FindSalvageable(store_.get(), lost_pointers, &scan, progress_));
  if (!repair_options_.salvage) {
    std::erase_if(scan.files, [&](const SalvagedFile& f) {
      if (!f.has_record) rep_->salvageable++;
      return !f.has_record;
    });
  }
  if (scan.damaged_records > 0 && !scan.files.empty()) {
    Change("salvage: " + std::to_string(scan.damaged_records) +
           " vLog records did not verify; " + std::to_string(scan.skipped_bytes) +
           " bytes after them were passed over to the next record that does");
  }
  const kv::Timespec now = Now();
  const uint32_t bs = store_->super().block_size;
  for (const SalvagedFile& f : scan.files) {
    if (f.has_record) {
      for (const auto& [block, ptr] : f.blocks) batch_.PutBlock(f.ino, block, ptr);
      Change(Describe(f.ino) + ": pointed " + std::to_string(f.blocks.size()) +
             " blocks inside its size, whose pointers were lost, to their newest vLog records");
      SEPFS_RETURN_IF_ERROR(Commit(false));
      *any = true;
      continue;
    }
    kv::InodeRecord r;
    r.ino = f.ino;
    r.mode = S_IFREG | 0600;  // whoever owned it, only root reads it until told
    r.nlink = 1;
    r.size = f.size;
    r.blocks = f.sectors;
    r.atime = r.mtime = r.ctime = now;
    if (store_->super().version >= kv::kMetaFormatXattrCounts) r.xattr_list_bytes = 0;
    batch_.PutInode(r);
    for (const auto& [block, ptr] : f.blocks) batch_.PutBlock(f.ino, block, ptr);
    const bool full_end = f.size % bs == 0;
    Change("salvaged inode " + std::to_string(f.ino) + ": " +
           std::to_string(f.blocks.size() + f.kept) + " blocks (" + std::to_string(f.kept) +
           " of them still pointed to), " + std::to_string(f.size) +
           " bytes; its inode record was lost" +
           (full_end && store_->super().inline_max > 0
                ? " (it ends with a full block: a last block of at most " +
                      std::to_string(store_->super().inline_max) +
                      " bytes, kept inline, may be missing)"
                : ""));
    SEPFS_RETURN_IF_ERROR(Commit(false));
    *any = true;
  }
  return Commit(true);
}

Status Repairer::Run() {
  SEPFS_RETURN_IF_ERROR(OpenStore());
  // Renamed segments first: the check would drop the pointers into them.
  SEPFS_RETURN_IF_ERROR(NameSegmentsBack());
  SEPFS_RETURN_IF_ERROR(ClaimSetAsideSegments());
  FsckReport r;
  SEPFS_RETURN_IF_ERROR(Fsck(store_.get(), &r, progress_));
  bool corrupt = false;
  for (const auto& f : r.findings) corrupt |= f.kind == FsckKind::kMetaCorrupt;
  if (corrupt && !rep_->leveldb_repaired) {
    rep_->before = std::move(r);
    store_.reset();
    meta_ = nullptr;
    SEPFS_RETURN_IF_ERROR(RepairLevelDb("reading it reported corruption"));
    SEPFS_RETURN_IF_ERROR(OpenStore());
    r = FsckReport();
    if (progress_) progress_("checking again after leveldb::RepairDB");
    SEPFS_RETURN_IF_ERROR(Fsck(store_.get(), &r, progress_));
  } else if (rep_->before.findings.empty()) {
    rep_->before = r;
  } else {  // the open failed and RepairDB ran: keep that finding, add these
    for (const auto& f : r.findings) {
      (f.error ? rep_->before.errors : rep_->before.notes).push_back(f.message);
      rep_->before.findings.push_back(f);
    }
  }
  bool salvaged = false;
  SEPFS_RETURN_IF_ERROR(Salvage(r, &salvaged));
  if (salvaged) {  // check again: the passes name what was salvaged
    r = FsckReport();
    SEPFS_RETURN_IF_ERROR(Fsck(store_.get(), &r, progress_));
  }
  LearnPaths(r);

  for (int pass = 1; pass <= kMaxPasses; pass++) {
    const bool verified = pass == 1 || verify_next_pass_;
    if (pass > 1) {
      r = FsckReport();
      FsckOptions quick;
      quick.verify_data = verify_next_pass_;
      verify_next_pass_ = false;
      SEPFS_RETURN_IF_ERROR(Fsck(store_.get(), quick, &r, progress_));
    }
    if (r.findings.empty()) break;
    if (progress_) {
      progress_("repair pass " + std::to_string(pass) + ": " + std::to_string(r.findings.size()) +
                " problems");
    }
    bool changed = false;
    SEPFS_RETURN_IF_ERROR(Apply(r, verified, &changed));
    if (!changed) break;
  }
  SEPFS_RETURN_IF_ERROR(RewriteCounters(counters_asked_));
  SEPFS_RETURN_IF_ERROR(meta_->Sync());
  if (progress_) progress_("checking the repaired store");
  return Fsck(store_.get(), &rep_->after, progress_);
}

}  // namespace

Status Repair(const std::string& dir, const StoreOptions& options, RepairReport* report,
              const FsckProgress& progress, const RepairOptions& repair_options) {
  Repairer r(dir, options, repair_options, report, progress);
  return r.Run();
}

}  // namespace sepfs::fs
