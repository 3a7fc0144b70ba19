#include "fs/fuse_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <vector>

#include "fs/clock.h"
#include "fs/dir_cookie.h"
#include "fs/fuse_uring.h"

namespace sepfs::fs {

namespace {

FuseContext* Ctx(fuse_req_t req) { return static_cast<FuseContext*>(fuse_req_userdata(req)); }
Filesystem* Fs(fuse_req_t req) { return Ctx(req)->fs; }

// Runs body; any exception becomes an error reply (the body has not
// replied when it throws, because every reply is its last statement).
template <typename Body>
void Guard(fuse_req_t req, Body&& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fuse_reply_err(req, ENOMEM);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sepfs: internal error: %s\n", e.what());
    fuse_reply_err(req, EIO);
  }
}

// The caller of req as the set-id rules see it. Its supplementary groups
// are read (from /proc) only if KillSuidSgid asks; groups that cannot be
// read count as none, so setgid then goes: the safe side.
SetidCaller SetidCallerOf(fuse_req_t req) {
  const struct fuse_ctx* ctx = fuse_req_ctx(req);
  SetidCaller c;
  c.privileged = ctx->uid == 0;
  c.in_group = [req, own = ctx->gid](uint32_t gid) {
    if (gid == own) return true;
    std::vector<gid_t> groups(64);
    int n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
    if (n > static_cast<int>(groups.size())) {
      groups.resize(n);
      n = fuse_req_getgroups(req, n, groups.data());
    }
    if (n <= 0) return false;
    groups.resize(std::min<size_t>(groups.size(), n));
    return std::find(groups.begin(), groups.end(), gid) != groups.end();
  };
  return c;
}

void ReplyErr(fuse_req_t req, const Status& st) {
  if (st.err() == EIO) {
    // Named by the store's path, not the pinned /proc/self/fd/N it is reached by.
    std::fprintf(stderr, "sepfs: %s\n", Fs(req)->store()->Shown(st).c_str());
  }
  fuse_reply_err(req, st.ok() ? 0 : st.err());
}

void ToStat(const kv::InodeRecord& r, uint32_t blksize, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = r.ino;
  st->st_mode = r.mode;
  st->st_nlink = r.nlink;
  st->st_uid = r.uid;
  st->st_gid = r.gid;
  st->st_rdev = r.rdev;
  st->st_size = static_cast<off_t>(r.size);
  st->st_blksize = blksize;
  st->st_blocks = static_cast<blkcnt_t>(r.blocks);
  st->st_atim = ToTimespec(r.atime);
  st->st_mtim = ToTimespec(r.mtime);
  st->st_ctim = ToTimespec(r.ctime);
}

fuse_entry_param Entry(fuse_req_t req, const kv::InodeRecord& r) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = r.ino;
  e.generation = 1;
  e.attr_timeout = Ctx(req)->options.attr_timeout;
  e.entry_timeout = Ctx(req)->options.entry_timeout;
  ToStat(r, Fs(req)->block_size(), &e.attr);
  return e;
}

// A reply that failed handed nothing to the kernel (its caller was
// interrupted): take back the lookup and the open it carried, which the
// kernel will never forget or release. libfuse frees req with every reply,
// failed or not, so this takes the Filesystem, never the request.
void TakeBack(Filesystem* fs, uint64_t ino, bool lookup, bool open) noexcept {
  try {
    if (open) (void)fs->Release(ino);
    if (lookup) fs->Forget(ino, 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sepfs: undoing an undelivered reply for inode %llu: %s\n",
                 static_cast<unsigned long long>(ino), e.what());
  }
}

void ReplyEntry(fuse_req_t req, const Status& st, const kv::InodeRecord& r) {
  if (!st.ok()) return ReplyErr(req, st);
  Filesystem* fs = Fs(req);
  fuse_entry_param e = Entry(req, r);
  if (fuse_reply_entry(req, &e) != 0) TakeBack(fs, r.ino, /*lookup=*/true, /*open=*/false);
}

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  return Caller{c->uid, c->gid};
}

// --------------------------------------------------------------------------

void OpInit(void* userdata, struct fuse_conn_info* conn) {
  auto* ctx = static_cast<FuseContext*>(userdata);
  const MountOptions& o = ctx->options;
  if (o.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
    conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    ctx->writeback_cache = true;
  } else {
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    ctx->writeback_cache = false;
  }
  if (o.readdirplus && (conn->capable & FUSE_CAP_READDIRPLUS)) {
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;  // plus on every listing: ls -l is one pass
  } else {
    conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
  }
  if (o.parallel_dirops && (conn->capable & FUSE_CAP_PARALLEL_DIROPS)) {
    conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  } else {
    conn->want &= ~FUSE_CAP_PARALLEL_DIROPS;
  }
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  // Opens without a round trip: the first OPEN answers ENOSYS and the
  // kernel opens every later file itself. O_TRUNC then arrives as a
  // SETATTR of the size, not with an OPEN that would no longer be sent.
  ctx->no_open = !o.open_requests && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
  if (ctx->no_open) conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  ctx->no_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  conn->want &= ~FUSE_CAP_POSIX_ACL;
  conn->max_write = o.max_write;
  conn->max_read = o.max_read;  // libfuse fails INIT unless it matches the mount's
  conn->max_readahead = 1u << 20;
  conn->time_gran = 1;
}

void OpDestroy(void*) {}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guard(req, [&] {
    kv::InodeRecord r;
    Status st = Fs(req)->Lookup(parent, name, &r);
    if (st.IsNotFound()) {
      // Negative entry: cached by the kernel for entry_timeout. Safe because
      // every change to the namespace goes through this mount.
      fuse_entry_param e;
      std::memset(&e, 0, sizeof(e));
      e.entry_timeout = Ctx(req)->options.entry_timeout;
      fuse_reply_entry(req, &e);
      return;
    }
    ReplyEntry(req, st, r);
  });
}

// FORGET gets no reply, so Guard does not fit; an exception (a flush or
// reclaim of the forgotten inode running out of memory) must still not
// unwind through libfuse's C frames, which would end the daemon.
void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  try {
    // Only once every reference is gone: the kernel also forgets some of
    // an inode it keeps, and with io_uring a FORGET of an evicted inode may
    // come after the READDIR of the inode looked up again.
    if (Fs(req)->Forget(ino, nlookup)) Ctx(req)->kernel_listings.Forgotten(ino);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sepfs: forget of inode %llu: %s\n",
                 static_cast<unsigned long long>(ino), e.what());
  }
}

// Makes the kernel drop what it caches of ino: its attributes, and with
// pages also its page cache (a directory's: its listing). Attributes only
// take no page lock.
void InvalidateKernelCache(fuse_req_t req, fuse_ino_t ino, bool pages) {
  if (Ctx(req)->session) {
    (void)fuse_lowlevel_notify_inval_inode(Ctx(req)->session, ino, pages ? 0 : -1, 0);
  }
}

// dir's entries changed: drops the listing of it the kernel may hold from
// before (KernelListings), or whatever it holds when `always`. Before the
// reply, so no listing after the call returns can be the old one. The
// notification takes only the cache's page locks, which only a reader of
// the directory holds, under the directory's i_rwsem shared, and the caller
// holds it exclusive; for the same reason no READDIR of dir runs beside the
// change.
void DropKernelListing(fuse_req_t req, fuse_ino_t dir, bool always = false) {
  if (Ctx(req)->kernel_listings.Changed(dir) || always) InvalidateKernelCache(req, dir, true);
}

void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Forget(req, ino, nlookup);
  fuse_reply_none(req);
}

void OpForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; i++) Forget(req, forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  Guard(req, [&] {
    kv::InodeRecord r;
    Status st = Fs(req)->GetAttr(ino, &r);
    if (!st.ok()) return ReplyErr(req, st);
    struct stat s;
    ToStat(r, Fs(req)->block_size(), &s);
    fuse_reply_attr(req, &s, Ctx(req)->options.attr_timeout);
  });
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               struct fuse_file_info*) {
  Guard(req, [&] {
    SetAttrRequest s;
    s.set_mode = to_set & FUSE_SET_ATTR_MODE;
    s.set_uid = to_set & FUSE_SET_ATTR_UID;
    s.set_gid = to_set & FUSE_SET_ATTR_GID;
    s.set_size = to_set & FUSE_SET_ATTR_SIZE;
    s.set_atime = (to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW);
    s.set_atime_now = to_set & FUSE_SET_ATTR_ATIME_NOW;
    s.set_mtime = (to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW);
    s.set_mtime_now = to_set & FUSE_SET_ATTR_MTIME_NOW;
    s.set_ctime = to_set & FUSE_SET_ATTR_CTIME;
    // Under FUSE_HANDLE_KILLPRIV_V2 the server clears the set-id bits: on
    // truncate when the kernel says so, and on every chown, chown(-1, -1)
    // included, which reaches it as a change of ctime alone under the
    // writeback cache and as no change at all without it (the kernel drops
    // its own kill flags; a directory keeps its bits: Filesystem::SetAttr).
    const bool chown = s.set_uid || s.set_gid || to_set == FUSE_SET_ATTR_CTIME || to_set == 0;
    s.kill_suidgid =
        CurrentWireFlags().kill_suidgid || (Ctx(req)->wire.killpriv_v2.load() && chown);
    if (s.kill_suidgid) s.setid = SetidCallerOf(req);
    s.mode = attr->st_mode;
    s.uid = attr->st_uid;
    s.gid = attr->st_gid;
    s.size = static_cast<uint64_t>(attr->st_size);
    s.atime = {attr->st_atim.tv_sec, static_cast<uint32_t>(attr->st_atim.tv_nsec)};
    s.mtime = {attr->st_mtim.tv_sec, static_cast<uint32_t>(attr->st_mtim.tv_nsec)};
    s.ctime = {attr->st_ctim.tv_sec, static_cast<uint32_t>(attr->st_ctim.tv_nsec)};
    kv::InodeRecord r;
    Status st = Fs(req)->SetAttr(ino, s, &r);
    if (!st.ok()) return ReplyErr(req, st);
    struct stat out;
    ToStat(r, Fs(req)->block_size(), &out);
    fuse_reply_attr(req, &out, Ctx(req)->options.attr_timeout);
  });
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  Guard(req, [&] {
    kv::InodeRecord r;
    const Status st = Fs(req)->Mknod(CallerOf(req), parent, name, mode, rdev, &r);
    if (st.ok()) DropKernelListing(req, parent);
    ReplyEntry(req, st, r);
  });
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Guard(req, [&] {
    kv::InodeRecord r;
    const Status st =
        Fs(req)->Mknod(CallerOf(req), parent, name, S_IFDIR | (mode & 07777), 0, &r);
    if (st.ok()) DropKernelListing(req, parent);
    ReplyEntry(req, st, r);
  });
}

void OpSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  Guard(req, [&] {
    kv::InodeRecord r;
    const Status st = Fs(req)->Symlink(CallerOf(req), parent, name, link, &r);
    if (st.ok()) DropKernelListing(req, parent);
    ReplyEntry(req, st, r);
  });
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  Guard(req, [&] {
    std::string target;
    Status st = Fs(req)->Readlink(ino, &target);
    if (!st.ok()) return ReplyErr(req, st);
    fuse_reply_readlink(req, target.c_str());
  });
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guard(req, [&] {
    const Status st = Fs(req)->Unlink(parent, name);
    if (st.ok()) DropKernelListing(req, parent);
    ReplyErr(req, st);
  });
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guard(req, [&] {
    const Status st = Fs(req)->Rmdir(parent, name);
    if (st.ok()) DropKernelListing(req, parent);
    ReplyErr(req, st);
  });
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
              const char* newname, unsigned int flags) {
  Guard(req, [&] {
    std::vector<uint64_t> moved;
    Status st = Fs(req)->Rename(parent, name, newparent, newname, flags, &moved);
    // A moved directory's listing names its old "..". Dropped before the
    // reply: a reply first left a window the tests hit.
    if (st.ok()) {
      DropKernelListing(req, parent);
      if (newparent != parent) DropKernelListing(req, newparent);
    }
    // Whether or not readdir answered since (moves are rare).
    for (uint64_t dir : moved) DropKernelListing(req, dir, /*always=*/true);
    ReplyErr(req, st);
  });
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  Guard(req, [&] {
    kv::InodeRecord r;
    const Status st = Fs(req)->Link(ino, newparent, newname, &r);
    if (st.ok()) DropKernelListing(req, newparent);
    ReplyEntry(req, st, r);
  });
}

void SetOpenFlags(fuse_req_t req, struct fuse_file_info* fi) {
  // Every change goes through this mount, so cached pages stay valid.
  fi->keep_cache = Ctx(req)->options.writeback_cache ? 1 : 0;
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  if (Ctx(req)->no_open) {
    fuse_reply_err(req, ENOSYS);  // success, and no OPEN from now on
    return;
  }
  Guard(req, [&] {
    // libfuse enables atomic O_TRUNC: the truncation arrives with the open.
    if (fi->flags & O_TRUNC) {
      SetAttrRequest s;
      s.set_size = true;
      s.size = 0;
      // Under KILLPRIV_V2 the kernel says whether the caller may keep the
      // set-id bits; without it nobody does, so judge by the caller (root
      // stands in for CAP_FSETID).
      s.kill_suidgid = Ctx(req)->wire.killpriv_v2.load() ? CurrentWireFlags().kill_suidgid
                                                         : fuse_req_ctx(req)->uid != 0;
      if (s.kill_suidgid) s.setid = SetidCallerOf(req);
      kv::InodeRecord r;
      Status st = Fs(req)->SetAttr(ino, s, &r);
      if (!st.ok()) return ReplyErr(req, st);
    }
    Filesystem* fs = Fs(req);
    Status st = fs->OpenFile(ino);
    if (!st.ok()) return ReplyErr(req, st);
    SetOpenFlags(req, fi);
    auto fh = std::make_unique<FileHandle>();
    fi->fh = reinterpret_cast<uint64_t>(fh.get());
    if (fuse_reply_open(req, fi) != 0) {
      TakeBack(fs, ino, /*lookup=*/false, /*open=*/true);
    } else {
      fh.release();  // freed by OpRelease
    }
  });
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              struct fuse_file_info* fi) {
  Guard(req, [&] {
    Filesystem* fs = Fs(req);
    kv::InodeRecord r;
    Status st = fs->Mknod(CallerOf(req), parent, name, S_IFREG | (mode & 07777), 0, &r);
    if (!st.ok()) return ReplyErr(req, st);
    DropKernelListing(req, parent);
    // Once the kernel opens files itself it sends no RELEASE for any
    // regular file, created ones included: then no handle and no open count
    // (the kernel's lookup reference keeps the inode). A RELEASE that still
    // comes, before the kernel learned of no-open, finds nothing to drop.
    const bool handle = !Ctx(req)->no_open;
    if (handle) {
      st = fs->OpenFile(r.ino);
      if (!st.ok()) {
        ReplyErr(req, st);
        return TakeBack(fs, r.ino, /*lookup=*/true, /*open=*/false);
      }
    }
    SetOpenFlags(req, fi);
    fuse_entry_param e = Entry(req, r);
    std::unique_ptr<FileHandle> fh;
    if (handle) fh = std::make_unique<FileHandle>();
    fi->fh = reinterpret_cast<uint64_t>(fh.get());
    if (fuse_reply_create(req, &e, fi) != 0) {
      TakeBack(fs, r.ino, /*lookup=*/true, /*open=*/handle);
    } else {
      fh.release();  // freed by OpRelease
    }
  });
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  Guard(req, [&] {
    // One buffer per worker thread, grown to the largest read seen (the
    // kernel's max_read bounds it): no allocation or zero-fill per request.
    thread_local std::unique_ptr<char[]> buf;
    thread_local size_t cap = 0;
    if (cap < size) {
      buf.reset(new char[size]);
      cap = size;
    }
    // Cached records go out by reference (no copy into buf); the pieces
    // keep them alive until the reply is written.
    thread_local ReadPieces pieces;
    // Cleared however the request ends, so no cache buffer stays held.
    struct Clear {
      ~Clear() { pieces.clear(); }
    } clear;
    // Opens the kernel makes itself keep the page cache, and so do ours with
    // the writeback cache (SetOpenFlags); otherwise our OPENs drop it.
    pieces.kernel_keeps_pages = Ctx(req)->no_open || Ctx(req)->options.writeback_cache;
    // A file the kernel opened by itself has no handle of ours: its reads
    // share the inode's sequential detector.
    FileHandle* fh = reinterpret_cast<FileHandle*>(fi->fh);
    std::shared_ptr<FileHandle> shared;
    if (fh == nullptr && Fs(req)->InodeHandle(ino, &shared).ok()) fh = shared.get();
    size_t got = 0;
    Status st = Fs(req)->ReadInto(ino, static_cast<uint64_t>(off), size, buf.get(), &got, fh,
                                  &pieces);
    if (!st.ok()) return ReplyErr(req, st);
    if (pieces.iov.empty()) {
      fuse_reply_buf(req, buf.get(), 0);
    } else {
      fuse_reply_iov(req, pieces.iov.data(), static_cast<int>(pieces.iov.size()));
    }
  });
}

void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t off,
             struct fuse_file_info* fi) {
  Guard(req, [&] {
    const bool kill = CurrentWireFlags().kill_suidgid;
    WriteEffects fx{.kill_suidgid = kill,
                    .kernel_times = Ctx(req)->writeback_cache.load(),
                    .from_cache = fi != nullptr && fi->writepage != 0};
    if (kill) fx.setid = SetidCallerOf(req);
    Status st = Fs(req)->Write(ino, static_cast<uint64_t>(off), std::string_view(data, size), fx);
    if (!st.ok()) return ReplyErr(req, st);
    // The kernel keeps its cached mode after such a write; make it ask again
    // before the writer can see the old set-id bits. Attributes only, so no
    // page lock is taken while the write holds the inode.
    if (kill) InvalidateKernelCache(req, ino, /*pages=*/false);
    fuse_reply_write(req, size);
  });
}

void OpFlush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  // By default close(2) costs no round trip: ENOSYS makes the kernel stop
  // sending FLUSH for this mount (it still writes cached pages back to us
  // first). The blocks reach the vLog with the flusher, or, with
  // open_requests, with the RELEASE sent right after the last close.
  if (!Ctx(req)->options.flush_on_close) {
    fuse_reply_err(req, ENOSYS);
    return;
  }
  Guard(req, [&] { ReplyErr(req, Fs(req)->Flush(ino)); });
}

void OpRelease(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  delete reinterpret_cast<FileHandle*>(fi->fh);
  fi->fh = 0;
  Guard(req, [&] { ReplyErr(req, Fs(req)->Release(ino)); });
}

void OpFsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info*) {
  Guard(req, [&] { ReplyErr(req, Fs(req)->Fsync(ino, datasync != 0)); });
}

// Readdir keeps no state between replies: offsets are cookies, and the
// listing a reply resumes in is the one kept for the directory's current
// generation (DirListings). So directories need no handle: the first
// OPENDIR answers ENOSYS and the kernel opens every later directory itself,
// two round trips fewer per listing. Its defaults for such opens keep the
// listing in the directory's page cache and serve the next listing from it
// until the directory changes (every change goes through this mount; the
// kernel checks for one when a listing starts at offset 0, and the first
// change after a readdir answer drops the cache: KernelListings). The
// kernel resumes any reader at an offset and joins replies of several
// readers, which cookies (the same offset for an entry in every listing)
// allow. Kernels without no-opendir get the same flags here.
void OpOpendir(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  if (Ctx(req)->no_opendir) {
    fuse_reply_err(req, ENOSYS);  // success, and no OPENDIR from now on
    return;
  }
  fi->fh = 0;
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void DoReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  Guard(req, [&] {
    Filesystem* fs = Fs(req);
    DirListings& kept = Ctx(req)->listings;
    // A listing from the start is a new pass: taken anew, and told to the
    // prefetcher in name order (the order `for f in dir/*` reads).
    uint64_t gen = 0;
    std::shared_ptr<const CookieListing> listing;
    if (off != 0) {
      gen = fs->EntriesGen(ino);
      listing = kept.Get(ino, gen);
    }
    if (listing == nullptr) {
      std::vector<DirListEntry> entries;
      Status st = fs->ListDir(ino, &entries, &gen);
      if (!st.ok()) return ReplyErr(req, st);
      if (off == 0) fs->DirListed(ino, entries);
      listing = std::make_shared<const CookieListing>(SortByCookie(std::move(entries)));
      kept.Put(ino, gen, listing);
    }
    std::string buf(size, '\0');
    size_t used = 0;
    const size_t start = listing->After(static_cast<uint64_t>(off));
    // Entries sharing a cookie go in one reply or none: the next readdir
    // resumes after that cookie. (A single entry is sized by add itself.)
    size_t group_end = start;
    auto add = [&](const DirListEntry& e, const kv::InodeRecord& r, size_t index) {
      const off_t next = static_cast<off_t>(listing->cookies[index]);
      if (index >= group_end && (group_end = listing->GroupEnd(index)) > index + 1) {
        size_t group = 0;
        for (size_t j = index; j < group_end; ++j) {
          const char* n = listing->entries[j].name.c_str();
          group += plus ? fuse_add_direntry_plus(req, nullptr, 0, n, nullptr, 0)
                        : fuse_add_direntry(req, nullptr, 0, n, nullptr, 0);
        }
        if (group > size - used) return false;
      }
      size_t need;
      if (plus) {
        fuse_entry_param p;
        std::memset(&p, 0, sizeof(p));
        if (e.name != "." && e.name != ".." && r.ino != 0) {
          p = Entry(req, r);
        } else {
          p.attr.st_ino = e.ino;
          p.attr.st_mode = e.type;
        }
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, e.name.c_str(), &p,
                                      next);
      } else {
        struct stat s;
        std::memset(&s, 0, sizeof(s));
        s.st_ino = e.ino;
        s.st_mode = e.type;
        need = fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &s, next);
      }
      if (need > size - used) return false;
      used += need;
      return true;
    };
    // Entries listed with attributes each carry a lookup (ReadDirPlus),
    // given back if the reply fails; reserved so that noting one never throws.
    std::vector<uint64_t> looked_up;
    if (plus) {
      looked_up.reserve(listing->entries.size() - start);
      size_t index = start;
      Status st = fs->ReadDirPlus(
          listing->entries, start, [&](const DirListEntry& e, const kv::InodeRecord& r) {
            if (!add(e, r, index++)) return false;
            if (e.name != "." && e.name != ".." && r.ino != 0) looked_up.push_back(r.ino);
            return true;
          },
          gen);
      if (!st.ok()) {
        ReplyErr(req, st);
        for (uint64_t i : looked_up) TakeBack(fs, i, /*lookup=*/true, /*open=*/false);
        return;
      }
    } else {
      for (size_t i = start; i < listing->entries.size(); i++) {
        if (!add(listing->entries[i], kv::InodeRecord{}, i)) break;
      }
    }
    Ctx(req)->kernel_listings.Served(ino);
    if (fuse_reply_buf(req, buf.data(), used) != 0) {
      for (uint64_t i : looked_up) TakeBack(fs, i, /*lookup=*/true, /*open=*/false);
    }
  });
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
               struct fuse_file_info*) {
  DoReaddir(req, ino, size, off, false);
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info*) {
  DoReaddir(req, ino, size, off, true);
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int, struct fuse_file_info*) {
  Guard(req, [&] { ReplyErr(req, Fs(req)->FsyncDir(ino)); });
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  Guard(req, [&] {
    struct statvfs s;
    Status st = Fs(req)->StatFs(&s);
    if (!st.ok()) return ReplyErr(req, st);
    fuse_reply_statfs(req, &s);
  });
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                int flags) {
  Guard(req, [&] {
    // The kernel only asks for write permission on the root for this name.
    if (ino == Filesystem::kRootIno && std::string_view(name) == "sepfs.gc" &&
        fuse_req_ctx(req)->uid != 0) {
      return ReplyErr(req, Status::FromErrno(EPERM, "sepfs.gc: root only"));
    }
    ReplyErr(req, Fs(req)->SetXattr(ino, name, std::string_view(value, size), flags));
  });
}

void ReplyXattr(fuse_req_t req, const Status& st, const std::string& value, size_t size) {
  if (!st.ok()) return ReplyErr(req, st);
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (value.size() > size) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

std::string TransportText(const FuseContext* ctx) {
  const FuseUring* u = ctx->wire.transport;
  if (u != nullptr && ctx->wire.uring.load()) return u->Describe();
  if (!ctx->options.io_uring) return "/dev/fuse (io_uring not asked for: -o io_uring)";
  if (!ctx->wire.init_offers_uring.load()) {
    return "/dev/fuse (the kernel offers no io_uring: fuse module parameter enable_uring is off "
           "or the kernel predates 6.14)";
  }
  return "/dev/fuse (io_uring could not be prepared)";
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Guard(req, [&] {
    std::string value;
    Status st = Fs(req)->GetXattr(ino, name, &value);
    if (st.ok() && ino == Filesystem::kRootIno && std::string_view(name) == "sepfs.stats") {
      value += "fuse transport: " + TransportText(Ctx(req)) + "\n";
    }
    ReplyXattr(req, st, value, size);
  });
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Guard(req, [&] {
    std::string names;
    Status st = Fs(req)->ListXattr(ino, &names);
    if (st.ok() && fuse_req_ctx(req)->uid != 0) {
      // As ext4: trusted.* names are listed to privileged callers only.
      // ListXattr ends every name with a NUL.
      std::string shown;
      for (size_t at = 0, end; at < names.size(); at = end + 1) {
        end = names.find('\0', at);
        const std::string_view n(names.data() + at, end - at);
        if (!n.starts_with("trusted.")) shown.append(n).push_back('\0');
      }
      names.swap(shown);
    }
    ReplyXattr(req, st, names, size);
  });
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Guard(req, [&] { ReplyErr(req, Fs(req)->RemoveXattr(ino, name)); });
}

void OpAccess(fuse_req_t req, fuse_ino_t ino, int mask) {
  Guard(req, [&] {
    kv::InodeRecord r;
    Status st = Fs(req)->GetAttr(ino, &r);
    if (!st.ok()) return ReplyErr(req, st);
    const fuse_ctx* c = fuse_req_ctx(req);
    int err = 0;
    if (c->uid == 0) {
      // As for root on Linux: everything but executing a file with no
      // execute bit at all.
      if ((mask & X_OK) && !S_ISDIR(r.mode) && (r.mode & 0111) == 0) err = EACCES;
    } else if (mask != F_OK) {
      uint32_t bits = r.mode & 07;
      if (c->uid == r.uid) {
        bits = (r.mode >> 6) & 07;
      } else if (c->gid == r.gid) {
        bits = (r.mode >> 3) & 07;
      }
      if ((mask & bits) != static_cast<uint32_t>(mask)) err = EACCES;
    }
    fuse_reply_err(req, err);
  });
}

void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                 struct fuse_file_info*) {
  Guard(req, [&] {
    if (off < 0 || len <= 0) return ReplyErr(req, Status::InvalidArgument("range"));
    // Under KILLPRIV_V2 the kernel leaves clearing the set-id bits to the
    // server, but FALLOCATE carries no flag saying the caller lacks
    // CAP_FSETID (as a WRITE does): judge by the caller, root standing in
    // for it. Without KILLPRIV_V2 the kernel clears them itself first.
    WriteEffects fx{
        .kill_suidgid = Ctx(req)->wire.killpriv_v2.load() && fuse_req_ctx(req)->uid != 0,
        .kernel_times = Ctx(req)->writeback_cache.load()};
    if (fx.kill_suidgid) fx.setid = SetidCallerOf(req);
    bool cleared = false;
    const Status st = Fs(req)->Fallocate(ino, mode, static_cast<uint64_t>(off),
                                         static_cast<uint64_t>(len), fx, &cleared);
    // The kernel keeps its cached mode otherwise (see OpWrite).
    if (cleared) InvalidateKernelCache(req, ino, /*pages=*/false);
    ReplyErr(req, st);
  });
}

struct fuse_lowlevel_ops MakeOps() {
  struct fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OpInit;
  ops.destroy = OpDestroy;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.forget_multi = OpForgetMulti;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.symlink = OpSymlink;
  ops.rename = OpRename;
  ops.link = OpLink;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  ops.access = OpAccess;
  ops.create = OpCreate;
  ops.fallocate = OpFallocate;
  // No lseek: the kernel sends SEEK_DATA/SEEK_HOLE without writing back
  // its dirty pages (the writeback cache's, or a shared mapping's with
  // nowriteback), so holes answered from the stored blocks made `cp` copy
  // zeros over written data. Without it the kernel answers from its own
  // size: the whole file is data, as POSIX allows.
  return ops;
}

}  // namespace

const struct fuse_lowlevel_ops* SepfsFuseOps() {
  static const struct fuse_lowlevel_ops ops = MakeOps();
  return &ops;
}

}  // namespace sepfs::fs
