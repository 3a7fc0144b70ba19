// Helpers shared by every test suite: a temporary directory and
// deterministic test data.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace sepfs::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
// path() is empty if it could not be created (and the test has failed).
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/sepfs-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr) << tmpl;
    if (p != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

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

}  // namespace sepfs::testing
