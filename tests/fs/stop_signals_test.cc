// StopSignals: a stop signal runs the drain first, then wakes a thread
// waiting the way libfuse's loop does (sem_wait), which the kernel restarts
// after a handler installed with SA_RESTART (the first version hung so).
#include "fs/stop_signals.h"

#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace sepfs::fs {
namespace {

using std::chrono::milliseconds;

// Posts sem after 30 s unless disarmed: a wait the handler never interrupts
// fails the test instead of hanging it.
class Rescue {
 public:
  explicit Rescue(sem_t* sem)
      : thread_([this, sem] {
          for (int i = 0; i < 3000 && !disarmed_; i++) std::this_thread::sleep_for(milliseconds(10));
          if (!disarmed_) {
            fired_ = true;
            sem_post(sem);
          }
        }) {}
  ~Rescue() {
    disarmed_ = true;
    thread_.join();
  }
  bool fired() const { return fired_; }

 private:
  std::atomic<bool> disarmed_{false}, fired_{false};
  std::thread thread_;
};

// libfuse's loop: waits on its semaphore until the session has exited.
void WaitLikeTheLoop(sem_t* sem, const std::atomic<bool>& exited, const Rescue& rescue) {
  while (!exited && !rescue.fired()) sem_wait(sem);
}

TEST(StopSignalsTest, EachSignalRunsOnStopThenWakesTheLoopThread) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    sem_t sem;
    ASSERT_EQ(sem_init(&sem, 0, 0), 0);
    std::atomic<bool> exited{false};
    std::atomic<int> stops{0};
    std::unique_ptr<StopSignals> s;
    ASSERT_TRUE(StopSignals::Install(
                    [&] {
                      stops++;
                      exited = true;
                    },
                    &s)
                    .ok());
    {
      Rescue rescue(&sem);
      // From another thread, as a kill(1) may land on any thread.
      std::thread([sig] { ::kill(::getpid(), sig); }).join();
      WaitLikeTheLoop(&sem, exited, rescue);
      EXPECT_FALSE(rescue.fired()) << strsignal(sig) << ": the loop thread was never woken";
    }
    s->LoopEnded();
    ::kill(::getpid(), sig);  // after LoopEnded: caught, and nothing runs again
    std::this_thread::sleep_for(milliseconds(50));
    s.reset();
    EXPECT_EQ(stops.load(), 1) << strsignal(sig);
    sem_destroy(&sem);
  }
}

TEST(StopSignalsTest, ASecondSignalIsReportedToOnStop) {
  std::atomic<bool> repeated{false}, exited{false}, in_stop{false};
  std::unique_ptr<StopSignals> s;
  ASSERT_TRUE(StopSignals::Install(
                  [&] {
                    in_stop = true;
                    for (int i = 0; i < 3000 && !StopSignals::Repeated(); i++) {
                      std::this_thread::sleep_for(milliseconds(10));
                    }
                    repeated = StopSignals::Repeated();
                    exited = true;
                  },
                  &s)
                  .ok());
  EXPECT_FALSE(StopSignals::Repeated());
  sem_t sem;
  ASSERT_EQ(sem_init(&sem, 0, 0), 0);
  {
    Rescue rescue(&sem);
    ::kill(::getpid(), SIGTERM);
    while (!in_stop) std::this_thread::sleep_for(milliseconds(1));
    ::kill(::getpid(), SIGINT);
    WaitLikeTheLoop(&sem, exited, rescue);
    EXPECT_FALSE(rescue.fired());
  }
  s.reset();
  EXPECT_TRUE(repeated);
  sem_destroy(&sem);
}

TEST(StopSignalsTest, AnIgnoredSignalStaysIgnoredAndDispositionsComeBack) {
  struct sigaction ign = {}, before = {}, now = {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGHUP, &ign, &before), 0);
  std::unique_ptr<StopSignals> s;
  ASSERT_TRUE(StopSignals::Install([] {}, &s).ok());
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN) << "nohup's SIGHUP was taken over";
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_NE(now.sa_handler, SIG_DFL);
  EXPECT_NE(now.sa_handler, SIG_IGN);
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  std::unique_ptr<StopSignals> second;
  EXPECT_FALSE(StopSignals::Install([] {}, &second).ok()) << "two at once";
  s.reset();
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_EQ(::sigaction(SIGHUP, &before, nullptr), 0);
}

}  // namespace
}  // namespace sepfs::fs
