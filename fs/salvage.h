// Salvage: files rebuilt from vLog records whose inode has no record.
//
// Every vLog record carries the inode and block it was written for (the
// key stored with the value, as in WiscKey), so when the metadata store
// has lost keys (a table leveldb::RepairDB had to drop), the data of the
// lost files can still be found: per (inode, block), the newest verified
// record. A GC copy (kRecordRelocated) counts only when no user write of
// that block is left, since a copy that lost its compare-and-set to a
// newer write can be newer than that write. Records of files deleted
// since, whose segments GC has not collected yet, are found the same way:
// salvage brings them back too, so `fsck --repair` salvages only when
// asked (--salvage).
//
// Inline blocks (kv::BlockValue::inlined) live in the metadata store only:
// a small file lost with it cannot be salvaged, nor the last block of a
// file when that block was no longer than the inline limit (the salvaged
// file then ends with a full block, and is shorter than it was).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "fs/fsck.h"
#include "fs/store.h"

namespace sepfs::fs {

struct SalvagedFile {
  uint64_t ino = 0;
  std::map<uint64_t, vlog::BlockPtr> blocks;  // block number -> its newest record
  uint64_t size = 0;     // end of the furthest block's data
  uint64_t sectors = 0;  // st_blocks the records hold
};

// Scans every segment whose header is intact for verified records of
// inodes that have no inode record in the store, in inode order.
Status FindSalvageable(Store* store, std::vector<SalvagedFile>* out,
                       const FsckProgress& progress);

}  // namespace sepfs::fs
