#include "fs/fsck.h"

#include <sys/stat.h>

#include <deque>
#include <map>
#include <unordered_map>

namespace sepfs::fs {

namespace {

struct InodeInfo {
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint32_t links_seen = 0;    // entries naming it
  uint32_t subdirs_seen = 0;  // directories: child directories
  bool reachable = false;
  bool orphan = false;
};

std::string Ino(uint64_t ino) { return "inode " + std::to_string(ino); }

void PutLE(std::string* s, uint64_t v, int n) {
  for (int i = 0; i < n; i++) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetLE(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

}  // namespace

std::string EncodeSegmentUsage(const std::vector<vlog::SegmentInfo>& segs) {
  std::string s;
  s.push_back(1);  // version
  for (const auto& seg : segs) {
    PutLE(&s, seg.id, 4);
    PutLE(&s, seg.live_bytes, 8);
  }
  return s;
}

Status DecodeSegmentUsage(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out) {
  out->clear();
  if (src.empty() || src[0] != 1 || (src.size() - 1) % 12 != 0) {
    return Status::Corruption("bad segment usage record");
  }
  for (size_t i = 1; i < src.size(); i += 12) {
    out->emplace_back(static_cast<uint32_t>(GetLE(src.data() + i, 4)),
                      GetLE(src.data() + i + 4, 8));
  }
  return Status::OK();
}

Status Fsck(Store* store, FsckReport* rep, const FsckProgress& progress) {
  kv::MetaStore* meta = store->meta();
  vlog::ValueLog* vlog = store->vlog();
  const uint32_t bs = store->super().block_size;
  std::unordered_map<uint64_t, InodeInfo> inodes;
  auto err = [&](std::string msg) { rep->errors.push_back(std::move(msg)); };

  // Pass 1: inodes.
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(std::string(1, kv::kTagInode),
                                         [&](std::string_view key, std::string_view value) {
                                           uint64_t ino;
                                           kv::InodeRecord r;
                                           if (!kv::ParseInodeKey(key, &ino) ||
                                               !kv::DecodeInode(value, &r).ok() || r.ino != ino) {
                                             err("undecodable inode record");
                                             return true;
                                           }
                                           inodes[ino] = {r.mode, r.nlink, r.size};
                                           return true;
                                         }));
  rep->inodes = inodes.size();
  if (!inodes.count(1) || !S_ISDIR(inodes[1].mode)) err("root directory (inode 1) missing");
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(std::string(1, kv::kTagOrphan),
                                         [&](std::string_view key, std::string_view) {
                                           uint64_t ino;
                                           if (kv::ParseOrphanKey(key, &ino)) {
                                             auto it = inodes.find(ino);
                                             if (it == inodes.end()) {
                                               err("orphan entry for missing " + Ino(ino));
                                             } else {
                                               it->second.orphan = true;
                                               rep->notes.push_back(
                                                   Ino(ino) + " is an orphan (reclaimed at mount)");
                                             }
                                           }
                                           return true;
                                         }));

  // Pass 2: directory entries.
  std::unordered_map<uint64_t, std::vector<uint64_t>> children;
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(
      std::string(1, kv::kTagDentry), [&](std::string_view key, std::string_view value) {
        uint64_t parent;
        std::string_view name;
        kv::DirEntry e;
        if (!kv::ParseDentryKey(key, &parent, &name) || !kv::DecodeDirEntry(value, &e).ok()) {
          err("undecodable directory entry");
          return true;
        }
        rep->dentries++;
        const std::string where = "entry '" + std::string(name) + "' in " + Ino(parent);
        auto p = inodes.find(parent);
        if (p == inodes.end() || !S_ISDIR(p->second.mode)) {
          err(where + ": parent is not an existing directory");
        }
        auto c = inodes.find(e.ino);
        if (c == inodes.end()) {
          err(where + ": names missing " + Ino(e.ino));
          return true;
        }
        if ((c->second.mode & S_IFMT) != e.type) err(where + ": type differs from the inode's");
        c->second.links_seen++;
        if (S_ISDIR(c->second.mode) && p != inodes.end()) p->second.subdirs_seen++;
        children[parent].push_back(e.ino);
        if (rep->dentries % 100000 == 0 && progress) {
          progress("checked " + std::to_string(rep->dentries) + " directory entries");
        }
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
      if (info.nlink != 0) err(Ino(ino) + ": orphan with link count " + std::to_string(info.nlink));
      continue;
    }
    if (!info.reachable) err(Ino(ino) + ": not reachable from the root");
    const uint32_t expect = S_ISDIR(info.mode) ? 2 + info.subdirs_seen : info.links_seen;
    if (S_ISDIR(info.mode) && ino != 1 && info.links_seen != 1) {
      err(Ino(ino) + ": directory with " + std::to_string(info.links_seen) + " entries");
    }
    if (info.nlink != expect) {
      err(Ino(ino) + ": link count " + std::to_string(info.nlink) + ", expected " +
          std::to_string(expect));
    }
  }

  // Pass 3: block pointers, verified against their records.
  std::map<uint32_t, uint64_t> live;
  std::string buf;
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(
      std::string(1, kv::kTagBlock), [&](std::string_view key, std::string_view value) {
        uint64_t ino, block;
        vlog::BlockPtr p;
        if (!kv::ParseBlockKey(key, &ino, &block) || !kv::DecodeBlockValue(value, &p).ok()) {
          err("undecodable block pointer");
          return true;
        }
        rep->pointers++;
        const std::string where = Ino(ino) + " block " + std::to_string(block);
        auto it = inodes.find(ino);
        if (it == inodes.end()) {
          err(where + ": pointer of a missing inode");
        } else if (!S_ISREG(it->second.mode)) {
          err(where + ": pointer of a non-regular inode");
        } else if (block * bs >= it->second.size || p.length > bs) {
          err(where + ": record beyond the end of the file");
        }
        buf.resize(p.length);
        Status st = vlog->Read(p, ino, block, buf.data());
        if (!st.ok()) {
          err(where + ": " + st.ToString());
        } else {
          rep->data_bytes_checked += p.length;
          live[p.segment] += p.record_size();
        }
        if (rep->pointers % 20000 == 0 && progress) {
          progress("verified " + std::to_string(rep->pointers) + " block pointers (" +
                   std::to_string(rep->data_bytes_checked >> 20) + " MiB)");
        }
        return true;
      }));

  // Xattrs and symlinks belong to existing inodes.
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(std::string(1, kv::kTagXattr),
                                         [&](std::string_view key, std::string_view) {
                                           uint64_t ino;
                                           std::string_view name;
                                           if (!kv::ParseXattrKey(key, &ino, &name) ||
                                               !inodes.count(ino)) {
                                             err("xattr of a missing inode");
                                           }
                                           return true;
                                         }));
  for (auto& [ino, info] : inodes) {
    if (!S_ISLNK(info.mode)) continue;
    std::string target;
    Status st = meta->Get(kv::SymlinkKey(ino), &target);
    if (!st.ok() || target.size() != info.size) err(Ino(ino) + ": symlink target missing");
  }

  // Segment live counters persisted at the last clean unmount.
  const auto segs = vlog->Segments();
  rep->segments = segs.size();
  uint64_t clean = 0;
  std::string usage;
  if (meta->GetCounter("clean", &clean).ok() && clean &&
      meta->Get(kv::CounterKey(kSegmentUsageCounter), &usage).ok()) {
    std::vector<std::pair<uint32_t, uint64_t>> saved;
    Status st = DecodeSegmentUsage(usage, &saved);
    if (!st.ok()) {
      err("segment usage counters: " + st.ToString());
    } else {
      std::map<uint32_t, uint64_t> saved_map(saved.begin(), saved.end());
      for (const auto& s : segs) {
        const uint64_t got = saved_map.count(s.id) ? saved_map[s.id] : 0;
        const uint64_t want = live.count(s.id) ? live[s.id] : 0;
        if (got != want) {
          err("segment " + std::to_string(s.id) + ": live counter " + std::to_string(got) +
              " bytes, recount " + std::to_string(want));
        }
      }
    }
  } else {
    rep->notes.push_back("not unmounted cleanly: segment counters are rebuilt at next mount");
  }
  for (const auto& [seg, bytes] : live) {
    bool known = false;
    for (const auto& s : segs) known |= s.id == seg;
    if (!known) err("segment " + std::to_string(seg) + " is referenced but missing");
  }
  return Status::OK();
}

}  // namespace sepfs::fs
