// Conversion of leveldb::Status to sepfs::Status (internal to kvstore).
#pragma once

#include <string_view>

#include "leveldb/status.h"
#include "vlog/status.h"

namespace sepfs::kv {

// Maps a LevelDB status to an errno-carrying Status. The message is
// "<context>: <LevelDB's message>", so the failing path is never lost.
//   ok               -> OK
//   NotFound         -> ENOENT
//   Corruption       -> Corruption (EIO)
//   NotSupported     -> EOPNOTSUPP
//   InvalidArgument  -> ENOENT ("does not exist"), EEXIST ("exists"), else EINVAL
//   IOError          -> the errno whose strerror text the message carries
//                       (ENOSPC, EACCES, ...), else EIO; a held LOCK
//                       (EAGAIN/EACCES on it, or "already held by process")
//                       -> EBUSY, "metadata is locked by another process
//                       (already mounted?)".
Status FromLevelDb(const leveldb::Status& s, std::string_view context);

}  // namespace sepfs::kv
