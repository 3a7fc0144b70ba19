// Readdir cookies: stable, positive, in listing order, and groups of equal
// cookies kept together.
#include "fs/dir_cookie.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace sepfs::fs {
namespace {

TEST(DirCookie, DotsFirstNamesStablePositiveAndSpread) {
  EXPECT_EQ(DirCookie("."), 1u);
  EXPECT_EQ(DirCookie(".."), 2u);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const std::string name = "file-" + std::to_string(i);
    const uint64_t c = DirCookie(name);
    EXPECT_GE(c, 3u);
    EXPECT_LT(c, uint64_t{1} << 63);
    EXPECT_EQ(c, DirCookie(name));
    seen.insert(c);
  }
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(DirCookie, ListingsSortAndResumeByCookie) {
  std::vector<DirListEntry> entries = {{".", 1, 0}, {"..", 1, 0}};
  for (int i = 0; i < 50; ++i) entries.push_back({"n" + std::to_string(i), 100u + i, 0});
  const CookieListing l = SortByCookie(entries);
  ASSERT_EQ(l.entries.size(), entries.size());
  EXPECT_EQ(l.entries[0].name, ".");
  EXPECT_EQ(l.entries[1].name, "..");
  for (size_t i = 0; i < l.entries.size(); ++i) {
    EXPECT_EQ(l.cookies[i], DirCookie(l.entries[i].name));
    if (i > 0) {
      EXPECT_LT(l.cookies[i - 1], l.cookies[i]);
    }
    EXPECT_EQ(l.After(l.cookies[i]), i + 1);  // resume right after it
    EXPECT_EQ(l.GroupEnd(i), i + 1);
  }
  EXPECT_EQ(l.After(0), 0u);
  // The same names listed again, after one was removed and one added,
  // resume after a cookie at the same entry.
  entries.erase(entries.begin() + 10);
  entries.push_back({"added", 999, 0});
  const CookieListing again = SortByCookie(entries);
  const uint64_t mid = l.cookies[20];
  for (size_t i = again.After(mid); i < again.entries.size(); ++i) {
    EXPECT_GT(again.cookies[i], mid);
  }
}

TEST(DirCookie, GroupsOfEqualCookiesAreFound) {
  CookieListing l;
  l.cookies = {1, 2, 7, 7, 7, 9};
  l.entries.resize(l.cookies.size());
  EXPECT_EQ(l.GroupEnd(2), 5u);
  EXPECT_EQ(l.GroupEnd(3), 5u);
  EXPECT_EQ(l.GroupEnd(5), 6u);
  EXPECT_EQ(l.After(7), 5u);
  EXPECT_EQ(l.After(6), 2u);
}

}  // namespace
}  // namespace sepfs::fs
