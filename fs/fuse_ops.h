// The libfuse low-level operation table of sepfs. Every request gets exactly
// one reply; a Status becomes an errno only here; no exception crosses into
// libfuse (bad_alloc becomes ENOMEM).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>

#include "fs/dir_listings.h"
#include "fs/filesystem.h"
#include "fs/fuse_wire.h"
#include "fs/kernel_listings.h"
#include "fs/mount_options.h"

namespace sepfs::fs {

// Budget of the directory listings kept for readdir (fs/dir_listings.h).
constexpr size_t kDirListingBytes = 16u << 20;

struct FuseContext {
  Filesystem* fs = nullptr;
  MountOptions options;
  WireState wire;
  // Opens of existing files are the kernel's own (no OPEN, no RELEASE):
  // set at INIT from options.open_requests and the kernel's support.
  std::atomic<bool> no_open{false};
  // Directories likewise (no OPENDIR, no RELEASEDIR): set at INIT from the
  // kernel's support. Readdir keeps no handle either way.
  std::atomic<bool> no_opendir{false};
  // The writeback cache is on (set at INIT): the kernel owns the mtime and
  // ctime of regular files, and WRITEs leave them alone (WriteEffects).
  std::atomic<bool> writeback_cache{false};
  DirListings listings{kDirListingBytes};
  KernelListings kernel_listings;
  struct fuse_session* session = nullptr;  // for notifications to the kernel
};

const struct fuse_lowlevel_ops* SepfsFuseOps();

}  // namespace sepfs::fs
