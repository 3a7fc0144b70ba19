#include "fs/superblock_guess.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>

#include "fs/clock.h"
#include "fs/store.h"
#include "kvstore/schema.h"
#include "vlog/format.h"

namespace sepfs::fs {

namespace {

constexpr uint32_t kDefaultBlockSize = 64 * 1024;
constexpr uint64_t kDefaultSegmentSize = 64ull << 20;

struct Seen {
  uint64_t longest_value = 0;   // data bytes of the longest block value
  uint64_t longest_inline = 0;  // of the inline ones
  uint64_t furthest_end = 0;    // end of the furthest record in its segment
  uint64_t longest_file = 0;    // of the segment files
  uint64_t values = 0;
  bool second_block = false;    // some file has a block past block 0
};

Status ScanBlockValues(kv::MetaStore* meta, Seen* seen) {
  return meta->ScanPrefix(std::string(1, kv::kTagBlock),
                          [&](std::string_view key, std::string_view value) {
                            uint64_t ino = 0, block = 0;
                            kv::BlockValue v;
                            if (!kv::ParseBlockKey(key, &ino, &block) ||
                                !kv::DecodeBlock(value, &v).ok()) {
                              return true;  // fsck reports it; it tells nothing
                            }
                            seen->values++;
                            seen->second_block |= block > 0;
                            seen->longest_value = std::max(seen->longest_value, v.length());
                            if (v.inlined) {
                              seen->longest_inline = std::max(seen->longest_inline, v.length());
                            } else {
                              seen->furthest_end = std::max(
                                  seen->furthest_end, v.ptr.offset + v.ptr.record_size());
                            }
                            return true;
                          });
}

Status ScanSegmentFiles(Env* env, const std::string& store, Seen* seen) {
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env->ListDir(VlogDir(store), &names));
  for (const std::string& name : names) {
    uint32_t id = 0;
    if (!vlog::ParseSegmentFileName(name, &id) && !vlog::ParseFreeFileName(name, &id)) continue;
    std::unique_ptr<File> f;
    uint64_t size = 0;
    if (!env->OpenFile(VlogDir(store) + "/" + name, OpenMode::kRead, &f).ok() ||
        !f->Size(&size).ok() || size > kv::kMaxSegmentSize) {
      continue;  // not a segment this store could have written
    }
    seen->longest_file = std::max(seen->longest_file, size);
  }
  return Status::OK();
}

Status RootIsDirectory(kv::MetaStore* meta) {
  std::string raw;
  kv::InodeRecord root;
  Status st = meta->Get(kv::InodeKey(1), &raw);
  if (st.ok()) st = kv::DecodeInode(raw, &root);
  if (st.ok() && S_ISDIR(root.mode)) return Status::OK();
  if (!st.ok() && !st.IsNotFound() && !st.IsCorruption()) return st;
  return Status::NotFound("no root directory to guess a superblock from (not a sepfs store?)");
}

std::string MiB(uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

Status GuessSuperblock(Env* env, const std::string& store, kv::MetaStore* meta,
                       kv::Superblock* sb, std::string* how) {
  SEPFS_RETURN_IF_ERROR(RootIsDirectory(meta));
  Seen seen;
  SEPFS_RETURN_IF_ERROR(ScanBlockValues(meta, &seen));
  SEPFS_RETURN_IF_ERROR(ScanSegmentFiles(env, store, &seen));

  uint64_t bs = std::bit_ceil(std::max<uint64_t>(seen.longest_value, kv::kMinBlockSize));
  if (!seen.second_block) bs = std::max<uint64_t>(bs, kDefaultBlockSize);
  if (bs > kv::kMaxBlockSize) {
    return Status::Corruption("a block value of " + std::to_string(seen.longest_value) +
                              " bytes is longer than any block size: cannot guess the "
                              "superblock");
  }
  kv::Superblock out;
  out.block_size = static_cast<uint32_t>(bs);
  const uint64_t end = std::max(seen.furthest_end, seen.longest_file);
  out.segment_size = std::min(std::max(kDefaultSegmentSize, std::bit_ceil(end)),
                              kv::kMaxSegmentSize);
  out.inline_max = kv::DefaultInlineMax(out.block_size);
  if (seen.longest_inline > out.inline_max &&
      kv::ValidInlineMax(static_cast<uint32_t>(seen.longest_inline), out.block_size)) {
    out.inline_max = static_cast<uint32_t>(seen.longest_inline);
  }
  out.capacity = 0;
  out.created = Now().sec;
  out.uuid = NewStoreUuid();

  *how = "block size " + MiB(out.block_size) + " (" +
         (seen.second_block ? "the longest of " + std::to_string(seen.values) + " block values"
                            : std::string("no file has a second block: the default or more")) +
         "), segment size " + MiB(out.segment_size) + " (the default or the longest segment), " +
         "inline limit " + std::to_string(out.inline_max) + " bytes, no capacity limit " +
         "(a limit the store had is not recorded anywhere else), format " +
         std::to_string(out.version);
  *sb = out;
  return Status::OK();
}

}  // namespace sepfs::fs
