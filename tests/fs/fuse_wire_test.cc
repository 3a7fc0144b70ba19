// The /dev/fuse shim: which requests carry "kill set-id bits", and the one
// reply it patches (INIT, to accept FUSE_HANDLE_KILLPRIV_V2 and
// FUSE_OVER_IO_URING).
#include "fs/fuse_wire.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <sys/uio.h>

#include <cstring>
#include <vector>

#include "fs/fuse_uring.h"

namespace sepfs::fs {
namespace {

template <typename Body>
std::vector<char> Request(uint32_t opcode, uint64_t unique, const Body& body) {
  fuse_in_header h{};
  h.len = sizeof(h) + sizeof(body);
  h.opcode = opcode;
  h.unique = unique;
  std::vector<char> buf(h.len);
  std::memcpy(buf.data(), &h, sizeof(h));
  std::memcpy(buf.data() + sizeof(h), &body, sizeof(body));
  return buf;
}

struct InitReply {
  fuse_out_header h{};
  fuse_init_out out{};
  std::vector<struct iovec> Iov() {  // header and body apart, as libfuse sends them
    return {{&h, sizeof(h)}, {&out, sizeof(out)}};
  }
};

InitReply ReplyTo(uint64_t unique, uint32_t flags) {
  InitReply r;
  r.h.len = sizeof(r.h) + sizeof(r.out);
  r.h.unique = unique;
  r.out.major = 7;
  r.out.flags = flags;
  return r;
}

std::vector<char> Init(uint64_t unique, uint32_t flags, uint32_t flags2 = 0) {
  fuse_init_in in{};
  in.major = 7;
  in.minor = 38;
  in.flags = flags;
  in.flags2 = flags2;
  return Request(FUSE_INIT, unique, in);
}

TEST(FuseWireTest, AcceptsKillprivV2OnlyWhenTheKernelOffersIt) {
  WireState s;
  auto init = Init(7, FUSE_HANDLE_KILLPRIV_V2 | FUSE_ASYNC_READ);
  InspectRequest(init.data(), init.size(), &s);
  InitReply other = ReplyTo(8, FUSE_ASYNC_READ);  // not the INIT reply
  auto iov = other.Iov();
  PatchReply(iov.data(), static_cast<int>(iov.size()), &s);
  EXPECT_EQ(other.out.flags, static_cast<uint32_t>(FUSE_ASYNC_READ));
  EXPECT_FALSE(s.killpriv_v2.load());

  InitReply r = ReplyTo(7, FUSE_ASYNC_READ);
  iov = r.Iov();
  PatchReply(iov.data(), static_cast<int>(iov.size()), &s);
  EXPECT_EQ(r.out.flags, static_cast<uint32_t>(FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV_V2));
  EXPECT_TRUE(s.killpriv_v2.load());

  WireState old_kernel;
  init = Init(1, FUSE_ASYNC_READ);
  InspectRequest(init.data(), init.size(), &old_kernel);
  r = ReplyTo(1, FUSE_ASYNC_READ);
  iov = r.Iov();
  PatchReply(iov.data(), static_cast<int>(iov.size()), &old_kernel);
  EXPECT_EQ(r.out.flags, static_cast<uint32_t>(FUSE_ASYNC_READ));
  EXPECT_FALSE(old_kernel.killpriv_v2.load());

  WireState refused;
  refused.offer_killpriv_v2 = false;  // -o nokillpriv
  init = Init(1, FUSE_HANDLE_KILLPRIV_V2);
  InspectRequest(init.data(), init.size(), &refused);
  r = ReplyTo(1, 0);
  iov = r.Iov();
  PatchReply(iov.data(), static_cast<int>(iov.size()), &refused);
  EXPECT_EQ(r.out.flags, 0u);
  EXPECT_FALSE(refused.killpriv_v2.load());

  WireState failed;
  init = Init(3, FUSE_HANDLE_KILLPRIV_V2);
  InspectRequest(init.data(), init.size(), &failed);
  InitReply err = ReplyTo(3, 0);
  err.h.error = -EPROTO;
  err.h.len = sizeof(err.h);  // an error reply has no body
  iov = err.Iov();
  PatchReply(iov.data(), 1, &failed);
  EXPECT_FALSE(failed.killpriv_v2.load());
}

// PatchReply only needs to know that a transport exists: a stand-in
// address, never dereferenced.
FuseUring* StandInTransport() {
  static char stand_in;
  return reinterpret_cast<FuseUring*>(&stand_in);
}

// Passes an INIT request (flags, flags2) and its reply through the shim:
// the reply's flags2 as patched, and whether the transport is to start.
struct Negotiated {
  uint32_t flags2;
  bool start;
};
Negotiated Negotiate(WireState* s, uint64_t unique, uint32_t flags, uint32_t flags2) {
  auto init = Init(unique, flags, flags2);
  InspectRequest(init.data(), init.size(), s);
  InitReply r = ReplyTo(unique, FUSE_INIT_EXT | FUSE_ASYNC_READ);
  auto iov = r.Iov();
  const bool start = PatchReply(iov.data(), static_cast<int>(iov.size()), s);
  return {r.out.flags2, start};
}

TEST(FuseWireTest, AcceptsIoUringOnlyWithATransportAndTheKernelsOffer) {
  const uint32_t ext = FUSE_INIT_EXT | FUSE_ASYNC_READ;
  WireState s;
  s.transport = StandInTransport();
  Negotiated n = Negotiate(&s, 5, ext, kInitFlags2OverIoUring);
  EXPECT_TRUE(n.start);
  EXPECT_EQ(n.flags2, kInitFlags2OverIoUring);
  EXPECT_TRUE(s.uring.load());
  // One INIT per session: a later reply with the same unique is left alone.
  InitReply again = ReplyTo(5, ext);
  auto iov = again.Iov();
  EXPECT_FALSE(PatchReply(iov.data(), static_cast<int>(iov.size()), &s));
  EXPECT_EQ(again.out.flags2, 0u);

  // The kernel does not offer it (enable_uring off, or older than 6.14).
  WireState not_offered;
  not_offered.transport = StandInTransport();
  n = Negotiate(&not_offered, 6, ext, 0);
  EXPECT_FALSE(n.start);
  EXPECT_EQ(n.flags2, 0u);
  EXPECT_FALSE(not_offered.uring.load());

  // No transport (io_uring not asked for, or it could not be prepared).
  WireState none;
  n = Negotiate(&none, 7, ext, kInitFlags2OverIoUring);
  EXPECT_FALSE(n.start);
  EXPECT_EQ(n.flags2, 0u);

  // Without FUSE_INIT_EXT in the request's flags, its flags2 means nothing.
  WireState no_ext;
  no_ext.transport = StandInTransport();
  n = Negotiate(&no_ext, 8, FUSE_ASYNC_READ, kInitFlags2OverIoUring);
  EXPECT_FALSE(n.start);
  EXPECT_EQ(n.flags2, 0u);
}

TEST(FuseWireTest, KillFlagsFollowTheRequestOnThisThread) {
  WireState s;
  fuse_write_in w{};
  w.write_flags = FUSE_WRITE_KILL_SUIDGID;
  auto req = Request(FUSE_WRITE, 10, w);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_TRUE(CurrentWireFlags().kill_suidgid);

  w.write_flags = FUSE_WRITE_CACHE;
  req = Request(FUSE_WRITE, 11, w);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_FALSE(CurrentWireFlags().kill_suidgid);

  fuse_open_in o{};
  o.open_flags = FUSE_OPEN_KILL_SUIDGID;
  req = Request(FUSE_OPEN, 12, o);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_TRUE(CurrentWireFlags().kill_suidgid);

  fuse_getattr_in g{};  // any other request clears the flags
  req = Request(FUSE_GETATTR, 13, g);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_FALSE(CurrentWireFlags().kill_suidgid);

  fuse_setattr_in a{};
  a.valid = FATTR_SIZE | FATTR_KILL_SUIDGID;
  req = Request(FUSE_SETATTR, 14, a);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_TRUE(CurrentWireFlags().kill_suidgid);

  // A truncated request (shorter than its body) is not misread.
  req.resize(sizeof(fuse_in_header) + 4);
  InspectRequest(req.data(), req.size(), &s);
  EXPECT_FALSE(CurrentWireFlags().kill_suidgid);
}

}  // namespace
}  // namespace sepfs::fs
