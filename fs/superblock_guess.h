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
// had is recorded nowhere else); the creation time now, as the uuid the
// store id of the segments the block pointers lead into (one pointer per
// segment: its record must verify there), else the one most segment
// headers carry (segments planted from another store can outnumber the
// store's own), else a new one; and
// this binary's format, which reads every older store (older binaries then
// refuse it).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvstore/meta_store.h"
#include "kvstore/records.h"
#include "vlog/env.h"
#include "vlog/format.h"

namespace sepfs::fs {

// What a store's records tell about its superblock, gathered once: one scan
// of the inode records and the block values, one listing of the segments.
class SuperblockEvidence {
 public:
  // Corruption from the metadata scans is returned as is.
  static Status Gather(Env* env, const std::string& store, kv::MetaStore* meta,
                       SuperblockEvidence* out);

  // *how says what was inferred from what, for the repair's report.
  // NotFound when there is neither a root directory (inode 1) nor a segment
  // file: then this is not a sepfs store's, or too little of it is left.
  Status Guess(kv::Superblock* sb, std::string* how) const;

  // OK when copy's block size is one the records allow with no more
  // violations than the best guess, and its uuid is the store id the
  // guess takes (if any segment names one); otherwise InvalidArgument
  // saying why.
  Status Check(const kv::Superblock& copy) const;

 private:
  Status ScanMetadata(kv::MetaStore* meta);
  Status ScanSegmentFiles(Env* env, const std::string& store);
  // Files whose last block would start at or past their size.
  uint64_t Violations(uint64_t bs) const;
  // 0 when no block size holds the longest value.
  uint64_t BestBlockSize(uint64_t* violations) const;

  uint64_t longest_value_ = 0;   // data bytes of the longest block value
  uint64_t longest_inline_ = 0;  // of the inline ones
  uint64_t furthest_end_ = 0;    // end of the furthest record in its segment
  uint64_t longest_file_ = 0;    // of the segment files
  uint64_t segment_files_ = 0;
  // One pointer into each segment: (pointer, inode, block).
  struct Sample {
    vlog::BlockPtr ptr;
    uint64_t ino = 0;
    uint64_t block = 0;
  };
  std::unordered_map<uint32_t, Sample> samples_;
  // The store id the guess takes (unknown if no header names one), how
  // many segment headers name it, and whether a pointer's record verified
  // in one of them.
  vlog::StoreId store_id_{};
  uint64_t store_id_segments_ = 0;
  bool store_id_verified_ = false;
  uint64_t values_ = 0;
  bool root_ = false;
  // Regular files with a block past block 0: (last block number, size).
  std::vector<std::pair<uint64_t, uint64_t>> last_blocks_;
};

}  // namespace sepfs::fs
