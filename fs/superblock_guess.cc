#include "fs/superblock_guess.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <map>
#include <unordered_map>

#include "fs/clock.h"
#include "fs/store.h"
#include "kvstore/schema.h"
#include "vlog/format.h"

namespace sepfs::fs {

namespace {

constexpr uint32_t kDefaultBlockSize = 64 * 1024;
constexpr uint64_t kDefaultSegmentSize = 64ull << 20;

std::string Size(uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

Status SuperblockEvidence::Gather(Env* env, const std::string& store, kv::MetaStore* meta,
                                  SuperblockEvidence* out) {
  SEPFS_RETURN_IF_ERROR(out->ScanMetadata(meta));
  return out->ScanSegmentFiles(env, store);
}

Status SuperblockEvidence::ScanMetadata(kv::MetaStore* meta) {
  std::unordered_map<uint64_t, uint64_t> sizes;  // regular files
  SEPFS_RETURN_IF_ERROR(meta->ScanPrefix(std::string(1, kv::kTagInode),
                                         [&](std::string_view key, std::string_view value) {
                                           uint64_t ino = 0;
                                           kv::InodeRecord r;
                                           if (kv::ParseInodeKey(key, &ino) &&
                                               kv::DecodeInode(value, &r).ok()) {
                                             if (S_ISREG(r.mode)) sizes[ino] = r.size;
                                             root_ |= ino == 1 && S_ISDIR(r.mode);
                                           }
                                           return true;
                                         }));
  std::unordered_map<uint64_t, uint64_t> last;  // ino -> its last block number
  SEPFS_RETURN_IF_ERROR(meta->ScanAllBlocks(
      [&](std::string_view, uint64_t ino, uint64_t block, const kv::BlockValue& v) {
        values_++;
        longest_value_ = std::max(longest_value_, v.length());
        if (v.inlined) {
          longest_inline_ = std::max(longest_inline_, v.length());
        } else {
          furthest_end_ = std::max(furthest_end_, v.ptr.offset + v.ptr.record_size());
          samples_.try_emplace(v.ptr.segment, Sample{v.ptr, ino, block});
        }
        if (block > 0 && sizes.count(ino)) last[ino] = std::max(last[ino], block);
        return true;
      }));
  for (const auto& [ino, block] : last) last_blocks_.emplace_back(block, sizes[ino]);
  return Status::OK();
}

Status SuperblockEvidence::ScanSegmentFiles(Env* env, const std::string& store) {
  std::vector<std::string> names;
  SEPFS_RETURN_IF_ERROR(env->ListDir(VlogDir(store), &names));
  std::map<vlog::StoreId, uint64_t> ids;       // segment headers naming each
  std::map<vlog::StoreId, uint64_t> verified;  // ... where a pointer's record verifies
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
    segment_files_ += segment;
    longest_file_ = std::max(longest_file_, size);
    char raw[vlog::kSegmentHeaderSize];
    size_t got = 0;
    vlog::SegmentHeader h;
    if (segment && f->Read(0, sizeof(raw), raw, &got).ok() && got == sizeof(raw) &&
        vlog::DecodeSegmentHeader(raw, &h).ok() && vlog::KnownStoreId(h.store_id)) {
      ids[h.store_id]++;
      auto s = samples_.find(id);
      if (s != samples_.end() && vlog::RecordVerifiesAt(f.get(), s->second.ptr, s->second.ino,
                                                        s->second.block)) {
        verified[h.store_id]++;
      }
    }
  }
  uint64_t most = 0;
  for (const auto& [id, n] : verified) {
    if (n > most) {
      most = n;
      store_id_ = id;
      store_id_verified_ = true;
    }
  }
  for (const auto& [id, n] : ids) {
    if (!store_id_verified_ && n > store_id_segments_) store_id_ = id;
    if (id == store_id_) store_id_segments_ = n;
  }
  return Status::OK();
}

uint64_t SuperblockEvidence::Violations(uint64_t bs) const {
  uint64_t n = 0;
  for (const auto& [block, size] : last_blocks_) n += block >= (size + bs - 1) / bs;
  return n;
}

uint64_t SuperblockEvidence::BestBlockSize(uint64_t* violations) const {
  uint64_t best = 0;
  *violations = UINT64_MAX;
  for (uint64_t bs = kv::kMinBlockSize; bs <= kv::kMaxBlockSize; bs *= 2) {
    if (bs < longest_value_) continue;
    const uint64_t v = Violations(bs);
    if (v < *violations || (v == *violations && bs == kDefaultBlockSize)) {
      best = bs;
      *violations = v;
    }
  }
  return best;
}

Status SuperblockEvidence::Guess(kv::Superblock* sb, std::string* how) const {
  if (!root_ && segment_files_ == 0) {
    return Status::NotFound("neither a root directory nor a vLog segment to guess a "
                            "superblock from (not a sepfs store?)");
  }
  uint64_t violations = 0;
  const uint64_t bs = BestBlockSize(&violations);
  if (bs == 0) {
    return Status::Corruption("a block value of " + std::to_string(longest_value_) +
                              " bytes is longer than any block size: cannot guess the "
                              "superblock");
  }
  kv::Superblock out;
  out.block_size = static_cast<uint32_t>(bs);
  const uint64_t end = std::max(furthest_end_, longest_file_);
  out.segment_size = std::min(std::max(kDefaultSegmentSize, std::bit_ceil(end)),
                              kv::kMaxSegmentSize);
  out.inline_max = kv::DefaultInlineMax(out.block_size);
  if (longest_inline_ > out.inline_max &&
      kv::ValidInlineMax(static_cast<uint32_t>(longest_inline_), out.block_size)) {
    out.inline_max = static_cast<uint32_t>(longest_inline_);
  }
  out.capacity = 0;
  out.created = Now().sec;
  out.uuid = store_id_segments_ > 0 ? vlog::StoreIdHex(store_id_) : NewStoreUuid();

  *how = "block size " + Size(out.block_size) + " (the " + std::to_string(values_) +
         " block values and " + std::to_string(last_blocks_.size()) +
         " files of more than one block allow it" +
         (violations ? " but for " + std::to_string(violations) + " files" : std::string()) +
         (last_blocks_.empty() ? "; no file tells block sizes apart: the default or more" : "") +
         "), segment size " + Size(out.segment_size) + " (the default or the longest segment), " +
         "inline limit " + std::to_string(out.inline_max) + " bytes, no capacity limit " +
         "(a limit the store had is not recorded anywhere else), " +
         (store_id_segments_ > 0
              ? "uuid " + out.uuid + " (what " + std::to_string(store_id_segments_) +
                    " segment headers name" +
                    (store_id_verified_ ? ", where the block pointers' records verify" : "") +
                    ")"
              : std::string("a new uuid (no segment header names one)")) +
         ", format " +
         std::to_string(out.version);
  *sb = out;
  return Status::OK();
}

Status SuperblockEvidence::Check(const kv::Superblock& copy) const {
  if (copy.block_size < longest_value_) {
    return Status::InvalidArgument("its block size " + Size(copy.block_size) +
                                   " is shorter than a block value of " +
                                   std::to_string(longest_value_) + " bytes");
  }
  uint64_t fewest = 0;
  (void)BestBlockSize(&fewest);
  const uint64_t v = Violations(copy.block_size);
  if (v > fewest) {
    return Status::InvalidArgument("with its block size " + Size(copy.block_size) + ", " +
                                   std::to_string(v) + " files would have blocks past their end");
  }
  if (store_id_segments_ > 0 && StoreIdOf(copy) != store_id_) {
    return Status::InvalidArgument(
        "its uuid " + copy.uuid + " is not the store id " + vlog::StoreIdHex(store_id_) +
        " that " + std::to_string(store_id_segments_) + " segment headers name" +
        (store_id_verified_ ? " (where the block pointers' records verify)" : ""));
  }
  return Status::OK();
}

}  // namespace sepfs::fs
