#include "kvstore/snappy_raw.h"

#include <cstdint>

#include "kvstore/byte_coding.h"

namespace sepfs::kv {

bool SnappyUncompress(std::string_view in, std::string* out) {
  uint64_t expect = 0;
  if (!TakeVarint(&in, 5, &expect) || expect > UINT32_MAX) return false;
  out->clear();
  out->reserve(expect);
  while (!in.empty()) {
    const uint8_t tag = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    uint64_t len = 0, offset = 0;
    switch (tag & 3) {
      case 0: {
        len = tag >> 2;
        if (len >= 60 && !TakeLe(&in, static_cast<int>(len - 59), &len)) return false;
        const uint64_t n = len + 1;
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
    for (uint64_t i = 0; i < len; i++) out->push_back((*out)[from + i]);
  }
  return out->size() == expect;
}

}  // namespace sepfs::kv
