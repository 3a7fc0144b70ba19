#include "kvstore/leveldb_table_salvage.h"

#include <memory>
#include <set>

#include "kvstore/byte_coding.h"
#include "kvstore/leveldb_log_check.h"
#include "kvstore/snappy_raw.h"
#include "leveldb/env.h"
#include "leveldb/options.h"
#include "leveldb/table.h"
#include "leveldb/table_builder.h"
#include "vlog/whole_file.h"

namespace sepfs::kv {

namespace {

constexpr size_t kTrailerSize = 5;
constexpr uint8_t kNoCompression = 0, kSnappyCompression = 1;
constexpr uint64_t kMaxSequence = (uint64_t{1} << 56) - 1;
// LevelDB writes tables of about 2 MiB; a file far larger is left to
// RepairDB rather than read into memory.
constexpr uint64_t kMaxMendBytes = 256ull << 20;

class StringSource : public leveldb::RandomAccessFile {
 public:
  explicit StringSource(std::string_view bytes) : bytes_(bytes) {}
  leveldb::Status Read(uint64_t off, size_t n, leveldb::Slice* result,
                       char* /*scratch*/) const override {
    if (off > bytes_.size()) return leveldb::Status::InvalidArgument("read past the end");
    const std::string_view got = bytes_.substr(off, n);
    *result = leveldb::Slice(got.data(), got.size());
    return leveldb::Status::OK();
  }

 private:
  std::string_view bytes_;
};

class StringSink : public leveldb::WritableFile {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  leveldb::Status Append(const leveldb::Slice& data) override {
    out_->append(data.data(), data.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }

 private:
  std::string* out_;
};

class InternalOrder : public leveldb::Comparator {
 public:
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    const leveldb::Slice ua(a.data(), a.size() - 8), ub(b.data(), b.size() - 8);
    if (int c = ua.compare(ub); c != 0) return c;
    const uint64_t ta = LoadLe(a.data() + ua.size(), 8), tb = LoadLe(b.data() + ub.size(), 8);
    return ta > tb ? -1 : ta < tb ? 1 : 0;
  }
  const char* Name() const override { return "leveldb.InternalKeyComparator"; }
  // The key itself is always a valid separator (index keys are then the
  // last key of each block).
  void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

bool ValidInternalKey(std::string_view key) {
  if (key.size() < 8) return false;
  const uint64_t tag = LoadLe(key.data() + key.size() - 8, 8);
  return (tag & 0xff) <= 1 && (tag >> 8) < kMaxSequence;
}

bool Before(std::string_view a, std::string_view b) {
  return InternalKeyOrder()->Compare(leveldb::Slice(a.data(), a.size()),
                                     leveldb::Slice(b.data(), b.size())) < 0;
}

// The entries of a data block's contents, each key a valid internal key
// greater than the one before (the first greater than *last, when not
// empty); false if the contents are not such a block.
bool ParseDataBlock(std::string_view block, std::string* last,
                    std::vector<std::pair<std::string, std::string>>* entries) {
  if (block.size() < 4) return false;
  const uint64_t restarts = LoadLe(block.data() + block.size() - 4, 4);
  if (restarts == 0 || (restarts + 1) * 4 > block.size()) return false;
  std::string_view in = block.substr(0, block.size() - (restarts + 1) * 4);
  std::string key;
  const size_t before = entries->size();
  while (!in.empty()) {
    uint64_t shared = 0, unshared = 0, value_size = 0;
    if (!TakeVarint(&in, 5, &shared) || !TakeVarint(&in, 5, &unshared) ||
        !TakeVarint(&in, 5, &value_size)) {
      return false;
    }
    if (shared > key.size() || unshared + value_size > in.size()) return false;
    key.resize(shared);
    key.append(in.substr(0, unshared));
    if (!ValidInternalKey(key) || (!last->empty() && !Before(*last, key))) return false;
    entries->emplace_back(key, std::string(in.substr(unshared, value_size)));
    in.remove_prefix(unshared + value_size);
    *last = key;
  }
  return entries->size() > before;
}

// Whether every entry's value is the handle (varint64 offset and size) of
// one of the blocks found: an index block, whose keys look like data keys.
bool PointsAtBlocks(const std::vector<std::pair<std::string, std::string>>& entries, size_t from,
                    const std::set<std::pair<uint64_t, uint64_t>>& blocks) {
  for (size_t i = from; i < entries.size(); i++) {
    std::string_view v = entries[i].second;
    uint64_t off = 0, size = 0;
    if (!TakeVarint(&v, 10, &off) || !TakeVarint(&v, 10, &size) || !v.empty() ||
        !blocks.contains({off, size})) {
      return false;
    }
  }
  return true;
}

}  // namespace

const leveldb::Comparator* InternalKeyOrder() {
  static const InternalOrder* order = new InternalOrder;
  return order;
}

bool TableOpens(std::string_view table) {
  StringSource source(table);
  leveldb::Options o;
  o.paranoid_checks = true;
  leveldb::Table* t = nullptr;
  const leveldb::Status s = leveldb::Table::Open(o, &source, table.size(), &t);
  delete t;
  return s.ok();
}

SalvagedBlocks SalvageTableBlocks(std::string_view table) {
  SalvagedBlocks out;
  std::set<std::pair<uint64_t, uint64_t>> found;
  std::string last, plain;
  size_t pos = 0;
  while (pos + kTrailerSize <= table.size()) {
    bool accepted = false, intact_block = false;
    uint32_t crc = 0;
    for (size_t end = pos; end + kTrailerSize <= table.size() && !accepted; end++) {
      const char type = table[end];
      const bool match =
          (type == kNoCompression || type == kSnappyCompression) &&
          MaskCrc(Crc32c(std::string_view(&type, 1), crc)) == LoadLe(table.data() + end + 1, 4);
      crc = Crc32c(table.substr(end, 1), crc);
      if (!match) continue;
      intact_block = true;
      std::string_view block = table.substr(pos, end - pos);
      if (type == kSnappyCompression) {
        if (!SnappyUncompress(block, &plain)) continue;
        block = plain;
      }
      std::string block_last = last;
      const size_t first = out.entries.size();
      if (ParseDataBlock(block, &block_last, &out.entries) &&
          !PointsAtBlocks(out.entries, first, found)) {
        found.insert({pos, end - pos});
        last = std::move(block_last);
        out.blocks++;
        pos = end + kTrailerSize;
        accepted = true;
      } else {
        out.entries.resize(first);
      }
    }
    if (!accepted) {
      out.complete = intact_block && out.blocks > 0;
      break;
    }
  }
  return out;
}

std::string BuildTable(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string bytes;
  StringSink sink(&bytes);
  leveldb::Options o;
  o.comparator = InternalKeyOrder();
  leveldb::TableBuilder builder(o, &sink);
  for (const auto& [key, value] : entries) builder.Add(key, value);
  (void)builder.Finish();  // the sink cannot fail
  return bytes;
}

Status MendDamagedTable(Env* env, const std::string& path, TableMend* out) {
  *out = TableMend{};
  std::string table;
  if (Status st = ReadWholeFile(env, path, &table, kMaxMendBytes); st.err() == EFBIG) {
    return Status::OK();
  } else if (!st.ok()) {
    return st;
  }
  if (TableOpens(table)) return Status::OK();
  out->damaged = true;
  SalvagedBlocks salvaged = SalvageTableBlocks(table);
  if (!salvaged.complete) return Status::OK();
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string lost = dir + "/lost", kept = lost + "/" + path.substr(slash + 1);
  if (Status st = env->CreateDir(lost); !st.ok() && st.err() != EEXIST) return st;
  SEPFS_RETURN_IF_ERROR(ReplaceWholeFile(env, kept, TempPathFor(kept), table));
  SEPFS_RETURN_IF_ERROR(ReplaceWholeFile(env, path, TempPathFor(path), BuildTable(salvaged.entries)));
  out->blocks = salvaged.blocks;
  out->entries = salvaged.entries.size();
  return Status::OK();
}

}  // namespace sepfs::kv
