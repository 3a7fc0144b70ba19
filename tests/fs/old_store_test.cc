// fs/old_store.h: what mkfs --force may remove, and how.
#include "fs/old_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../temp_dir.h"
#include "vlog/format.h"

namespace sepfs::fs {
namespace {

namespace fsys = std::filesystem;

class OldStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Sub("store");
    ASSERT_TRUE(fsys::create_directories(dir_ + "/meta"));
    ASSERT_TRUE(fsys::create_directory(dir_ + "/vlog"));
    for (const char* f : {"CURRENT", "LOCK", "LOG", "MANIFEST-000002", "000003.log", "000004.ldb"}) {
      Touch(dir_ + "/meta/" + f);
    }
    Touch(dir_ + "/vlog/" + vlog::SegmentFileName(1));
    Touch(dir_ + "/vlog/" + vlog::FreeFileName(2));
    Touch(dir_ + "/LOCK");
    Touch(dir_ + "/sepfs.log");
  }
  static void Touch(const std::string& path, const std::string& text = "x") {
    std::ofstream(path) << text;
  }

  sepfs::testing::TempDir tmp_;
  std::string dir_;
};

TEST_F(OldStoreTest, RemovesAStoreButItsLock) {
  ASSERT_TRUE(fsys::create_directory(dir_ + "/lost+found"));
  std::unique_ptr<OldStore> old;
  ASSERT_TRUE(OldStore::Find(dir_, &old).ok());
  EXPECT_FALSE(old->empty());
  ASSERT_TRUE(old->Remove().ok());
  std::vector<std::string> left;
  for (const auto& e : fsys::directory_iterator(dir_)) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"LOCK", "lost+found"}));
}

TEST_F(OldStoreTest, AnEmptyDirectoryHoldsNone) {
  const std::string empty = tmp_.Sub("empty");
  ASSERT_TRUE(fsys::create_directory(empty));
  std::unique_ptr<OldStore> old;
  ASSERT_TRUE(OldStore::Find(empty, &old).ok());
  EXPECT_TRUE(old->empty());
}

TEST_F(OldStoreTest, RefusesWhatNoStoreHolds) {
  const std::string user = tmp_.Sub("user");
  ASSERT_TRUE(fsys::create_directory(user));
  for (const std::string& what : {std::string("meta/notes.txt"), std::string("vlog/000001.ldb"),
                                  std::string("extra")}) {
    Touch(dir_ + "/" + what);
    std::unique_ptr<OldStore> old;
    const Status st = OldStore::Find(dir_, &old);
    EXPECT_EQ(st.err(), EEXIST) << what << ": " << st.ToString();
    EXPECT_NE(st.ToString().find("'" + what + "'"), std::string::npos) << st.ToString();
    fsys::remove(dir_ + "/" + what);
  }
  // A link where a store file or directory would be.
  fsys::remove(dir_ + "/sepfs.log");
  fsys::create_symlink(user, dir_ + "/sepfs.log");
  std::unique_ptr<OldStore> old;
  EXPECT_EQ(OldStore::Find(dir_, &old).err(), EEXIST);
  fsys::remove(dir_ + "/sepfs.log");
  fsys::rename(dir_ + "/vlog", tmp_.Sub("vlog-aside"));
  fsys::create_directory_symlink(user, dir_ + "/vlog");
  const Status st = OldStore::Find(dir_, &old);
  EXPECT_EQ(st.err(), EEXIST) << st.ToString();
  EXPECT_NE(st.ToString().find("'vlog'"), std::string::npos) << st.ToString();
}

// The removal works on the directories it checked: one swapped for a link
// to a user's directory after the check is not followed, and a file
// swapped for a link loses the link, not what it points to.
TEST_F(OldStoreTest, SwapsAfterTheCheckAreNotFollowed) {
  const std::string user = tmp_.Sub("user");
  ASSERT_TRUE(fsys::create_directory(user));
  const std::string seg = vlog::SegmentFileName(1);
  Touch(user + "/" + seg, "precious");
  Touch(user + "/CURRENT", "precious");
  std::unique_ptr<OldStore> old;
  ASSERT_TRUE(OldStore::Find(dir_, &old).ok());
  fsys::rename(dir_ + "/vlog", tmp_.Sub("vlog-aside"));
  fsys::create_directory_symlink(user, dir_ + "/vlog");
  fsys::remove(dir_ + "/meta/CURRENT");
  fsys::create_symlink(user + "/CURRENT", dir_ + "/meta/CURRENT");
  (void)old->Remove();  // fails at the link where vlog/ was; what matters is below
  EXPECT_TRUE(fsys::exists(user + "/" + seg));
  EXPECT_TRUE(fsys::exists(user + "/CURRENT"));
  EXPECT_FALSE(fsys::exists(tmp_.Sub("vlog-aside") + "/" + seg)) << "the checked directory's";
}

}  // namespace
}  // namespace sepfs::fs
