// Inode: the in-memory state of one inode the filesystem is working with.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "fs/readahead.h"
#include "kvstore/records.h"

namespace sepfs::fs {

// 512-byte units of a record of `bytes` data bytes, as counted in st_blocks.
inline uint64_t SectorsOf(uint64_t bytes) { return (bytes + 511) / 512; }

// Who made a change that may clear set-id bits. The default is a caller
// outside every group: the bits go.
struct SetidCaller {
  bool privileged = false;  // root, standing in for CAP_FSETID
  // Whether the caller is in group gid; asked only when the answer matters
  // (reading the supplementary groups costs a read of /proc).
  std::function<bool(uint32_t gid)> in_group;
};

// The mode after a write, truncate or chown (of a file of group file_gid) by
// someone who may not keep the set-id bits, as the Linux VFS does it
// (setattr_should_drop_sgid): setuid goes; setgid goes with group execute,
// and without it (where it marks mandatory locking) unless the caller is in
// the file's group or privileged.
inline uint32_t KillSuidSgid(uint32_t mode, uint32_t file_gid, const SetidCaller& c) {
  mode &= ~static_cast<uint32_t>(S_ISUID);
  if (!(mode & S_ISGID)) return mode;
  if ((mode & S_IXGRP) || !(c.privileged || (c.in_group && c.in_group(file_gid)))) {
    mode &= ~static_cast<uint32_t>(S_ISGID);
  }
  return mode;
}

struct Inode {
  // entries_gen: the namespace generation now (a listing of an older one
  // may be stale).
  Inode(const kv::InodeRecord& r, uint64_t gen)
      : ino(r.ino), rec(r), stored_size(r.size), entries_gen(gen) {}

  const uint64_t ino;

  // Guards everything below. Lock order: Filesystem::ns_mu_, then inode
  // mutexes in ascending ino order, then Filesystem::table_mu_ never held
  // while waiting for an inode mutex.
  std::mutex mu;
  kv::InodeRecord rec;      // authoritative while the inode is in the table
  bool attr_dirty = false;  // rec differs from the LSM copy
  // Regular files: the size the LSM holds. A write grows rec.size at once,
  // but its bytes reach the vLog only with its flush, which stores the size
  // with them; a batch that writes the record for anything else (times,
  // mode, links, xattrs) stores this size (Stored), so that no crash leaves
  // a size ahead of the data (such bytes read as zeros after a kill).
  uint64_t stored_size = 0;
  // Dirty blocks: block number -> bytes from the block start (may be
  // shorter than a block: the rest reads as zeros).
  std::map<uint64_t, std::string> dirty;
  // Sequential detector of reads that come without an open handle (files
  // the kernel opened by itself).
  FileHandle handle;
  uint64_t dirty_bytes = 0;
  bool dead = false;    // reclaimed: never flushed again
  int write_error = 0;  // errno of a failed flush not yet reported (errseq)
  // Regular files: [refused_from, refused_end) spans the writeback writes
  // (WriteEffects::from_cache) refused for lack of space (refused_from
  // kNothingRefused: none). Later writeback writes that start past
  // refused_from are refused too, so the file keeps what came
  // before it instead of the kernel's writeback, which goes on after a
  // refusal, storing data after a gap of zeros once the space check passes
  // again. A write that starts at or before refused_from moves it to the
  // write's end, or clears the span when it reaches refused_end; so does a
  // change of size.
  static constexpr uint64_t kNothingRefused = UINT64_MAX;
  uint64_t refused_from = kNothingRefused, refused_end = 0;
  void ClearRefusal() {
    refused_from = kNothingRefused;
    refused_end = 0;
  }
  int8_t temperature = -1;  // user.sepfs.temperature: -1 unknown, 0 hot, 1 cold

  // Directories: the parent's ino when known (for ".."), 0 otherwise. Atomic,
  // not under mu: ReadDirPlus sets it under table_mu_ alone.
  std::atomic<uint64_t> parent{0};

  // Directories, guarded by Filesystem::ns_mu_: the namespace generation
  // of the last change of the entries, ".." included (Filesystem::ns_gen_).
  uint64_t entries_gen = 0;

  // Guarded by Filesystem::table_mu_.
  uint64_t lookups = 0;  // kernel references (lookup count)
  uint32_t opens = 0;    // open file handles

  // r (rec, or a copy about to replace it) as a batch that changes no size
  // must store it. Call with mu held.
  kv::InodeRecord Stored(kv::InodeRecord r) const {
    if (S_ISREG(r.mode)) r.size = std::min(r.size, stored_size);
    return r;
  }
  // Whether the LSM's copy still lacks the size (a batch stored Stored(rec)
  // while rec.size ran ahead): the record stays dirty, for the next flush.
  bool SizePending() const { return S_ISREG(rec.mode) && rec.size != stored_size; }
};

}  // namespace sepfs::fs
