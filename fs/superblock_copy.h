// STORE/superblock: a copy of the superblock record, outside LevelDB.
//
// Every open of a store needs the superblock record (block size, segment
// size, capacity, format), and it is one key of the LSM: a damaged table
// block or log record that held it made the whole store unmountable while
// every other record was intact. Mkfs writes the copy beside the record, a
// store opened for writing rewrites it when it is missing or differs from
// the record (the record, when it decodes, is what counts), and
// `fsck --repair` restores a lost or undecodable record from it.
//
// Layout: the record's bytes (kv::EncodeSuperblock), then the XXH3-64 of
// those bytes, 8 bytes little-endian. Written to superblock.tmp, synced and
// renamed over the copy, so a crash leaves the old copy or the new one.
#pragma once

#include <string>

#include "kvstore/records.h"
#include "vlog/env.h"

namespace sepfs::fs {

std::string SuperblockCopyPath(const std::string& store);
std::string SuperblockCopyTempPath(const std::string& store);

// Writes the copy of sb durably (the file, then the directory entry).
Status WriteSuperblockCopy(Env* env, const std::string& store, const kv::Superblock& sb);

// Reads and checks the copy: NotFound when there is none; Corruption (naming
// the file) when its checksum fails or its record does not decode.
Status ReadSuperblockCopy(Env* env, const std::string& store, kv::Superblock* sb);

}  // namespace sepfs::fs
