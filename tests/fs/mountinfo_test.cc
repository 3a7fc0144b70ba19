#include "fs/mountinfo.h"

#include <gtest/gtest.h>

#include <vector>

namespace sepfs::fs {
namespace {

TEST(MountInfo, ParsesALineWithOptionalFieldsAndEscapes) {
  MountInfo m;
  ASSERT_TRUE(ParseMountInfoLine(
      "53 27 0:40 / /mnt/photo\\040store rw,nosuid,relatime shared:7 master:1 - fuse.sepfs "
      "/srv/sepfs\\011store rw,user_id=0,group_id=0,default_permissions",
      &m));
  EXPECT_EQ(m.dev, "0:40");
  EXPECT_EQ(m.point, "/mnt/photo store");
  EXPECT_EQ(m.fstype, "fuse.sepfs");
  EXPECT_EQ(m.source, "/srv/sepfs\tstore");

  ASSERT_TRUE(ParseMountInfoLine("22 1 8:1 / / rw - ext4 /dev/vda rw", &m));
  EXPECT_EQ(m.point, "/");
  EXPECT_EQ(m.fstype, "ext4");
  EXPECT_EQ(m.source, "/dev/vda");
}

TEST(MountInfo, RefusesTruncatedLines) {
  MountInfo m;
  EXPECT_FALSE(ParseMountInfoLine("", &m));
  EXPECT_FALSE(ParseMountInfoLine("53 27 0:40 / /mnt rw shared:7", &m));  // no separator
  EXPECT_FALSE(ParseMountInfoLine("53 27 0:40 / /mnt rw - fuse.sepfs", &m));  // no source
}

TEST(MountInfo, ReadsThisProcessesMounts) {
  std::vector<MountInfo> mounts;
  ASSERT_TRUE(ReadMountInfo(&mounts).ok());
  ASSERT_FALSE(mounts.empty());
  for (const MountInfo& m : mounts) {
    EXPECT_FALSE(m.point.empty());
    EXPECT_FALSE(m.fstype.empty()) << m.point;
  }
}

}  // namespace
}  // namespace sepfs::fs
