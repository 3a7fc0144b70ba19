// SIGTERM, SIGINT and SIGHUP stop the daemon the way an unmount does.
// libfuse's own handlers end the session loop at once, and its unmount then
// closes /dev/fuse before it unmounts: writes the kernel still cached for
// open files (writeback cache) were never sent, and were lost. Here the
// first signal runs a drain on a thread of its own while the loop still
// serves, and ends the loop only after it. Later signals do nothing more
// (systemd may send SIGHUP right after SIGTERM): SIGKILL ends a stop that
// takes too long.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "vlog/fd.h"
#include "vlog/status.h"

namespace sepfs::fs {

class StopSignals {
 public:
  // Installs the handlers, except for a signal ignored already, and
  // ignores SIGPIPE (as libfuse does). On the first signal, on_stop runs on
  // the signal thread; after it, once LoopStarts was called, the thread
  // that called Install is interrupted by the signal every 50 ms until
  // LoopEnded: libfuse's loop waits on a semaphore that only a signal
  // interrupts, so on_stop's fuse_session_exit alone would not wake it.
  // One instance at a time (the handlers reach it through a global).
  static Status Install(std::function<void(const StopSignals&)> on_stop,
                        std::unique_ptr<StopSignals>* out);
  ~StopSignals();  // LoopEnded, then the previous dispositions back

  // Called by the thread of Install right before it enters the loop:
  // interruptions before would break the mount's own system calls.
  void LoopStarts();
  // The loop returned: on_stop should cut its work short (LoopGone), and
  // the interruptions end. Waits for on_stop. Signals that come later are
  // still caught (they do nothing) until the destructor, so a second ^C
  // does not kill the daemon while it closes the store.
  void LoopEnded();
  bool LoopGone() const { return ended_.load(); }

  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  explicit StopSignals(Fd wake_fd) : wake_fd_(std::move(wake_fd)) {}
  void Run();

  std::function<void(const StopSignals&)> on_stop_;
  pthread_t loop_thread_{};
  Fd wake_fd_;  // eventfd: written by the first signal and by LoopEnded
  bool installed_ = false;  // the handlers are in place
  std::atomic<bool> started_{false}, ended_{false};
  std::thread thread_;
  struct sigaction old_[4] = {};
};

}  // namespace sepfs::fs
