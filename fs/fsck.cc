#include "fs/fsck.h"

#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "fs/inode.h"
#include "fs/superblock_copy.h"
#include "kvstore/ino_alloc.h"

namespace sepfs::fs {

namespace {

struct InodeInfo {
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint64_t blocks = 0;
  uint32_t xattr_list_bytes = kv::kXattrsUnknown;  // as the record says
  uint64_t xattr_names_seen = 0;                   // bytes of the names found
  uint32_t links_seen = 0;    // entries naming it
  uint32_t subdirs_seen = 0;  // directories: child directories
  bool reachable = false;
  bool orphan = false;
};

std::string Ino(uint64_t ino) { return "inode " + std::to_string(ino); }

Status Check(Store* store, const FsckOptions& options, FsckReport* rep,
             const FsckProgress& progress);

}  // namespace

Status Fsck(Store* store, FsckReport* rep, const FsckProgress& progress) {
  return Fsck(store, FsckOptions{}, rep, progress);
}

Status Fsck(Store* store, const FsckOptions& options, FsckReport* rep,
            const FsckProgress& progress) {
  Status st = Check(store, options, rep, progress);
  if (!st.IsCorruption()) return st;
  // A read that met damage outside a scan (a counter, a truncated table):
  // the check cannot go on, and the damage is a finding for repair.
  FsckFinding f{FsckKind::kMetaCorrupt, true, 0, 0, 0, "",
                "metadata store: " + st.ToString() + " (the check stopped there)"};
  rep->errors.push_back(f.message);
  rep->findings.push_back(std::move(f));
  return Status::OK();
}

namespace {

Status Check(Store* store, const FsckOptions& options, FsckReport* rep,
             const FsckProgress& progress) {
  kv::MetaStore* meta = store->meta();
  vlog::ValueLog* vlog = store->vlog();
  const uint32_t bs = store->super().block_size;
  std::unordered_map<uint64_t, InodeInfo> inodes;
  auto add = [&](FsckFinding f) {
    (f.error ? rep->errors : rep->notes).push_back(f.message);
    rep->findings.push_back(std::move(f));
  };
  // Opening the store already removed these (ValueLog::Open); say so.
  if (const uint64_t n = vlog->stats().unfinished_removed; n > 0) {
    rep->notes.push_back("removed " + std::to_string(n) +
                         " unfinished segment file(s) a crash left shorter than a header");
  }
  if (const uint64_t n = vlog->stats().unfinished_kept; n > 0) {
    rep->notes.push_back(std::to_string(n) +
                         " unfinished segment file(s) a crash left shorter than a header "
                         "(no data; sepfs fsck --repair or the next mount removes them)");
  }
  auto err = [&](FsckKind kind, std::string msg, uint64_t ino = 0, std::string_view key = {},
                 uint64_t value = 0, uint64_t block = 0) {
    add({kind, true, ino, block, value, std::string(key), std::move(msg)});
  };
  // A scan that meets corruption has still seen every readable key; the
  // damage is a finding, the check goes on.
  auto scan = [&](char tag, const std::function<bool(std::string_view, std::string_view)>& fn) {
    const std::string prefix(1, tag);
    Status st = meta->ScanPrefix(prefix, fn);
    if (st.IsCorruption()) {
      err(FsckKind::kMetaCorrupt, "metadata store: " + st.ToString(), 0, prefix);
      return Status::OK();
    }
    return st;
  };

  kv::Superblock copy;
  if (Status cs = ReadSuperblockCopy(store->env(), store->io_dir(), &copy);
      !cs.ok() || !(copy == store->super())) {
    // Something other than a file in the copy's place is the user's to
    // move: the store writes files only.
    const bool not_a_file = cs.err() == EISDIR || cs.err() == ENODEV;
    add({FsckKind::kSuperblockCopy, false, 0, 0, 0, "",
         (cs.ok() ? SuperblockCopyPath(store->dir()) + ": differs from the superblock record"
                  : cs.ToString()) +
             (not_a_file ? " (not a file: move it away, and the next mount or sepfs fsck "
                           "--repair writes the copy)"
                         : " (the next mount or sepfs fsck --repair writes it)")});
  }

  // Pass 1: inodes.
  uint64_t max_ino = 0;
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagInode, [&](std::string_view key, std::string_view value) {
    uint64_t ino;
    kv::InodeRecord r;
    if (!kv::ParseInodeKey(key, &ino) || !kv::DecodeInode(value, &r).ok() || r.ino != ino) {
      err(FsckKind::kInodeBad, "undecodable inode record " + kv::DescribeKey(key), 0, key);
      return true;
    }
    InodeInfo& info = inodes[ino];
    info.mode = r.mode;
    info.nlink = r.nlink;
    info.size = r.size;
    info.blocks = r.blocks;
    info.xattr_list_bytes = r.xattr_list_bytes;
    max_ino = std::max(max_ino, ino);
    return true;
  }));
  rep->inodes = inodes.size();
  if (!inodes.count(1) || !S_ISDIR(inodes[1].mode)) {
    err(FsckKind::kRootMissing, "root directory (inode 1) missing", 1);
  }
  uint64_t next_ino = kv::InodeAllocator::kFirstIno;
  Status st = meta->GetCounter(kNextInoCounter, &next_ino);
  if (!st.ok() && !st.IsNotFound()) {
    if (!st.IsCorruption()) return st;
    next_ino = 0;
  }
  if (max_ino >= next_ino) {
    err(FsckKind::kInoCounter,
        "inode number counter " + std::to_string(next_ino) + " is not above " + Ino(max_ino), 0,
        kv::CounterKey(kNextInoCounter), max_ino + 1);
  }
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagOrphan, [&](std::string_view key, std::string_view) {
    uint64_t ino;
    auto it = kv::ParseOrphanKey(key, &ino) ? inodes.find(ino) : inodes.end();
    if (it == inodes.end()) {
      err(FsckKind::kOrphanKeyStale, "orphan entry " + kv::DescribeKey(key) + " of a missing inode",
          0, key);
    } else {
      it->second.orphan = true;
    }
    return true;
  }));

  // Pass 2: directory entries.
  std::unordered_map<uint64_t, std::vector<uint64_t>> children;
  std::unordered_map<uint64_t, std::string> dir_entry;  // directory -> its entry's key
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagDentry, [&](std::string_view key, std::string_view value) {
    uint64_t parent;
    std::string_view name;
    kv::DirEntry e;
    if (!kv::ParseDentryKey(key, &parent, &name) || !kv::DecodeDirEntry(value, &e).ok()) {
      err(FsckKind::kDentryBad, "undecodable directory entry " + kv::DescribeKey(key), 0, key);
      return true;
    }
    rep->dentries++;
    if (rep->dentries % 100000 == 0 && progress) {
      progress("checked " + std::to_string(rep->dentries) + " directory entries");
    }
    const std::string where = "entry '" + std::string(name) + "' in " + Ino(parent);
    auto p = inodes.find(parent);
    if (p == inodes.end() || !S_ISDIR(p->second.mode)) {
      err(FsckKind::kDentryBadParent, where + ": parent is not an existing directory", e.ino, key);
      return true;
    }
    if (e.ino == 1) {
      err(FsckKind::kDentryNamesRoot, where + ": names the root directory", e.ino, key);
      return true;
    }
    auto c = inodes.find(e.ino);
    if (c == inodes.end()) {
      err(FsckKind::kDentryMissingInode, where + ": names missing " + Ino(e.ino), e.ino, key);
      return true;
    }
    if ((c->second.mode & S_IFMT) != e.type) {
      err(FsckKind::kDentryWrongType, where + ": type differs from the inode's", e.ino, key,
          c->second.mode & S_IFMT);
    }
    if (S_ISDIR(c->second.mode)) {
      if (!dir_entry.emplace(e.ino, std::string(key)).second) {
        err(FsckKind::kDirExtraEntry,
            where + ": another entry of directory " + Ino(e.ino) + " (first: " +
                kv::DescribeKey(dir_entry[e.ino]) + ")",
            e.ino, key);
        return true;
      }
      p->second.subdirs_seen++;
    }
    c->second.links_seen++;
    children[parent].push_back(e.ino);
    return true;
  }));

  // Reachability from the root.
  std::deque<uint64_t> queue;
  if (inodes.count(1)) {
    inodes[1].reachable = true;
    queue.push_back(1);
  }
  while (!queue.empty()) {
    uint64_t d = queue.front();
    queue.pop_front();
    for (uint64_t c : children[d]) {
      auto& info = inodes[c];
      if (!info.reachable) {
        info.reachable = true;
        if (S_ISDIR(info.mode)) queue.push_back(c);
      }
    }
  }
  for (auto& [ino, info] : inodes) {
    if (S_ISDIR(info.mode)) {
      rep->dirs++;
    } else {
      rep->files++;
    }
    if (info.orphan) {
      if (info.links_seen == 0) {
        const bool linked = info.nlink != 0;
        add({FsckKind::kOrphan, linked, ino, 0, 0, kv::OrphanKey(ino),
             Ino(ino) + (linked ? ": orphan with link count " + std::to_string(info.nlink)
                                : " is an orphan (reclaimed at mount)")});
        continue;
      }
      err(FsckKind::kOrphanLinked,
          Ino(ino) + ": has an orphan entry but " + std::to_string(info.links_seen) +
              " directory entries",
          ino, kv::OrphanKey(ino));
    }
    if (!info.reachable) {
      // key: a directory's entry (inside an unreachable directory).
      auto de = dir_entry.find(ino);
      err(FsckKind::kUnreachable, Ino(ino) + ": not reachable from the root", ino,
          de == dir_entry.end() ? std::string_view() : std::string_view(de->second),
          info.links_seen);
    }
    const uint32_t expect = S_ISDIR(info.mode) ? 2 + info.subdirs_seen : info.links_seen;
    if (info.nlink != expect) {
      err(FsckKind::kLinkCount,
          Ino(ino) + ": link count " + std::to_string(info.nlink) + ", expected " +
              std::to_string(expect),
          ino, {}, expect);
    }
  }

  // Pass 3: block pointers, verified against their records.
  const auto segs = vlog->Segments();
  std::set<uint32_t> seg_ids;
  std::map<uint32_t, uint64_t> seg_size;
  for (const auto& s : segs) {
    seg_ids.insert(s.id);
    seg_size[s.id] = s.size;
  }
  // After an unclean shutdown, a pointer whose record lies past the end of
  // its segment was written to the LevelDB log while its record (written,
  // not synced) was lost: the mount drops it (see RebuildLiveCounts), so it
  // is a note here, like an orphan, not damage. Unless the last checkpoint
  // declared the record durable: then the segment was damaged or removed,
  // and the mount keeps the pointer (its reads fail).
  uint64_t clean_flag = 0;
  const bool unclean = !(meta->GetCounter("clean", &clean_flag).ok() && clean_flag);
  // Read once: its heads here, its counts below (where a failure to read
  // them is returned; here it leaves no heads: nothing declared durable).
  LoadedCounts lc;
  const Status counts_read = LoadCounts(meta, &lc);
  if (!counts_read.ok()) lc = LoadedCounts{};
  auto crash_lost = [&](const vlog::BlockPtr& p) { return unclean && !lc.heads.Durable(p); };
  if (unclean) {
    rep->notes.push_back(
        "not unmounted cleanly: the next mount recovers (it reads the vLog written since the "
        "last checkpoint); writes that were not fsync'd may be lost");
  }
  // A recycled file that was a stream's open segment ends, after a crash,
  // where its scan stops (the mount cuts it there; docs/vlog-format.md,
  // "Recycled segment files"), not where the file does.
  if (unclean) {
    std::map<int, const vlog::SegmentInfo*> newest;  // stream -> its newest segment
    for (const auto& s : segs) {
      if (!s.damaged) newest[static_cast<int>(s.stream)] = &s;  // segs is in id order
    }
    for (const auto& [stream, s] : newest) {
      if (!s->recycled) continue;
      uint64_t end = s->size;
      SEPFS_RETURN_IF_ERROR(vlog->ScanSegment(
          s->id, [&](const vlog::BlockPtr& p, const vlog::RecordHeader&, std::string_view,
                     const Status& st) {
            if (!st.ok()) end = p.offset;
            return st.ok();
          }));
      seg_size[s->id] = end;
    }
  }
  std::unordered_map<uint64_t, uint64_t> sectors;  // regular inode -> units its pointers hold
  std::map<uint32_t, uint64_t> referenced;  // segment -> bytes named by decodable pointers
  std::string buf;
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagBlock, [&](std::string_view key, std::string_view value) {
    uint64_t ino, block;
    kv::BlockValue v;
    if (!kv::ParseBlockKey(key, &ino, &block) || !kv::DecodeBlock(value, &v).ok()) {
      err(FsckKind::kPointerBad, "undecodable block pointer " + kv::DescribeKey(key), 0, key);
      return true;
    }
    const vlog::BlockPtr& p = v.ptr;
    rep->pointers++;
    if (v.inlined) {
      rep->inline_blocks++;
    } else {
      referenced[p.segment] += p.record_size();
    }
    if (rep->pointers % 20000 == 0 && progress) {
      progress("verified " + std::to_string(rep->pointers) + " block pointers (" +
               std::to_string(rep->data_bytes_checked >> 20) + " MiB)");
    }
    const std::string where = Ino(ino) + " block " + std::to_string(block);
    auto it = inodes.find(ino);
    if (it == inodes.end()) {
      err(FsckKind::kPointerNoInode, where + ": pointer of a missing inode", ino, key, 0, block);
      return true;
    }
    if (!S_ISREG(it->second.mode)) {
      err(FsckKind::kPointerNotRegular, where + ": pointer of a non-regular inode", ino, key, 0,
          block);
      return true;
    }
    sectors[ino] += SectorsOf(v.length());
    if (v.length() > bs) {
      err(FsckKind::kPointerBeyondEof, where + ": record longer than a block", ino, key, 0, block);
      return true;
    }
    const bool beyond_eof = block >= it->second.size / bs + (it->second.size % bs != 0);
    if (v.inlined) {
      // The data is the value itself: nothing in the vLog to check. Past the
      // end it means the inode lost a size update (e.g. an older inode record
      // that leveldb::RepairDB brought back): as for a record, the value is
      // the size that covers it, and repair grows the file to it. LevelDB's
      // block checksums vouch for the bytes.
      if (beyond_eof) {
        err(FsckKind::kPointerBeyondEof,
            where + ": inline data beyond the end of the file (size " +
                std::to_string(it->second.size) + ")",
            ino, key, block * bs + v.length(), block);
      }
      return true;
    }
    if (!seg_ids.count(p.segment) && crash_lost(p)) {
      add({FsckKind::kPointerSegmentMissing, false, ino, block, p.segment, std::string(key),
           where + ": segment " + std::to_string(p.segment) +
               " was lost in a crash before it was synced (dropped at next mount)"});
      return true;
    }
    if (!seg_ids.count(p.segment)) {
      err(FsckKind::kPointerSegmentMissing,
          where + ": segment " + std::to_string(p.segment) + " is missing", ino, key, p.segment,
          block);
      return true;
    }
    if (crash_lost(p) && p.offset + p.record_size() > seg_size[p.segment]) {
      add({FsckKind::kPointerBadRecord, false, ino, block, p.segment, std::string(key),
           where + ": record lost in a crash before it was synced (dropped at next mount)"});
      return true;
    }
    if (options.verify_data) {
      buf.resize(p.length);
      Status rst = vlog->Read(p, ino, block, buf.data());
      if (!rst.ok()) {
        err(FsckKind::kPointerBadRecord, where + ": " + rst.ToString(), ino, key, p.segment,
            block);
        return true;
      }
      rep->data_bytes_checked += p.length;
    }
    if (beyond_eof) {
      // No operation leaves a pointer past EOF; a record that verifies
      // there means the inode lost a size update (value: the size needed).
      err(FsckKind::kPointerBeyondEof,
          where + ": record beyond the end of the file (size " + std::to_string(it->second.size) +
              ")",
          ino, key, block * bs + p.length, block);
    }
    rep->live[p.segment] += p.record_size();
    return true;
  }));
  for (const auto& [ino, info] : inodes) {
    if (!S_ISREG(info.mode)) continue;
    const uint64_t want = sectors.count(ino) ? sectors[ino] : 0;
    if (info.blocks != want) {
      err(FsckKind::kBlockCount,
          Ino(ino) + ": allocation count " + std::to_string(info.blocks) +
              " sectors, its block pointers hold " + std::to_string(want),
          ino, {}, want);
    }
  }

  // Xattrs and symlinks belong to existing inodes.
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagXattr, [&](std::string_view key, std::string_view) {
    uint64_t ino;
    std::string_view name;
    auto it = kv::ParseXattrKey(key, &ino, &name) ? inodes.find(ino) : inodes.end();
    if (it == inodes.end()) {
      err(FsckKind::kXattrNoInode, "xattr " + kv::DescribeKey(key) + " of a missing inode", ino,
          key);
    } else {
      it->second.xattr_names_seen += name.size() + 1;
    }
    return true;
  }));
  // A count that differs from the names would cut scans short (or make
  // them walk on): its xattrs would be listed, or reclaimed, in part.
  for (const auto& [ino, info] : inodes) {
    if (info.xattr_list_bytes != kv::kXattrsUnknown &&
        info.xattr_list_bytes != info.xattr_names_seen) {
      err(FsckKind::kXattrCount,
          Ino(ino) + ": xattr names counted as " + std::to_string(info.xattr_list_bytes) +
              " bytes, its xattrs hold " + std::to_string(info.xattr_names_seen),
          ino, {}, info.xattr_names_seen);
    }
  }
  std::unordered_map<uint64_t, uint64_t> targets;  // symlink -> target length
  SEPFS_RETURN_IF_ERROR(scan(kv::kTagSymlink, [&](std::string_view key, std::string_view value) {
    const uint64_t ino = key.size() == 9 ? kv::GetBE64(key.data() + 1) : 0;
    auto it = inodes.find(ino);
    if (it == inodes.end() || !S_ISLNK(it->second.mode)) {
      err(FsckKind::kSymlinkNoInode,
          "symlink target " + kv::DescribeKey(key) + " of a missing or non-symlink inode", ino,
          key);
    } else {
      targets[ino] = value.size();
    }
    return true;
  }));
  for (auto& [ino, info] : inodes) {
    if (!S_ISLNK(info.mode)) continue;
    auto t = targets.find(ino);
    if (t == targets.end()) {
      err(FsckKind::kSymlinkMissing, Ino(ino) + ": symlink target missing", ino);
    } else if (t->second != info.size) {
      err(FsckKind::kSymlinkSize,
          Ino(ino) + ": symlink size " + std::to_string(info.size) + ", target has " +
              std::to_string(t->second) + " bytes",
          ino, {}, t->second);
    }
  }

  // Segments, and the live counters persisted at the last clean unmount.
  rep->segments = segs.size();
  for (const auto& s : segs) {
    if (s.damaged) {
      err(FsckKind::kSegmentDamaged, "segment " + std::to_string(s.id) + ": damaged header", 0, {},
          s.id);
    }
  }
  for (const auto& s : store->vlog()->SetAsideSegments()) {
    err(s.why == vlog::SetAsideSegment::Why::kMisnamed ? FsckKind::kSegmentMisnamed
                                                       : FsckKind::kSegmentForeign,
        "segment file " + vlog::SegmentFileName(s.id) + ": " +
            DescribeSetAside(s, store->super().uuid),
        0, {}, s.id);
  }
  if (!options.verify_data) return Status::OK();
  // The persisted counts (last checkpoint + journal entries since) must
  // equal the bytes every block pointer names, clean or not: entries commit
  // with the pointers. (A pointer fsck reports for another reason still
  // counts: the counters track references, the errors above track damage.)
  SEPFS_RETURN_IF_ERROR(counts_read);
  const std::string key = kv::CounterKey(kSegmentUsageCounter);
  if (!lc.have_checkpoint) {
    rep->notes.push_back("no segment counter checkpoint: counters are rebuilt at next mount");
  } else if (!lc.consistent) {
    err(FsckKind::kSegmentCounters, "segment counter checkpoint or journal is unreadable", 0, key);
  } else {
    std::set<uint32_t> ids;
    for (const auto& s : segs) ids.insert(s.id);
    for (const auto& [id, bytes] : lc.live) ids.insert(id);
    for (uint32_t id : ids) {
      const uint64_t got = lc.live.count(id) ? lc.live.at(id) : 0;
      const uint64_t want = referenced.count(id) ? referenced[id] : 0;
      if (got != want) {
        err(FsckKind::kSegmentCounters,
            "segment " + std::to_string(id) + ": live counter " + std::to_string(got) +
                " bytes, recount " + std::to_string(want),
            0, key, id);
      }
    }
  }
  return Status::OK();
}

}  // namespace

}  // namespace sepfs::fs
