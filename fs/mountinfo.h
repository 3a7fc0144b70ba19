// The mounts this process sees (/proc/self/mountinfo), read without touching
// any of them: safe before a FUSE session serves requests, and while a
// mount's daemon is busy or gone.
#pragma once

#include <string>
#include <vector>

#include "vlog/status.h"

namespace sepfs::fs {

struct MountInfo {
  std::string dev;     // major:minor
  std::string point;   // mount point, unescaped
  std::string fstype;  // e.g. "fuse.sepfs"
  std::string source;  // e.g. the store directory of a sepfs mount
};

// All mounts, in mountinfo order (later entries stack on earlier ones).
[[nodiscard]] Status ReadMountInfo(std::vector<MountInfo>* out);

// path made absolute and without symlinks (realpath), as mountinfo names
// mount points; path itself if that fails.
std::string ResolvedPath(const std::string& path);

// The sepfs mount (type fuse.sepfs) whose mount point is `point`, a
// resolved path; false if there is none this process can see.
bool SepfsMountAt(const std::string& point, MountInfo* out);

// Parses one mountinfo line; false if it lacks a field.
bool ParseMountInfoLine(const std::string& line, MountInfo* out);

}  // namespace sepfs::fs
