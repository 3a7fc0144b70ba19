// FsGcIndex: the filesystem's side of vlog::GcIndex. Liveness and the
// pointer compare-and-set go through the metadata LSM under the pointer
// locks (fs/ptr_locks.h: every writer of an inode's pointers holds its
// stripe from its first vLog append to its metadata write); Quiesce waits
// for the readers holding the segment read lock to let it go.
#pragma once

#include <atomic>
#include <mutex>
#include <shared_mutex>

#include "fs/live_journal.h"
#include "fs/ptr_locks.h"
#include "kvstore/meta_store.h"
#include "vlog/gc_job.h"

namespace sepfs::fs {

class FsGcIndex : public vlog::GcIndex {
 public:
  FsGcIndex(kv::MetaStore* meta, LiveJournal* journal, PtrLocks* ptr_locks,
            std::shared_mutex* seg_mu)
      : meta_(meta), journal_(journal), ptr_locks_(ptr_locks), seg_mu_(seg_mu) {}

  Status IsLive(uint64_t inode, uint64_t block, const vlog::BlockPtr& ptr, bool* live) override;
  Status SwapPointers(const std::vector<vlog::Relocation>& relocs,
                      std::vector<bool>* swapped) override;
  Status Quiesce(const std::function<Status()>& fn) override;

  // Longest time user I/O could have waited on a lock held by the GC.
  uint64_t max_hold_micros() const { return max_hold_us_.load(); }

 private:
  void NoteHold(uint64_t us);
  kv::MetaStore* const meta_;
  LiveJournal* const journal_;
  PtrLocks* const ptr_locks_;
  std::shared_mutex* const seg_mu_;
  std::atomic<uint64_t> max_hold_us_{0};
};

}  // namespace sepfs::fs
