#include "fs/dir_cookie.h"

#include <xxhash.h>

#include <algorithm>
#include <numeric>

namespace sepfs::fs {

uint64_t DirCookie(std::string_view name) {
  if (name == ".") return 1;
  if (name == "..") return 2;
  const uint64_t h = XXH3_64bits(name.data(), name.size()) >> 1;  // below 2^63
  return h < 3 ? h + 3 : h;
}

size_t CookieListing::After(uint64_t off) const {
  return static_cast<size_t>(std::upper_bound(cookies.begin(), cookies.end(), off) -
                             cookies.begin());
}

size_t CookieListing::GroupEnd(size_t i) const {
  size_t j = i + 1;
  while (j < cookies.size() && cookies[j] == cookies[i]) ++j;
  return j;
}

CookieListing SortByCookie(std::vector<DirListEntry> entries) {
  std::vector<uint64_t> cookie(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) cookie[i] = DirCookie(entries[i].name);
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cookie[a] != cookie[b] ? cookie[a] < cookie[b] : entries[a].name < entries[b].name;
  });
  CookieListing out;
  out.entries.reserve(entries.size());
  out.cookies.reserve(entries.size());
  for (size_t i : order) {
    out.entries.push_back(std::move(entries[i]));
    out.cookies.push_back(cookie[i]);
  }
  return out;
}

}  // namespace sepfs::fs
