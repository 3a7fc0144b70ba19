// Decodes Snappy's raw format (the one LevelDB compresses table blocks
// with), for reading the blocks of a table LevelDB itself can no longer
// open (kvstore/leveldb_table_salvage.h). Written from the format's
// description (snappy's format_description.txt):
//
//   varint32 uncompressed length, then elements, each a tag byte whose low
//   two bits say what follows:
//     00 literal: length - 1 in the tag's upper six bits, or (values 60-63)
//        in the next 1-4 bytes, little-endian; then that many bytes
//     01 copy: length 4 + bits 2-4 of the tag, offset bits 5-7 of the tag
//        then one byte (11 bits)
//     10 copy: length 1 + the tag's upper six bits, offset in 2 bytes
//     11 copy: as 10 with a 4-byte offset
//   A copy repeats `length` bytes starting `offset` bytes back in the
//   output (offset > 0; the ranges may overlap, which repeats a pattern).
#pragma once

#include <string>
#include <string_view>

namespace sepfs::kv {

// *out = the decoded bytes of `in`; false (and *out unspecified) when `in`
// is not well-formed: a length past the input, a copy reaching before the
// start, or an output of a size other than the one announced.
[[nodiscard]] bool SnappyUncompress(std::string_view in, std::string* out);

}  // namespace sepfs::kv
