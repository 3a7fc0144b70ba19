// Directories whose listing the kernel may hold in its page cache: those
// readdir has answered since their last change. The kernel checks such a
// cached listing against the directory's changes only when a reader starts
// at offset 0; a directory opened anew and resumed at a saved offset
// (seekdir after reopening, as NFS and SMB servers do for every part of a
// listing) was served the listing from before the change, names removed or
// renamed since included. So the first change after a readdir answer drops
// the kernel's listing (FUSE_NOTIFY_INVAL_INODE), and a change to a
// directory nobody listed since costs nothing.
//
// Thread-safe. Bounded by the directories the kernel holds: it forgets one
// (FORGET) together with its cached listing.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace sepfs::fs {

class KernelListings {
 public:
  // A readdir of dir is about to be answered (call before the reply, so
  // that a change after it is seen here).
  void Served(uint64_t dir) {
    std::lock_guard<std::mutex> l(mu_);
    listed_.insert(dir);
  }
  // dir's entries changed: whether the kernel may hold a listing of it from
  // before, which the caller then drops. Later changes return false until
  // readdir answers again.
  bool Changed(uint64_t dir) {
    std::lock_guard<std::mutex> l(mu_);
    return listed_.erase(dir) > 0;
  }
  // The kernel forgot dir's inode, and with it any cached listing.
  void Forgotten(uint64_t dir) { (void)Changed(dir); }

 private:
  std::mutex mu_;
  std::unordered_set<uint64_t> listed_;
};

}  // namespace sepfs::fs
