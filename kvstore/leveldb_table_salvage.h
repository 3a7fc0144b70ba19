// Mends a LevelDB table whose end was lost or damaged, for
// leveldb::RepairDB, which (in 1.23) cannot read such a table and moves it
// to lost/ whole: a table cut short by one byte lost every key it held.
//
// LevelDB's table format (its doc/table_format.md): data blocks, the filter
// block, the metaindex block, the index block, then a 48-byte footer (the
// handles of the metaindex and index blocks, padding, a magic number). The
// index at the end is what says where the data blocks are. Every block is
// followed by a 5-byte trailer: its compression type (0 none, 1 Snappy)
// and the masked CRC32C of the block's bytes and that type byte. A data
// block holds entries -- varint32 key bytes shared with the previous key,
// varint32 key bytes not shared, varint32 value length, the unshared key
// bytes, the value -- then its restart offsets and their count (fixed32
// each). Its keys are internal keys: the user key, then fixed64
// (sequence << 8 | type), type 1 a value and 0 a deletion, in increasing
// user key and decreasing sequence.
//
// SalvageTableBlocks walks the data blocks from the file's start instead:
// a block ends where its trailer's checksum matches, and the walk stops at
// the first block that is not an intact data block in order (the filter,
// metaindex or index block, or the damage).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "leveldb/comparator.h"
#include "vlog/env.h"

namespace sepfs::kv {

// Whether leveldb::Table::Open accepts these table bytes with its checks on
// (footer and index block intact).
bool TableOpens(std::string_view table);

struct SalvagedBlocks {
  uint64_t blocks = 0;  // intact data blocks, from the start
  std::vector<std::pair<std::string, std::string>> entries;  // internal key, value, in order
  // The walk ended at an intact block that is not a data block (the
  // filter, metaindex or index block): every data block was intact.
  bool complete = false;
};
SalvagedBlocks SalvageTableBlocks(std::string_view table);

// Orders internal keys as LevelDB's DB does (user keys bytewise, then the
// newest sequence first). Never deleted.
const leveldb::Comparator* InternalKeyOrder();

// The bytes of a table holding `entries` (internal keys in InternalKeyOrder),
// without a filter block.
std::string BuildTable(const std::vector<std::pair<std::string, std::string>>& entries);

struct TableMend {
  bool damaged = false;  // TableOpens refused the file
  uint64_t blocks = 0, entries = 0;  // what the rebuilt table holds; 0: none
};
// When the table at path (DIR/NNNNNN.ldb or .sst) does not open and all of
// its data blocks are intact (SalvagedBlocks::complete): its bytes are kept
// as DIR/lost/NNNNNN.ldb and the file is replaced durably by a table of
// those blocks' entries (the same internal keys, so sequence numbers and
// deletions order against the other tables' as before). A table that opens
// is left alone, and so is one of over 256 MiB or whose damage reaches its
// data blocks: RepairDB moves those to lost/ whole. Keeping the blocks
// before such damage would keep part of the table's key range only, and
// what a batch wrote together (a file's block pointers and its inode
// record, whose keys sort apart) could come back half from this table and
// half from an older one: new data under an old size.
[[nodiscard]] Status MendDamagedTable(Env* env, const std::string& path, TableMend* out);

}  // namespace sepfs::kv
