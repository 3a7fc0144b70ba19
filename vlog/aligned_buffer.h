// AlignedBuffer: a growable byte buffer whose storage starts on a
// File::kDirectAlign boundary and spans whole aligned blocks, so any prefix
// rounded up to the alignment can go to File::WriteDirect as it is.
//
// Not thread-safe; the owner serialises access (the vLog's stream lock).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace sepfs::vlog {

class AlignedBuffer {
 public:
  char* data() { return mem_.get(); }
  const char* data() const { return mem_.get(); }
  size_t size() const { return size_; }

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

}  // namespace sepfs::vlog
