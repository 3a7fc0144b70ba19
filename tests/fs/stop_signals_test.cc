// StopSignals: a stop signal runs on_stop first, then wakes a thread
// waiting the way libfuse's loop does (sem_wait), which the kernel restarts
// after a handler installed with SA_RESTART (the first version hung so).
#include "fs/stop_signals.h"

#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace sepfs::fs {
namespace {

using std::chrono::milliseconds;
constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};

// Every test starts from the default dispositions, whatever the test
// runner inherited (under nohup SIGHUP is ignored), and puts them back.
class StopSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < 4; i++) ASSERT_EQ(::sigaction(kSignals[i], &dfl, &saved_[i]), 0);
  }
  void TearDown() override {
    for (int i = 0; i < 4; i++) ::sigaction(kSignals[i], &saved_[i], nullptr);
  }
  static std::unique_ptr<StopSignals> Install(std::function<void(const StopSignals&)> fn) {
    std::unique_ptr<StopSignals> s;
    Status st = StopSignals::Install(std::move(fn), &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }

 private:
  struct sigaction saved_[4] = {};
};

// Counts the waits a signal interrupts in the next ms milliseconds.
int InterruptionsWithin(sem_t* sem, int ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  int n = 0;
  for (;;) {
    if (sem_timedwait(sem, &until) == 0) continue;
    if (errno == EINTR) {
      n++;
    } else {
      return n;  // ETIMEDOUT
    }
  }
}

// libfuse's loop: waits on its semaphore (sem_wait, without a timeout: a
// timed wait returns EINTR even where the kernel restarts sem_wait) until
// the session has exited. A thread posts the semaphore after 30 s, which
// fails the test instead of hanging it: false then.
bool WaitLikeTheLoop(sem_t* sem, const std::atomic<bool>& exited) {
  std::atomic<bool> woken{false}, rescued{false};
  std::thread rescue([&] {
    for (int i = 0; i < 3000 && !woken; i++) std::this_thread::sleep_for(milliseconds(10));
    if (!woken) {
      rescued = true;
      sem_post(sem);
    }
  });
  while (!exited) sem_wait(sem);
  woken = true;
  rescue.join();
  return !rescued;
}

TEST_F(StopSignalsTest, EachSignalRunsOnStopThenWakesTheLoopThread) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    sem_t sem;
    ASSERT_EQ(sem_init(&sem, 0, 0), 0);
    std::atomic<bool> exited{false};
    std::atomic<int> stops{0};
    std::unique_ptr<StopSignals> s = Install([&](const StopSignals&) {
      stops++;
      // Long enough for the test's thread to be in sem_wait, the way a
      // drain that takes a while finds libfuse's loop.
      std::this_thread::sleep_for(milliseconds(200));
      exited = true;
    });
    ASSERT_TRUE(s);
    s->LoopStarts();
    // From another thread, as a kill(1) may land on any thread.
    std::thread([sig] { ::kill(::getpid(), sig); }).join();
    EXPECT_TRUE(WaitLikeTheLoop(&sem, exited)) << strsignal(sig) << ": never woken";
    s->LoopEnded();
    ::kill(::getpid(), sig);  // after the loop: caught, the process lives on
    ::kill(::getpid(), sig);
    std::this_thread::sleep_for(milliseconds(50));
    s.reset();
    EXPECT_EQ(stops.load(), 1) << strsignal(sig);
    sem_destroy(&sem);
  }
}

// The interruptions come every 50 ms, and only once the loop runs: they
// came back through the handler, which woke the thread at once, and the
// first version sent thousands a second (a helper's review). More signals
// (systemd's SIGHUP after SIGTERM) run nothing again.
TEST_F(StopSignalsTest, InterruptionsArePacedAndWaitForTheLoop) {
  sem_t sem;
  ASSERT_EQ(sem_init(&sem, 0, 0), 0);
  std::atomic<int> stops{0};
  std::unique_ptr<StopSignals> s = Install([&](const StopSignals&) { stops++; });
  ASSERT_TRUE(s);
  ::kill(::getpid(), SIGTERM);
  for (int i = 0; i < 3000 && stops == 0; i++) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(stops.load(), 1);
  // The signal itself may have landed on this thread; nothing else may.
  EXPECT_LE(InterruptionsWithin(&sem, 300), 1) << "interrupted before the loop started";
  s->LoopStarts();
  ::kill(::getpid(), SIGHUP);
  const int n = InterruptionsWithin(&sem, 500);
  EXPECT_GE(n, 1);
  EXPECT_LE(n, 20) << "not paced at 50 ms";
  s.reset();
  EXPECT_EQ(stops.load(), 1);
  sem_destroy(&sem);
}

TEST_F(StopSignalsTest, AnIgnoredSignalStaysIgnoredAndDispositionsComeBack) {
  struct sigaction ign = {}, now = {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGHUP, &ign, nullptr), 0);
  std::unique_ptr<StopSignals> s = Install([](const StopSignals&) {});
  ASSERT_TRUE(s);
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN) << "nohup's SIGHUP was taken over";
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_NE(now.sa_handler, SIG_DFL);
  EXPECT_NE(now.sa_handler, SIG_IGN);
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  std::unique_ptr<StopSignals> second;
  EXPECT_FALSE(StopSignals::Install([](const StopSignals&) {}, &second).ok()) << "two at once";
  s.reset();
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
}

}  // namespace
}  // namespace sepfs::fs
