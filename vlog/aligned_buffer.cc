#include "vlog/aligned_buffer.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "vlog/env.h"

namespace sepfs::vlog {
namespace {

size_t RoundUp(size_t n) {
  constexpr size_t a = File::kDirectAlign;
  return (n + a - 1) / a * a;
}

}  // namespace

void AlignedBuffer::Reallocate(size_t cap) {
  void* p = nullptr;
  if (::posix_memalign(&p, File::kDirectAlign, cap) != 0) throw std::bad_alloc();
  std::unique_ptr<char, Free> fresh(static_cast<char*>(p));
  if (size_ > 0) std::memcpy(fresh.get(), mem_.get(), size_);
  mem_ = std::move(fresh);
  cap_ = cap;
}

void AlignedBuffer::reserve(size_t n) {
  if (n > cap_) Reallocate(RoundUp(std::max(n, cap_ + cap_ / 2)));
}

void AlignedBuffer::resize(size_t n) {
  reserve(n);
  size_ = n;
}

void AlignedBuffer::erase_front(size_t n) {
  if (n >= size_) {
    size_ = 0;
    return;
  }
  std::memmove(mem_.get(), mem_.get() + n, size_ - n);
  size_ -= n;
}

void AlignedBuffer::shrink(size_t max_keep, size_t keep) {
  if (cap_ <= max_keep) return;
  const size_t cap = RoundUp(std::max(size_, keep));
  if (cap < cap_) Reallocate(cap);
}

AlignedBufferPool::AlignedBufferPool(size_t max_out, size_t keep_bytes, size_t max_idle)
    : state_(std::make_shared<State>(max_out, keep_bytes, std::min(max_idle, max_out))) {}

AlignedBufferPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Give(std::move(buf_));
}

AlignedBufferPool::Lease AlignedBufferPool::Take() {
  State& st = *state_;
  std::unique_ptr<AlignedBuffer> buf;
  {
    std::lock_guard<std::mutex> l(st.mu);
    if (st.out >= st.max_out) return Lease();
    if (!st.free.empty()) {
      buf = std::move(st.free.back());
      st.free.pop_back();
    }
    st.out++;
  }
  if (buf == nullptr) buf.reset(new (std::nothrow) AlignedBuffer());
  if (buf == nullptr) {
    std::lock_guard<std::mutex> l(st.mu);
    st.out--;
    return Lease();
  }
  buf->resize(0);
  return Lease(state_, std::move(buf));
}

void AlignedBufferPool::State::Give(std::unique_ptr<AlignedBuffer> buf) {
  std::lock_guard<std::mutex> l(mu);
  out--;
  // A buffer grown past keep, or one more than max_idle, is freed (no
  // reallocation: nothing can throw).
  if (buf != nullptr && buf->capacity() <= keep && free.size() < max_idle) {
    free.push_back(std::move(buf));
  }
}

size_t AlignedBufferPool::lent() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->out;
}

}  // namespace sepfs::vlog
