// Small files read and replaced whole through the Env (the superblock
// copy, a LevelDB log or table being mended).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vlog/env.h"

namespace sepfs {

// *out = the bytes of the file at path (as many as a read returns up to
// its size); EFBIG, reading nothing, when it holds more than max_bytes.
[[nodiscard]] Status ReadWholeFile(Env* env, const std::string& path, std::string* out,
                                   uint64_t max_bytes = UINT64_MAX);

// Replaces the file at path with `data`, durably: data is written to tmp
// (created or truncated) and synced, tmp is renamed over path and the
// directory synced. A reader sees the old bytes or the new, never a mix.
// A failed rename removes tmp.
[[nodiscard]] Status ReplaceWholeFile(Env* env, const std::string& path, const std::string& tmp,
                                      std::string_view data);

}  // namespace sepfs
