// A thin shim on the /dev/fuse byte stream, for the two things libfuse 3.14
// cannot express:
//  - offering FUSE_HANDLE_KILLPRIV_V2 in the INIT reply. With it the kernel
//    marks the superblock SB_NOSEC, so a write() to a file without
//    security.capability no longer costs a GETXATTR round trip each time
//    (measured: one per write syscall without it);
//  - passing the request's "kill suid/sgid" flags (FUSE_WRITE_KILL_SUIDGID,
//    FUSE_OPEN_KILL_SUIDGID, FATTR_KILL_SUIDGID), which libfuse drops, to the
//    handler that then owns that duty.
// The shim reads and writes the device with read(2)/writev(2) exactly as
// libfuse does; it only inspects headers and flips one bit of one reply.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstdint>

namespace sepfs::fs {

struct WireState {
  bool offer_killpriv_v2 = true;  // set before the session starts
  std::atomic<uint64_t> init_unique{0};
  std::atomic<bool> init_seen{false};
  std::atomic<bool> killpriv_v2{false};  // the kernel accepted the offer
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

// The pure parts, for tests: inspect one request (updates the thread's
// flags and `state`), and patch one reply in place.
void InspectRequest(const void* buf, size_t len, WireState* state);
void PatchReply(struct iovec* iov, int count, WireState* state);

}  // namespace sepfs::fs
