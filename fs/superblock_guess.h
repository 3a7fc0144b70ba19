// A superblock inferred from a store's records, for `fsck --repair` when the
// superblock record is lost: to check the copy (fs/superblock_copy.h) before
// it is trusted (a copy from another store, with another block size, made
// the repair drop or misplace every block), and to rebuild the record when
// there is no good copy.
//
// The block size must hold every block value, and a file's blocks must lie
// inside its size (block number x block size < size). Each power of two
// from 4 KiB to 4 MiB that holds every value is counted against the second
// rule; the fewest violations win (a damaged store may have pointers past
// a lost size), then the default 64 KiB, then the smallest. Files of one
// block and sparse files do not tell sizes apart: every size that fits
// reads them the same, which is why the default is preferred.
//
// The rest of a rebuilt superblock: segment size the default 64 MiB, or the
// power of two above the longest segment file or record end if that is
// more; inline limit the default for the block size, or the longest inline
// value if that is more (and valid); no capacity limit (a limit the store
// had is recorded nowhere else); the creation time now, a new uuid, and
// this binary's format, which reads every older store (older binaries then
// refuse it).
#pragma once

#include <string>

#include "kvstore/meta_store.h"
#include "kvstore/records.h"
#include "vlog/env.h"

namespace sepfs::fs {

// *how says what was inferred from what, for the repair's report. NotFound
// when there is neither a root directory (inode 1) nor a segment file: then
// this is not a sepfs store's, or too little of it is left to guess from.
// Corruption from the metadata scans is returned as is.
Status GuessSuperblock(Env* env, const std::string& store, kv::MetaStore* meta,
                       kv::Superblock* sb, std::string* how);

// OK when copy's block size is one the records allow with no more
// violations than the best guess; otherwise InvalidArgument saying why.
// Corruption from the metadata scans is returned as is.
Status CheckSuperblockAgainstRecords(Env* env, const std::string& store, kv::MetaStore* meta,
                                     const kv::Superblock& copy);

}  // namespace sepfs::fs
