// Salvage: files rebuilt from vLog records whose inode has no record.
//
// Every vLog record carries the inode and block it was written for (the
// key stored with the value, as in WiscKey), so when the metadata store
// has lost keys (a table leveldb::RepairDB had to drop), the data of the
// lost files can still be found. Per (inode, block): a block value that
// survived in the metadata store (a pointer whose record verifies, or
// inline bytes) is kept; otherwise the verified record with the highest
// seq is taken. A GC copy has a seq of its own, newer than the write it
// copied, so it wins over older writes of its block as it should; the rare
// copy that lost its race to a newer user write (and was never pointed to)
// wins too.
//
// What salvage cannot know, and so gets wrong (files without an inode
// come back only when asked, `fsck --repair --salvage`):
//   - files deleted, and blocks cut by a truncation, whose segments GC has
//     not collected yet come back (a file truncated or rewritten shorter
//     comes back at its old length, the old bytes after the new ones);
//   - a size set past the last block (truncate up) is lost: the file ends
//     with its last block;
//   - inline blocks (kv::BlockValue::inlined) live in the metadata store
//     only: a small file lost with it cannot be salvaged, nor the last
//     block of a file when it was no longer than the inline limit.
// A record that does not verify is skipped, and the scan resumes at the
// next record that does.
//
// Files that kept their inode record but lost block pointers (their
// allocation count says more than their pointers hold: the pointers were in
// a dropped table) get the same treatment for the blocks inside their size
// that no pointer names; the repair does this with or without --salvage,
// since it then rewrites the allocation count, the only sign of the loss.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "fs/fsck.h"
#include "fs/store.h"

namespace sepfs::fs {

struct SalvagedFile {
  uint64_t ino = 0;
  bool has_record = false;  // an inode that lost pointers: only blocks are added
  std::map<uint64_t, vlog::BlockPtr> blocks;  // block number -> record found in the vLog
  uint64_t kept = 0;     // block values that survived in the metadata store
  uint64_t size = 0;     // end of the furthest block's data
  uint64_t sectors = 0;  // st_blocks the blocks hold
};

struct SalvageScan {
  std::vector<SalvagedFile> files;  // in inode order
  uint64_t damaged_records = 0;     // records that did not verify
  uint64_t skipped_bytes = 0;       // bytes passed over to the next good record
};

// Scans every segment whose header is intact for verified records of
// inodes that have no inode record in the store, and of the regular files
// in lost_pointers (inodes that lost block pointers).
Status FindSalvageable(Store* store, const std::set<uint64_t>& lost_pointers, SalvageScan* out,
                       const FsckProgress& progress);

}  // namespace sepfs::fs
