// FUSE requests over io_uring (Linux 6.14+, with the fuse module's
// enable_uring parameter on), beside the /dev/fuse loop libfuse 3.14 runs.
// Used with -o io_uring; off by default because streaming reads and writes
// lose the second CPU (docs/design.md, "Requests over io_uring").
//
// Why: over /dev/fuse a request wakes whichever worker thread waits, often
// on the other CPU, whose vCPU is halted on these VMs; a round trip then
// costs 150-300 us (bench/RESULTS.md, "What one FUSE round trip costs").
// Over io_uring the kernel queues a request on the queue of the CPU the
// caller runs on, and that queue's threads are pinned to that CPU: the
// request is served, and the caller woken, without leaving it.
//
// The kernel's protocol (fs/fuse/dev_uring.c): one queue per possible CPU;
// the server registers ring entries on each queue, each entry a 288-byte
// header buffer and a payload buffer of at least max_write bytes, with an
// IORING_OP_URING_CMD REGISTER. A request arrives as the completion of an
// entry's command: its fuse_in_header in header.in_out, its first argument
// in header.op_in, the rest in the payload. The reply goes back the same
// way (fuse_out_header in in_out, the body in the payload) with a
// COMMIT_AND_FETCH command, which also waits for the entry's next request.
// FORGET and INTERRUPT, and every request before all queues are
// registered, still come through /dev/fuse; so do notifications.
//
// This transport rebuilds each request in the byte layout of /dev/fuse and
// hands it to libfuse's fuse_session_process_buf, so the same handlers
// serve both paths; the session's device-write hook (fs/fuse_wire.h) hands
// replies whose request came over the ring to Reply().
//
// Threads: each queue has `threads_per_queue` threads pinned to its CPU,
// each with its own ring and exactly one entry: an entry is free only while
// its thread is idle, so the kernel never queues a request behind a busy
// handler while another thread of the CPU waits.
//
// Idle handoff: the reply wakes the caller while the replying thread still
// runs on the caller's CPU, so the scheduler would move the caller to the
// other, idle CPU, waking it from a halt (measured: 3 590 migrations in
// 5 000 round trips, 55 us each instead of 12 us). A CPU whose only
// runnable tasks are SCHED_IDLE counts as idle for that choice, so each
// thread switches to SCHED_IDLE just for the system call that commits its
// reply, and back to SCHED_OTHER once it runs again: the caller is woken
// in place, and the thread waits for its next request, and handles it, at
// normal priority (waiting at SCHED_IDLE starved it whenever other tasks
// were runnable on the CPU: 4 random readers on page-cache hits got 85 000
// IOPS instead of 140 000). If it ran again only long after the commit,
// other tasks are competing for the CPU, and its next replies go without
// the handoff (HandOff). Three system calls per request; a round trip of
// 16 us instead of 55.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vlog/status.h"

namespace sepfs::fs {

struct WireState;

// Bit 9 of fuse_init_in/out.flags2 (FUSE_OVER_IO_URING, 1ULL << 41, protocol
// 7.42): offered by the kernel when enable_uring is on, accepted by the
// server in its INIT reply.
constexpr uint32_t kInitFlags2OverIoUring = 1u << 9;

// The number of queues the kernel makes: one per possible CPU (the count
// of /sys/devices/system/cpu/possible), or 0 when that cannot be read.
unsigned PossibleCpus();

class FuseUring {
 public:
  struct Options {
    unsigned threads_per_queue = 2;
    size_t max_write = 1u << 20;  // the session's max_write
    // Threads drop to SCHED_IDLE from their reply until their next request
    // (see below); needs the right to return (root, or RLIMIT_NICE >= 20).
    bool idle_handoff = true;
  };

  // Allocates the rings and buffers of every queue; registers nothing. The
  // session must use `dev_fd` for /dev/fuse, and `wire` is where the
  // request flags of each request are recorded (fs/fuse_wire.h).
  // Commands go to a duplicate of `dev_fd`, which the transport owns.
  [[nodiscard]] static Status Prepare(struct fuse_session* se, int dev_fd, WireState* wire,
                                      const Options& options, std::unique_ptr<FuseUring>* out);
  ~FuseUring();  // Stop()s first
  FuseUring(const FuseUring&) = delete;
  FuseUring& operator=(const FuseUring&) = delete;

  // Creates the threads, which wait for Start(). Call before the INIT
  // reply can accept FUSE_OVER_IO_URING: once it has, every request waits
  // until each queue has an entry, so a thread that could not be created
  // would hang the mount. On error no thread is left.
  [[nodiscard]] Status Launch();
  // Lets the threads register their entries. Call after the kernel has
  // taken an INIT reply that accepted FUSE_OVER_IO_URING.
  void Start();
  // Wakes every thread and joins it. The kernel ends the entries itself at
  // unmount (-ENOTCONN); this covers a daemon that stops while mounted.
  void Stop();

  // If the reply in iov (fuse_out_header first) answers a request that came
  // over the ring, hands it to the kernel on that entry and returns true,
  // with *result the bytes taken or -errno; false for any other reply.
  bool Reply(struct iovec* iov, int count, ssize_t* result);

  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  // A one-line description for the statistics.
  std::string Describe() const;

  struct Entry;

 private:
  FuseUring() = default;
  bool AwaitStart();  // false when stopped first
  void Serve(Entry* e);
  void Handle(Entry* e);
  // Commits e's reply at SCHED_IDLE (see "Idle handoff" above).
  void HandOff(Entry* e);
  // Answers the entry's request with EIO (the commit goes with the next wait).
  void FailRequest(Entry* e, uint64_t unique);
  void SubmitCommand(Entry* e, uint32_t cmd_op, uint64_t commit_id, bool now);

  struct fuse_session* se_ = nullptr;
  int dev_fd_ = -1;
  WireState* wire_ = nullptr;
  unsigned queues_ = 0;
  size_t payload_bytes_ = 0;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::mutex start_mu_;
  std::condition_variable start_cv_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> handoffs_{0};        // replies committed at SCHED_IDLE
  std::atomic<uint64_t> handoff_stalls_{0};  // ... after which the thread waited long
  std::atomic<unsigned> failed_{0};
  std::atomic<int> first_error_{0};
  std::atomic<bool> idle_handoff_{false};
};

}  // namespace sepfs::fs
