// Little-endian fixed-width and varint reads, for the formats kvstore reads
// itself (LevelDB's log and table blocks, Snappy's raw format).
#pragma once

#include <cstdint>
#include <string_view>

namespace sepfs::kv {

// The n-byte (n <= 8) little-endian number at p.
inline uint64_t LoadLe(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

// The n-byte little-endian number at the front of *in, which loses it;
// false (and *in unchanged) when *in is shorter.
inline bool TakeLe(std::string_view* in, int n, uint64_t* v) {
  if (in->size() < static_cast<size_t>(n)) return false;
  *v = LoadLe(in->data(), n);
  in->remove_prefix(static_cast<size_t>(n));
  return true;
}

// The varint (7 bits a byte, low first, high bit set on all but the last)
// at the front of *in, which loses it; false when it runs past *in or past
// max_bytes bytes (5 for a 32-bit value, 10 for 64).
inline bool TakeVarint(std::string_view* in, int max_bytes, uint64_t* v) {
  *v = 0;
  for (int i = 0; i < max_bytes && !in->empty(); i++) {
    const uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace sepfs::kv
