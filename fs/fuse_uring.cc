#include "fs/fuse_uring.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <sstream>
#include <thread>

#include "fs/fuse_wire.h"
#include "fs/uring.h"
#include "vlog/aligned_buffer.h"

namespace sepfs::fs {

namespace {

// The kernel's ABI (include/uapi/linux/fuse.h, protocol 7.42); Debian's
// headers predate it.
struct UringEntInOut {
  uint64_t flags;
  uint64_t commit_id;  // the request's unique
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
struct UringReqHeader {
  char in_out[128];  // fuse_in_header in, fuse_out_header out
  char op_in[128];   // the request's first argument
  UringEntInOut ring_ent_in_out;
};
static_assert(sizeof(UringReqHeader) == 288);
struct UringCmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;

constexpr uint64_t kUserEntry = 1;  // the entry's command completed
constexpr uint64_t kUserStop = 2;   // Stop()'s wake-up
// Room before the payload for the rebuilt fuse_in_header and first argument.
constexpr size_t kPrefix = 4096;
constexpr size_t kMinPayload = 32 * 4096;  // FUSE_DEFAULT_MAX_PAGES_PER_REQ pages
// An idle handoff after which the thread ran again only this much later
// means other tasks were runnable on its CPU (a lone caller gives it back
// within tens of microseconds); the next kHandoffBackoff replies then go
// out at normal priority.
constexpr auto kHandoffStall = std::chrono::microseconds(200);
constexpr unsigned kHandoffBackoff = 256;

bool ConnectionEnded(int res) {
  return res == -ENOTCONN || res == -ECONNABORTED || res == -ECANCELED || res == -ENODEV;
}

size_t IovTotal(const struct iovec* iov, int count) {
  size_t n = 0;
  for (int i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// Pins the calling thread to `cpu`. An offline CPU cannot be pinned to; its
// queue then serves from anywhere.
void PinTo(unsigned cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace

struct FuseUring::Entry {
  uint16_t qid = 0;
  std::unique_ptr<Uring> ring;
  std::mutex sq_mu;  // the ring's submissions: its thread, Stop, a reply from elsewhere
  UringReqHeader header{};
  vlog::AlignedBuffer area;  // kPrefix bytes, then the payload
  char* payload = nullptr;
  struct iovec iov[2]{};
  uint32_t last_cmd = kCmdRegister;
  uint64_t last_commit = 0;
  // Set by a reply from the entry's own thread: the commit goes with the
  // thread's next wait, one system call for both.
  bool commit_pending = false;
  uint64_t pending_unique = 0;
  // The unique of the request its handler is serving; 0 when none.
  std::atomic<uint64_t> unique{0};
  // Replies to commit at normal priority before the thread tries the idle
  // handoff again (Serve).
  unsigned handoff_backoff = 0;
  std::thread thread;
};

namespace {
thread_local FuseUring::Entry* t_entry = nullptr;
}  // namespace

unsigned PossibleCpus() {
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string line;
  if (!std::getline(f, line)) return 0;
  // A list of ranges, "0-1" or "0,2-5": counted, as num_possible_cpus().
  unsigned count = 0;
  std::stringstream ss(line);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const size_t dash = part.find('-');
    try {
      const unsigned first = static_cast<unsigned>(std::stoul(part.substr(0, dash)));
      const unsigned last = dash == std::string::npos
                                ? first
                                : static_cast<unsigned>(std::stoul(part.substr(dash + 1)));
      if (last < first) return 0;
      count += last - first + 1;
    } catch (...) {
      return 0;
    }
  }
  return count;
}

namespace {

// Whether this process may go to SCHED_IDLE and come back (CAP_SYS_NICE or
// RLIMIT_NICE >= 20), tried on a scratch thread.
bool CanReturnFromIdle() {
  bool ok = false;
  try {
    std::thread t([&ok] {
      struct sched_param sp{};
      ok = sched_setscheduler(0, SCHED_IDLE, &sp) == 0 &&
           sched_setscheduler(0, SCHED_OTHER, &sp) == 0;
    });
    t.join();
  } catch (...) {
    return false;
  }
  return ok;
}

}  // namespace

Status FuseUring::Prepare(struct fuse_session* se, int dev_fd, WireState* wire,
                          const Options& options, std::unique_ptr<FuseUring>* out) {
  const unsigned queues = PossibleCpus();
  if (queues == 0 || queues > 1024) {
    return Status::IOError("io_uring: cannot read the possible CPUs");
  }
  std::unique_ptr<FuseUring> u(new FuseUring());
  u->se_ = se;
  // Its own descriptor: libfuse closes the session's at unmount, while
  // commits may still be under way.
  u->dev_fd_ = ::fcntl(dev_fd, F_DUPFD_CLOEXEC, 0);
  if (u->dev_fd_ < 0) return Status::FromErrno(errno, "io_uring: duplicate /dev/fuse");
  u->wire_ = wire;
  u->queues_ = queues;
  u->idle_handoff_ = options.idle_handoff && CanReturnFromIdle();
  const size_t page = static_cast<size_t>(std::max(4096L, ::sysconf(_SC_PAGESIZE)));
  // The kernel refuses an entry whose payload is smaller than max_write,
  // max_pages pages, or 8 KiB. max_pages is at least its default of 32 and,
  // with libfuse 3.14, covers max_write.
  u->payload_bytes_ =
      (std::max<size_t>(options.max_write, kMinPayload) + page - 1) / page * page;
  const unsigned per_queue = std::max(1u, options.threads_per_queue);
  for (unsigned q = 0; q < queues; ++q) {
    for (unsigned t = 0; t < per_queue; ++t) {
      auto e = std::make_unique<Entry>();
      e->qid = static_cast<uint16_t>(q);
      // Room for the entry's command plus Stop()'s wake-up and a reply
      // from another thread.
      Status st = Uring::Open(4, &e->ring);
      if (!st.ok()) return st;
      try {
        e->area.resize(kPrefix + u->payload_bytes_);
      } catch (const std::bad_alloc&) {
        return Status::FromErrno(ENOMEM, "io_uring: buffers");
      }
      e->payload = e->area.data() + kPrefix;
      e->iov[0] = {&e->header, sizeof(UringReqHeader)};
      e->iov[1] = {e->payload, u->payload_bytes_};
      u->entries_.push_back(std::move(e));
    }
  }
  *out = std::move(u);
  return Status::OK();
}

FuseUring::~FuseUring() {
  Stop();
  if (dev_fd_ >= 0) ::close(dev_fd_);
}

Status FuseUring::Launch() {
  try {
    for (auto& e : entries_) {
      Entry* raw = e.get();
      raw->thread = std::thread([this, raw] {
        if (AwaitStart()) Serve(raw);
      });
    }
  } catch (const std::exception& ex) {
    Stop();
    return Status::IOError(std::string("io_uring: cannot start its threads: ") + ex.what());
  }
  return Status::OK();
}

bool FuseUring::AwaitStart() {
  std::unique_lock<std::mutex> l(start_mu_);
  start_cv_.wait(l, [this] { return started_.load() || stopped_.load(); });
  return !stopped_.load();
}

void FuseUring::Start() {
  {
    std::lock_guard<std::mutex> l(start_mu_);
    if (stopped_.load()) return;
    started_.store(true);
  }
  start_cv_.notify_all();
}

void FuseUring::Stop() {
  {
    std::lock_guard<std::mutex> l(start_mu_);
    if (stopped_.exchange(true)) return;
  }
  start_cv_.notify_all();
  for (auto& e : entries_) {
    if (!e->thread.joinable()) continue;
    {
      std::lock_guard<std::mutex> l(e->sq_mu);
      if (io_uring_sqe* sqe = e->ring->Prepare()) {
        sqe->opcode = IORING_OP_NOP;
        sqe->user_data = kUserStop;
        (void)e->ring->Submit();
      }
    }
    e->thread.join();
  }
}

void FuseUring::SubmitCommand(Entry* e, uint32_t cmd_op, uint64_t commit_id, bool now) {
  std::lock_guard<std::mutex> l(e->sq_mu);
  e->last_cmd = cmd_op;
  e->last_commit = commit_id;
  io_uring_sqe* sqe = e->ring->Prepare();
  if (sqe == nullptr) {  // cannot happen: one command in flight per entry
    (void)e->ring->Submit();
    sqe = e->ring->Prepare();
    if (sqe == nullptr) return;
  }
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = dev_fd_;
  sqe->cmd_op = cmd_op;
  sqe->user_data = kUserEntry;
  if (cmd_op == kCmdRegister) {
    sqe->addr = reinterpret_cast<uint64_t>(e->iov);
    sqe->len = 2;
  }
  UringCmdReq req{};
  req.qid = e->qid;
  req.commit_id = commit_id;
  std::memcpy(sqe->cmd, &req, sizeof(req));
  if (now) {
    (void)e->ring->Submit();
  } else {
    e->ring->Publish();  // the thread's next Wait submits it
  }
}

void FuseUring::Serve(Entry* e) {
  PinTo(e->qid);
  SubmitCommand(e, kCmdRegister, 0, /*now=*/false);
  for (;;) {
    // Submits the entry's command (a commit, or a first REGISTER) and waits.
    const int w = e->ring->Wait();
    if (w == -EAGAIN || w == -ENOMEM || w == -EBUSY) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (w < 0 && w != -EINTR) {
      std::fprintf(stderr, "sepfs: io_uring wait: %s\n", std::strerror(-w));
      return;
    }
    io_uring_cqe cqe;
    bool replied = false;
    while (e->ring->Reap(&cqe)) {
      if (cqe.user_data == kUserStop) {
        std::lock_guard<std::mutex> l(e->sq_mu);
        (void)e->ring->Submit();  // a reply published just before
        return;
      }
      if (cqe.res == 0) {
        Handle(e);
        if (e->commit_pending) {
          e->commit_pending = false;
          SubmitCommand(e, kCmdCommitAndFetch, e->pending_unique, /*now=*/false);
          replied = true;
        }
        continue;
      }
      if (ConnectionEnded(cqe.res)) return;
      if (cqe.res == -EINTR || cqe.res == -EAGAIN) {
        SubmitCommand(e, e->last_cmd, e->last_commit, /*now=*/false);
        continue;
      }
      // A refused REGISTER makes the kernel fall back to /dev/fuse for the
      // whole connection; note the first cause for the statistics.
      int expected = 0;
      first_error_.compare_exchange_strong(expected, -cqe.res);
      failed_.fetch_add(1);
      if (e->last_cmd == kCmdCommitAndFetch) {
        // The reply was refused (its request is gone): offer the entry again.
        SubmitCommand(e, kCmdRegister, 0, /*now=*/false);
        continue;
      }
      return;
    }
    if (replied && idle_handoff_.load(std::memory_order_relaxed)) HandOff(e);
  }
}

void FuseUring::HandOff(Entry* e) {
  // Otherwise the commit goes with the next Wait, at normal priority.
  if (e->handoff_backoff > 0) {
    e->handoff_backoff--;
    return;
  }
  struct sched_param sp{};
  if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0) return;
  handoffs_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> l(e->sq_mu);
    (void)e->ring->Submit();  // wakes the caller, which runs here at once
  }
  // Back here once this CPU had nothing else to run: soon if the caller
  // was alone (it sent its next request, or slept); a slice or more if
  // other tasks kept the CPU busy, and then the thread would be starved
  // again at every reply. It stays at normal priority for a while.
  const auto away = std::chrono::steady_clock::now() - start;
  if (sched_setscheduler(0, SCHED_OTHER, &sp) != 0 && idle_handoff_.exchange(false)) {
    // Checked at Prepare, so not expected: no thread goes idle again.
    std::fprintf(stderr, "sepfs: io_uring idle handoff off: %s\n", std::strerror(errno));
  }
  if (away > kHandoffStall) {
    handoff_stalls_.fetch_add(1, std::memory_order_relaxed);
    e->handoff_backoff = kHandoffBackoff;
  }
}

void FuseUring::Handle(Entry* e) {
  fuse_in_header in;
  std::memcpy(&in, e->header.in_out, sizeof(in));
  const UringEntInOut io = e->header.ring_ent_in_out;
  const size_t fixed = sizeof(fuse_in_header);
  // in.len counts every argument; the first sits in op_in, the rest in the
  // payload.
  if (in.len < fixed + io.payload_sz || io.payload_sz > payload_bytes_ ||
      in.len - fixed - io.payload_sz > sizeof(e->header.op_in)) {
    return FailRequest(e, io.commit_id);
  }
  const size_t op_len = in.len - fixed - io.payload_sz;
  char* start = e->payload - fixed - op_len;
  std::memcpy(start, &in, fixed);
  std::memcpy(start + fixed, e->header.op_in, op_len);
  requests_.fetch_add(1, std::memory_order_relaxed);
  e->unique.store(in.unique);
  t_entry = e;
  InspectRequest(start, in.len, wire_);
  struct fuse_buf buf{};
  buf.size = in.len;
  buf.mem = start;
  fuse_session_process_buf(se_, &buf);
  t_entry = nullptr;
  if (e->unique.load() == in.unique) {
    // Every handler replies before it returns; should one not, its caller
    // gets EIO rather than the entry being lost.
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      std::fprintf(stderr, "sepfs: io_uring: request %u got no reply\n", in.opcode);
    }
    e->unique.store(0);
    FailRequest(e, in.unique);
  }
}

void FuseUring::FailRequest(Entry* e, uint64_t unique) {
  const fuse_out_header out{sizeof(fuse_out_header), -EIO, unique};
  std::memcpy(e->header.in_out, &out, sizeof(out));
  e->header.ring_ent_in_out.payload_sz = 0;
  e->commit_pending = true;  // committed by Serve
  e->pending_unique = unique;
}

bool FuseUring::Reply(struct iovec* iov, int count, ssize_t* result) {
  fuse_out_header out;
  const size_t total = IovTotal(iov, count);
  if (total < sizeof(out)) return false;
  if (!IovAccess(iov, count, 0, &out, sizeof(out), /*write=*/false)) return false;
  if (out.unique == 0) return false;  // a notification: /dev/fuse only
  Entry* e = t_entry;
  if (e == nullptr || e->unique.load() != out.unique) {
    e = nullptr;
    for (auto& c : entries_) {
      if (c->unique.load() == out.unique) {
        e = c.get();
        break;
      }
    }
    if (e == nullptr) return false;
  }
  const size_t body = total - sizeof(out);
  if (body > payload_bytes_) {
    out.error = -EIO;
    *result = -EINVAL;
  } else {
    (void)IovAccess(iov, count, sizeof(out), e->payload, body, /*write=*/false);
    *result = static_cast<ssize_t>(total);
  }
  std::memcpy(e->header.in_out, &out, sizeof(out));
  e->header.ring_ent_in_out.payload_sz = out.error == 0 ? static_cast<uint32_t>(body) : 0;
  e->unique.store(0);
  if (e == t_entry) {
    e->commit_pending = true;
    e->pending_unique = out.unique;
  } else {
    SubmitCommand(e, kCmdCommitAndFetch, out.unique, /*now=*/true);
  }
  return true;
}

std::string FuseUring::Describe() const {
  std::ostringstream s;
  s << "io_uring, " << queues_ << " queues x " << entries_.size() / std::max(1u, queues_)
    << " threads, " << requests() << " requests";
  if (idle_handoff_.load()) {
    s << ", idle handoff on " << handoffs_.load() << " replies (" << handoff_stalls_.load()
      << " stalled)";
  }
  if (const unsigned f = failed_.load()) {
    s << ", " << f << " commands refused (" << std::strerror(first_error_.load()) << ")";
  }
  return s.str();
}

}  // namespace sepfs::fs
