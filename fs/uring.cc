#include "fs/uring.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace sepfs::fs {

namespace {

constexpr size_t kSqeBytes = 128;  // IORING_SETUP_SQE128

unsigned LoadAcquire(const unsigned* p) {
  return std::atomic_ref<const unsigned>(*p).load(std::memory_order_acquire);
}

void StoreRelease(unsigned* p, unsigned v) {
  std::atomic_ref<unsigned>(*p).store(v, std::memory_order_release);
}

template <typename T>
T* At(void* base, uint32_t off) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + off);
}

}  // namespace

Status Uring::Open(unsigned entries, std::unique_ptr<Uring>* out) {
  std::unique_ptr<Uring> r(new Uring());
  io_uring_params p{};
  p.flags = IORING_SETUP_SQE128;
  const long fd = ::syscall(__NR_io_uring_setup, entries, &p);
  if (fd < 0) return Status::FromErrno(errno, "io_uring_setup");
  r->fd_ = static_cast<int>(fd);

  r->sq_map_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  r->cq_map_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
  if (single) r->sq_map_len_ = r->cq_map_len_ = std::max(r->sq_map_len_, r->cq_map_len_);
  void* sq = ::mmap(nullptr, r->sq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    r->fd_, IORING_OFF_SQ_RING);
  if (sq == MAP_FAILED) return Status::FromErrno(errno, "io_uring: map the submission ring");
  r->sq_map_ = sq;
  void* cq = sq;
  if (!single) {
    cq = ::mmap(nullptr, r->cq_map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                r->fd_, IORING_OFF_CQ_RING);
    if (cq == MAP_FAILED) return Status::FromErrno(errno, "io_uring: map the completion ring");
  }
  r->cq_map_ = cq;
  r->sqes_len_ = p.sq_entries * kSqeBytes;
  void* sqes = ::mmap(nullptr, r->sqes_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                      r->fd_, IORING_OFF_SQES);
  if (sqes == MAP_FAILED) return Status::FromErrno(errno, "io_uring: map the entries");
  r->sqes_ = static_cast<io_uring_sqe*>(sqes);

  r->sq_head_ = At<unsigned>(sq, p.sq_off.head);
  r->sq_tail_ = At<unsigned>(sq, p.sq_off.tail);
  r->sq_array_ = At<unsigned>(sq, p.sq_off.array);
  r->sq_mask_ = *At<unsigned>(sq, p.sq_off.ring_mask);
  r->sq_entries_ = *At<unsigned>(sq, p.sq_off.ring_entries);
  r->sq_local_tail_ = *r->sq_tail_;
  r->cq_head_ = At<unsigned>(cq, p.cq_off.head);
  r->cq_tail_ = At<unsigned>(cq, p.cq_off.tail);
  r->cqes_ = At<io_uring_cqe>(cq, p.cq_off.cqes);
  r->cq_mask_ = *At<unsigned>(cq, p.cq_off.ring_mask);
  *out = std::move(r);
  return Status::OK();
}

Uring::~Uring() {
  if (sqes_ != nullptr) ::munmap(sqes_, sqes_len_);
  if (cq_map_ != nullptr && cq_map_ != sq_map_) ::munmap(cq_map_, cq_map_len_);
  if (sq_map_ != nullptr) ::munmap(sq_map_, sq_map_len_);
  if (fd_ >= 0) ::close(fd_);
}

io_uring_sqe* Uring::Prepare() {
  if (sq_local_tail_ - LoadAcquire(sq_head_) >= sq_entries_) return nullptr;
  const unsigned idx = sq_local_tail_ & sq_mask_;
  auto* sqe = reinterpret_cast<io_uring_sqe*>(reinterpret_cast<char*>(sqes_) + idx * kSqeBytes);
  std::memset(sqe, 0, kSqeBytes);
  sq_array_[idx] = idx;
  ++sq_local_tail_;
  return sqe;
}

void Uring::Publish() { StoreRelease(sq_tail_, sq_local_tail_); }

// Entries published and not yet consumed by the kernel. Submitting more
// than there are is harmless (the kernel takes what it finds), so this may
// race with a Wait on another thread.
unsigned Uring::Unsubmitted() const { return LoadAcquire(sq_tail_) - LoadAcquire(sq_head_); }

int Uring::Submit() {
  Publish();
  int total = 0;
  while (const unsigned pending = Unsubmitted()) {
    const long n = ::syscall(__NR_io_uring_enter, fd_, pending, 0, 0, nullptr, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return total > 0 ? total : -errno;
    }
    if (n == 0) break;
    total += static_cast<int>(n);
  }
  return total;
}

int Uring::Wait() {
  const unsigned pending = Unsubmitted();
  if (pending == 0 && LoadAcquire(cq_tail_) != LoadAcquire(cq_head_)) return 0;
  const long n =
      ::syscall(__NR_io_uring_enter, fd_, pending, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
  return n < 0 ? -errno : 0;
}

bool Uring::Reap(io_uring_cqe* out) {
  const unsigned head = *cq_head_;
  if (head == LoadAcquire(cq_tail_)) return false;
  *out = cqes_[head & cq_mask_];
  StoreRelease(cq_head_, head + 1);
  return true;
}

}  // namespace sepfs::fs
