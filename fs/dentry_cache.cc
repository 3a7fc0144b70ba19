#include "fs/dentry_cache.h"

namespace sepfs::fs {

size_t DentryCache::EntryBytes(std::string_view name) {
  // A map node (tree links, key string, value) plus malloc's overhead; a
  // name longer than the string's inline buffer has its own allocation.
  static const size_t inline_chars = std::string().capacity();
  constexpr size_t kNode = 32 + sizeof(std::string) + sizeof(kv::DirEntry) + 16;
  return kNode + (name.size() > inline_chars ? name.size() + 1 + 16 : 0);
}

DentryCache::Dir* DentryCache::FindLocked(uint64_t dir) {
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) {
    misses_++;
    return nullptr;
  }
  hits_++;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second;
}

bool DentryCache::Lookup(uint64_t dir, std::string_view name, kv::DirEntry* e, bool* found) {
  std::lock_guard<std::mutex> l(mu_);
  Dir* d = FindLocked(dir);
  if (d == nullptr) return false;
  auto it = d->entries.find(name);
  *found = it != d->entries.end();
  if (*found) *e = it->second;
  return true;
}

bool DentryCache::List(uint64_t dir, std::vector<DirListEntry>* out) {
  std::lock_guard<std::mutex> l(mu_);
  Dir* d = FindLocked(dir);
  if (d == nullptr) return false;
  out->reserve(out->size() + d->entries.size());
  for (const auto& [name, e] : d->entries) out->push_back({name, e.ino, e.type});
  return true;
}

bool DentryCache::Empty(uint64_t dir, bool* empty) {
  std::lock_guard<std::mutex> l(mu_);
  Dir* d = FindLocked(dir);
  if (d == nullptr) return false;
  *empty = d->entries.empty();
  return true;
}

void DentryCache::Fill(uint64_t dir, std::vector<DirListEntry>::const_iterator begin,
                       std::vector<DirListEntry>::const_iterator end) {
  if (static_cast<size_t>(end - begin) > max_entries_) return;
  Dir fresh;
  fresh.bytes = kDirBytes;
  for (auto i = begin; i != end; ++i) {
    fresh.entries.emplace_hint(fresh.entries.end(), i->name, kv::DirEntry{i->ino, i->type});
    fresh.bytes += EntryBytes(i->name);
  }
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = dirs_.find(dir); it != dirs_.end()) EraseLocked(it);
  lru_.push_front(dir);
  fresh.lru = lru_.begin();
  bytes_ += fresh.bytes;
  entries_ += fresh.entries.size();
  dirs_.emplace(dir, std::move(fresh));
  TrimLocked();
}

void DentryCache::Put(uint64_t dir, std::string_view name, const kv::DirEntry& e) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  Dir& d = it->second;
  auto [pos, inserted] = d.entries.insert_or_assign(std::string(name), e);
  if (!inserted) return;
  d.bytes += EntryBytes(name);
  bytes_ += EntryBytes(name);
  entries_++;
  if (d.entries.size() > max_entries_) return EraseLocked(it);
  TrimLocked();
}

void DentryCache::Erase(uint64_t dir, std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  auto pos = it->second.entries.find(name);
  if (pos == it->second.entries.end()) return;
  it->second.entries.erase(pos);
  it->second.bytes -= EntryBytes(name);
  bytes_ -= EntryBytes(name);
  entries_--;
}

void DentryCache::Drop(uint64_t dir) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = dirs_.find(dir); it != dirs_.end()) EraseLocked(it);
}

void DentryCache::EraseLocked(std::unordered_map<uint64_t, Dir>::iterator it) {
  bytes_ -= it->second.bytes;
  entries_ -= it->second.entries.size();
  lru_.erase(it->second.lru);
  dirs_.erase(it);
}

void DentryCache::TrimLocked() {
  while (bytes_ > max_bytes_ && !lru_.empty()) EraseLocked(dirs_.find(lru_.back()));
}

DentryCacheStats DentryCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return DentryCacheStats{dirs_.size(), entries_, bytes_, hits_, misses_};
}

}  // namespace sepfs::fs
