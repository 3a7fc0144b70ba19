// Readdir offsets ("cookies") that name the same entry in every listing of
// a directory: "." is 1, ".." is 2, any other name the hash of its bytes.
// A listing is returned in cookie order and a readdir at offset X resumes
// with the first entry whose cookie is above X, whichever listing or handle
// the offset came from. So a listing that resumes after the directory
// changed, or the kernel's cache of listings (which joins replies of
// several handles), returns every unchanged entry exactly once.
//
// Two names may share a cookie (about 2^-63 per pair of names); such a
// group travels in one reply (CookieListing::GroupEnd), but should the
// kernel's copy to the reader stop inside the group, the rest of it is
// skipped, as with any hash cookie. Offsets above 2^31 need large-file
// support in 32-bit readers (telldir, non-LFS readdir).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fs/filesystem.h"

namespace sepfs::fs {

// In [1, 2^63): a positive off_t.
uint64_t DirCookie(std::string_view name);

// A listing in cookie order, with each entry's cookie.
struct CookieListing {
  std::vector<DirListEntry> entries;
  std::vector<uint64_t> cookies;
  // Index of the first entry whose cookie is above off.
  size_t After(uint64_t off) const;
  // One past the last entry with the cookie of entries[i].
  size_t GroupEnd(size_t i) const;
};

// Sorts `entries` (as ListDir returns them) into cookie order.
CookieListing SortByCookie(std::vector<DirListEntry> entries);

}  // namespace sepfs::fs
