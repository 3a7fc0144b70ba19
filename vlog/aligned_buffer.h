// AlignedBuffer: a growable byte buffer whose storage starts on a
// File::kDirectAlign boundary and spans whole aligned blocks, so any prefix
// rounded up to the alignment can go to File::WriteDirect as it is.
//
// Not thread-safe; the owner serialises access (the vLog's stream lock).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace sepfs::vlog {

class AlignedBuffer {
 public:
  char* data() { return mem_.get(); }
  const char* data() const { return mem_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }

  // Sets the size to n, keeping the first min(size(), n) bytes; bytes past
  // the old size are unspecified. Grows the storage (to whole blocks) as
  // needed; throws std::bad_alloc like std::string does.
  void resize(size_t n);
  // Grows the storage to hold at least n bytes.
  void reserve(size_t n);
  // Drops the first n bytes (n <= size()); the rest moves to the front.
  void erase_front(size_t n);
  // Frees the storage when it holds more than max_keep bytes, keeping the
  // contents and at least max(size(), keep) bytes of capacity.
  void shrink(size_t max_keep, size_t keep);

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  void Reallocate(size_t cap);

  std::unique_ptr<char, Free> mem_;
  size_t size_ = 0;
  size_t cap_ = 0;
};

// At most max_out AlignedBuffers lent out at once, so their memory stays
// bounded however many threads want one; of the returned ones, at most
// max_idle buffers of at most keep_bytes of capacity each are kept to be
// lent again, the rest are freed. Leases may outlive the pool. Thread-safe.
class AlignedBufferPool {
  struct State;

 public:
  AlignedBufferPool(size_t max_out, size_t keep_bytes, size_t max_idle);
  AlignedBufferPool(size_t max_out, size_t keep_bytes)
      : AlignedBufferPool(max_out, keep_bytes, max_out) {}

  // A lent buffer (empty, capacity unspecified), returned by the destructor.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    explicit operator bool() const { return buf_ != nullptr; }
    AlignedBuffer* operator->() const { return buf_.get(); }
    AlignedBuffer& operator*() const { return *buf_; }

   private:
    friend class AlignedBufferPool;
    Lease(std::shared_ptr<State> pool, std::unique_ptr<AlignedBuffer> buf)
        : pool_(std::move(pool)), buf_(std::move(buf)) {}
    std::shared_ptr<State> pool_;
    std::unique_ptr<AlignedBuffer> buf_;
  };

  // A buffer, or an empty lease when max_out are lent out already (or no
  // memory is left for the buffer object).
  Lease Take();
  size_t lent() const;

 private:
  struct State {
    State(size_t max_out, size_t keep, size_t max_idle)
        : max_out(max_out), keep(keep), max_idle(max_idle) {
      free.reserve(max_idle);  // Give never reallocates
    }
    void Give(std::unique_ptr<AlignedBuffer> buf);
    const size_t max_out, keep, max_idle;
    mutable std::mutex mu;
    std::vector<std::unique_ptr<AlignedBuffer>> free;
    size_t out = 0;
  };
  std::shared_ptr<State> state_;
};

}  // namespace sepfs::vlog
