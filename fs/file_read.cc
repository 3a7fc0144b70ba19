// Filesystem read path: finds the pointers of the blocks a read covers with
// one range scan, overlays dirty (unflushed) blocks and inline data (whose
// bytes come with the scan), and reads the records from the vLog with
// ReadMany (physically adjacent records in one pread).
//
// With prefetch on, reads go through the Prefetcher (cached and in-flight
// records are not read again) and two triggers feed it:
//   - sequential: the handle's SequentialDetector names the blocks ahead;
//     their pointers come from the same range scan as the read's own;
//   - readdir: the first read of a file of a recent listing prefetches the
//     first blocks of the next files of that listing (DirStreams).
// Prefetches are issued before the foreground read so they overlap it.
#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include "fs/filesystem.h"

namespace sepfs::fs {
namespace {

// A record's data in a read, by reference: out[dst, dst + want) is
// (*holds[req])[lo, lo + want).
struct RefPiece {
  size_t dst;
  uint64_t lo;
  uint64_t want;
  size_t req;
};

// Past this many pieces the read is copied into out instead: a reply's
// writev takes at most 1024, and FUSE adds its header to them.
constexpr size_t kMaxPieces = 512;

// Lists the n bytes of a read in order: out where no ref covers them, the
// held records where refs (in file order) do.
void ListPieces(char* out, size_t n, const std::vector<RefPiece>& refs, ReadPieces* pieces) {
  std::vector<iovec>& iov = pieces->iov;
  size_t pos = 0;
  for (const RefPiece& r : refs) {
    if (r.dst > pos) iov.push_back({out + pos, r.dst - pos});
    // writev only reads through iov_base; the held data stays const.
    char* data = const_cast<char*>(pieces->holds[r.req]->data());
    if (r.want > 0) iov.push_back({data + r.lo, r.want});
    pos = r.dst + r.want;
  }
  if (n > pos) iov.push_back({out + pos, n - pos});
  if (iov.size() > kMaxPieces) {
    for (const RefPiece& r : refs) {
      std::memcpy(out + r.dst, pieces->holds[r.req]->data() + r.lo, r.want);
    }
    pieces->clear();
    iov.push_back({out, n});
  }
}

}  // namespace

PrefetchEngine* Filesystem::Prefetch() {
  std::call_once(pf_once_, [this] {
    if (vlog_ == nullptr || options_.data_cache_bytes == 0) return;
    if (!options_.prefetch_seq && !options_.prefetch_dir) return;
    pf_ = std::make_unique<PrefetchEngine>(vlog_, options_.data_cache_bytes, block_size_,
                                           std::max(1u, options_.prefetch_threads));
  });
  return pf_.get();
}

void Filesystem::PrefetchFirstBlocks(const DirPrefetch& p) {
  PrefetchEngine* e = Prefetch();
  if (e == nullptr || p.inos.empty()) return;
  // Up to 128 KiB of each file: the whole of a small file in one request.
  const uint64_t per_file = std::max<uint64_t>(1, (128u << 10) / block_size_);
  std::vector<vlog::PrefetchRequest> reqs;
  for (uint64_t ino : p.inos) {
    Status st = meta_->ScanBlocks(ino, 0, per_file,
                                  [&](uint64_t b, std::string_view, std::string_view value) {
                                    vlog::BlockPtr ptr;
                                    if (kv::DecodeBlockValue(value, &ptr).ok()) {
                                      reqs.push_back({ptr, ino, b, p.tag});
                                    }
                                    return true;
                                  });
    // A hint only: the foreground read will report errors. A bad key of one
    // file does not stop the others'.
    if (st.IsCorruption()) continue;
    if (!st.ok()) break;
  }
  e->prefetcher.Prefetch(std::move(reqs));
}

void Filesystem::DirListed(uint64_t dir, const std::vector<DirListEntry>& entries) {
  if (!options_.prefetch_dir || Prefetch() == nullptr) return;
  std::vector<uint64_t> files;
  files.reserve(entries.size());
  for (const DirListEntry& e : entries) {
    if (S_ISREG(e.type)) files.push_back(e.ino);
  }
  DirPrefetch p = pf_->dirs.OnListing(dir, files);
  for (uint64_t tag : p.cancel) pf_->prefetcher.Cancel(tag);
  PrefetchFirstBlocks(p);
}

vlog::PrefetcherStats Filesystem::PrefetchStats() {
  PrefetchEngine* e = Prefetch();
  return e ? e->prefetcher.stats() : vlog::PrefetcherStats{};
}

vlog::BlockCacheStats Filesystem::DataCacheStats() {
  PrefetchEngine* e = Prefetch();
  return e ? e->cache.stats() : vlog::BlockCacheStats{};
}

std::string Filesystem::PrefetchStatsText() {
  PrefetchEngine* e = Prefetch();
  if (e == nullptr) return "prefetch:\n  off\n";
  const vlog::PrefetcherStats p = e->prefetcher.stats();
  const vlog::BlockCacheStats c = e->cache.stats();
  const uint64_t lookups = c.hits + c.misses;
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "prefetch:\n"
                "  triggers             seq=%s dir=%s threads=%u\n"
                "  issued               %" PRIu64 " (completed %" PRIu64 ", failed %" PRIu64
                ", dropped %" PRIu64 ", cancelled %" PRIu64 ")\n"
                "  hits                 %" PRIu64 "\n"
                "  waits                %" PRIu64 "\n"
                "  wasted bytes         %" PRIu64 "\n"
                "  dir listings         %" PRIu64 "\n"
                "data cache:\n"
                "  used bytes           %" PRIu64 " of %" PRIu64 " (%" PRIu64 " entries)\n"
                "  hit ratio            %.3f (%" PRIu64 " hits, %" PRIu64 " misses)\n"
                "  evictions            %" PRIu64 "\n",
                options_.prefetch_seq ? "on" : "off", options_.prefetch_dir ? "on" : "off",
                options_.prefetch_threads, p.issued, p.completed, p.failed, p.dropped,
                p.cancelled, p.hits, p.waits, p.wasted_bytes, e->dirs.streams_started(),
                c.usage, c.capacity, c.entries,
                lookups ? static_cast<double>(c.hits) / static_cast<double>(lookups) : 0.0,
                c.hits, c.misses, c.evictions);
  return buf;
}

Status Filesystem::Read(uint64_t ino, uint64_t off, size_t size, std::string* out) {
  return Read(ino, off, size, out, nullptr);
}

Status Filesystem::Read(uint64_t ino, uint64_t off, size_t size, std::string* out,
                        FileHandle* fh) {
  out->resize(size);
  size_t got = 0;
  Status st = ReadInto(ino, off, size, out->data(), &got, fh);
  out->resize(st.ok() ? got : 0);
  return st;
}

Status Filesystem::ReadInto(uint64_t ino, uint64_t off, size_t size, char* out, size_t* got,
                            FileHandle* fh, ReadPieces* pieces) {
  *got = 0;
  if (pieces != nullptr) pieces->clear();
  PrefetchEngine* pf = Prefetch();
  // Records are handed over by the prefetcher's cache instead of copied.
  const bool by_ref = pieces != nullptr && pf != nullptr;
  std::vector<RefPiece> refs;
  std::vector<vlog::PrefetchRequest> ahead;
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
    uint64_t span;   // bytes of out this block covers (want..span are zeros)
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
    *got = n;
    const uint64_t bs = block_size_;
    const uint64_t first = off / bs, last = (off + n - 1) / bs;
    BlockRange ra;
    if (pf != nullptr && fh != nullptr && options_.prefetch_seq) {
      ra = fh->seq.OnRead(off, n, in->rec.size, block_size_, pf->window_bytes);
    }
    // One scan covers the read and the blocks to prefetch after it.
    const uint64_t scan_end = ra.empty() ? last + 1 : std::max(last + 1, ra.end);
    std::map<uint64_t, vlog::BlockPtr> ptrs;
    std::map<uint64_t, std::string> inlined;  // blocks whose bytes are their value
    Status decode;
    SEPFS_RETURN_IF_ERROR(meta_->ScanBlocks(
        ino, first, scan_end, [&](uint64_t b, std::string_view, std::string_view value) {
          kv::BlockValue v;
          if (!kv::DecodeBlock(value, &v).ok()) {
            decode = Status::Corruption("bad block pointer");
            return false;
          }
          if (v.inlined) {
            if (b <= last) inlined[b] = std::string(v.bytes);
          } else {
            ptrs[b] = v.ptr;
          }
          return true;
        }));
    SEPFS_RETURN_IF_ERROR(decode);
    for (auto it = ptrs.lower_bound(std::max(ra.first, last + 1)); !ra.empty() && it != ptrs.end();
         ++it) {
      if (it->first >= ra.end) break;
      if (!in->dirty.count(it->first)) ahead.push_back({it->second, ino, it->first, 0});
    }
    partial.reserve(last - first + 1);
    for (uint64_t b = first; b <= last; b++) {
      const uint64_t bstart = b * bs;
      // Part of block b that the read wants: [lo, hi) within the block.
      const uint64_t lo = bstart < off ? off - bstart : 0;
      const uint64_t hi = std::min<uint64_t>(bs, off + n - bstart);
      const size_t dst = bstart + lo - off;
      // Every byte of out[0, n) is written below: data, or zeros for holes
      // and for the part of a block past its stored bytes.
      auto d = in->dirty.find(b);
      auto il = d == in->dirty.end() ? inlined.find(b) : inlined.end();
      if (d != in->dirty.end() || il != inlined.end()) {
        const std::string& bytes = d != in->dirty.end() ? d->second : il->second;
        const uint64_t stored = bytes.size();
        const uint64_t have = stored > lo ? std::min<uint64_t>(hi, stored) - lo : 0;
        std::memcpy(out + dst, bytes.data() + lo, have);
        std::memset(out + dst + have, 0, hi - lo - have);
        continue;
      }
      auto p = ptrs.find(b);
      if (p == ptrs.end()) {
        std::memset(out + dst, 0, hi - lo);  // hole
        continue;
      }
      vlog::ReadRequest r;
      r.ptr = p->second;
      r.inode = ino;
      r.block = b;
      if (by_ref) {
        const uint64_t avail = p->second.length > lo ? p->second.length - lo : 0;
        const uint64_t want = std::min(avail, hi - lo);
        // The READ takes the whole record: the kernel's page cache keeps it
        // from here on, so the data cache need not.
        r.once = pieces->kernel_keeps_pages && lo == 0 && want == p->second.length;
        refs.push_back({dst, lo, want, reqs.size()});
        std::memset(out + dst + want, 0, hi - lo - want);  // past the stored bytes
      } else if (lo == 0 && p->second.length <= hi) {
        r.buf = out + dst;  // whole record lands in place
        std::memset(out + dst + p->second.length, 0, hi - p->second.length);
      } else {
        const uint64_t avail = p->second.length > lo ? p->second.length - lo : 0;
        partial.push_back(
            {dst, lo, std::min(avail, hi - lo), hi - lo, std::string(p->second.length, '\0')});
        r.buf = partial.back().scratch.data();
      }
      reqs.push_back(r);
    }
  }
  if (pf != nullptr) {
    if (!ahead.empty()) pf->prefetcher.Prefetch(std::move(ahead));
    if (options_.prefetch_dir) PrefetchFirstBlocks(pf->dirs.OnRead(ino));
  }
  if (by_ref) {
    pieces->holds.resize(reqs.size());
    for (size_t k = 0; k < reqs.size(); k++) reqs[k].ref = &pieces->holds[k];
  }
  // Records are immutable: read them without holding the inode lock.
  Status st = pf != nullptr ? pf->prefetcher.Read(reqs) : vlog_->ReadMany(reqs);
  if (!st.ok()) {
    stats_.read_eio++;
    *got = 0;
    if (pieces != nullptr) pieces->clear();
    return st;
  }
  for (const Partial& p : partial) {
    std::memcpy(out + p.dst, p.scratch.data() + p.lo, p.want);
    std::memset(out + p.dst + p.want, 0, p.span - p.want);
  }
  if (pieces != nullptr) ListPieces(out, *got, refs, pieces);
  stats_.user_bytes_read += *got;
  return Status::OK();
}

}  // namespace sepfs::fs
