// Helpers shared by the vlog tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "vlog/value_log.h"

namespace sepfs::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/sepfs-vlog-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Deterministic pseudo-random bytes for (seed, size).
inline std::string Payload(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + size);
  std::string s(size, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
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
