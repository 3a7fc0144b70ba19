#include "kvstore/ino_alloc.h"

#include <algorithm>
#include <cerrno>
#include <limits>

namespace sepfs::kv {
namespace {

constexpr char kNextInoCounter[] = "next_ino";
// Bounds the memory of sub-leases; dropping them only skips numbers.
constexpr size_t kMaxRuns = 4096;

}  // namespace

Status InodeAllocator::Init() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t persisted = kFirstIno;
  Status s = store_->GetCounter(kNextInoCounter, &persisted);
  if (s.IsNotFound()) {
    persisted = kFirstIno;
  } else if (!s.ok()) {
    return s.WithContext("inode allocator");
  }
  next_ = lease_end_ = std::max(persisted, kFirstIno);
  runs_.clear();
  return Status::OK();
}

Status InodeAllocator::Extend() {
  if (lease_end_ > std::numeric_limits<uint64_t>::max() - kLeaseSize) {
    return Status::NoSpace("inode allocator: inode numbers exhausted");
  }
  const uint64_t new_end = lease_end_ + kLeaseSize;
  // A synced write: MetaStore's before-sync hook makes the records that
  // earlier (unsynced) batches name durable first.
  Batch batch;
  batch.Put(CounterKey(kNextInoCounter), EncodeCounter(new_end));
  Status s = store_->Write(&batch, /*sync=*/true);
  if (!s.ok()) return s.WithContext("inode allocator: persist lease");
  lease_end_ = new_end;
  return Status::OK();
}

Status InodeAllocator::Allocate(uint64_t parent, uint64_t* ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(parent);
  if (it == runs_.end() || it->second.next >= it->second.end) {
    if (lease_end_ - next_ < kDirRunSize) SEPFS_RETURN_IF_ERROR(Extend());
    if (it == runs_.end() && runs_.size() >= kMaxRuns) runs_.clear();
    Run run{next_, next_ + kDirRunSize};
    next_ += kDirRunSize;
    it = runs_.insert_or_assign(parent, run).first;
  }
  *ino = it->second.next++;
  return Status::OK();
}

void InodeAllocator::ForgetDir(uint64_t parent) {
  std::lock_guard<std::mutex> lock(mu_);
  runs_.erase(parent);
}

uint64_t InodeAllocator::TEST_next() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

}  // namespace sepfs::kv
