// Filesystem data path: files are arrays of fixed-size logical blocks. A
// block's bytes live in one vLog record whose pointer is the LSM value of
// BlockKey(ino, block), or, when they are no more than the store's inline
// limit, in that value itself; a missing value is a hole (zeros). Writes go to a
// per-inode dirty-block cache (partial writes merge with the old block);
// FlushLocked appends dirty blocks to the hot stream, makes them reach the
// segment files, then installs their pointers and the inode record in one
// batch, and only then releases the replaced records (garbage).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "fs/clock.h"
#include "fs/filesystem.h"

namespace sepfs::fs {

Status Filesystem::LoadBlock(Inode* in, uint64_t block, std::string* out) {
  out->clear();
  const uint64_t start = block * block_size_;
  if (start >= in->rec.size) return Status::OK();
  std::shared_lock<std::shared_mutex> seg(seg_mu_);
  std::string raw;
  Status st = meta_->Get(kv::BlockKey(in->ino, block), &raw);
  if (st.IsNotFound()) return Status::OK();
  SEPFS_RETURN_IF_ERROR(st);
  kv::BlockValue v;
  SEPFS_RETURN_IF_ERROR(kv::DecodeBlock(raw, &v));
  if (v.inlined) {
    out->assign(v.bytes.substr(0, in->rec.size - start));
    return Status::OK();
  }
  const vlog::BlockPtr& p = v.ptr;
  out->resize(p.length);
  st = vlog_->Read(p, in->ino, block, out->data());
  if (!st.ok()) {
    stats_.read_eio++;
    out->clear();
    return st;
  }
  out->resize(std::min<uint64_t>(p.length, in->rec.size - start));
  return Status::OK();
}

Status Filesystem::PastRefusalLocked(const Inode* in, uint64_t off) const {
  if (off <= in->refused_from) return Status::OK();
  return Status::NoSpace(store_->dir() + ": inode " + std::to_string(in->ino) +
                         ": the write at offset " + std::to_string(in->refused_from) +
                         " was refused for lack of space, and none past it is taken until it "
                         "is written");
}

Status Filesystem::Write(uint64_t ino, uint64_t off, std::string_view data, WriteEffects fx) {
  if (data.empty()) return Status::OK();
  if (off + data.size() < off || off + data.size() > MaxFileSize()) {
    return Status::FromErrno(EFBIG, "write past the maximum file size");
  }
  if (fx.from_cache && refused_any_.load(std::memory_order_relaxed)) {
    // Refused before it waits for space (HaveSpace may wait for the collector).
    std::shared_lock<std::shared_mutex> ns(ns_mu_);
    InodeRef in;
    SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
    std::lock_guard<std::mutex> il(in->mu);
    SEPFS_RETURN_IF_ERROR(PastRefusalLocked(in.get(), off));
  }
  SpaceGrant grant;  // until the bytes are in the dirty-block cache
  const Status space = HaveSpace(data.size(), &grant);
  std::shared_lock<std::shared_mutex> ns(ns_mu_);
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::unique_lock<std::mutex> il(in->mu);
  if (!S_ISREG(in->rec.mode)) return Status::InvalidArgument("write to a non-regular file");
  if (!space.ok()) {
    // A caller told of the refusal decides what it writes next; only the
    // kernel's writeback goes on by itself.
    if (space.err() != ENOSPC || !fx.from_cache) return space;
    in->refused_from = std::min(in->refused_from, off);
    in->refused_end = std::max(in->refused_end, off + data.size());
    refused_any_.store(true, std::memory_order_relaxed);
    // The kernel's writeback sends a range's requests several at a time, so
    // some past this one may have been taken already. When no flush has
    // stored anything past it, they are only in the dirty cache: they go
    // too, and the file ends here rather than after a gap of zeros.
    if (off >= in->stored_size && off < in->rec.size) {
      TrimDirtyLocked(in.get(), off, /*rewrote_last=*/false);
      in->rec.size = off;
    }
    return space;
  }
  if (fx.from_cache) SEPFS_RETURN_IF_ERROR(PastRefusalLocked(in.get(), off));
  const uint64_t bs = block_size_;
  uint64_t pos = off;
  size_t done = 0;
  while (done < data.size()) {
    const uint64_t b = pos / bs, boff = pos % bs;
    const size_t n = std::min<uint64_t>(bs - boff, data.size() - done);
    auto it = in->dirty.find(b);
    if (it == in->dirty.end()) {
      std::string buf;
      if (!(boff == 0 && n == bs)) SEPFS_RETURN_IF_ERROR(LoadBlock(in.get(), b, &buf));
      it = in->dirty.emplace(b, std::move(buf)).first;
      in->dirty_bytes += it->second.size();
      dirty_total_ += it->second.size();
    }
    std::string& buf = it->second;
    const char* src = data.data() + done;
    if (buf.size() < boff + n) {
      in->dirty_bytes += boff + n - buf.size();
      dirty_total_ += boff + n - buf.size();
      // Appends grow the block to its full size at once (not by doubling)
      // and write only the bytes they bring, not zeros first.
      if (buf.capacity() < boff + n && boff + n > bs / 4) buf.reserve(bs);
      if (buf.size() < boff) buf.append(boff - buf.size(), '\0');  // a gap reads as zeros
      const size_t over = buf.size() - boff;  // bytes of the block the write replaces
      std::memcpy(buf.data() + boff, src, over);
      buf.append(src + over, n - over);
    } else {
      std::memcpy(buf.data() + boff, src, n);
    }
    pos += n;
    done += n;
  }
  in->rec.size = std::max<uint64_t>(in->rec.size, off + data.size());
  if (off + data.size() > in->refused_from) {  // written again, from its start
    in->refused_from = off + data.size();
    if (in->refused_from >= in->refused_end) in->ClearRefusal();
  }
  if (!fx.kernel_times) in->rec.mtime = in->rec.ctime = Now();
  if (fx.kill_suidgid) KillSetidLocked(in.get(), fx.setid);
  in->attr_dirty = true;
  stats_.user_bytes_written += data.size();
  // Over the limit the writer flushes its own file too, so that dirty
  // blocks stay within it: the flusher alone fell behind the kernel's
  // writeback, and they reached about 500 MiB of a 256 MiB limit
  // (bench/RESULTS.md, "Dirty blocks kept within their limit").
  const bool over = dirty_total_ > options_.dirty_limit_bytes;
  if (over) {
    std::lock_guard<std::mutex> l(flusher_mu_);
    flusher_kick_ = true;
    flusher_cv_.notify_one();
  }
  if (over || in->dirty_bytes >= options_.inode_flush_bytes) {
    SEPFS_RETURN_IF_ERROR(FlushLocked(in.get(), /*sync=*/false));
  }
  return Status::OK();
}

Status Filesystem::FlushLocked(Inode* in, bool sync) {
  if (in->dead) return Status::OK();
  if (in->dirty.empty() && !in->attr_dirty) {
    if (!sync) return Status::OK();
    return meta_->Sync();  // its records were written: the hook syncs them first
  }
  // Records no batch may name are never appended: after a failed LevelDB
  // write, every later batch fails, and recovery would replay such records
  // (data a caller was told was not written). The dirty blocks stay.
  if (!in->dirty.empty()) SEPFS_RETURN_IF_ERROR(meta_->WriteError());
  std::unique_lock<std::mutex> pl(ptr_locks_.For(in->ino));
  const uint64_t ino = in->ino;
  // Old values of the dirty blocks: one range scan when they are dense.
  struct Old {
    bool inlined;
    vlog::BlockPtr ptr;  // the record it names, when not inlined
    uint64_t length;
  };
  std::map<uint64_t, Old> old;
  auto note_old = [&](uint64_t b, std::string_view value) {
    kv::BlockValue v;
    if (kv::DecodeBlock(value, &v).ok() && in->dirty.count(b)) {
      old[b] = {v.inlined, v.ptr, v.length()};
    }
    return true;
  };
  if (!in->dirty.empty()) {
    const uint64_t first = in->dirty.begin()->first, last = in->dirty.rbegin()->first;
    if (last - first + 1 <= 4 * in->dirty.size()) {
      SEPFS_RETURN_IF_ERROR(meta_->ScanBlocks(
          ino, first, last + 1,
          [&](uint64_t b, std::string_view, std::string_view value) { return note_old(b, value); }));
    } else {
      for (const auto& [b, data] : in->dirty) {
        std::string raw;
        Status st = meta_->Get(kv::BlockKey(ino, b), &raw);
        if (st.IsNotFound()) continue;
        SEPFS_RETURN_IF_ERROR(st);
        note_old(b, raw);
      }
    }
  }
  kv::Batch batch;
  kv::InodeRecord r = in->rec;
  std::vector<vlog::BlockPtr> added, released;
  std::vector<uint64_t> added_blocks;
  vlog::StreamMask used = 0;
  Status st;
  std::unique_lock<std::mutex> al(append_mu_);
  // Drop counts per stream, taken before our first append: a failed write
  // from then on may have dropped our buffered records (only the streams
  // this flush appends to matter).
  uint64_t drops_before[vlog::kNumStreams];
  for (int i = 0; i < vlog::kNumStreams; ++i) {
    drops_before[i] = vlog_->DropCount(vlog::MaskOf(static_cast<vlog::Stream>(i)));
  }
  for (const auto& [b, data] : in->dirty) {
    vlog::BlockPtr p;
    // Bytes past EOF never reach the log (a later extension must read zeros).
    const uint64_t bstart = b * block_size_;
    if (bstart >= r.size) continue;
    const size_t len = std::min<uint64_t>(data.size(), r.size - bstart);
    const std::string_view bytes(data.data(), len);
    auto o = old.find(b);
    if (len == 0 && o == old.end()) continue;  // a hole (punched inside a hole) stays one
    const bool had_record = o != old.end() && !o->second.inlined;
    if (Inlines(len)) {
      batch.PutInlineBlock(ino, b, bytes);  // no record, nothing to sync but the batch
    } else {
      const vlog::Stream stream = StreamFor(in, had_record ? o->second.ptr.seq : 0);
      used |= vlog::MaskOf(stream);
      st = vlog_->Append(stream, ino, b, bytes, &p);
      if (!st.ok()) break;
      batch.PutBlock(ino, b, p);
      added.push_back(p);
      added_blocks.push_back(b);
    }
    if (had_record) released.push_back(o->second.ptr);
    if (o != old.end()) r.blocks -= std::min(r.blocks, SectorsOf(o->second.length));
    r.blocks += SectorsOf(len);
  }
  al.unlock();
  // Nothing appended (all inline): the Sync(kNoStreams) before the batch's
  // sync below covers earlier records, outside the pointer lock.
  if (st.ok() && used != 0) st = sync ? vlog_->Sync(used) : vlog_->Flush(used);
  // A concurrent failed flush of one of our streams may have dropped our
  // buffered records too; never install pointers that may dangle.
  uint64_t drops = 0;
  for (int i = 0; i < vlog::kNumStreams; ++i) {
    if (used & (1u << i)) drops += drops_before[i];
  }
  if (st.ok() && vlog_->DropCount(used) != drops) {
    st = Status::IOError("vlog: buffered records were dropped by a failed write");
  }
  LiveJournal::Entry entry;
  if (!st.ok()) {
    // Never referenced: the records are garbage at once.
    for (size_t i = 0; i < added.size(); i++) vlog_->Discard(added[i], ino, added_blocks[i]);
  } else {
    batch.PutInode(r);
    entry = journal_->Note(&batch, added, released, {&ino, 1});
    // A failed write may still reach LevelDB's log and be replayed at the
    // next open, so its records stay counted live: at worst a leak of
    // accounting, never a pointer to a freed record. Written unsynced even
    // for fsync: its sync comes below, outside the pointer lock.
    st = meta_->Write(&batch, /*sync=*/false);
  }
  if (!st.ok()) {
    // The appended records were never referenced. Drop the dirty data so a
    // full store does not pin memory; the writer sees the error.
    std::fprintf(stderr, "sepfs: flush of inode %llu failed, dirty data dropped: %s\n",
                 static_cast<unsigned long long>(ino), store_->Shown(st).c_str());
    // The file is what is stored: a size that only the dropped bytes
    // reached would read as zeros, and the next batch would store it.
    in->rec = in->Stored(in->rec);
  } else {
    in->rec = r;
    in->stored_size = r.size;
    journal_->Commit(entry);
    // For fsync the replaced records stay counted live until the batch is
    // synced: GC deletes a segment with no live records at once, and an
    // older durable pointer may still name it.
    if (!sync) {
      for (const auto& p : released) vlog_->Release(p);
    }
    stats_.flushes++;
    stats_.blocks_flushed += in->dirty.size();
  }
  dirty_total_ -= in->dirty_bytes;
  in->dirty.clear();
  in->dirty_bytes = 0;
  if (st.ok()) {
    in->attr_dirty = false;
  } else if (in->write_error == 0) {
    in->write_error = st.err();  // reported by the next flush/fsync/close
  }
  pl.unlock();
  if (!st.ok() || !sync) return st;
  // Our records were fdatasync'd before their pointers were written at all.
  // The batch's sync waits outside the pointer lock, so the next fsync's
  // vLog work overlaps it; it also makes other flushes' batches durable, so
  // MetaStore's before-sync hook syncs their records first (a flush slipping
  // in between may still have a pointer durable before its record: recovery
  // drops such pointers).
  st = meta_->Sync();
  // On failure the replaced records stay counted live: a leak of
  // accounting, never a deleted segment an older durable pointer names.
  if (st.ok()) {
    for (const auto& p : released) vlog_->Release(p);
  }
  return st;
}

vlog::Stream Filesystem::StreamFor(Inode* in, uint64_t prev_seq) {
  if (in->temperature < 0) {
    std::string v;
    Status st = meta_->Get(kv::XattrKey(in->ino, kTemperatureXattr), &v);
    in->temperature = st.ok() && v == "cold" ? 1 : 0;
  }
  return gc_ ? gc_->UserStream(in->temperature == 1, prev_seq) : vlog::Stream::kHot;
}

Status Filesystem::FlushBeforeSizeLocked(Inode* in, uint64_t size) {
  if (size <= in->stored_size || in->dirty.empty()) return Status::OK();
  return FlushLocked(in, /*sync=*/false);
}

Status Filesystem::TakeWriteError(Inode* in, Status st) {
  if (st.ok() && in->write_error != 0) {
    st = Status::FromErrno(in->write_error, "inode " + std::to_string(in->ino) +
                                                ": an earlier background flush failed");
  }
  in->write_error = 0;
  return st;
}

Status Filesystem::Flush(uint64_t ino) {
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::lock_guard<std::mutex> il(in->mu);
  return TakeWriteError(in.get(), FlushLocked(in.get(), /*sync=*/false));
}

Status Filesystem::Fsync(uint64_t ino, bool datasync) {
  (void)datasync;  // the inode record (size) travels with the data anyway
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::lock_guard<std::mutex> il(in->mu);
  // FlushLocked syncs the vLog and then LevelDB, with all written before.
  return TakeWriteError(in.get(), FlushLocked(in.get(), /*sync=*/true));
}

Status Filesystem::FlushAll(bool sync) {
  std::vector<InodeRef> dirty;
  {
    std::lock_guard<std::mutex> l(table_mu_);
    for (auto& [ino, in] : table_) dirty.push_back(in);
  }
  Status result;
  for (auto& in : dirty) {
    std::lock_guard<std::mutex> il(in->mu);
    if (in->dirty.empty() && !in->attr_dirty) continue;
    Status st = FlushLocked(in.get(), /*sync=*/false);
    if (result.ok()) result = st;
  }
  if (sync) {
    Status st = vlog_->Sync();
    if (result.ok()) result = st;
    st = meta_->Sync();
    if (result.ok()) result = st;
  }
  return result;
}

void Filesystem::TEST_PauseFlusher(bool paused) {
  std::lock_guard<std::mutex> l(flusher_mu_);
  flusher_paused_ = paused;
  flusher_cv_.notify_one();
}

void Filesystem::FlusherLoop() {
  const auto interval = std::chrono::duration<double>(options_.flush_interval_sec);
  std::unique_lock<std::mutex> l(flusher_mu_);
  while (!flusher_stop_) {
    flusher_cv_.wait_for(l, interval,
                         [&] { return flusher_stop_ || (flusher_kick_ && !flusher_paused_); });
    if (flusher_stop_) break;
    if (flusher_paused_) continue;
    flusher_kick_ = false;
    l.unlock();
    Status st = FlushAll(/*sync=*/false);
    if (!st.ok()) std::fprintf(stderr, "sepfs: background flush: %s\n", store_->Shown(st).c_str());
    if (st.ok() && CheckpointDue()) {
      st = Checkpoint();
      if (!st.ok()) std::fprintf(stderr, "sepfs: checkpoint: %s\n", store_->Shown(st).c_str());
    }
    l.lock();
  }
}

Status Filesystem::TruncateLocked(Inode* in, uint64_t size, kv::Batch* b,
                                  std::vector<vlog::BlockPtr>* added,
                                  std::vector<vlog::BlockPtr>* released, bool* rewrote_last) {
  *rewrote_last = false;
  const uint64_t bs = block_size_;
  if (size < in->rec.size) {
    const uint64_t keep = (size + bs - 1) / bs;  // blocks [0, keep) survive
    if (size % bs) {
      const uint64_t last = size / bs, tail = size % bs;
      // A flushed record longer than the new size is rewritten shortened in
      // this same batch: left in place, its cut bytes would come back if the
      // file grew again and the daemon died before the next flush.
      std::string raw;
      kv::BlockValue old;
      Status st = meta_->Get(kv::BlockKey(in->ino, last), &raw);
      if (!st.ok() && !st.IsNotFound()) return st;
      if (st.ok() && kv::DecodeBlock(raw, &old).ok() && old.length() > tail) {
        std::string buf;
        auto d = in->dirty.find(last);
        if (d != in->dirty.end()) {
          buf = d->second.substr(0, std::min<size_t>(d->second.size(), tail));
        } else {
          SEPFS_RETURN_IF_ERROR(LoadBlock(in, last, &buf));
          if (buf.size() > tail) buf.resize(tail);
        }
        if (Inlines(buf.size())) {
          b->PutInlineBlock(in->ino, last, buf);
        } else {
          SEPFS_RETURN_IF_ERROR(meta_->WriteError());  // as FlushLocked
          const vlog::Stream stream = StreamFor(in, old.inlined ? 0 : old.ptr.seq);
          const uint64_t drops = vlog_->DropCount(vlog::MaskOf(stream));
          vlog::BlockPtr np;
          SEPFS_RETURN_IF_ERROR(
              vlog_->Append(stream, in->ino, last, buf, &np, vlog::kRecordShortened));
          st = vlog_->Flush(vlog::MaskOf(stream));
          if (st.ok() && vlog_->DropCount(vlog::MaskOf(stream)) != drops) {
            st = Status::IOError("vlog: buffered records were dropped by a failed write");
          }
          if (!st.ok()) {
            vlog_->Discard(np, in->ino, last);  // never referenced
            return st;
          }
          b->PutBlock(in->ino, last, np);
          added->push_back(np);
        }
        if (!old.inlined) released->push_back(old.ptr);
        in->rec.blocks -= std::min(in->rec.blocks, SectorsOf(old.length()));
        in->rec.blocks += SectorsOf(buf.size());
        *rewrote_last = true;
      }
    }
    // Pointers lie below the size (fsck checks it): the scan stops at the
    // old last block instead of walking the deletion markers behind it, and
    // does not start when no block was past the new end.
    const uint64_t old_last = (in->rec.size - 1) / bs;
    if (keep <= old_last) {
      SEPFS_RETURN_IF_ERROR(meta_->ScanBlocks(
          in->ino, keep, old_last + 1, [&](uint64_t, std::string_view key, std::string_view value) {
            ForgetBlock(in, value, released);
            b->Delete(key);
            return true;
          }));
    }
  }
  in->rec.size = size;
  return Status::OK();
}

void Filesystem::ForgetBlock(Inode* in, std::string_view value,
                             std::vector<vlog::BlockPtr>* released) {
  kv::BlockValue v;
  if (!kv::DecodeBlock(value, &v).ok()) return;  // fsck reports it
  if (!v.inlined) released->push_back(v.ptr);
  in->rec.blocks -= std::min(in->rec.blocks, SectorsOf(v.length()));
}

void Filesystem::EraseDirtyLocked(Inode* in, uint64_t first, uint64_t end) {
  for (auto it = in->dirty.lower_bound(first); it != in->dirty.end() && it->first < end;) {
    in->dirty_bytes -= it->second.size();
    dirty_total_ -= it->second.size();
    it = in->dirty.erase(it);
  }
}

void Filesystem::TrimDirtyLocked(Inode* in, uint64_t size, bool rewrote_last) {
  const uint64_t bs = block_size_;
  EraseDirtyLocked(in, (size + bs - 1) / bs, UINT64_MAX);
  if (size % bs == 0) return;
  const uint64_t last = size / bs;
  auto d = in->dirty.find(last);
  if (d == in->dirty.end()) return;
  if (rewrote_last) {
    EraseDirtyLocked(in, last, last + 1);  // its bytes are in the rewritten record
  } else if (d->second.size() > size % bs) {
    in->dirty_bytes -= d->second.size() - size % bs;
    dirty_total_ -= d->second.size() - size % bs;
    d->second.resize(size % bs);
  }
}

Status Filesystem::PunchLocked(Inode* in, uint64_t off, uint64_t len, bool kernel_times) {
  const uint64_t bs = block_size_;
  const uint64_t end = std::min<uint64_t>(off + len, in->rec.size);
  if (off >= end) return Status::OK();
  std::lock_guard<std::mutex> pl(ptr_locks_.For(in->ino));
  // Whole blocks inside [off, end) lose their pointers and dirty copies; the
  // edges get zeros in their dirty copies. Everything that can fail comes
  // first (the edges' loads, the scan, the batch), so a failure leaves the
  // file as it was: no dirty data dropped, no record changed.
  const uint64_t first_full = (off + bs - 1) / bs;
  const uint64_t end_full = end == in->rec.size ? (end + bs - 1) / bs : end / bs;
  struct Edge {
    uint64_t block, from, n;  // zero [from, from + n) of the block
  };
  std::vector<Edge> edges;
  std::map<uint64_t, std::string> loaded;  // edge blocks without a dirty copy yet
  for (uint64_t pos = off; pos < end;) {
    const uint64_t blk = pos / bs;
    if (blk >= first_full && blk < end_full) {
      pos = end_full * bs;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(end, (blk + 1) * bs) - pos;
    edges.push_back({blk, pos % bs, n});
    if (!in->dirty.count(blk)) SEPFS_RETURN_IF_ERROR(LoadBlock(in, blk, &loaded[blk]));
    pos += n;
  }
  const kv::InodeRecord before = in->rec;
  kv::Batch b;
  std::vector<vlog::BlockPtr> released;
  Status st;
  if (first_full < end_full) {
    st = meta_->ScanBlocks(in->ino, first_full, end_full,
                           [&](uint64_t, std::string_view key, std::string_view value) {
                             ForgetBlock(in, value, &released);
                             b.Delete(key);
                             return true;
                           });
  }
  if (st.ok()) {
    if (!kernel_times) in->rec.mtime = in->rec.ctime = Now();
    b.PutInode(in->Stored(in->rec));
    const LiveJournal::Entry e = journal_->Note(&b, {}, released, {});
    st = meta_->Write(&b, false);
    if (st.ok()) journal_->Commit(e);
  }
  if (!st.ok()) {
    in->rec = before;
    return st;
  }
  for (const auto& p : released) vlog_->Release(p);
  if (first_full < end_full) EraseDirtyLocked(in, first_full, end_full);
  for (auto& [blk, buf] : loaded) {
    in->dirty_bytes += buf.size();
    dirty_total_ += buf.size();
    in->dirty.emplace(blk, std::move(buf));
  }
  for (const Edge& x : edges) {
    std::string& d = in->dirty[x.block];
    if (d.size() > x.from) std::memset(d.data() + x.from, 0, std::min(x.n, d.size() - x.from));
  }
  return Status::OK();
}

bool Filesystem::KillSetidLocked(Inode* in, const SetidCaller& c) {
  const uint32_t mode = KillSuidSgid(in->rec.mode, in->rec.gid, c);
  if (mode == in->rec.mode) return false;
  in->rec.mode = mode;
  in->rec.ctime = Now();
  in->attr_dirty = true;
  return true;
}

Status Filesystem::Fallocate(uint64_t ino, int mode, uint64_t off, uint64_t len,
                             const WriteEffects& fx, bool* setid_cleared) {
  if (setid_cleared != nullptr) *setid_cleared = false;
  if (len == 0) return Status::InvalidArgument("fallocate of zero bytes");
  if (off + len < off || off + len > MaxFileSize()) return Status::FromErrno(EFBIG, "too large");
  std::shared_lock<std::shared_mutex> ns(ns_mu_);
  InodeRef in;
  SEPFS_RETURN_IF_ERROR(GetInode(ino, &in));
  std::lock_guard<std::mutex> il(in->mu);
  if (!S_ISREG(in->rec.mode)) return Status::FromErrno(ENODEV, "fallocate of non-file");
  Status st;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    st = PunchLocked(in.get(), off, len, fx.kernel_times);
  } else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
    st = AllocateLocked(in.get(), mode, off, len, fx.kernel_times);
  } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    // Zeros inside the size, then the size as an allocation sets it; the
    // room for the bytes past the size is checked before anything changes.
    st = RoomToExtendLocked(in.get(), off, len);
    if (st.ok()) st = PunchLocked(in.get(), off, len, fx.kernel_times);
    if (st.ok()) {
      st = AllocateLocked(in.get(), mode & FALLOC_FL_KEEP_SIZE, off, len, fx.kernel_times);
    }
  } else {
    return Status::FromErrno(EOPNOTSUPP, "fallocate mode");
  }
  // As a write does, whatever the mode (Linux's file_modified).
  if (st.ok() && fx.kill_suidgid && KillSetidLocked(in.get(), fx.setid) && setid_cleared) {
    *setid_cleared = true;
  }
  return st;
}

Status Filesystem::RoomToExtendLocked(Inode* in, uint64_t off, uint64_t len) {
  // The bytes past the size must be free now (holes below it are not
  // counted); nothing is reserved, so later writes may still find the
  // store full if others took the space first.
  if (off + len <= in->rec.size) return Status::OK();
  return HaveRoomFor(off + len - std::max(off, in->rec.size));
}

Status Filesystem::AllocateLocked(Inode* in, int mode, uint64_t off, uint64_t len,
                                  bool kernel_times) {
  SEPFS_RETURN_IF_ERROR(RoomToExtendLocked(in, off, len));
  if (mode == FALLOC_FL_KEEP_SIZE) return Status::OK();
  // Blocks are allocated on write (the log is append-only); extending the
  // size is what a caller of the default mode can observe.
  if (off + len > in->rec.size) {
    SEPFS_RETURN_IF_ERROR(FlushBeforeSizeLocked(in, off + len));
    kv::InodeRecord r = in->rec;
    r.size = off + len;
    if (!kernel_times) r.ctime = r.mtime = Now();
    kv::Batch b;
    b.PutInode(r);
    SEPFS_RETURN_IF_ERROR(meta_->Write(&b, false));
    in->rec.size = in->stored_size = r.size;
    in->rec.mtime = r.mtime;
    in->rec.ctime = r.ctime;
  }
  return Status::OK();
}

}  // namespace sepfs::fs
