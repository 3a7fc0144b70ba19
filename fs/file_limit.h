// The descriptor limit of a process that opens a store: the value log keeps
// one descriptor per segment open, so a store of more segments than the soft
// RLIMIT_NOFILE (1024 by default) fails to open with EMFILE. Every process
// that opens a store (the mount daemon, fsck, stats, gc) raises it first.
#pragma once

namespace sepfs::fs {

// Raises the soft RLIMIT_NOFILE to the hard limit. Best effort: when that
// fails the soft limit stays and opening a large store may fail with EMFILE.
void RaiseFileLimit();

}  // namespace sepfs::fs
