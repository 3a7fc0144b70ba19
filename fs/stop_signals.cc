#include "fs/stop_signals.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace sepfs::fs {

namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr int kIgnored = SIGPIPE;

std::atomic<int> g_wake_fd{-1};
std::atomic<int> g_first{0};     // the first stop signal's number; 0: none yet
std::atomic<int> g_handlers{0};  // handlers running now (the destructor waits)

void OnSignal(int sig) {
  const int saved = errno;
  g_handlers.fetch_add(1);
  int none = 0;
  // Only the first wakes the thread: the interruptions of the loop thread
  // come back here, and must not end its 50 ms waits.
  if (g_first.compare_exchange_strong(none, sig)) {
    const int fd = g_wake_fd.load();
    if (fd >= 0) {
      const uint64_t one = 1;
      (void)!::write(fd, &one, sizeof(one));
    }
  }
  g_handlers.fetch_sub(1);
  errno = saved;
}

// Waits up to timeout_ms (-1: for ever) for the eventfd, and empties it.
void Wait(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) > 0) {
    uint64_t n;
    (void)!::read(fd, &n, sizeof(n));
  }
}

}  // namespace

static_assert(std::atomic<int>::is_always_lock_free, "the handler needs lock-free atomics");

Status StopSignals::Install(std::function<void(const StopSignals&)> on_stop,
                            std::unique_ptr<StopSignals>* out) {
  if (g_wake_fd.load() >= 0) return Status::InvalidArgument("stop signals installed twice");
  Fd wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake_fd.get() < 0) return Status::FromErrno(errno, "stop signals: eventfd");
  std::unique_ptr<StopSignals> s(new StopSignals(std::move(wake_fd)));
  s->on_stop_ = std::move(on_stop);
  s->loop_thread_ = ::pthread_self();
  g_first = 0;
  g_wake_fd = s->wake_fd_.get();
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  // No SA_RESTART: the kernel restarts a futex wait after a handler that
  // asks for it, and then the loop's semaphore wait never returns. libfuse's
  // own handlers did not ask either.
  sa.sa_flags = 0;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) {
    // One ignored when the daemon started (SIGHUP under nohup) stays so.
    (void)::sigaction(kStopSignals[i], nullptr, &s->old_[i]);
    if (s->old_[i].sa_handler != SIG_IGN) (void)::sigaction(kStopSignals[i], &sa, nullptr);
  }
  sa.sa_handler = SIG_IGN;
  (void)::sigaction(kIgnored, &sa, &s->old_[3]);
  s->installed_ = true;
  s->thread_ = std::thread(&StopSignals::Run, s.get());
  *out = std::move(s);
  return Status::OK();
}

void StopSignals::Run() {
  while (g_first.load() == 0 && !ended_.load()) Wait(wake_fd_.get(), -1);
  if (ended_.load()) return;
  on_stop_(*this);
  while (!ended_.load()) {
    if (started_.load()) (void)::pthread_kill(loop_thread_, g_first.load());
    Wait(wake_fd_.get(), 50);
  }
}

void StopSignals::LoopStarts() { started_ = true; }

void StopSignals::LoopEnded() {
  if (ended_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

StopSignals::~StopSignals() {
  if (!installed_) return;
  LoopEnded();
  for (int i = 0; i < 3; i++) {
    if (old_[i].sa_handler != SIG_IGN) (void)::sigaction(kStopSignals[i], &old_[i], nullptr);
  }
  (void)::sigaction(kIgnored, &old_[3], nullptr);
  // A handler that read the descriptor before this store has raised
  // g_handlers first: wait for it, so it never writes to a reused number
  // (wake_fd_ closes after this body).
  g_wake_fd = -1;
  while (g_handlers.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace sepfs::fs
