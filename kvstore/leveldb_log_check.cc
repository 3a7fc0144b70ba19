#include "kvstore/leveldb_log_check.h"

#include <array>
#include <cstring>

#include "kvstore/byte_coding.h"
#include "vlog/whole_file.h"

namespace sepfs::kv {

namespace {

constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;
constexpr uint8_t kLastType = 4;
constexpr uint32_t kMaskDelta = 0xa282ead8u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Whether the physical record at `pos` (inside the block ending at
// block_end) is intact; *next: where the following one starts.
bool RecordIntact(const std::string& log, size_t pos, size_t block_end, size_t* next) {
  const char* h = log.data() + pos;
  const size_t length = static_cast<uint8_t>(h[4]) | (size_t{static_cast<uint8_t>(h[5])} << 8);
  const uint8_t type = static_cast<uint8_t>(h[6]);
  if (type == 0 || type > kLastType || pos + kHeaderSize + length > block_end) return false;
  const std::string_view typed(h + 6, 1 + length);  // the type byte, then the payload
  *next = pos + kHeaderSize + length;
  return MaskCrc(Crc32c(typed)) == LoadLe(h, 4);
}

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t init) {
  static const std::array<uint32_t, 256> table = MakeTable();
  uint32_t c = ~init;
  for (char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

uint64_t BlankDamagedLogRecords(std::string* log) {
  uint64_t blanked = 0;
  for (size_t block = 0; block < log->size(); block += kBlockSize) {
    const size_t end = std::min(log->size(), block + kBlockSize);
    size_t pos = block;
    while (pos + kHeaderSize <= end) {
      const char* h = log->data() + pos;
      if (h[4] == 0 && h[5] == 0 && h[6] == 0) break;  // padding or a blank: skipped whole
      size_t next = 0;
      if (!RecordIntact(*log, pos, end, &next)) {
        std::memset(log->data() + pos, 0, end - pos);
        blanked++;
        break;
      }
      pos = next;
    }
  }
  return blanked;
}

Status BlankDamagedLogRecordsInFile(Env* env, const std::string& path, uint64_t* blanked) {
  *blanked = 0;
  std::string log;
  SEPFS_RETURN_IF_ERROR(ReadWholeFile(env, path, &log));
  *blanked = BlankDamagedLogRecords(&log);
  if (*blanked == 0) return Status::OK();
  return ReplaceWholeFile(env, path, TempPathFor(path), log);
}

std::string TempPathFor(const std::string& path) {
  const size_t dot = path.find_last_of("./");
  return (dot != std::string::npos && path[dot] == '.' ? path.substr(0, dot) : path) + ".dbtmp";
}

}  // namespace sepfs::kv
