// Filesystem read path: finds the pointers of the blocks a read covers with
// one range scan, overlays dirty (unflushed) blocks, and reads the records
// from the vLog with ReadMany (physically adjacent records in one pread).
#include <algorithm>
#include <cstring>
#include <map>

#include "fs/filesystem.h"

namespace sepfs::fs {

Status Filesystem::Read(uint64_t ino, uint64_t off, size_t size, std::string* out) {
  out->clear();
  InodeRef in;
  {
    std::shared_lock<std::shared_mutex> ns(ns_mu_);
    SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  }
  std::vector<vlog::ReadRequest> reqs;
  // Records that only partly fall inside the read are read into scratch.
  struct Partial {
    size_t dst;      // offset in *out
    uint64_t lo;     // first wanted byte within the record
    uint64_t want;   // bytes to copy
    std::string scratch;
  };
  std::vector<Partial> partial;
  // Held from the pointer lookup until the records are read (see seg_mu_).
  std::shared_lock<std::shared_mutex> seg(seg_mu_, std::defer_lock);
  {
    std::lock_guard<std::mutex> il(in->mu);
    seg.lock();
    if (off >= in->rec.size || size == 0) return Status::OK();
    const uint64_t n = std::min<uint64_t>(size, in->rec.size - off);
    out->assign(n, '\0');
    const uint64_t bs = block_size_;
    const uint64_t first = off / bs, last = (off + n - 1) / bs;
    std::map<uint64_t, vlog::BlockPtr> ptrs;
    Status decode;
    SEPFS_RETURN_IF_ERROR(meta_->Scan(kv::BlockKey(ino, first), kv::BlockKey(ino, last + 1),
                                      [&](std::string_view key, std::string_view value) {
                                        uint64_t i, b;
                                        vlog::BlockPtr p;
                                        if (!kv::ParseBlockKey(key, &i, &b) ||
                                            !kv::DecodeBlockValue(value, &p).ok()) {
                                          decode = Status::Corruption("bad block pointer");
                                          return false;
                                        }
                                        ptrs[b] = p;
                                        return true;
                                      }));
    SEPFS_RETURN_IF_ERROR(decode);
    partial.reserve(last - first + 1);
    for (uint64_t b = first; b <= last; b++) {
      const uint64_t bstart = b * bs;
      // Part of block b that the read wants: [lo, hi) within the block.
      const uint64_t lo = bstart < off ? off - bstart : 0;
      const uint64_t hi = std::min<uint64_t>(bs, off + n - bstart);
      const size_t dst = bstart + lo - off;
      auto d = in->dirty.find(b);
      if (d != in->dirty.end()) {
        if (d->second.size() > lo) {
          std::memcpy(out->data() + dst, d->second.data() + lo,
                      std::min<uint64_t>(hi, d->second.size()) - lo);
        }
        continue;
      }
      auto p = ptrs.find(b);
      if (p == ptrs.end()) continue;  // hole
      vlog::ReadRequest r;
      r.ptr = p->second;
      r.inode = ino;
      r.block = b;
      if (lo == 0 && p->second.length <= hi) {
        r.buf = out->data() + dst;  // whole record lands in place
      } else {
        const uint64_t avail = p->second.length > lo ? p->second.length - lo : 0;
        partial.push_back({dst, lo, std::min(avail, hi - lo), std::string(p->second.length, '\0')});
        r.buf = partial.back().scratch.data();
      }
      reqs.push_back(r);
    }
  }
  // Records are immutable: read them without holding the inode lock.
  Status st = vlog_->ReadMany(reqs);
  if (!st.ok()) {
    stats_.read_eio++;
    out->clear();
    return st;
  }
  for (const Partial& p : partial) {
    std::memcpy(out->data() + p.dst, p.scratch.data() + p.lo, p.want);
  }
  stats_.user_bytes_read += out->size();
  return Status::OK();
}

}  // namespace sepfs::fs
