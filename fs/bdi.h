// The kernel's writeback settings of one mount (its "backing device info",
// /sys/class/bdi/MAJOR:MINOR). A FUSE mount gets its own bdi, created with
// read_ahead_kb = 128, max_ratio = 1 and strict_limit on: its dirty pages
// may take only 1% of the kernel's dirty-page limit, so a writer to a
// writeback-cached FUSE file is throttled long before the pages could merge
// into large writes. Changing these needs root.
#pragma once

#include <string>

#include "vlog/status.h"

namespace sepfs::fs {

// Sets *dir to the bdi directory of the file system mounted at `mountpoint`
// (an absolute path without symlinks; the newest mount there wins). Reads
// /proc/self/mountinfo only, so it never touches the mount itself: safe
// before the FUSE session serves requests.
[[nodiscard]] Status FindMountBdi(const std::string& mountpoint, std::string* dir);

// Writes `value` to the setting `knob` (e.g. "max_ratio") under `dir`.
[[nodiscard]] Status SetBdiKnob(const std::string& dir, const std::string& knob, unsigned value);

}  // namespace sepfs::fs
