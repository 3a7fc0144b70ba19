// -o option parsing: numbers in seconds must be finite and within bounds.
#include "fs/mount_options.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

namespace sepfs::fs {
namespace {

TEST(MountOptions, WorkerThreadsDefaultToTwiceTheCpusWithinBounds) {
  cpu_set_t set;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  const unsigned cpus = static_cast<unsigned>(CPU_COUNT(&set));
  const unsigned want = std::min(32u, std::max(4u, 2 * cpus));
  EXPECT_EQ(DefaultFuseThreads(), want);
  MountOptions o;
  EXPECT_EQ(o.threads, want);
  ASSERT_TRUE(ParseMountOptions("threads=9", &o).ok());
  EXPECT_EQ(o.threads, 9u);
  EXPECT_FALSE(ParseMountOptions("threads=0", &o).ok());
}

TEST(MountOptions, SecondsWithinBoundsAreTaken) {
  MountOptions o;
  ASSERT_TRUE(ParseMountOptions("attr_timeout=0,entry_timeout=2.5,flush_interval=.5", &o).ok());
  EXPECT_EQ(o.attr_timeout, 0.0);
  EXPECT_EQ(o.entry_timeout, 2.5);
  EXPECT_EQ(o.flush_interval, 0.5);
  ASSERT_TRUE(ParseMountOptions("attr_timeout=1000000,flush_interval=0.001", &o).ok());
  EXPECT_EQ(o.attr_timeout, 1e6);
  EXPECT_EQ(o.flush_interval, 0.001);
}

// inf or 1e300 seconds overflow the clock a wait is added to (the flusher
// then spins); nan, negatives and blanks are no number of seconds.
TEST(MountOptions, SecondsOutOfBoundsAreRefused) {
  for (const char* key : {"attr_timeout", "entry_timeout", "flush_interval"}) {
    for (const char* val : {"inf", "INF", "infinity", "nan", "-nan", "1e300", "1000001", "-1",
                            "-0.5", " 1", "+1", "1s", "", "0x", ".", "0x10", "0x1p4",
                            "1e-400", "1e3", "1.2.3"}) {
      const std::string opt = std::string(key) + "=" + val;
      MountOptions o;
      Status st = ParseMountOptions(opt, &o);
      EXPECT_FALSE(st.ok()) << opt;
      EXPECT_EQ(st.err(), EINVAL) << opt;
      EXPECT_NE(st.ToString().find("bad value in mount option '" + opt + "'"), std::string::npos)
          << st.ToString();
      EXPECT_NE(st.ToString().find("seconds from"), std::string::npos) << st.ToString();
      EXPECT_EQ(o.attr_timeout, MountOptions{}.attr_timeout) << opt;
      EXPECT_EQ(o.entry_timeout, MountOptions{}.entry_timeout) << opt;
      EXPECT_EQ(o.flush_interval, MountOptions{}.flush_interval) << opt;
    }
  }
  // A flush interval of no time at all, or of a nanosecond, spins the flusher.
  for (const char* opt : {"flush_interval=0", "flush_interval=1e-9"}) {
    MountOptions o;
    EXPECT_FALSE(ParseMountOptions(opt, &o).ok()) << opt;
  }
}

// max_read is sepfs's own: libfuse fails INIT unless the INIT reply repeats
// the mount's value, so it must not reach libfuse unseen.
TEST(MountOptions, MaxReadIsTakenWithinBounds) {
  MountOptions o;
  EXPECT_EQ(o.max_read, 128u << 10);
  ASSERT_TRUE(ParseMountOptions("max_read=262144", &o).ok());
  EXPECT_EQ(o.max_read, 262144u);
  ASSERT_TRUE(ParseMountOptions("max_read=4096", &o).ok());
  EXPECT_EQ(o.max_read, 4096u);
  ASSERT_TRUE(ParseMountOptions("max_read=1048576", &o).ok());
  EXPECT_EQ(o.max_read, 1048576u);
  EXPECT_TRUE(o.passthrough.empty());
  for (const char* opt : {"max_read=4095", "max_read=1048577", "max_read=", "max_read=x"}) {
    MountOptions p;
    Status st = ParseMountOptions(opt, &p);
    EXPECT_FALSE(st.ok()) << opt;
    EXPECT_NE(st.ToString().find("4096 to 1048576 bytes"), std::string::npos) << st.ToString();
  }
}

// A request is read into a buffer of max_write plus a page; a SETXATTR of a
// 64 KiB value must fit (fsx found E2BIG with max_write=16384).
TEST(MountOptions, MaxWriteIsAtLeast64KiB) {
  MountOptions o;
  EXPECT_EQ(o.max_write, 1u << 20);
  ASSERT_TRUE(ParseMountOptions("max_write=65536", &o).ok());
  EXPECT_EQ(o.max_write, 65536u);
  EXPECT_EQ(o.max_read, 65536u) << "max_read is at most max_write";
  MountOptions q;
  ASSERT_TRUE(ParseMountOptions("max_read=1048576,max_write=262144", &q).ok());
  EXPECT_EQ(q.max_read, 262144u);
  ASSERT_TRUE(ParseMountOptions("max_read=4096", &q).ok());
  EXPECT_EQ(q.max_read, 4096u);
  for (const char* opt : {"max_write=4096", "max_write=65535", "max_write=1048577", "max_write="}) {
    MountOptions p;
    Status st = ParseMountOptions(opt, &p);
    EXPECT_FALSE(st.ok()) << opt;
    EXPECT_NE(st.ToString().find("65536 to 1048576 bytes"), std::string::npos) << st.ToString();
  }
}

TEST(MountOptions, BufferedVlogTurnsDirectWritesOff) {
  MountOptions o;
  EXPECT_TRUE(o.direct_io);
  ASSERT_TRUE(ParseMountOptions("buffered_vlog", &o).ok());
  EXPECT_FALSE(o.direct_io);
}

TEST(MountOptions, IoUringIsAskedForAndTheLastWordCounts) {
  MountOptions o;
  EXPECT_FALSE(o.io_uring);
  EXPECT_TRUE(o.idle_handoff);
  ASSERT_TRUE(ParseMountOptions("io_uring,noidle_handoff", &o).ok());
  EXPECT_TRUE(o.io_uring);
  EXPECT_FALSE(o.idle_handoff);
  ASSERT_TRUE(ParseMountOptions("noio_uring", &o).ok());
  EXPECT_FALSE(o.io_uring);
  EXPECT_TRUE(o.passthrough.empty());  // none of them reaches libfuse
}

// The mount is named after its store; commands find a mounted store by it.
// Escaped spellings are the same options once unescaped (as libfuse reads them).
TEST(MountOptions, FsnameAndSubtypeAreSepfsOwn) {
  for (const char* opt : {"fsname=other", "subtype=x", "ro,fsname=/srv/s", "fs\\name=/srv/other",
                          "sub\\type=x", "fsn\\141me=x"}) {
    MountOptions o;
    Status st = ParseMountOptions(opt, &o);
    EXPECT_FALSE(st.ok()) << opt;
    EXPECT_NE(st.ToString().find("is set by sepfs itself"), std::string::npos) << st.ToString();
  }
}

// Whole numbers are digits only: strtoull alone takes a sign and blanks.
TEST(MountOptions, WholeNumbersAreDigitsOnly) {
  for (const char* opt : {"threads=+8", "cache_mb= 8", "max_dirty_ratio=\t0", "data_cache_mb= -0",
                          "data_cache_mb=-0", "recycle_segments=2 ", "cpu_latency=1e3",
                          "threads=0x8", "cache_mb=18446744073709551617"}) {
    MountOptions o;
    EXPECT_FALSE(ParseMountOptions(opt, &o).ok()) << opt;
  }
  MountOptions o;
  ASSERT_TRUE(ParseMountOptions("threads=8,data_cache_mb=0,recycle_segments=02", &o).ok());
  EXPECT_EQ(o.threads, 8u);
  EXPECT_EQ(o.data_cache_mb, 0u);
  EXPECT_EQ(o.recycle_segments, 2u);
}

// Options are split and unescaped as libfuse does, so sepfs checks what
// libfuse will act on: allow\_other is allow_other, an escaped comma stays
// in its option's value (SELinux context= labels), \101 is 'A'.
TEST(MountOptions, EscapesAreReadAsLibfuseReadsThem) {
  MountOptions a;
  ASSERT_TRUE(ParseMountOptions("allow\\_other", &a).ok());
  EXPECT_EQ(a.passthrough, std::vector<std::string>{"allow_other"});
  MountOptions b;
  ASSERT_TRUE(ParseMountOptions("context=\"system_u:object_r:x_t:s0:c1\\,c2\",noatime", &b).ok());
  EXPECT_EQ(b.passthrough, (std::vector<std::string>{"context=\"system_u:object_r:x_t:s0:c1,c2\"",
                                                     "noatime"}));
  MountOptions c;
  ASSERT_TRUE(ParseMountOptions("r\\o", &c).ok());
  EXPECT_TRUE(c.read_only);
  MountOptions d;
  ASSERT_TRUE(ParseMountOptions("threads=\\0631", &d).ok());  // \063 is '3'
  EXPECT_EQ(d.threads, 31u);
  // \000 would end the option early in libfuse: allow_other unseen.
  for (const char* opt : {"allow_other\\000x", "nodefault_permissions,allow_other\\000"}) {
    MountOptions o;
    Status st = ParseMountOptions(opt, &o);
    EXPECT_FALSE(st.ok()) << opt;
    EXPECT_NE(st.ToString().find("escaped NUL"), std::string::npos) << st.ToString();
  }
}

// libfuse would take an option that starts with '-' for a flag (-r: ro).
TEST(MountOptions, FlagsAreNoOptions) {
  for (const char* opt : {"-r", "-o,ro", "--ro", "\\-r"}) {
    MountOptions o;
    Status st = ParseMountOptions(opt, &o);
    EXPECT_FALSE(st.ok()) << opt;
    EXPECT_EQ(st.err(), EINVAL) << opt;
    EXPECT_FALSE(o.read_only) << opt;
  }
}

// sepfs mount parses each -o in turn: several end as one would.
TEST(MountOptions, MaxReadEndsTheSameOverSeveralOptionLists) {
  MountOptions a;
  ASSERT_TRUE(ParseMountOptions("max_write=65536", &a).ok());
  ASSERT_TRUE(ParseMountOptions("max_write=1048576", &a).ok());
  MountOptions b;
  ASSERT_TRUE(ParseMountOptions("max_write=65536,max_write=1048576", &b).ok());
  EXPECT_EQ(a.max_read, 128u << 10);
  EXPECT_EQ(b.max_read, 128u << 10);
  MountOptions c;
  ASSERT_TRUE(ParseMountOptions("max_read=1048576", &c).ok());
  ASSERT_TRUE(ParseMountOptions("max_write=262144", &c).ok());
  EXPECT_EQ(c.max_read, 262144u);
}

}  // namespace
}  // namespace sepfs::fs
