// What an earlier store, or an interrupted mkfs, left in a directory, and
// its removal by `sepfs mkfs --force`.
//
// mkfs never deletes what is not a store's, --force or not: every name is
// checked before anything goes, and the removal works on descriptors of the
// directories it checked, so a directory swapped for a link meanwhile is
// never followed (a file swapped for a link loses the link, not its target;
// a directory swapped for another under the same name is removed only if
// it is empty). The store directory itself is opened by its path, as every
// other step of mkfs reaches it: a path through a link someone else can
// change is the caller's to avoid.
#pragma once

#include <memory>
#include <string>

#include "vlog/status.h"

namespace sepfs::fs {

class OldStore {
 public:
  // Lists dir. A store's names are LOCK, sepfs.log and superblock(.tmp)
  // (regular files), meta/ (LevelDB's file names, and lost/ of them, which
  // leveldb::RepairDB fills) and vlog/ (segment and kept-file names):
  // regular files only, no other subdirectories, no links. lost+found (a
  // disk's root) and set-aside-segments (other stores' segments repair
  // moved there: fs/store.h) are not counted and stay. Anything else is
  // EEXIST naming it.
  static Status Find(const std::string& dir, std::unique_ptr<OldStore>* out);
  ~OldStore();

  bool empty() const;
  // Removes everything Find listed but the LOCK file (the caller holds its
  // lock). A name added since makes its directory's removal fail.
  Status Remove();

 private:
  struct Dir;
  OldStore() = default;
  std::string path_;
  std::unique_ptr<Dir> root_;
};

}  // namespace sepfs::fs
