#include "vlog/status.h"

#include <cctype>
#include <cstring>

namespace sepfs {

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = rep_->kind == Kind::kCorruption ? "corruption" : std::strerror(rep_->err);
  if (!rep_->msg.empty()) out += ": " + rep_->msg;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  std::string msg(context);
  if (!rep_->msg.empty()) msg += ": " + rep_->msg;
  return Status(rep_->err, rep_->kind, msg);
}

Status Status::Replacing(std::string_view from, std::string_view to) const {
  if (ok() || from.empty()) return *this;
  return Status(rep_->err, rep_->kind, ReplacedAll(rep_->msg, from, to));
}

std::string ReplacedAll(std::string text, std::string_view from, std::string_view to) {
  if (from.empty()) return text;
  auto name_char = [&](size_t at) {
    if (at >= text.size()) return false;
    const char c = text[at];
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  };
  // A '.' ends a sentence unless a name goes on after it.
  auto continues = [&](size_t end) {
    return name_char(end) && (text[end] != '.' || name_char(end + 1));
  };
  for (size_t at = text.find(from); at != std::string::npos;) {
    if (continues(at + from.size())) {
      at = text.find(from, at + 1);
      continue;
    }
    text.replace(at, from.size(), to);
    at = text.find(from, at + to.size());
  }
  return text;
}

}  // namespace sepfs
