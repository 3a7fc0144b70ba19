// Checks the records of a LevelDB write-ahead log (STORE/meta/NNNNNN.log)
// and blanks the damaged ones, for leveldb::RepairDB, which (in 1.23)
// converts logs to tables without checking record checksums: a damaged
// byte of a record came back as data (an inline block's bytes).
//
// LevelDB's log format (its doc/log_format.md): the file is a sequence of
// 32 KiB blocks; a block holds physical records, each a 7-byte header --
// masked CRC32C (4, little-endian) of the type byte and the payload, payload
// length (2, little-endian), type (1: full, 2: first, 3: middle, 4: last
// fragment of a logical record) -- then the payload. Fewer than 7 bytes
// left in a block are zero padding; a zero header (type 0, length 0) makes
// readers skip the rest of the block.
//
// A record whose checksum fails, or whose length runs past its block, is
// blanked together with the rest of its block (the same extent LevelDB's
// checked recovery drops); a logical record that loses a fragment so is
// dropped whole by the reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vlog/env.h"

namespace sepfs::kv {

// CRC32C (Castagnoli) of data, and LevelDB's masking of a stored CRC.
uint32_t Crc32c(std::string_view data, uint32_t init = 0);
uint32_t MaskCrc(uint32_t crc);

// Blanks the damaged records of the log in `log` (a copy of a file's
// bytes); returns how many were blanked.
uint64_t BlankDamagedLogRecords(std::string* log);

// Reads the log file at path, and when BlankDamagedLogRecords changed it,
// writes it back durably (ReplaceWholeFile through TempPathFor(path)).
// *blanked: the records blanked.
Status BlankDamagedLogRecordsInFile(Env* env, const std::string& path, uint64_t* blanked);

// The temporary name for a file of LevelDB's being replaced:
// DIR/NNNNNN.log or .ldb -> DIR/NNNNNN.dbtmp, LevelDB's own name for a
// temporary file, which its recovery and `sepfs mkfs --force` know.
std::string TempPathFor(const std::string& path);

}  // namespace sepfs::kv
