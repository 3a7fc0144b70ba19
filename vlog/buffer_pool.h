// BufferPool: recycles the buffers that hold cached record data.
//
// Without it every block-cache miss allocated a fresh 4 KiB-1 MiB string
// and every eviction freed one; glibc kept the freed chunks in its per-thread
// arenas, and under random reads the daemon's RSS grew 150 MiB and more past
// the configured cache sizes (bench/RESULTS.md). A buffer handed out here
// returns to the pool when its last shared_ptr goes (the cache evicted it
// and no reader holds it), and the next miss of the same size class reuses
// it. Size classes are multiples of 4 KiB; at most max_free_bytes of
// capacity wait in the pool, the rest is freed.
//
// Thread safety: all methods may be called concurrently; buffers may
// outlive the pool.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sepfs::vlog {

class BufferPool {
 public:
  explicit BufferPool(size_t max_free_bytes);

  // A buffer of exactly n bytes. Its contents are unspecified (a reused
  // buffer keeps old bytes; only bytes past its previous size are zeroed).
  std::shared_ptr<std::string> Get(size_t n);

  size_t free_bytes() const;
  uint64_t reused() const;  // Get calls served from the pool

 private:
  struct State {
    explicit State(size_t max) : max_free(max) {}
    void Put(std::string* s);
    std::mutex mu;
    std::unordered_map<size_t, std::vector<std::unique_ptr<std::string>>> free;  // by class
    size_t free_bytes = 0;
    uint64_t reused = 0;
    const size_t max_free;
  };
  static size_t ClassOf(size_t n) { return (n + 4095) & ~size_t{4095}; }

  std::shared_ptr<State> state_;
};

}  // namespace sepfs::vlog
