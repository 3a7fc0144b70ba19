// Helpers shared by the vlog tests.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"
#include "vlog/value_log.h"

namespace sepfs::testing {

// Pages of [from, to) of the file at path resident in the page cache
// (mincore of a mapping); from is rounded down to a page.
inline size_t ResidentPages(const std::string& path, uint64_t from, uint64_t to) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  from = from / page * page;
  void* map = ::mmap(nullptr, to - from, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(from));
  ::close(fd);
  EXPECT_NE(map, MAP_FAILED);
  if (map == MAP_FAILED) return 0;
  std::vector<unsigned char> vec((to - from + page - 1) / page);
  EXPECT_EQ(::mincore(map, to - from, vec.data()), 0);
  ::munmap(map, to - from);
  return static_cast<size_t>(
      std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

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
