// Helpers shared by the vlog tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"
#include "vlog/value_log.h"

namespace sepfs::testing {

// A record appended by a test, with what is needed to read it back.
struct Written {
  vlog::BlockPtr ptr;
  uint64_t inode = 0;
  uint64_t block = 0;
  std::string data;
};

// Appends Payload(seed_mult * inode + block, size) for (inode, block).
inline Written PutRecord(vlog::ValueLog* log, vlog::Stream stream, uint64_t inode,
                         uint64_t block, size_t size, uint64_t seed_mult = 1000003) {
  Written w{{}, inode, block, Payload(inode * seed_mult + block, size)};
  Status st = log->Append(stream, inode, block, w.data, &w.ptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return w;
}

// Reads w back; a successful read of other bytes is an error too.
inline Status ReadBack(vlog::ValueLog* log, const Written& w) {
  std::string buf(w.data.size(), '\0');
  Status st = log->Read(w.ptr, w.inode, w.block, buf.data());
  if (st.ok() && buf != w.data) return Status::IOError("wrong bytes returned");
  return st;
}

}  // namespace sepfs::testing
