#include "fs/salvage.h"

#include <set>

#include "fs/inode.h"
#include "kvstore/schema.h"

namespace sepfs::fs {

namespace {

struct Candidate {
  vlog::BlockPtr ptr;
  bool relocated = false;
};

// A user write beats a GC copy; among equals, the newer record wins.
bool Better(const Candidate& a, const Candidate& b) {
  if (a.relocated != b.relocated) return !a.relocated;
  return a.ptr.seq > b.ptr.seq;
}

Status ExistingInodes(kv::MetaStore* meta, std::set<uint64_t>* out) {
  return meta->ScanPrefix(std::string(1, kv::kTagInode),
                          [&](std::string_view key, std::string_view) {
                            uint64_t ino = 0;
                            if (kv::ParseInodeKey(key, &ino)) out->insert(ino);
                            return true;
                          });
}

}  // namespace

Status FindSalvageable(Store* store, std::vector<SalvagedFile>* out,
                       const FsckProgress& progress) {
  std::set<uint64_t> existing;
  SEPFS_RETURN_IF_ERROR(ExistingInodes(store->meta(), &existing));
  std::map<uint64_t, std::map<uint64_t, Candidate>> found;  // ino -> block -> best
  for (const vlog::SegmentInfo& seg : store->vlog()->Segments()) {
    if (seg.damaged) continue;
    if (progress) progress("looking for records of lost files in segment " + std::to_string(seg.id));
    Status st = store->vlog()->ScanSegment(
        seg.id, [&](const vlog::BlockPtr& ptr, const vlog::RecordHeader& h, std::string_view,
                    const Status& verified) {
          if (!verified.ok()) return false;  // the rest of the segment is not trusted
          if (h.inode == 0 || existing.count(h.inode)) return true;
          const Candidate c{ptr, (h.flags & vlog::kRecordRelocated) != 0};
          auto [it, fresh] = found[h.inode].try_emplace(h.block, c);
          if (!fresh && Better(c, it->second)) it->second = c;
          return true;
        });
    if (!st.ok() && !st.IsNotFound()) return st;
  }
  const uint64_t bs = store->super().block_size;
  for (auto& [ino, blocks] : found) {
    SalvagedFile f;
    f.ino = ino;
    for (const auto& [block, c] : blocks) {
      f.blocks[block] = c.ptr;
      f.size = std::max(f.size, block * bs + c.ptr.length);
      f.sectors += SectorsOf(c.ptr.length);
    }
    out->push_back(std::move(f));
  }
  return Status::OK();
}

}  // namespace sepfs::fs
