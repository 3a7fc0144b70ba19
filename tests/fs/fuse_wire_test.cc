// The /dev/fuse shim: which requests carry "kill set-id bits", and the one
// reply it patches (INIT, to accept FUSE_HANDLE_KILLPRIV_V2).
#include "fs/fuse_wire.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <sys/uio.h>

#include <cstring>
#include <vector>

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

std::vector<char> Init(uint64_t unique, uint32_t flags) {
  fuse_init_in in{};
  in.major = 7;
  in.minor = 38;
  in.flags = flags;
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
