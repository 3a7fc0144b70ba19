#include "fs/superblock_copy.h"

#include <xxhash.h>

#include <cstring>

#include "vlog/whole_file.h"

namespace sepfs::fs {

namespace {

constexpr size_t kChecksumSize = 8;
// A copy is a few dozen bytes; anything much longer is not one.
constexpr size_t kMaxCopySize = 4096;

std::string Checksum(std::string_view bytes) {
  const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
  std::string out(kChecksumSize, '\0');
  for (size_t i = 0; i < kChecksumSize; i++) out[i] = static_cast<char>(sum >> (8 * i));
  return out;
}

}  // namespace

std::string SuperblockCopyPath(const std::string& store) { return store + "/superblock"; }
std::string SuperblockCopyTempPath(const std::string& store) { return store + "/superblock.tmp"; }

Status WriteSuperblockCopy(Env* env, const std::string& store, const kv::Superblock& sb) {
  const std::string record = kv::EncodeSuperblock(sb);
  return ReplaceWholeFile(env, SuperblockCopyPath(store), SuperblockCopyTempPath(store),
                          record + Checksum(record));
}

Status ReadSuperblockCopy(Env* env, const std::string& store, kv::Superblock* sb) {
  const std::string path = SuperblockCopyPath(store);
  std::unique_ptr<File> f;
  Status st = env->OpenFile(path, OpenMode::kRead, &f);
  if (st.err() == ENOENT) return Status::NotFound(path + ": no superblock copy");
  SEPFS_RETURN_IF_ERROR(st);
  uint64_t size = 0;
  SEPFS_RETURN_IF_ERROR(f->Size(&size));
  if (size <= kChecksumSize || size > kMaxCopySize) {
    return Status::Corruption(path + ": " + std::to_string(size) +
                              " bytes, not a superblock copy");
  }
  std::string raw(size, '\0');
  size_t got = 0;
  SEPFS_RETURN_IF_ERROR(f->Read(0, raw.size(), raw.data(), &got));
  if (got != raw.size()) return Status::Corruption(path + ": shorter than its size");
  const std::string_view record(raw.data(), raw.size() - kChecksumSize);
  if (raw.compare(record.size(), kChecksumSize, Checksum(record)) != 0) {
    return Status::Corruption(path + ": checksum mismatch");
  }
  return kv::DecodeSuperblock(record, sb).WithContext(path);
}

}  // namespace sepfs::fs
