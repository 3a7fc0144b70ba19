// SIGTERM, SIGINT and SIGHUP stop the daemon the way an unmount does.
// libfuse's own handlers end the session loop at once, and its unmount then
// closes /dev/fuse before it unmounts: writes the kernel still cached for
// open files (writeback cache) were never sent, and were lost. Here the
// first signal runs a drain on a thread of its own while the loop still
// serves, and ends the loop only after it.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "vlog/status.h"

namespace sepfs::fs {

class StopSignals {
 public:
  // Installs the handlers, except for a signal ignored already, and
  // ignores SIGPIPE (as libfuse does). On the
  // first signal, on_stop runs on the signal thread; after it, the thread
  // that called Install is interrupted by the signal every 50 ms until
  // LoopEnded: libfuse's loop waits on a semaphore that only a signal
  // interrupts, so on_stop's fuse_session_exit alone would not wake it.
  // One instance at a time (the handlers reach it through a global).
  static Status Install(std::function<void()> on_stop, std::unique_ptr<StopSignals>* out);
  // Whether a signal came again while on_stop ran: the user insists, and
  // on_stop should cut its work short.
  static bool Repeated();
  ~StopSignals();  // LoopEnded, then the previous dispositions back

  // The loop returned: no more interruptions. Signals that come later are
  // still caught (they do nothing) until the destructor, so a second ^C does
  // not kill the daemon while it closes the store.
  void LoopEnded();

  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  StopSignals() = default;
  void Run();

  std::function<void()> on_stop_;
  pthread_t loop_thread_{};
  int wake_fd_ = -1;  // eventfd: written by the handler and by LoopEnded
  bool installed_ = false;  // the handlers are in place
  std::atomic<bool> ended_{false};
  std::thread thread_;
  struct sigaction old_[4] = {};
};

}  // namespace sepfs::fs
