// Fsck: consistency check of an unmounted store.
//
// Checks that every block pointer resolves to a record that verifies (magic,
// checksum, inode, block, length), lies within its file, and belongs to a
// regular file; that a file's allocation count (st_blocks) equals what its
// pointers hold; every directory entry names an existing inode of the right
// type inside a directory; every linked inode is reachable from the root;
// link counts (files: entries naming them; directories: 2 + subdirectories);
// xattrs and symlink targets belong to existing inodes; the inode-number
// counter is above every inode; no segment has a damaged header, belongs
// to another store or has another segment's name
// (vlog::ValueLog::SetAsideSegments); and, after
// a clean unmount, the persisted per-segment live counters equal a recount;
// and that the superblock's copy (fs/superblock_copy.h) matches the record.
// Corruption reported by LevelDB while scanning is a finding too (the scan
// goes on past the damaged block), not an operational error.
//
// The check never changes the store. Every problem is recorded twice: as a
// line of text (errors/notes) and as a structured FsckFinding that
// fs/repair.h acts on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fs/live_journal.h"
#include "fs/store.h"

namespace sepfs::fs {

enum class FsckKind {
  kMetaCorrupt,          // LevelDB reported corruption scanning key (a prefix)
  kRootMissing,          // no root directory (inode 1)
  kInodeBad,             // key: undecodable inode record
  kInoCounter,           // next_ino counter not above every inode; value: minimum
  kOrphan,               // ino: unlinked inode to reclaim (a note, not an error)
  kOrphanKeyStale,       // key: orphan entry of a missing inode, or undecodable
  kOrphanLinked,         // ino, key: orphan entry of an inode that has entries
  kDentryBad,            // key: undecodable directory entry
  kDentryBadParent,      // key: parent is not an existing directory
  kDentryMissingInode,   // key, ino: entry names a missing inode
  kDentryNamesRoot,      // key: an entry names the root
  kDentryWrongType,      // key, ino; value: the inode's S_IFMT bits
  kDirExtraEntry,        // key, ino: second (third, ...) entry of a directory
  kUnreachable,          // ino; value: entries naming it
  kLinkCount,            // ino; value: expected link count
  kPointerBad,           // key: undecodable block key or value
  kPointerNoInode,       // key, ino, block: pointer of a missing inode
  kPointerNotRegular,    // key, ino, block: pointer of a non-regular inode
  kPointerBeyondEof,     // key, ino, block; value: file size that covers the
                         // record, which verifies (0: the record is too long)
  kPointerSegmentMissing,  // key, ino, block; value: segment id
  kPointerBadRecord,     // key, ino, block: record does not verify
  kBlockCount,           // ino; value: 512-byte units its pointers hold
  kXattrNoInode,         // key
  kXattrCount,           // ino; value: bytes of its xattr names (each with a NUL)
  kSymlinkNoInode,       // key, ino: target of a missing or non-symlink inode
  kSymlinkMissing,       // ino: symlink inode without a target
  kSymlinkSize,          // ino; value: the target's length
  kSegmentDamaged,       // value: segment id (bad header)
  kSegmentForeign,       // value: segment id (its header names another store)
  kSegmentMisnamed,      // value: segment id (its header names another segment)
  kSegmentCounters,      // persisted live counters differ from the recount
  kSuperblockCopy,       // STORE/superblock missing, damaged or out of date (a
                         // note: a store opened for writing rewrites it)
};

struct FsckFinding {
  FsckKind kind;
  bool error = true;  // false: a note (orphans)
  uint64_t ino = 0;
  uint64_t block = 0;
  uint64_t value = 0;
  std::string key;      // the LevelDB key concerned, if any
  std::string message;  // same text as in errors/notes
};

struct FsckReport {
  std::vector<std::string> errors;  // each names the object and the problem
  std::vector<std::string> notes;   // not errors (e.g. orphans to reclaim)
  std::vector<FsckFinding> findings;
  uint64_t inodes = 0, dirs = 0, files = 0, dentries = 0, pointers = 0, segments = 0;
  uint64_t inline_blocks = 0;  // of the pointers, values that hold the block's bytes
  uint64_t data_bytes_checked = 0;
  // Live record bytes per segment, from the pointers that verified.
  std::map<uint32_t, uint64_t> live;
};

struct FsckOptions {
  // Read and verify every record a pointer names. false: pointers are only
  // checked against their inode and the segment list, and the persisted
  // segment counters are not compared (a quick namespace check).
  bool verify_data = true;
};

// Progress callback: a short line now and then on large stores.
using FsckProgress = std::function<void(const std::string&)>;

// Non-OK only for operational errors (I/O errors other than corruption):
// corruption that stops the check is a kMetaCorrupt finding.
Status Fsck(Store* store, FsckReport* report, const FsckProgress& progress);
Status Fsck(Store* store, const FsckOptions& options, FsckReport* report,
            const FsckProgress& progress);

// The inode-number counter of kv::InodeAllocator.
constexpr std::string_view kNextInoCounter = "next_ino";


}  // namespace sepfs::fs
