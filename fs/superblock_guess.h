// A superblock inferred from a store's records, for `fsck --repair` when the
// superblock record is lost and there is no copy (fs/superblock_copy.h) to
// restore it from.
//
// What the records tell:
//   block_size    the smallest power of two (at least 4 KiB) that holds
//                 every block value; when no file has a second block the
//                 data cannot tell, and it is at least the default 64 KiB
//                 (every block is block 0, which any larger size reads
//                 the same)
//   segment_size  the default 64 MiB, or the power of two above the
//                 longest segment file or record end if that is more
//   inline_max    the default for the block size, or the longest inline
//                 value if that is more (and still valid)
// What they do not: the capacity limit (0: the free space below bounds
// the store), the creation time (now) and the uuid (a new one). The format
// is this binary's, which reads every older store; older binaries then
// refuse the store.
#pragma once

#include <string>

#include "kvstore/meta_store.h"
#include "kvstore/records.h"
#include "vlog/env.h"

namespace sepfs::fs {

// *how says what was inferred from what, for the repair's report. NotFound
// when there is no root directory (inode 1): then this is not a sepfs
// store's metadata, or too little of it is left to guess from.
Status GuessSuperblock(Env* env, const std::string& store, kv::MetaStore* meta,
                       kv::Superblock* sb, std::string* how);

}  // namespace sepfs::fs
