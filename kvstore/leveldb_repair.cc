#include "kvstore/leveldb_repair.h"

#include <memory>

#include "leveldb/db.h"
#include "leveldb/write_batch.h"

namespace sepfs::kv {

leveldb::Status RepairDbInOrder(const std::string& dir, const leveldb::Options& options) {
  leveldb::Status s = leveldb::RepairDB(dir, options);
  if (!s.ok()) return s;
  leveldb::DB* raw = nullptr;
  s = leveldb::DB::Open(options, dir, &raw);
  if (!s.ok()) return s;
  std::unique_ptr<leveldb::DB> db(raw);
  db->CompactRange(nullptr, nullptr);
  // CompactRange reports nothing; a background error (a damaged block met
  // while merging) is what the next write returns.
  leveldb::WriteBatch nothing;
  return db->Write(leveldb::WriteOptions(), &nothing);
}

}  // namespace sepfs::kv
