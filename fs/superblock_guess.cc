#include "fs/superblock_guess.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <unordered_map>

#include "fs/clock.h"
#include "fs/store.h"
#include "kvstore/schema.h"
#include "vlog/format.h"

namespace sepfs::fs {

namespace {

constexpr uint32_t kDefaultBlockSize = 64 * 1024;
constexpr uint64_t kDefaultSegmentSize = 64ull << 20;

struct Evidence {
  uint64_t longest_value = 0;   // data bytes of the longest block value
  uint64_t longest_inline = 0;  // of the inline ones
  uint64_t furthest_end = 0;    // end of the furthest record in its segment
  uint64_t longest_file = 0;    // of the segment files
  uint64_t segment_files = 0;
  uint64_t values = 0;
  bool root = false;
  // Regular files with a block past block 0: (last block number, size).
  std::vector<std::pair<uint64_t, uint64_t>> last_blocks;
};

Status ScanMetadata(kv::MetaStore* meta, Evidence* ev) {
  std::unordered_map<uint64_t, uint64_t> sizes;  // regular files
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(std::string(1, kv::kTagInode),
                                         [&](std::string_view key, std::string_view value) {
                                           uint64_t ino = 0;
                                           kv::InodeRecord r;
                                           if (kv::ParseInodeKey(key, &ino) &&
                                               kv::DecodeInode(value, &r).ok()) {
                                             if (S_ISREG(r.mode)) sizes[ino] = r.size;
                                             ev->root |= ino == 1 && S_ISDIR(r.mode);
                                           }
                                           return true;
                                         }));
  std::unordered_map<uint64_t, uint64_t> last;  // ino -> its last block number
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(
      std::string(1, kv::kTagBlock), [&](std::string_view key, std::string_view value) {
        uint64_t ino = 0, block = 0;
        kv::BlockValue v;
        if (!kv::ParseBlockKey(key, &ino, &block) || !kv::DecodeBlock(value, &v).ok()) {
          return true;  // fsck reports it; it tells nothing
        }
        ev->values++;
        ev->longest_value = std::max(ev->longest_value, v.length());
        if (v.inlined) {
          ev->longest_inline = std::max(ev->longest_inline, v.length());
        } else {
          ev->furthest_end = std::max(ev->furthest_end, v.ptr.offset + v.ptr.record_size());
        }
        if (block > 0 && sizes.count(ino)) last[ino] = std::max(last[ino], block);
        return true;
      }));
  for (const auto& [ino, block] : last) ev->last_blocks.emplace_back(block, sizes[ino]);
  return Status::OK();
}

Status ScanSegmentFiles(Env* env, const std::string& store, Evidence* ev) {
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env->ListDir(VlogDir(store), &names));
  for (const std::string& name : names) {
    uint32_t id = 0;
    const bool segment = vlog::ParseSegmentFileName(name, &id);
    if (!segment && !vlog::ParseFreeFileName(name, &id)) continue;
    std::unique_ptr<File> f;
    uint64_t size = 0;
    if (!env->OpenFile(VlogDir(store) + "/" + name, OpenMode::kRead, &f).ok() ||
        !f->Size(&size).ok() || size > kv::kMaxSegmentSize) {
      continue;  // not a segment this store could have written
    }
    ev->segment_files += segment;
    ev->longest_file = std::max(ev->longest_file, size);
  }
  return Status::OK();
}

Status Gather(Env* env, const std::string& store, kv::MetaStore* meta, Evidence* ev) {
  SEPFS_RETURN_IF_ERROR(ScanMetadata(meta, ev));
  return ScanSegmentFiles(env, store, ev);
}

// Files whose last block would start at or past their size.
uint64_t Violations(const Evidence& ev, uint64_t bs) {
  uint64_t n = 0;
  for (const auto& [block, size] : ev.last_blocks) n += block >= (size + bs - 1) / bs;
  return n;
}

// 0 when no block size holds the longest value.
uint64_t BestBlockSize(const Evidence& ev, uint64_t* violations) {
  uint64_t best = 0;
  *violations = UINT64_MAX;
  for (uint64_t bs = kv::kMinBlockSize; bs <= kv::kMaxBlockSize; bs *= 2) {
    if (bs < ev.longest_value) continue;
    const uint64_t v = Violations(ev, bs);
    if (v < *violations || (v == *violations && bs == kDefaultBlockSize)) {
      best = bs;
      *violations = v;
    }
  }
  return best;
}

std::string Size(uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

Status GuessSuperblock(Env* env, const std::string& store, kv::MetaStore* meta,
                       kv::Superblock* sb, std::string* how) {
  Evidence ev;
  SEPFS_RETURN_IF_ERROR(Gather(env, store, meta, &ev));
  if (!ev.root && ev.segment_files == 0) {
    return Status::NotFound("neither a root directory nor a vLog segment to guess a "
                            "superblock from (not a sepfs store?)");
  }
  uint64_t violations = 0;
  const uint64_t bs = BestBlockSize(ev, &violations);
  if (bs == 0) {
    return Status::Corruption("a block value of " + std::to_string(ev.longest_value) +
                              " bytes is longer than any block size: cannot guess the "
                              "superblock");
  }
  kv::Superblock out;
  out.block_size = static_cast<uint32_t>(bs);
  const uint64_t end = std::max(ev.furthest_end, ev.longest_file);
  out.segment_size = std::min(std::max(kDefaultSegmentSize, std::bit_ceil(end)),
                              kv::kMaxSegmentSize);
  out.inline_max = kv::DefaultInlineMax(out.block_size);
  if (ev.longest_inline > out.inline_max &&
      kv::ValidInlineMax(static_cast<uint32_t>(ev.longest_inline), out.block_size)) {
    out.inline_max = static_cast<uint32_t>(ev.longest_inline);
  }
  out.capacity = 0;
  out.created = Now().sec;
  out.uuid = NewStoreUuid();

  *how = "block size " + Size(out.block_size) + " (the " + std::to_string(ev.values) +
         " block values and " + std::to_string(ev.last_blocks.size()) +
         " files of more than one block allow it" +
         (violations ? " but for " + std::to_string(violations) + " files" : std::string()) +
         (ev.last_blocks.empty() ? "; no file tells block sizes apart: the default or more" : "") +
         "), segment size " + Size(out.segment_size) + " (the default or the longest segment), " +
         "inline limit " + std::to_string(out.inline_max) + " bytes, no capacity limit " +
         "(a limit the store had is not recorded anywhere else), format " +
         std::to_string(out.version);
  *sb = out;
  return Status::OK();
}

Status CheckSuperblockAgainstRecords(Env* env, const std::string& store, kv::MetaStore* meta,
                                     const kv::Superblock& copy) {
  Evidence ev;
  SEPFS_RETURN_IF_ERROR(Gather(env, store, meta, &ev));
  if (copy.block_size < ev.longest_value) {
    return Status::InvalidArgument("its block size " + Size(copy.block_size) +
                              " is shorter than a block value of " +
                              std::to_string(ev.longest_value) + " bytes");
  }
  uint64_t fewest = 0;
  (void)BestBlockSize(ev, &fewest);
  const uint64_t v = Violations(ev, copy.block_size);
  if (v > fewest) {
    return Status::InvalidArgument("with its block size " + Size(copy.block_size) + ", " +
                              std::to_string(v) + " files would have blocks past their end");
  }
  return Status::OK();
}

}  // namespace sepfs::fs
