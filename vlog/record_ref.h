// RecordRef: the read-only data of one record, shared by the data cache,
// the prefetcher's jobs and the READ replies that send it.
//
// The bytes live in a buffer of their own (the cache's BufferPool), or in
// place inside the larger buffer a direct read filled (ValueLog::ReadMany,
// ReadRequest::in_place): that buffer stays alive while any RecordRef into
// it does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace sepfs::vlog {

using RecordRef = std::shared_ptr<const std::string_view>;

// A RecordRef to [data, data + n), which owner keeps alive.
inline RecordRef RefInto(std::shared_ptr<const void> owner, const char* data, size_t n) {
  struct Held {
    std::shared_ptr<const void> owner;
    std::string_view view;
  };
  auto held = std::make_shared<const Held>(Held{std::move(owner), std::string_view(data, n)});
  return RecordRef(held, &held->view);
}

// A RecordRef to all of *bytes, which it keeps alive.
inline RecordRef RefOf(std::shared_ptr<const std::string> bytes) {
  const char* data = bytes->data();
  const size_t n = bytes->size();
  return RefInto(std::move(bytes), data, n);
}

}  // namespace sepfs::vlog
