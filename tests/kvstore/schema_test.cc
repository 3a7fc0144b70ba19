#include "kvstore/schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sepfs::kv {
namespace {

TEST(Schema, BigEndianRoundTrip) {
  for (uint64_t v : {0ull, 1ull, 255ull, 256ull, 0x0102030405060708ull, ~0ull}) {
    std::string s;
    PutBE64(&s, v);
    ASSERT_EQ(s.size(), 8u);
    EXPECT_EQ(GetBE64(s.data()), v);
  }
  std::string s;
  PutBE64(&s, 0x0102030405060708ull);
  EXPECT_EQ(s, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
}

TEST(Schema, KeyLayout) {
  EXPECT_EQ(SuperKey(), "S");
  EXPECT_EQ(CounterKey("next_ino"), "Cnext_ino");
  EXPECT_EQ(InodeKey(0x0102), std::string("I\0\0\0\0\0\0\x01\x02", 9));
  EXPECT_EQ(DentryKey(1, "ab"), std::string("D\0\0\0\0\0\0\0\x01" "ab", 11));
  EXPECT_EQ(BlockKey(1, 2), std::string("B\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x02", 17));
  EXPECT_EQ(XattrKey(3, "user.x"), XattrPrefix(3) + "user.x");
  EXPECT_EQ(SymlinkKey(4), std::string("L\0\0\0\0\0\0\0\x04", 9));
  EXPECT_EQ(OrphanKey(5), std::string("O\0\0\0\0\0\0\0\x05", 9));
  EXPECT_EQ(DentryKey(7, ""), DentryPrefix(7));
  EXPECT_EQ(BlockKey(7, 0).substr(0, 9), BlockPrefix(7));
}

TEST(Schema, ParseRoundTrip) {
  const uint64_t vals[] = {0, 1, 255, 256, 65535, 65536, 1ull << 32, ~0ull};
  for (uint64_t a : vals) {
    uint64_t got = 0;
    ASSERT_TRUE(ParseInodeKey(InodeKey(a), &got));
    EXPECT_EQ(got, a);
    ASSERT_TRUE(ParseOrphanKey(OrphanKey(a), &got));
    EXPECT_EQ(got, a);
    for (uint64_t b : vals) {
      uint64_t ino = 0, block = 0;
      ASSERT_TRUE(ParseBlockKey(BlockKey(a, b), &ino, &block));
      EXPECT_EQ(ino, a);
      EXPECT_EQ(block, b);
    }
    const std::string name("n\0\xff/x", 5);
    std::string_view parsed;
    uint64_t parent = 0;
    const std::string dkey = DentryKey(a, name);  // parsed views point into it
    ASSERT_TRUE(ParseDentryKey(dkey, &parent, &parsed));
    EXPECT_EQ(parent, a);
    EXPECT_EQ(parsed, name);
    const std::string xkey = XattrKey(a, "user.k");
    ASSERT_TRUE(ParseXattrKey(xkey, &parent, &parsed));
    EXPECT_EQ(parent, a);
    EXPECT_EQ(parsed, "user.k");
  }
}

TEST(Schema, ParseRejectsWrongTagOrLength) {
  uint64_t a = 0, b = 0;
  std::string_view name;
  EXPECT_FALSE(ParseInodeKey(OrphanKey(1), &a));
  EXPECT_FALSE(ParseInodeKey(InodeKey(1) + "x", &a));
  EXPECT_FALSE(ParseInodeKey(InodeKey(1).substr(0, 8), &a));
  EXPECT_FALSE(ParseInodeKey("", &a));
  EXPECT_FALSE(ParseOrphanKey(InodeKey(1), &a));
  EXPECT_FALSE(ParseBlockKey(BlockKey(1, 2) + "x", &a, &b));
  EXPECT_FALSE(ParseBlockKey(BlockKey(1, 2).substr(0, 16), &a, &b));
  EXPECT_FALSE(ParseBlockKey(BlockPrefix(1), &a, &b));
  std::string wrong_tag = BlockKey(1, 2);
  wrong_tag[0] = kTagDentry;
  EXPECT_FALSE(ParseBlockKey(wrong_tag, &a, &b));
  EXPECT_FALSE(ParseDentryKey(XattrKey(1, "a"), &a, &name));
  EXPECT_FALSE(ParseDentryKey(DentryPrefix(1), &a, &name));  // empty name
  EXPECT_FALSE(ParseDentryKey("D\0\0", &a, &name));
  EXPECT_FALSE(ParseXattrKey(DentryKey(1, "a"), &a, &name));
  EXPECT_FALSE(ParseXattrKey(XattrPrefix(1), &a, &name));
}

TEST(Schema, DentriesOfOneParentSortTogether) {
  // Worst-case names: bytes 0x00 and 0xff, long names, a name that looks like
  // the next parent's number.
  const std::vector<std::string> names = {std::string(1, '\0'), "a", "b", std::string(255, '\xff'),
                                          std::string("\0\0\0\0\0\0\0\x02", 8)};
  for (uint64_t p : {1ull, 255ull, 256ull, (1ull << 32) - 1, 1ull << 32, ~0ull - 1}) {
    for (const std::string& n : names) {
      EXPECT_LT(DentryKey(p, n), DentryKey(p + 1, std::string(1, '\0')));
      EXPECT_LT(DentryKey(p, n), DentryKey(p + 1, ""));
      EXPECT_GT(DentryKey(p, n), DentryKey(p - 1, std::string(255, '\xff')));
      EXPECT_GE(DentryKey(p, n), DentryPrefix(p));
      EXPECT_LT(DentryKey(p, n), PrefixEnd(DentryPrefix(p)));
    }
  }
  // Within a parent, byte order of names.
  EXPECT_LT(DentryKey(9, "a"), DentryKey(9, "ab"));
  EXPECT_LT(DentryKey(9, "ab"), DentryKey(9, "b"));
}

TEST(Schema, BlockKeysSortNumerically) {
  std::vector<uint64_t> blocks = {0,   1,         2,         254,       255,        256,
                                  257, 65535,     65536,     (1ull << 32) - 1, 1ull << 32,
                                  (1ull << 32) + 1, 1ull << 40, ~0ull - 1, ~0ull};
  for (size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_LT(BlockKey(7, blocks[i - 1]), BlockKey(7, blocks[i])) << blocks[i];
    EXPECT_LT(InodeKey(blocks[i - 1]), InodeKey(blocks[i])) << blocks[i];
  }
  // Sorting keys gives numeric order.
  std::vector<std::string> keys;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) keys.push_back(BlockKey(7, *it));
  std::sort(keys.begin(), keys.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t ino = 0, block = 0;
    ASSERT_TRUE(ParseBlockKey(keys[i], &ino, &block));
    EXPECT_EQ(block, blocks[i]);
  }
  // All blocks of one inode sit inside its prefix range, before the next inode.
  for (uint64_t ino : {255ull, 256ull, 1ull << 32}) {
    const std::string end = PrefixEnd(BlockPrefix(ino));
    EXPECT_LT(BlockKey(ino, ~0ull), end);
    EXPECT_GE(BlockKey(ino, 0), BlockPrefix(ino));
    EXPECT_LE(end, BlockKey(ino + 1, 0));
    EXPECT_GT(BlockKey(ino, 0), BlockKey(ino - 1, ~0ull));
  }
}

TEST(Schema, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("abc"), "abd");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(std::string("a\xfe\xff\xff", 4)), std::string("a\xff", 2));
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff", 2)), "");
  EXPECT_EQ(PrefixEnd(""), "");
  EXPECT_EQ(PrefixEnd(DentryPrefix(0xff)), std::string("D\0\0\0\0\0\0\x01", 8));
  EXPECT_LE(PrefixEnd(DentryPrefix(0xff)), DentryPrefix(0x100));
  EXPECT_EQ(PrefixEnd(DentryPrefix(~0ull)), "E");  // 'D' + 1, all 0xff dropped
  // Bound property: every extension of the prefix is below the end, the end
  // itself is not an extension.
  const std::string p = XattrPrefix(0x1ff);
  const std::string end = PrefixEnd(p);
  EXPECT_LT(p + std::string(100, '\xff'), end);
  EXPECT_NE(end.substr(0, p.size()), p);
  EXPECT_GT(end, p);
}

TEST(Schema, TagsAreDistinctRanges) {
  // Different record kinds never interleave.
  EXPECT_LT(BlockKey(~0ull, ~0ull), PrefixEnd(std::string(1, kTagBlock)));
  EXPECT_LT(BlockKey(~0ull, ~0ull), CounterKey(""));
  EXPECT_LT(DentryKey(~0ull, std::string(10, '\xff')), InodeKey(0));
}

TEST(Schema, DescribeKey) {
  EXPECT_EQ(DescribeKey(SuperKey()), "super");
  EXPECT_EQ(DescribeKey(CounterKey("next_ino")), "counter('next_ino')");
  EXPECT_EQ(DescribeKey(InodeKey(42)), "inode(42)");
  EXPECT_EQ(DescribeKey(BlockKey(7, 3)), "block(7,3)");
  EXPECT_EQ(DescribeKey(DentryKey(1, std::string("a\0b", 3))), "dentry(1,'a\\x00b')");
  EXPECT_EQ(DescribeKey(XattrKey(2, "user.x")), "xattr(2,'user.x')");
  EXPECT_EQ(DescribeKey(SymlinkKey(5)), "symlink(5)");
  EXPECT_EQ(DescribeKey(OrphanKey(6)), "orphan(6)");
  EXPECT_EQ(DescribeKey("Z\x01"), "raw('Z\\x01')");
}

}  // namespace
}  // namespace sepfs::kv
