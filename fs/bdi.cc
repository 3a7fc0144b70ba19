#include "fs/bdi.h"

#include <cerrno>
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

Status FindMountBdi(const std::string& mountpoint, std::string* dir) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::FromErrno(errno ? errno : EIO, "/proc/self/mountinfo");
  std::string line, found;
  while (std::getline(in, line)) {
    // mount-id parent-id major:minor root mount-point ...
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (fields >> id >> parent >> dev >> root >> point && UnescapeMountinfo(point) == mountpoint) {
      found = dev;
    }
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
