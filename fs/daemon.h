// Mounting a store: opens it, mounts it through /dev/fuse and serves
// requests until unmounted, then flushes and closes the store.
#pragma once

#include <string>

#include "fs/mount_options.h"

namespace sepfs::fs {

struct MountRequest {
  std::string store;
  std::string mountpoint;
  bool foreground = false;  // otherwise detach once the mount is live
  bool debug = false;       // libfuse request tracing (implies foreground)
  MountOptions options;
};

// Returns the process exit code: 0 after a clean unmount (foreground) or
// once the mount is live (background: the parent returns, the daemon
// serves). Errors are printed to stderr naming the path and the reason.
int Mount(const MountRequest& req);

// The versions of libfuse and LevelDB the binary runs with, for `sepfs
// version`: "libfuse 3.14.0, LevelDB 1.23".
std::string LibraryVersions();

}  // namespace sepfs::fs
