#include "kvstore/snappy_raw.h"

#include <cstdint>

namespace sepfs::kv {

namespace {

bool ReadVarint32(std::string_view* in, uint32_t* v) {
  *v = 0;
  for (int shift = 0; shift <= 28 && !in->empty(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= uint32_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

bool TakeLe(std::string_view* in, int n, uint32_t* v) {
  if (in->size() < static_cast<size_t>(n)) return false;
  *v = 0;
  for (int i = 0; i < n; i++) *v |= uint32_t{static_cast<uint8_t>((*in)[i])} << (8 * i);
  in->remove_prefix(n);
  return true;
}

}  // namespace

bool SnappyUncompress(std::string_view in, std::string* out) {
  uint32_t expect = 0;
  if (!ReadVarint32(&in, &expect)) return false;
  out->clear();
  out->reserve(expect);
  while (!in.empty()) {
    const uint8_t tag = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    uint32_t len = 0, offset = 0;
    switch (tag & 3) {
      case 0: {
        len = tag >> 2;
        if (len >= 60 && !TakeLe(&in, static_cast<int>(len - 59), &len)) return false;
        const uint64_t n = uint64_t{len} + 1;
        if (n > expect - out->size() || n > in.size()) return false;
        out->append(in.substr(0, n));
        in.remove_prefix(n);
        continue;
      }
      case 1:
        len = 4 + ((tag >> 2) & 7);
        if (in.empty()) return false;
        offset = (static_cast<uint32_t>(tag >> 5) << 8) | static_cast<uint8_t>(in.front());
        in.remove_prefix(1);
        break;
      case 2:
        len = 1 + (tag >> 2);
        if (!TakeLe(&in, 2, &offset)) return false;
        break;
      default:
        len = 1 + (tag >> 2);
        if (!TakeLe(&in, 4, &offset)) return false;
        break;
    }
    if (offset == 0 || offset > out->size() || len > expect - out->size()) return false;
    const size_t from = out->size() - offset;
    for (uint32_t i = 0; i < len; i++) out->push_back((*out)[from + i]);
  }
  return out->size() == expect;
}

}  // namespace sepfs::kv
