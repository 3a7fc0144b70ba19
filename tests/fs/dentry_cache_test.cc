// The directory entries kept in memory: complete directories only, changed
// in place, bounded per directory and in bytes.
#include "fs/dentry_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sepfs::fs {
namespace {

std::vector<DirListEntry> Entries(int n, const std::string& prefix = "name-") {
  std::vector<DirListEntry> v;
  for (int i = 0; i < n; i++) {
    v.push_back({prefix + std::to_string(1000 + i), uint64_t(i + 10), 0100000});
  }
  return v;
}

std::vector<std::string> Listed(DentryCache* c, uint64_t dir) {
  std::vector<DirListEntry> out;
  EXPECT_TRUE(c->List(dir, &out));
  std::vector<std::string> names;
  for (const auto& e : out) names.push_back(e.name);
  return names;
}

TEST(DentryCache, AnswersOnlyForFilledDirectories) {
  DentryCache c(1 << 20, 100);
  kv::DirEntry e;
  bool found = true;
  std::vector<DirListEntry> out;
  EXPECT_FALSE(c.Lookup(7, "name-1000", &e, &found));
  EXPECT_FALSE(c.List(7, &out));
  bool empty;
  EXPECT_FALSE(c.Empty(7, &empty));
  c.Put(7, "x", kv::DirEntry{5, 0100000});  // not cached: ignored
  EXPECT_FALSE(c.Lookup(7, "x", &e, &found));

  const auto v = Entries(3);
  c.Fill(7, v.cbegin(), v.cend());
  ASSERT_TRUE(c.Lookup(7, "name-1001", &e, &found));
  EXPECT_TRUE(found);
  EXPECT_EQ(e.ino, 11u);
  ASSERT_TRUE(c.Lookup(7, "missing", &e, &found));
  EXPECT_FALSE(found) << "a complete directory answers negative lookups";
  ASSERT_TRUE(c.Empty(7, &empty));
  EXPECT_FALSE(empty);
  EXPECT_EQ(Listed(&c, 7), (std::vector<std::string>{"name-1000", "name-1001", "name-1002"}));
  const DentryCacheStats s = c.stats();
  EXPECT_EQ(s.dirs, 1u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.misses, 0u);
}

TEST(DentryCache, ChangesAreAppliedInPlaceInNameOrder) {
  DentryCache c(1 << 20, 100);
  std::vector<DirListEntry> none;
  c.Fill(3, none.cbegin(), none.cend());
  bool empty = false;
  ASSERT_TRUE(c.Empty(3, &empty));
  EXPECT_TRUE(empty);
  c.Put(3, "b", kv::DirEntry{20, 040000});
  c.Put(3, "a", kv::DirEntry{21, 0100000});
  c.Put(3, "\xff", kv::DirEntry{22, 0100000});  // bytes compare unsigned, as LevelDB's keys
  c.Put(3, "c", kv::DirEntry{23, 0100000});
  c.Erase(3, "c");
  c.Erase(3, "never");  // absent: nothing
  EXPECT_EQ(Listed(&c, 3), (std::vector<std::string>{"a", "b", "\xff"}));
  c.Put(3, "a", kv::DirEntry{30, 0100000});  // replaced (rename over)
  kv::DirEntry e;
  bool found;
  ASSERT_TRUE(c.Lookup(3, "a", &e, &found));
  EXPECT_EQ(e.ino, 30u);
  EXPECT_EQ(c.stats().entries, 3u);
  c.Drop(3);
  EXPECT_FALSE(c.Lookup(3, "a", &e, &found));
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(c.stats().bytes, 0u);
}

TEST(DentryCache, LargeDirectoriesAreNotKept) {
  DentryCache c(1 << 20, 4);
  const auto big = Entries(5);
  c.Fill(1, big.cbegin(), big.cend());
  std::vector<DirListEntry> out;
  EXPECT_FALSE(c.List(1, &out));
  const auto v = Entries(4);
  c.Fill(2, v.cbegin(), v.cend());
  ASSERT_TRUE(c.List(2, &out));
  c.Put(2, "one-more", kv::DirEntry{99, 0100000});  // grows past the limit: dropped
  EXPECT_FALSE(c.List(2, &out));
  EXPECT_EQ(c.stats().dirs, 0u);
  EXPECT_EQ(c.stats().entries, 0u);
  EXPECT_EQ(c.stats().bytes, 0u);
}

TEST(DentryCache, LeastRecentlyUsedDirectoriesGoFirst) {
  const auto v = Entries(10);
  DentryCache probe(1 << 20, 100);
  probe.Fill(1, v.cbegin(), v.cend());
  const size_t one = probe.stats().bytes;
  DentryCache c(3 * one, 100);  // room for three
  c.Fill(1, v.cbegin(), v.cend());
  c.Fill(2, v.cbegin(), v.cend());
  c.Fill(3, v.cbegin(), v.cend());
  std::vector<DirListEntry> out;
  ASSERT_TRUE(c.List(1, &out));  // 1 is now the most recent
  c.Fill(4, v.cbegin(), v.cend());
  EXPECT_FALSE(c.List(2, &out)) << "the least recently used goes";
  EXPECT_TRUE(c.List(1, &out));
  EXPECT_TRUE(c.List(3, &out));
  EXPECT_TRUE(c.List(4, &out));
  EXPECT_LE(c.stats().bytes, 3 * one);
  // Names longer than the string's inline buffer count their own bytes.
  DentryCache longer(1 << 20, 100);
  const auto l = Entries(10, std::string(200, 'n'));
  longer.Fill(1, l.cbegin(), l.cend());
  EXPECT_GT(longer.stats().bytes, one + 10 * 200);
}

TEST(DentryCache, EmptyDirectoriesCountAgainstTheBudget) {
  // Every mkdir puts its directory in, empty: a million of them must not
  // grow the cache past its bytes.
  DentryCache c(16 << 10, 100);
  const std::vector<DirListEntry> none;
  for (uint64_t d = 1; d <= 10000; d++) c.Fill(d, none.cbegin(), none.cend());
  EXPECT_LE(c.stats().bytes, size_t{16} << 10);
  EXPECT_GT(c.stats().dirs, 0u);
  EXPECT_LT(c.stats().dirs, 200u);
  bool empty = false;
  EXPECT_TRUE(c.Empty(10000, &empty));  // the newest stays
  EXPECT_TRUE(empty);
  EXPECT_FALSE(c.Empty(1, &empty));
}

}  // namespace
}  // namespace sepfs::fs
