#include "fs/fuse_wire.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "fs/fuse_ops.h"
#include "fs/fuse_uring.h"

namespace sepfs::fs {

namespace {

thread_local RequestWireFlags t_flags;

template <typename T>
bool ReadAt(const void* buf, size_t len, size_t off, T* out) {
  if (off > len || len - off < sizeof(T)) return false;
  std::memcpy(out, static_cast<const char*>(buf) + off, sizeof(T));
  return true;
}

// Whether the request body (after the header) is an In whose `field` has
// `bit` set; false for a body too short to hold an In.
template <typename In>
bool BodyHasFlag(const void* buf, size_t len, uint32_t In::*field, uint32_t bit) {
  In in;
  return ReadAt(buf, len, sizeof(fuse_in_header), &in) && (in.*field & bit) != 0;
}

ssize_t ShimRead(int fd, void* buf, size_t len, void* userdata) {
  const ssize_t n = ::read(fd, buf, len);
  if (n > 0) {
    InspectRequest(buf, static_cast<size_t>(n), &static_cast<FuseContext*>(userdata)->wire);
  } else if (n < 0 && errno == ECONNABORTED) {
    // The connection was aborted (fusectl abort) rather than unmounted: the
    // kernel serves no more requests either way, so end the session as at
    // an unmount (ENODEV), and the store is closed cleanly. libfuse would
    // otherwise stop with an error and the daemon exit with status 1.
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      std::fprintf(stderr, "sepfs: the kernel aborted the FUSE connection; closing the store\n");
    }
    errno = ENODEV;
  }
  return n;
}

ssize_t ShimWritev(int fd, struct iovec* iov, int count, void* userdata) {
  WireState* state = &static_cast<FuseContext*>(userdata)->wire;
  if (state->transport != nullptr) {
    ssize_t res;
    if (state->transport->Reply(iov, count, &res)) {
      if (res >= 0) return res;
      errno = static_cast<int>(-res);
      return -1;
    }
  }
  const bool start_uring = PatchReply(iov, count, state);
  const ssize_t n = ::writev(fd, iov, count);
  if (start_uring && n >= 0) state->transport->Start();
  return n;
}

}  // namespace

const RequestWireFlags& CurrentWireFlags() { return t_flags; }

bool IovAccess(struct iovec* iov, int count, size_t off, void* p, size_t n, bool write) {
  for (int i = 0; i < count && n > 0; ++i) {
    if (off >= iov[i].iov_len) {
      off -= iov[i].iov_len;
      continue;
    }
    const size_t k = std::min(n, iov[i].iov_len - off);
    char* base = static_cast<char*>(iov[i].iov_base) + off;
    if (write) {
      std::memcpy(base, p, k);
    } else {
      std::memcpy(p, base, k);
    }
    p = static_cast<char*>(p) + k;
    n -= k;
    off = 0;
  }
  return n == 0;
}

void InspectRequest(const void* buf, size_t len, WireState* state) {
  t_flags = RequestWireFlags{};
  fuse_in_header h;
  if (!ReadAt(buf, len, 0, &h)) return;
  const size_t body = sizeof(h);
  switch (h.opcode) {
    case FUSE_INIT: {
      fuse_init_in in{};
      // Old kernels send a shorter fuse_init_in; flags sit in its first 16
      // bytes, flags2 (7.36+) after them.
      std::memcpy(&in, static_cast<const char*>(buf) + body,
                  std::min(len - body, offsetof(fuse_init_in, flags2) + sizeof(in.flags2)));
      if (len - body < offsetof(fuse_init_in, flags2)) in.flags = 0;
      const bool ext = (in.flags & FUSE_INIT_EXT) != 0;
      state->init_unique.store(h.unique);
      state->init_offers_killpriv_v2.store((in.flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
      state->init_offers_uring.store(ext && (in.flags2 & kInitFlags2OverIoUring) != 0);
      state->init_seen.store(true);
      break;
    }
    case FUSE_WRITE:
      t_flags.kill_suidgid =
          BodyHasFlag(buf, len, &fuse_write_in::write_flags, FUSE_WRITE_KILL_SUIDGID);
      break;
    case FUSE_OPEN:
      t_flags.kill_suidgid =
          BodyHasFlag(buf, len, &fuse_open_in::open_flags, FUSE_OPEN_KILL_SUIDGID);
      break;
    case FUSE_SETATTR:
      t_flags.kill_suidgid = BodyHasFlag(buf, len, &fuse_setattr_in::valid, FATTR_KILL_SUIDGID);
      break;
    default:
      break;
  }
}

bool PatchReply(struct iovec* iov, int count, WireState* state) {
  if (!state->init_seen.load()) return false;
  fuse_out_header h;
  if (!IovAccess(iov, count, 0, &h, sizeof(h), false)) return false;
  if (h.unique != state->init_unique.load()) return false;
  state->init_seen.store(false);  // one INIT per session
  if (h.error != 0) return false;
  const size_t at = sizeof(h) + offsetof(fuse_init_out, flags);
  uint32_t flags;
  if (h.len < at + sizeof(flags) || !IovAccess(iov, count, at, &flags, sizeof(flags), false)) {
    return false;
  }
  if (state->offer_killpriv_v2 && state->init_offers_killpriv_v2.load()) {
    flags |= FUSE_HANDLE_KILLPRIV_V2;
    if (IovAccess(iov, count, at, &flags, sizeof(flags), true)) state->killpriv_v2.store(true);
  }
  const size_t at2 = sizeof(h) + offsetof(fuse_init_out, flags2);
  uint32_t flags2;
  if (state->transport == nullptr || !state->init_offers_uring.load() ||
      (flags & FUSE_INIT_EXT) == 0 || h.len < at2 + sizeof(flags2) ||
      !IovAccess(iov, count, at2, &flags2, sizeof(flags2), false)) {
    return false;
  }
  flags2 |= kInitFlags2OverIoUring;
  if (!IovAccess(iov, count, at2, &flags2, sizeof(flags2), true)) return false;
  state->uring.store(true);
  return true;
}

int InstallWireShim(struct fuse_session* se) {
  struct fuse_custom_io io{};
  io.read = ShimRead;
  io.writev = ShimWritev;
  return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

}  // namespace sepfs::fs
