// The raw io_uring ring under the FUSE transport: submissions, completions
// in order, a full submission queue, and a waiter woken from another thread.
#include "fs/uring.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sepfs::fs {
namespace {

std::unique_ptr<Uring> OpenRing(unsigned entries) {
  std::unique_ptr<Uring> r;
  Status st = Uring::Open(entries, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

void PrepareNop(Uring* r, uint64_t user_data) {
  io_uring_sqe* sqe = r->Prepare();
  ASSERT_NE(sqe, nullptr);
  sqe->opcode = IORING_OP_NOP;
  sqe->user_data = user_data;
}

TEST(UringTest, CompletesWhatWasSubmittedInOrder) {
  std::unique_ptr<Uring> r = OpenRing(8);
  ASSERT_NE(r, nullptr);
  io_uring_cqe cqe;
  EXPECT_FALSE(r->Reap(&cqe));
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_NO_FATAL_FAILURE(PrepareNop(r.get(), i));
  EXPECT_EQ(r->Submit(), 3);
  std::vector<uint64_t> seen;
  while (seen.size() < 3) {
    ASSERT_EQ(r->Wait(), 0);
    while (r->Reap(&cqe)) {
      EXPECT_EQ(cqe.res, 0);
      seen.push_back(cqe.user_data);
    }
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE(r->Reap(&cqe));
}

TEST(UringTest, AFullSubmissionQueueRefusesUntilSubmitted) {
  std::unique_ptr<Uring> r = OpenRing(4);
  ASSERT_NE(r, nullptr);
  unsigned n = 0;
  while (io_uring_sqe* sqe = r->Prepare()) {
    sqe->opcode = IORING_OP_NOP;
    sqe->user_data = ++n;
    ASSERT_LE(n, 64u);
  }
  EXPECT_GE(n, 4u);
  EXPECT_EQ(r->Submit(), static_cast<int>(n));
  unsigned reaped = 0;
  io_uring_cqe cqe;
  while (reaped < n) {
    ASSERT_EQ(r->Wait(), 0);
    while (r->Reap(&cqe)) ++reaped;
  }
  // Slots are free again once the kernel took the entries.
  ASSERT_NO_FATAL_FAILURE(PrepareNop(r.get(), 99));
  EXPECT_EQ(r->Submit(), 1);
  ASSERT_EQ(r->Wait(), 0);
  ASSERT_TRUE(r->Reap(&cqe));
  EXPECT_EQ(cqe.user_data, 99u);
}

TEST(UringTest, AWaiterIsWokenByASubmissionFromAnotherThread) {
  std::unique_ptr<Uring> r = OpenRing(4);
  ASSERT_NE(r, nullptr);
  uint64_t got = 0;
  std::thread waiter([&] {
    io_uring_cqe cqe;
    while (!r->Reap(&cqe)) {
      if (r->Wait() != 0) return;
    }
    got = cqe.user_data;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NO_FATAL_FAILURE(PrepareNop(r.get(), 42));
  EXPECT_EQ(r->Submit(), 1);
  waiter.join();
  EXPECT_EQ(got, 42u);
}

}  // namespace
}  // namespace sepfs::fs
