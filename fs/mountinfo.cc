#include "fs/mountinfo.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sepfs::fs {

namespace {

// mountinfo writes space, tab, newline and backslash as \ooo.
std::string UnescapeMountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() &&
        s.find_first_not_of("01234567", i + 1) >= i + 4) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

bool ParseMountInfoLine(const std::string& line, MountInfo* out) {
  // id parent major:minor root mount-point options [optional fields...] - fstype source super-options
  std::istringstream fields(line);
  std::string id, parent, root, options, field;
  MountInfo m;
  if (!(fields >> id >> parent >> m.dev >> root >> m.point >> options)) return false;
  while (fields >> field && field != "-") {
  }
  if (field != "-" || !(fields >> m.fstype >> m.source)) return false;
  m.point = UnescapeMountinfo(m.point);
  m.source = UnescapeMountinfo(m.source);
  *out = std::move(m);
  return true;
}

Status ReadMountInfo(std::vector<MountInfo>* out) {
  out->clear();
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::FromErrno(errno ? errno : EIO, "/proc/self/mountinfo");
  std::string line;
  MountInfo m;
  while (std::getline(in, line)) {
    if (ParseMountInfoLine(line, &m)) out->push_back(std::move(m));
  }
  return Status::OK();
}

std::string ResolvedPath(const std::string& path) {
  std::string out = path;
  if (char* p = ::realpath(path.c_str(), nullptr)) {
    out = p;
    std::free(p);
  }
  return out;
}

bool SepfsMountAt(const std::string& point, MountInfo* out) {
  std::vector<MountInfo> mounts;
  if (!ReadMountInfo(&mounts).ok()) return false;
  for (const MountInfo& m : mounts) {
    if (m.point == point && m.fstype == "fuse.sepfs") {
      *out = m;
      return true;
    }
  }
  return false;
}

}  // namespace sepfs::fs
