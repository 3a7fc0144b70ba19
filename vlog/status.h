// Status: the result of every fallible call in sepfs.
//
// Success is free (no allocation). An error carries the errno that the FUSE
// boundary will return, plus a message naming what failed and where.
// The class is [[nodiscard]], so every function returning it is too.
#pragma once

#include <cerrno>
#include <memory>
#include <string>
#include <string_view>

namespace sepfs {

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(const Status& other) { *this = other; }
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  // err is a positive errno value; msg names the path/object and the reason.
  static Status FromErrno(int err, std::string_view msg) { return Status(err, Kind::kErrno, msg); }
  // Data failed a check (magic, checksum, bounds). Maps to EIO.
  static Status Corruption(std::string_view msg) { return Status(EIO, Kind::kCorruption, msg); }
  static Status IOError(std::string_view msg) { return Status(EIO, Kind::kErrno, msg); }
  static Status NotFound(std::string_view msg) { return Status(ENOENT, Kind::kErrno, msg); }
  static Status InvalidArgument(std::string_view msg) {
    return Status(EINVAL, Kind::kErrno, msg);
  }
  static Status NoSpace(std::string_view msg) { return Status(ENOSPC, Kind::kErrno, msg); }

  bool ok() const { return rep_ == nullptr; }
  // The errno to report; 0 when ok().
  int err() const { return rep_ ? rep_->err : 0; }
  bool IsCorruption() const { return rep_ && rep_->kind == Kind::kCorruption; }
  bool IsNotFound() const { return err() == ENOENT; }
  // "OK" or "<strerror>: <message>".
  std::string ToString() const;
  std::string_view message() const { return rep_ ? std::string_view(rep_->msg) : ""; }

  // Prefixes the message with context, keeping errno and kind.
  Status WithContext(std::string_view context) const;
  // The message with every `from` replaced by `to`, keeping errno and kind.
  Status Replacing(std::string_view from, std::string_view to) const;

 private:
  enum class Kind : unsigned char { kErrno, kCorruption };
  struct Rep {
    int err;
    Kind kind;
    std::string msg;
  };
  Status(int err, Kind kind, std::string_view msg)
      : rep_(std::make_unique<Rep>(Rep{err, kind, std::string(msg)})) {}
  std::unique_ptr<Rep> rep_;
};

// text with every `from` (a path) replaced by `to` (text as is for an
// empty from). An occurrence that a file-name character (letter, digit,
// '.', '_', '-'; a '.' only with one after it) continues is another path
// and stays: "/proc/self/fd/5" is not replaced in "/proc/self/fd/57".
std::string ReplacedAll(std::string text, std::string_view from, std::string_view to);

// Returns from the enclosing function when `expr` yields a non-OK Status.
#define SEPFS_RETURN_IF_ERROR(expr)      \
  do {                                   \
    ::sepfs::Status _st = (expr);        \
    if (!_st.ok()) return _st;           \
  } while (0)

}  // namespace sepfs
