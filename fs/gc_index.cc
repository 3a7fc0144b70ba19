#include "fs/gc_index.h"

#include "fs/clock.h"
#include "vlog/atomic_bound.h"

namespace sepfs::fs {

namespace {

// The block's current vLog pointer; *present is false for a hole and for
// inline data, neither of which names a record.
Status Current(kv::MetaStore* meta, uint64_t inode, uint64_t block, vlog::BlockPtr* p,
               bool* present) {
  *present = false;
  std::string raw;
  Status st = meta->Get(kv::BlockKey(inode, block), &raw);
  if (st.IsNotFound()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(st);
  kv::BlockValue v;
  SEPFS_RETURN_IF_ERROR(kv::DecodeBlock(raw, &v));
  *present = !v.inlined;
  if (*present) *p = v.ptr;
  return Status::OK();
}

}  // namespace

void FsGcIndex::NoteHold(uint64_t us) { RaiseAtLeast(max_hold_us_, us); }

Status FsGcIndex::IsLive(uint64_t inode, uint64_t block, const vlog::BlockPtr& ptr, bool* live) {
  // A flush appends its records, then installs their pointers, holding its
  // inode's pointer lock throughout. Asked in between, the index would call
  // a record that is about to be referenced dead, and the victim (sealed by
  // that very flush) could be deleted under it: wait for the flush instead.
  std::lock_guard<std::mutex> l(ptr_locks_->For(inode));
  vlog::BlockPtr cur;
  bool present = false;
  SEPFS_RETURN_IF_ERROR(Current(meta_, inode, block, &cur, &present));
  *live = present && cur == ptr;
  return Status::OK();
}

Status FsGcIndex::SwapPointers(const std::vector<vlog::Relocation>& relocs,
                               std::vector<bool>* swapped) {
  swapped->assign(relocs.size(), false);
  PtrLocks::All all(ptr_locks_);
  const uint64_t start = MonotonicMicros();
  kv::Batch b;
  std::vector<vlog::BlockPtr> added, removed;
  std::vector<uint64_t> owners;
  for (size_t i = 0; i < relocs.size(); i++) {
    const auto& r = relocs[i];
    vlog::BlockPtr cur;
    bool present = false;
    SEPFS_RETURN_IF_ERROR(Current(meta_, r.inode, r.block, &cur, &present));
    if (present && cur == r.from) {
      b.PutBlock(r.inode, r.block, r.to);
      added.push_back(r.to);
      owners.push_back(r.inode);
      removed.push_back(r.from);
      (*swapped)[i] = true;
    }
  }
  const LiveJournal::Entry e = journal_->Note(&b, added, removed, owners);
  Status st = b.empty() ? Status::OK() : meta_->Write(&b, /*sync=*/true);
  NoteHold(MonotonicMicros() - start);
  if (!st.ok()) {
    swapped->assign(relocs.size(), false);
  } else {
    journal_->Commit(e);
  }
  return st;
}

Status FsGcIndex::Quiesce(const std::function<Status()>& fn) {
  // Users' overwrites that moved pointers off the victim may be unsynced:
  // after a power loss their durable predecessors would name a deleted
  // segment. Nothing to do when nothing was written unsynced.
  SEPFS_RETURN_IF_ERROR(meta_->Sync());
  // A barrier: readers hold the lock from a pointer's lookup until its
  // record is read, so once those holding it now have let it go, none can
  // follow a pointer it read before the swap, and later ones look up the
  // new pointers. fn (the victim's rename or unlink: tens of ms on a
  // discard-mounted disk) then runs without it, and reads do not wait.
  { std::unique_lock<std::shared_mutex> barrier(*seg_mu_); }
  return fn();
}

}  // namespace sepfs::fs
