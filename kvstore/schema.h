// Key schema of the metadata LSM (LevelDB). See docs/metadata-schema.md.
//
// Every key starts with a one-byte tag; integers in keys are fixed-width
// big-endian so that byte order equals numeric order. Hence:
//   - one directory's entries are one contiguous range   (readdir = 1 scan)
//   - one file's block pointers are one contiguous range (read/truncate/unlink)
//   - one inode's xattrs are one contiguous range
//
//   key                                    value
//   'S'                                    Superblock
//   'C' name                               counter / checkpoint (e.g. "next_ino")
//   'I' ino(8)                             InodeRecord
//   'D' parent(8) name                     DirEntry
//   'B' ino(8) block(8)                    BlockValue (vlog pointer, or inline data)
//   'X' ino(8) name                        xattr value bytes
//   'L' ino(8)                             symlink target bytes
//   'O' ino(8)                             "" (orphan: nlink 0, still open)
//   'J' n(8)                               live-count journal entry (fs/live_journal.h)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sepfs::kv {

enum Tag : char {
  kTagSuper = 'S',
  kTagCounter = 'C',
  kTagInode = 'I',
  kTagDentry = 'D',
  kTagBlock = 'B',
  kTagXattr = 'X',
  kTagSymlink = 'L',
  kTagOrphan = 'O',
  kTagJournal = 'J',
};

std::string SuperKey();
std::string CounterKey(std::string_view name);
std::string InodeKey(uint64_t ino);
std::string DentryKey(uint64_t parent, std::string_view name);
std::string DentryPrefix(uint64_t parent);
std::string BlockKey(uint64_t ino, uint64_t block);
std::string BlockPrefix(uint64_t ino);
std::string XattrKey(uint64_t ino, std::string_view name);
std::string XattrPrefix(uint64_t ino);
std::string SymlinkKey(uint64_t ino);
std::string OrphanKey(uint64_t ino);
std::string JournalKey(uint64_t n);
// The smallest key greater than every key that starts with prefix: the last
// byte that is not 0xff is incremented and trailing 0xff bytes are dropped.
// Returns "" when prefix is empty or all 0xff, meaning "no upper bound"
// (MetaStore::Scan treats an empty end that way).
std::string PrefixEnd(std::string_view prefix);

// Decoders return false when key does not have the expected shape.
bool ParseInodeKey(std::string_view key, uint64_t* ino);
bool ParseDentryKey(std::string_view key, uint64_t* parent, std::string_view* name);
bool ParseBlockKey(std::string_view key, uint64_t* ino, uint64_t* block);
bool ParseXattrKey(std::string_view key, uint64_t* ino, std::string_view* name);
bool ParseOrphanKey(std::string_view key, uint64_t* ino);
bool ParseJournalKey(std::string_view key, uint64_t* n);
// Dentry and xattr names are never empty: a bare prefix does not parse.

// Printable form of any key, e.g. "dentry(1,'a\x00b')", "block(7,3)", for
// error messages and dump tools.
std::string DescribeKey(std::string_view key);

// Big-endian fixed-width helpers, shared by the codecs.
void PutBE64(std::string* dst, uint64_t v);
uint64_t GetBE64(const char* p);

}  // namespace sepfs::kv
