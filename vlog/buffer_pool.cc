#include "vlog/buffer_pool.h"

namespace sepfs::vlog {

BufferPool::BufferPool(size_t max_free_bytes)
    : state_(std::make_shared<State>(max_free_bytes)) {}

void BufferPool::State::Put(std::string* s) {
  std::unique_ptr<std::string> owned(s);
  const size_t cls = ClassOf(s->capacity());
  std::lock_guard<std::mutex> l(mu);
  // Only buffers this pool shaped (capacity == class) come back; others,
  // and any beyond the limit, are freed when `owned` goes.
  if (s->capacity() != cls || free_bytes + cls > max_free) return;
  free_bytes += cls;
  free[cls].push_back(std::move(owned));
}

std::shared_ptr<std::string> BufferPool::Get(size_t n) {
  const size_t cls = ClassOf(n == 0 ? 1 : n);
  std::unique_ptr<std::string> s;
  {
    std::lock_guard<std::mutex> l(state_->mu);
    auto it = state_->free.find(cls);
    if (it != state_->free.end() && !it->second.empty()) {
      s = std::move(it->second.back());
      it->second.pop_back();
      state_->free_bytes -= cls;
      state_->reused++;
    }
  }
  if (s == nullptr) {
    s = std::make_unique<std::string>();
    s->reserve(cls);  // capacity == cls, so that Put takes it back
  }
  s->resize(n);  // zero-fills only past the previous size
  return std::shared_ptr<std::string>(s.release(),
                                      [st = state_](std::string* p) { st->Put(p); });
}

size_t BufferPool::free_bytes() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->free_bytes;
}

uint64_t BufferPool::reused() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->reused;
}

}  // namespace sepfs::vlog
