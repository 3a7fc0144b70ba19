#include "fs/file_limit.h"

#include <sys/resource.h>

namespace sepfs::fs {

void RaiseFileLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace sepfs::fs
