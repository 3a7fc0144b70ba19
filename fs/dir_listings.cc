#include "fs/dir_listings.h"

#include <string>

namespace sepfs::fs {

size_t ListingBytes(const CookieListing& listing) {
  constexpr size_t kAllocOverhead = 16;  // malloc's header and rounding, roughly
  static const size_t inline_chars = std::string().capacity();
  size_t n = sizeof(listing) + listing.cookies.capacity() * sizeof(uint64_t) +
             listing.entries.capacity() * sizeof(DirListEntry) + 2 * kAllocOverhead;
  for (const DirListEntry& e : listing.entries) {
    if (e.name.capacity() > inline_chars) n += e.name.capacity() + 1 + kAllocOverhead;
  }
  return n;
}

std::shared_ptr<const CookieListing> DirListings::Get(uint64_t dir, uint64_t gen) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = kept_.find(dir);
  if (it == kept_.end()) return nullptr;
  if (it->second.gen != gen) {
    // Stale for good if older (generations only grow); a newer one stays
    // for readers that are not behind.
    if (it->second.gen < gen) EraseLocked(it);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.listing;
}

void DirListings::Put(uint64_t dir, uint64_t gen, std::shared_ptr<const CookieListing> listing) {
  const size_t bytes = ListingBytes(*listing);
  std::lock_guard<std::mutex> l(mu_);
  auto it = kept_.find(dir);
  if (it != kept_.end()) {
    if (it->second.gen > gen) return;  // a slower lister of an older generation
    EraseLocked(it);
  }
  lru_.push_front(dir);
  kept_[dir] = Kept{gen, std::move(listing), bytes, lru_.begin()};
  bytes_ += bytes;
  while (bytes_ > max_bytes_ && lru_.size() > 1) EraseLocked(kept_.find(lru_.back()));
}

void DirListings::EraseLocked(std::unordered_map<uint64_t, Kept>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  kept_.erase(it);
}

size_t DirListings::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

size_t DirListings::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return kept_.size();
}

}  // namespace sepfs::fs
