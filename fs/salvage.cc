#include "fs/salvage.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include <sys/stat.h>

#include "fs/inode.h"
#include "kvstore/schema.h"
#include "vlog/format.h"

namespace sepfs::fs {

namespace {

using Blocks = std::map<uint64_t, std::map<uint64_t, vlog::BlockPtr>>;  // ino -> block -> record

Status ExistingInodes(kv::MetaStore* meta, std::set<uint64_t>* out) {
  return meta->ScanPrefix(std::string(1, kv::kTagInode),
                          [&](std::string_view key, std::string_view) {
                            uint64_t ino = 0;
                            if (kv::ParseInodeKey(key, &ino)) out->insert(ino);
                            return true;
                          });
}

// Block values of inodes without a record that still hold their data: the
// pointers whose records verify, and inline bytes. ino -> block -> length.
Status SurvivingValues(Store* store, const std::set<uint64_t>& existing,
                       std::map<uint64_t, std::map<uint64_t, uint64_t>>* out) {
  std::string buf;
  return store->meta()->ScanAllBlocks(
      [&](std::string_view, uint64_t ino, uint64_t block, const kv::BlockValue& v) {
        if (existing.count(ino)) return true;
        buf.resize(v.length());
        if (v.inlined || store->vlog()->Read(v.ptr, ino, block, buf.data()).ok()) {
          (*out)[ino][block] = v.length();
        }
        return true;
      });
}

// The newest verified record of each block of a missing inode in segment
// seg; the scan passes over records that do not verify to the next whole
// one (ValueLog::ScanSegment).
Status ScanSegment(Store* store, const vlog::SegmentInfo& seg, const std::set<uint64_t>& existing,
                   const std::set<uint64_t>& lost_pointers, Blocks* found, SalvageScan* out) {
  std::optional<uint64_t> bad;  // where the damage being passed over starts
  Status st = store->vlog()->ScanSegment(
      seg.id, [&](const vlog::BlockPtr& ptr, const vlog::RecordHeader& h, std::string_view,
                  const Status& verified) {
        if (!verified.ok()) {
          out->damaged_records++;
          bad = ptr.offset;
          return true;
        }
        if (bad) out->skipped_bytes += ptr.offset - *bad;
        bad.reset();
        if (h.inode == 0 || (existing.count(h.inode) && !lost_pointers.count(h.inode))) {
          return true;
        }
        auto [it, fresh] = (*found)[h.inode].try_emplace(h.block, ptr);
        if (!fresh && ptr.seq > it->second.seq) it->second = ptr;
        return true;
      });
  if (bad && seg.size > *bad) out->skipped_bytes += seg.size - *bad;  // to the end
  return st.IsNotFound() ? Status::OK() : st;
}

// The blocks of file ino inside its size that no pointer names, from found.
Status LostBlocks(Store* store, uint64_t ino, const std::map<uint64_t, vlog::BlockPtr>& found,
                  SalvagedFile* f) {
  kv::InodeRecord r;
  SEPFS_RETURN_IF_ERROR(store->meta()->GetInode(ino, &r));
  if (!S_ISREG(r.mode)) return Status::OK();
  const uint64_t bs = store->super().block_size;
  for (const auto& [block, ptr] : found) {
    if (block * bs >= r.size) continue;
    std::string unused;
    Status st = store->meta()->Get(kv::BlockKey(ino, block), &unused);
    if (st.ok()) continue;
    if (!st.IsNotFound()) return st;
    f->blocks[block] = ptr;
    f->sectors += SectorsOf(ptr.length);
  }
  f->size = r.size;
  return Status::OK();
}

}  // namespace

Status FindSalvageable(Store* store, const std::set<uint64_t>& lost_pointers, SalvageScan* out,
                       const FsckProgress& progress) {
  std::set<uint64_t> existing;
  SEPFS_RETURN_IF_ERROR(ExistingInodes(store->meta(), &existing));
  std::map<uint64_t, std::map<uint64_t, uint64_t>> surviving;
  SEPFS_RETURN_IF_ERROR(SurvivingValues(store, existing, &surviving));
  Blocks found;
  for (const vlog::SegmentInfo& seg : store->vlog()->Segments()) {
    if (seg.damaged) continue;
    if (progress) progress("looking for records of lost files in segment " + std::to_string(seg.id));
    SEPFS_RETURN_IF_ERROR(ScanSegment(store, seg, existing, lost_pointers, &found, out));
  }
  for (const auto& [ino, blocks] : surviving) found.try_emplace(ino);
  const uint64_t bs = store->super().block_size;
  for (auto& [ino, blocks] : found) {
    SalvagedFile f;
    f.ino = ino;
    if (existing.count(ino)) {
      f.has_record = true;
      SEPFS_RETURN_IF_ERROR(LostBlocks(store, ino, blocks, &f));
      if (!f.blocks.empty()) out->files.push_back(std::move(f));
      continue;
    }
    const auto& kept = surviving[ino];
    for (const auto& [block, length] : kept) {
      f.kept++;
      f.size = std::max(f.size, block * bs + length);
      f.sectors += SectorsOf(length);
    }
    for (const auto& [block, ptr] : blocks) {
      if (kept.count(block)) continue;
      f.blocks[block] = ptr;
      f.size = std::max(f.size, block * bs + ptr.length);
      f.sectors += SectorsOf(ptr.length);
    }
    out->files.push_back(std::move(f));
  }
  return Status::OK();
}

}  // namespace sepfs::fs
