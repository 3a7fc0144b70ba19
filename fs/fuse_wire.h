// A thin shim on the /dev/fuse byte stream, for the three things libfuse 3.14
// cannot express:
//  - offering FUSE_HANDLE_KILLPRIV_V2 in the INIT reply. With it the kernel
//    marks the superblock SB_NOSEC, so a write() to a file without
//    security.capability no longer costs a GETXATTR round trip each time
//    (measured: one per write syscall without it);
//  - passing the request's "kill suid/sgid" flags (FUSE_WRITE_KILL_SUIDGID,
//    FUSE_OPEN_KILL_SUIDGID, FATTR_KILL_SUIDGID), which libfuse drops, to the
//    handler that then owns that duty;
//  - accepting FUSE_OVER_IO_URING in the INIT reply when the session has an
//    io_uring transport ready (fs/fuse_uring.h), starting it once the kernel
//    has the reply, and handing it the replies to the requests it carried.
// The shim reads and writes the device with read(2)/writev(2) exactly as
// libfuse does; it only inspects headers and flips one bit of one reply.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>

namespace sepfs::fs {

class FuseUring;

struct WireState {
  bool offer_killpriv_v2 = true;  // set before the session starts
  FuseUring* transport = nullptr;  // io_uring offered when set; set before the session starts
  std::atomic<uint64_t> init_unique{0};
  std::atomic<bool> init_seen{false};
  std::atomic<bool> init_offers_killpriv_v2{false};
  std::atomic<bool> init_offers_uring{false};
  std::atomic<bool> killpriv_v2{false};  // the kernel accepted the offer
  std::atomic<bool> uring{false};         // the INIT reply accepted io_uring
};

// Flags of the request the calling worker thread is handling. libfuse
// receives and dispatches a request on the same thread, so the shim's read
// hook fills this and the handler reads it.
struct RequestWireFlags {
  bool kill_suidgid = false;
};
const RequestWireFlags& CurrentWireFlags();

// Routes the session's device I/O through the shim. Call after
// fuse_session_mount(); the session's userdata must be a FuseContext, whose
// `wire` member holds the state. Returns 0 or a negative errno.
int InstallWireShim(struct fuse_session* se);

// Copies `n` bytes at logical offset `off` of the iovec chain to (write) or
// from `p`; false when the chain is shorter.
bool IovAccess(struct iovec* iov, int count, size_t off, void* p, size_t n, bool write);

// The pure parts, for tests: inspect one request (updates the thread's
// flags and `state`), and patch one reply in place. PatchReply returns true
// for the INIT reply that accepts io_uring (the transport starts once the
// kernel has taken it).
void InspectRequest(const void* buf, size_t len, WireState* state);
bool PatchReply(struct iovec* iov, int count, WireState* state);

}  // namespace sepfs::fs
