// leveldb::RepairDB, then a compaction of everything, so that reads after
// the repair see the newest version of each key.
//
// RepairDB (1.23) places every table it keeps at level 0, where a read
// takes a key from the table with the highest file number that holds it,
// not from the one with the newest sequence number. File numbers do not
// follow the data's age: a compaction's output is numbered after a
// memtable flush that ran during it, and holds older versions than that
// flush. After a repair such a read returned an older value, or a key that
// a newer deletion had removed, until a compaction happened to merge the
// tables. A compaction merges by sequence number, so once everything has
// been compacted each key has its newest version.
#pragma once

#include <string>

#include "leveldb/options.h"
#include "leveldb/status.h"

namespace sepfs::kv {

leveldb::Status RepairDbInOrder(const std::string& dir, const leveldb::Options& options);

}  // namespace sepfs::kv
