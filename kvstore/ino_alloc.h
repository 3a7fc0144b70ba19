// InodeAllocator: hands out inode numbers that are never reused.
//
// The persisted counter CounterKey("next_ino") is always ahead of every
// number handed out: numbers come from a global lease of kLeaseSize numbers
// that is made durable (synced batch) before its first number is used, so
// after a crash numbers are skipped, never repeated. Numbers are never reused
// at all (64-bit space), so the kernel can never confuse two inodes.
//
// Children of one directory get consecutive numbers where possible: each
// directory takes a sub-lease of kDirRunSize numbers from the global lease
// and its children draw from it. Their inode keys therefore cluster, and
// readdirplus fetches them with one forward scan (MetaStore::MultiGetSorted).
// Sub-leases live in memory only; unused numbers are lost at unmount.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "kvstore/meta_store.h"

namespace sepfs::kv {

class InodeAllocator {
 public:
  static constexpr uint64_t kLeaseSize = 4096;
  static constexpr uint64_t kDirRunSize = 64;
  static constexpr uint64_t kFirstIno = 2;  // 1 is the root (FUSE_ROOT_ID)

  explicit InodeAllocator(MetaStore* store) : store_(store) {}

  // Loads the counter. A fresh store (no counter) starts at kFirstIno.
  Status Init();
  // Returns a new inode number for a child of `parent`.
  Status Allocate(uint64_t parent, uint64_t* ino);
  // Drops the sub-lease of a removed directory.
  void ForgetDir(uint64_t parent);

  // Next number the global lease would hand out (for tests and stats).
  uint64_t TEST_next() const;

 private:
  Status Extend();  // requires mu_ held
  MetaStore* store_;
  mutable std::mutex mu_;
  uint64_t next_ = 0;       // next unused number of the global lease
  uint64_t lease_end_ = 0;  // persisted counter value
  struct Run {
    uint64_t next = 0, end = 0;
  };
  std::unordered_map<uint64_t, Run> runs_;
};

}  // namespace sepfs::kv
