// Directory listings in cookie order (fs/dir_cookie.h), shared by every
// readdir of a directory while its entries are unchanged. Readdir has no
// handle (the kernel opens directories itself, FUSE no-opendir): a reply
// resumes after the cookie the kernel passes, in the listing kept for the
// directory's current generation (Filesystem::EntriesGen), so a large
// directory is listed once per change, not once per reply.
//
// Bounded: once the kept listings take more than max_bytes, the least
// recently used are dropped; the newest is kept whatever its size (a
// directory bigger than the budget is still listed once per pass).
// Thread-safe; a listing is immutable once kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fs/dir_cookie.h"

namespace sepfs::fs {

// Memory a listing holds (entries, names, cookies), roughly.
size_t ListingBytes(const CookieListing& listing);

class DirListings {
 public:
  explicit DirListings(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The listing of dir kept for generation gen, or null.
  std::shared_ptr<const CookieListing> Get(uint64_t dir, uint64_t gen);
  // Keeps listing as dir's, for generation gen (replaces an older one).
  void Put(uint64_t dir, uint64_t gen, std::shared_ptr<const CookieListing> listing);

  size_t bytes() const;
  size_t size() const;

 private:
  struct Kept {
    uint64_t gen = 0;
    std::shared_ptr<const CookieListing> listing;
    size_t bytes = 0;
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  void EraseLocked(std::unordered_map<uint64_t, Kept>::iterator it);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Kept> kept_;  // by directory
  std::list<uint64_t> lru_;                  // directories, most recent first
  size_t bytes_ = 0;
};

}  // namespace sepfs::fs
