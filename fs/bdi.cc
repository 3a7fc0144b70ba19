#include "fs/bdi.h"

#include <cerrno>
#include <fstream>
#include <vector>

#include "fs/mountinfo.h"

namespace sepfs::fs {

Status FindMountBdi(const std::string& mountpoint, std::string* dir) {
  std::vector<MountInfo> mounts;
  SEPFS_RETURN_IF_ERROR(ReadMountInfo(&mounts));
  std::string found;
  for (const MountInfo& m : mounts) {
    if (m.point == mountpoint) found = m.dev;
  }
  if (found.empty()) return Status::NotFound(mountpoint + ": not in /proc/self/mountinfo");
  *dir = "/sys/class/bdi/" + found;
  return Status::OK();
}

Status SetBdiKnob(const std::string& dir, const std::string& knob, unsigned value) {
  const std::string path = dir + "/" + knob;
  errno = 0;
  std::ofstream out(path);
  if (out) out << value << '\n' << std::flush;
  if (!out) return Status::FromErrno(errno ? errno : EIO, path);
  return Status::OK();
}

}  // namespace sepfs::fs
