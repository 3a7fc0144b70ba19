#include "kvstore/schema.h"

#include <cstdio>

namespace sepfs::kv {
namespace {

constexpr size_t kIntKeySize = 1 + 8;        // tag ino
constexpr size_t kBlockKeySize = 1 + 8 + 8;  // tag ino block

std::string TagKey(Tag tag, uint64_t id) {
  std::string key;
  key.reserve(kIntKeySize);
  key.push_back(tag);
  PutBE64(&key, id);
  return key;
}

std::string TagKeyWithName(Tag tag, uint64_t id, std::string_view name) {
  std::string key;
  key.reserve(kIntKeySize + name.size());
  key.push_back(tag);
  PutBE64(&key, id);
  key.append(name);
  return key;
}

bool ParseIntKey(std::string_view key, Tag tag, uint64_t* id) {
  if (key.size() != kIntKeySize || key[0] != tag) return false;
  *id = GetBE64(key.data() + 1);
  return true;
}

// Names of dentries and xattrs are never empty, so a bare prefix is no key.
bool ParseNamedKey(std::string_view key, Tag tag, uint64_t* id, std::string_view* name) {
  if (key.size() <= kIntKeySize || key[0] != tag) return false;
  *id = GetBE64(key.data() + 1);
  *name = key.substr(kIntKeySize);
  return true;
}

void AppendEscaped(std::string* out, std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out->push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out->append(buf);
    }
  }
}

}  // namespace

void PutBE64(std::string* dst, uint64_t v) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  dst->append(buf, sizeof(buf));
}

uint64_t GetBE64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string SuperKey() { return std::string(1, kTagSuper); }

std::string CounterKey(std::string_view name) {
  std::string key(1, kTagCounter);
  key.append(name);
  return key;
}

std::string InodeKey(uint64_t ino) { return TagKey(kTagInode, ino); }

std::string DentryKey(uint64_t parent, std::string_view name) {
  return TagKeyWithName(kTagDentry, parent, name);
}

std::string DentryPrefix(uint64_t parent) { return TagKey(kTagDentry, parent); }

std::string BlockKey(uint64_t ino, uint64_t block) {
  std::string key;
  key.reserve(kBlockKeySize);
  key.push_back(kTagBlock);
  PutBE64(&key, ino);
  PutBE64(&key, block);
  return key;
}

std::string BlockPrefix(uint64_t ino) { return TagKey(kTagBlock, ino); }

std::string XattrKey(uint64_t ino, std::string_view name) {
  return TagKeyWithName(kTagXattr, ino, name);
}

std::string XattrPrefix(uint64_t ino) { return TagKey(kTagXattr, ino); }

std::string SymlinkKey(uint64_t ino) { return TagKey(kTagSymlink, ino); }

std::string OrphanKey(uint64_t ino) { return TagKey(kTagOrphan, ino); }
std::string JournalKey(uint64_t n) { return TagKey(kTagJournal, n); }

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return end;  // empty: no upper bound
}

bool ParseInodeKey(std::string_view key, uint64_t* ino) {
  return ParseIntKey(key, kTagInode, ino);
}

bool ParseDentryKey(std::string_view key, uint64_t* parent, std::string_view* name) {
  return ParseNamedKey(key, kTagDentry, parent, name);
}

bool ParseBlockKey(std::string_view key, uint64_t* ino, uint64_t* block) {
  if (key.size() != kBlockKeySize || key[0] != kTagBlock) return false;
  *ino = GetBE64(key.data() + 1);
  *block = GetBE64(key.data() + 9);
  return true;
}

bool ParseXattrKey(std::string_view key, uint64_t* ino, std::string_view* name) {
  return ParseNamedKey(key, kTagXattr, ino, name);
}

bool ParseOrphanKey(std::string_view key, uint64_t* ino) {
  return ParseIntKey(key, kTagOrphan, ino);
}
bool ParseJournalKey(std::string_view key, uint64_t* n) {
  return ParseIntKey(key, kTagJournal, n);
}

std::string DescribeKey(std::string_view key) {
  std::string out;
  uint64_t a = 0, b = 0;
  std::string_view name;
  if (key == SuperKey()) return "super";
  if (!key.empty() && key[0] == kTagCounter) {
    out = "counter('";
    AppendEscaped(&out, key.substr(1));
    return out + "')";
  }
  if (ParseInodeKey(key, &a)) return "inode(" + std::to_string(a) + ")";
  if (ParseOrphanKey(key, &a)) return "orphan(" + std::to_string(a) + ")";
  if (ParseIntKey(key, kTagSymlink, &a)) return "symlink(" + std::to_string(a) + ")";
  if (ParseJournalKey(key, &a)) return "journal(" + std::to_string(a) + ")";
  if (ParseBlockKey(key, &a, &b)) {
    return "block(" + std::to_string(a) + "," + std::to_string(b) + ")";
  }
  if (ParseDentryKey(key, &a, &name) || ParseXattrKey(key, &a, &name)) {
    out = key[0] == kTagDentry ? "dentry(" : "xattr(";
    out += std::to_string(a) + ",'";
    AppendEscaped(&out, name);
    return out + "')";
  }
  out = "raw('";
  AppendEscaped(&out, key);
  return out + "')";
}

}  // namespace sepfs::kv
