// A minimal io_uring instance over the raw system calls (Debian's kernel
// headers, no liburing): 128-byte submission entries, for the FUSE
// transport's IORING_OP_URING_CMD requests (fs/fuse_uring.h).
//
// Thread safety: Prepare, Publish and Submit need external serialization
// (one submitter at a time), Reap likewise (one reaper at a time); Wait may
// run beside them.
#pragma once

#include <linux/io_uring.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "vlog/status.h"

namespace sepfs::fs {

class Uring {
 public:
  // A ring of `entries` submission slots (a power of two is not required;
  // the kernel rounds up) with 128-byte entries.
  [[nodiscard]] static Status Open(unsigned entries, std::unique_ptr<Uring>* out);
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  // A zeroed 128-byte entry to fill, or nullptr when every slot is taken
  // (call Submit and retry). Entries become visible to the kernel at Submit.
  io_uring_sqe* Prepare();
  // Makes the prepared entries visible to the kernel, without a system
  // call: the next Submit or Wait hands them over.
  void Publish();
  // Publishes and hands every published entry to the kernel. Returns how
  // many it took, or a negative errno.
  int Submit();
  // Hands the published entries to the kernel, then blocks until at least
  // one completion is waiting (or a signal, which returns -EINTR): one
  // system call for both. Returns 0 or a negative errno.
  int Wait();
  // Takes the oldest completion into *out; false when there is none.
  bool Reap(io_uring_cqe* out);

 private:
  Uring() = default;
  unsigned Unsubmitted() const;

  int fd_ = -1;
  void* sq_map_ = nullptr;
  size_t sq_map_len_ = 0;
  void* cq_map_ = nullptr;  // == sq_map_ with a single mapping
  size_t cq_map_len_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  size_t sqes_len_ = 0;

  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned sq_entries_ = 0;
  unsigned sq_local_tail_ = 0;  // prepared; *sq_tail_ is what is published

  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  io_uring_cqe* cqes_ = nullptr;
  unsigned cq_mask_ = 0;
};

}  // namespace sepfs::fs
