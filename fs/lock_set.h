// LockSet: locks the mutexes of several inodes in ascending ino order (the
// documented lock order), skipping nulls and duplicates; unlocks on scope exit.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <mutex>
#include <vector>

#include "fs/inode.h"

namespace sepfs::fs {

class LockSet {
 public:
  explicit LockSet(std::initializer_list<Inode*> inodes) {
    std::vector<Inode*> v;
    for (Inode* in : inodes) {
      if (in) v.push_back(in);
    }
    std::sort(v.begin(), v.end(), [](Inode* a, Inode* b) { return a->ino < b->ino; });
    v.erase(std::unique(v.begin(), v.end()), v.end());
    for (Inode* in : v) locks_.emplace_back(in->mu);
  }

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
};

}  // namespace sepfs::fs
