// Repair: fixes what Fsck (fs/fsck.h) finds in an unmounted store.
//
// Repair opens the store itself (taking its lock) and works in passes: a
// full check (every record verified), then fixes for its findings, then
// quick namespace checks and fixes until nothing is left or no fix applies,
// then a final full check (RepairReport::after). What it does per finding:
//
//   mode not a file's while every entry naming the inode says file and
//     its block records verify (a damaged mode; no entries of its own, no
//     symlink target)     set the type back to regular, first
//   bad block pointer (undecodable, record missing or not verifying,
//     segment missing, beyond EOF, of a missing or non-regular inode)
//                          delete the pointer: the block becomes a hole
//   allocation count       set st_blocks to what the pointers hold
//   entry naming a missing inode, in a non-directory, naming the root, or
//     a second entry of a directory      delete the entry
//   entry type wrong       rewrite the entry with the inode's type
//   unreachable inode      entry "#<ino>" in /lost+found (created 0700)
//   wrong link count       set it (after the moves above)
//   orphan                 reclaim: inode, pointers, xattrs, symlink, key
//   orphan key of a missing or linked inode   delete the key
//   xattr / symlink target of a missing inode delete
//   symlink without target delete the inode (its entries go next pass)
//   symlink size wrong     set it to the target's length
//   inode counter too low  raise it above every inode
//   damaged segment header move the segment to SetAsideDir once no
//                          pointer names it
//   segment of another store (its header names another store id)
//                          move its file to SetAsideDir (the
//                          pointers into it go as into a missing segment);
//                          if this store's pointers' records verify in it,
//                          refused, changing nothing, unless a segment
//                          names this store's uuid (the uuid may be what
//                          is wrong); a damaged header's: its header is
//                          rewritten instead (ValueLog::Adopt)
//   segment file renamed (its header names another segment of this store)
//                          give it that name back, before any check (in
//                          turn where renamed files have each other's
//                          names); move it to SetAsideDir if a segment of
//                          this store has that name
//   persisted segment live counters (clean store) rewrite from a recount
//   LevelDB corruption     leveldb::RepairDB on STORE/meta, then all above
//   superblock record lost or undecodable   written from STORE/superblock,
//                          or rebuilt from the records (fs/superblock_guess.h)
//   vLog records of inodes without a record (only with
//     RepairOptions::salvage)  an inode for each, which the passes above
//                          then move to lost+found (fs/salvage.h)
//   ... of files that lost block pointers (with or without salvage: the
//     allocation count fixed next is the only sign of the loss)
//                          pointers for the blocks inside the size
//
// Each fix is one atomic LevelDB batch (several fixes may share one);
// everything is synced before Repair returns. Every change is reported as
// one line in RepairReport::changes, naming the inode (and its path when it
// was reachable), the key or the segment.
#pragma once

#include <string>
#include <vector>

#include "fs/fsck.h"
#include "fs/store.h"

namespace sepfs::fs {

struct RepairReport {
  FsckReport before;                 // the first check
  FsckReport after;                  // the final check, after repairing
  std::vector<std::string> changes;  // what was changed, in order
  bool leveldb_repaired = false;     // leveldb::RepairDB ran
  // Metadata records were dropped: RepairDB ran, or LevelDB's logs were
  // recovered past records whose checksum failed.
  bool meta_records_dropped = false;
  // Without RepairOptions::salvage, after metadata records were dropped:
  // files the vLog holds records of while no inode names them (what salvage
  // would bring back). Files that kept their inode get lost pointers back
  // either way.
  uint64_t salvageable = 0;
  bool changed() const { return !changes.empty(); }
};

struct RepairOptions {
  // Rebuild files from vLog records no inode record names (fs/salvage.h);
  // deleted files whose segments GC has not collected come back too.
  bool salvage = false;
};

// Repairs the store in dir. Non-OK only for operational errors (the store
// cannot be opened for a reason other than corruption, or writing fails);
// problems that could not be fixed are left in report->after.errors.
// progress gets a line per pass and now and then on large stores.
Status Repair(const std::string& dir, const StoreOptions& options, RepairReport* report,
              const FsckProgress& progress, const RepairOptions& repair_options = {});

}  // namespace sepfs::fs
