// The listings readdir keeps per directory: for its generation only, newest
// generation wins, bounded by bytes with the newest always kept.
#include "fs/dir_listings.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace sepfs::fs {
namespace {

std::shared_ptr<const CookieListing> Listing(int n, const std::string& prefix = "file-name-") {
  std::vector<DirListEntry> entries;
  for (int i = 0; i < n; i++) entries.push_back({prefix + std::to_string(i), uint64_t(i + 10), 0});
  return std::make_shared<const CookieListing>(SortByCookie(std::move(entries)));
}

TEST(DirListings, KeptForItsGenerationOnly) {
  DirListings kept(1 << 20);
  auto l = Listing(10);
  kept.Put(7, 3, l);
  EXPECT_EQ(kept.Get(7, 3), l);
  EXPECT_EQ(kept.Get(8, 3), nullptr);  // another directory
  EXPECT_EQ(kept.Get(7, 2), nullptr);  // a reader behind the times
  EXPECT_EQ(kept.Get(7, 3), l);        // does not drop it
  EXPECT_EQ(kept.Get(7, 4), nullptr);  // the directory changed since
  EXPECT_EQ(kept.Get(7, 3), nullptr);  // and a stale listing is gone for good
  EXPECT_EQ(kept.size(), 0u);
  EXPECT_EQ(kept.bytes(), 0u);
}

TEST(DirListings, AnOlderGenerationNeverReplacesANewerOne) {
  DirListings kept(1 << 20);
  auto newer = Listing(3), older = Listing(4);
  kept.Put(7, 5, newer);
  kept.Put(7, 4, older);  // a slower lister
  EXPECT_EQ(kept.Get(7, 5), newer);
  auto newest = Listing(5);
  kept.Put(7, 6, newest);
  EXPECT_EQ(kept.Get(7, 6), newest);
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.bytes(), ListingBytes(*newest));
}

TEST(DirListings, LeastRecentlyUsedGoFirstAndTheNewestAlwaysStays) {
  const size_t one = ListingBytes(*Listing(100));
  DirListings kept(3 * one);
  for (uint64_t d = 1; d <= 3; d++) kept.Put(d, 1, Listing(100));
  ASSERT_NE(kept.Get(1, 1), nullptr);  // 1 is now the most recent
  kept.Put(4, 1, Listing(100));        // over budget: 2 goes
  EXPECT_EQ(kept.Get(2, 1), nullptr);
  EXPECT_NE(kept.Get(1, 1), nullptr);
  EXPECT_NE(kept.Get(3, 1), nullptr);
  EXPECT_NE(kept.Get(4, 1), nullptr);
  EXPECT_LE(kept.bytes(), 3 * one);
  // A listing bigger than the whole budget is kept alone.
  auto huge = Listing(1000);
  ASSERT_GT(ListingBytes(*huge), 3 * one);
  kept.Put(9, 1, huge);
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.Get(9, 1), huge);
}

TEST(DirListings, BytesCountNamesOutsideTheInlineBuffer) {
  auto short_names = Listing(100, "f");                     // "f0".."f99": inline
  auto mid_names = Listing(100, std::string(20, 'x'));      // 21-23 bytes: on the heap
  auto long_names = Listing(100, std::string(200, 'x'));
  EXPECT_GE(ListingBytes(*mid_names), ListingBytes(*short_names) + 100 * 21);
  EXPECT_GE(ListingBytes(*long_names), ListingBytes(*short_names) + 100 * 200);
}

}  // namespace
}  // namespace sepfs::fs
