// Fsck: read-only consistency check of an unmounted store.
//
// Checks that every block pointer resolves to a record that verifies (magic,
// checksum, inode, block, length), lies within its file, and belongs to a
// regular file; every directory entry names an existing inode of the right
// type inside a directory; every linked inode is reachable from the root;
// link counts (files: entries naming them; directories: 2 + subdirectories);
// xattrs and symlink targets belong to existing inodes; and, after a clean
// unmount, the persisted per-segment live counters equal a recount.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fs/store.h"

namespace sepfs::fs {

struct FsckReport {
  std::vector<std::string> errors;  // each names the object and the problem
  std::vector<std::string> notes;   // not errors (e.g. orphans to reclaim)
  uint64_t inodes = 0, dirs = 0, files = 0, dentries = 0, pointers = 0, segments = 0;
  uint64_t data_bytes_checked = 0;
};

// Progress callback: a short line now and then on large stores.
using FsckProgress = std::function<void(const std::string&)>;

Status Fsck(Store* store, FsckReport* report, const FsckProgress& progress);

// Persisted per-segment live counters (written at clean unmount).
std::string EncodeSegmentUsage(const std::vector<vlog::SegmentInfo>& segs);
Status DecodeSegmentUsage(std::string_view src, std::vector<std::pair<uint32_t, uint64_t>>* out);
constexpr std::string_view kSegmentUsageCounter = "segment_usage";

}  // namespace sepfs::fs
