// AlignedBuffer and AlignedBufferPool: alignment, and a bounded number of
// buffers lent at once.
#include "vlog/aligned_buffer.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "vlog/env.h"

namespace sepfs::vlog {
namespace {

TEST(AlignedBufferTest, StorageIsAlignedAndKeepsItsBytes) {
  AlignedBuffer b;
  b.resize(10);
  std::memcpy(b.data(), "0123456789", 10);
  b.resize(100000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % File::kDirectAlign, 0u);
  EXPECT_EQ(b.capacity() % File::kDirectAlign, 0u);
  EXPECT_GE(b.capacity(), 100000u);
  EXPECT_EQ(std::memcmp(b.data(), "0123456789", 10), 0);
}

TEST(AlignedBufferPoolTest, LendsAtMostMaxOutAndReusesReturnedBuffers) {
  AlignedBufferPool pool(2, 64 << 10);
  const char* first = nullptr;
  {
    AlignedBufferPool::Lease a = pool.Take();
    AlignedBufferPool::Lease b = pool.Take();
    ASSERT_TRUE(a);
    ASSERT_TRUE(b);
    EXPECT_FALSE(pool.Take());  // both lent: none for a third reader
    EXPECT_EQ(pool.lent(), 2u);
    a->resize(8192);
    first = a->data();
  }
  EXPECT_EQ(pool.lent(), 0u);
  AlignedBufferPool::Lease c = pool.Take();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->size(), 0u);  // lent empty
  AlignedBufferPool::Lease d = pool.Take();
  ASSERT_TRUE(d);
  // One of them is the returned 8 KiB buffer, storage and all.
  c->resize(8192);
  d->resize(8192);
  EXPECT_TRUE(c->data() == first || d->data() == first);
}

TEST(AlignedBufferPoolTest, BuffersGrownPastTheKeepSizeAreFreed) {
  AlignedBufferPool pool(1, 64 << 10);
  {
    AlignedBufferPool::Lease a = pool.Take();
    a->resize(1 << 20);
  }
  AlignedBufferPool::Lease b = pool.Take();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->capacity(), 0u);  // a fresh buffer: the large one was freed
}

// Returned buffers beyond max_idle are freed; a lease may outlive its pool.
TEST(AlignedBufferPoolTest, KeepsAtMostMaxIdleAndLeasesOutliveThePool) {
  auto pool = std::make_unique<AlignedBufferPool>(3, 64 << 10, /*max_idle=*/1);
  {
    AlignedBufferPool::Lease a = pool->Take();
    AlignedBufferPool::Lease b = pool->Take();
    a->resize(8192);
    b->resize(8192);
  }
  AlignedBufferPool::Lease c = pool->Take();
  AlignedBufferPool::Lease d = pool->Take();
  EXPECT_EQ(c->capacity() + d->capacity(), 8192u);  // one kept, one freed
  AlignedBufferPool::Lease e = pool->Take();
  ASSERT_TRUE(e);
  e->resize(4096);
  std::memset(e->data(), 7, 4096);
  pool.reset();
  EXPECT_EQ(e->data()[4095], 7);  // the pool's state lives on with its leases
}

}  // namespace
}  // namespace sepfs::vlog
