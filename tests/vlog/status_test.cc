#include "vlog/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace sepfs {
namespace {

// Log lines and errors name a store by the path it was given, not by the
// descriptor path the daemon reaches it through; a longer path that starts
// the same (another descriptor) is left as it is.
TEST(StatusTest, ReplacedAllReplacesWholePathsOnly) {
  EXPECT_EQ(ReplacedAll("/proc/self/fd/5/vlog: x; /proc/self/fd/5: y", "/proc/self/fd/5", "/s"),
            "/s/vlog: x; /s: y");
  EXPECT_EQ(ReplacedAll("/proc/self/fd/57/vlog and /proc/self/fd/5", "/proc/self/fd/5", "/s"),
            "/proc/self/fd/57/vlog and /s");
  EXPECT_EQ(ReplacedAll("/a/b.c /a/b_ /a/b- /a/b)", "/a/b", "/z"), "/a/b.c /a/b_ /a/b- /z)");
  EXPECT_EQ(ReplacedAll("in /a/b. Then /a/b.", "/a/b", "/z"), "in /z. Then /z.");
  EXPECT_EQ(ReplacedAll("text", "", "x"), "text");
  // The replacement may contain what it replaces.
  EXPECT_EQ(ReplacedAll("/d and /d", "/d", "/d/d"), "/d/d and /d/d");
  Status st = Status::FromErrno(EIO, "/proc/self/fd/5/vlog/seg-1.vlog: bad");
  Status shown = st.Replacing("/proc/self/fd/5", "/store");
  EXPECT_EQ(shown.err(), EIO);
  EXPECT_EQ(std::string(shown.message()), "/store/vlog/seg-1.vlog: bad");
}

}  // namespace
}  // namespace sepfs
