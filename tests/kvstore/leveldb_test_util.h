// Helpers for the tests of the LevelDB mending code (log check, table
// salvage): a DB opened the way LevelDB's own tools would, and a file's
// bytes.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "leveldb/db.h"

namespace sepfs::kv::testing {

// The DB at dir with default options (created when asked); null, and a
// test failure, if it does not open.
inline std::unique_ptr<leveldb::DB> OpenLevelDb(const std::string& dir, bool create = false) {
  leveldb::Options o;
  o.create_if_missing = create;
  leveldb::DB* db = nullptr;
  const leveldb::Status s = leveldb::DB::Open(o, dir, &db);
  EXPECT_TRUE(s.ok()) << dir << ": " << s.ToString();
  return std::unique_ptr<leveldb::DB>(db);
}

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace sepfs::kv::testing
