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

// Parses one mountinfo line; false if it lacks a field.
bool ParseMountInfoLine(const std::string& line, MountInfo* out);

}  // namespace sepfs::fs
