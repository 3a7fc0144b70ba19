#include "fs/readahead.h"

#include <algorithm>

namespace sepfs::fs {

BlockRange SequentialDetector::OnRead(uint64_t off, uint64_t len, uint64_t file_size,
                                      uint32_t block_size, uint64_t max_bytes) {
  BlockRange r;
  if (len == 0 || block_size == 0) return r;
  const uint64_t end = off + len;
  const uint64_t bytes = std::min(opt_.max_bytes, max_bytes);
  const uint64_t cap = std::max<uint64_t>(1, std::min<uint64_t>(opt_.max_blocks, bytes / block_size));
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t slack = std::min<uint64_t>(opt_.slack_bytes, kSlackReads * len);
  const bool sequential =
      started_ ? off + slack >= next_off_ && off <= next_off_ + slack : off == 0;
  started_ = true;
  if (!sequential) {
    window_ = 0;
    issued_end_ = 0;
    next_off_ = end;
    return r;
  }
  next_off_ = std::max(next_off_, end);
  if (next_off_ < opt_.start_bytes) return r;  // the kernel's readahead covers it
  window_ = window_ == 0 ? std::min<uint64_t>(opt_.initial_blocks, cap)
                         : std::min<uint64_t>(window_ * 2, cap);
  const uint64_t nblocks = (file_size + block_size - 1) / block_size;
  const uint64_t after = (end - 1) / block_size + 1;  // first block after the read
  if (issued_end_ > after && issued_end_ - after >= (window_ + 1) / 2) return r;
  r.first = std::max(after, issued_end_);
  r.end = std::min(nblocks, after + window_);
  if (r.empty()) return BlockRange{};
  issued_end_ = r.end;
  return r;
}

uint64_t SequentialDetector::window() const {
  std::lock_guard<std::mutex> l(mu_);
  return window_;
}

// ---------------------------------------------------------------------------

bool DirLearner::ShouldPrefetch(uint64_t dir) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = dirs_.find(dir);
  // A directory without history is judged by recent listings anywhere: a
  // tree walk that only lists (ls -lR, find) stops paying after two of them.
  Score& s = it == dirs_.end() ? global_ : it->second;
  const double n = s.hits + s.wasted;
  if (n < opt_.min_samples || s.hits >= opt_.min_hit_ratio * n) return true;
  if (++s.skipped >= opt_.probe_every) {
    s.skipped = 0;
    return true;  // probe: the workload may have changed
  }
  return false;
}

void DirLearner::Record(uint64_t dir, uint64_t hits, uint64_t wasted) {
  if (hits == 0 && wasted == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  if (dirs_.size() >= opt_.max_dirs && !dirs_.count(dir)) dirs_.clear();
  for (Score* s : {&dirs_[dir], &global_}) {
    s->hits += static_cast<double>(hits);
    s->wasted += static_cast<double>(wasted);
    while (s->hits + s->wasted > opt_.memory) {
      s->hits /= 2;
      s->wasted /= 2;
    }
  }
}

double DirLearner::HitRatio(uint64_t dir) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || it->second.hits + it->second.wasted == 0) return 1.0;
  return it->second.hits / (it->second.hits + it->second.wasted);
}

// ---------------------------------------------------------------------------

uint64_t DirStreams::EndLocked(uint64_t dir) {
  auto it = streams_.find(dir);
  if (it == streams_.end()) return 0;
  Stream& s = it->second;
  const uint64_t tag = s.tag;
  learner_.Record(dir, s.hits, s.issued > s.hits ? s.issued - s.hits : 0);
  for (uint64_t ino : s.files) {
    auto f = file_dir_.find(ino);
    if (f != file_dir_.end() && f->second.first == dir) file_dir_.erase(f);
  }
  total_files_ -= s.files.size();
  streams_.erase(it);
  order_.erase(std::remove(order_.begin(), order_.end(), dir), order_.end());
  return tag;
}

DirPrefetch DirStreams::IssueLocked(Stream& s, size_t upto) {
  DirPrefetch p;
  p.tag = s.tag;
  upto = std::min(upto, s.files.size());
  for (; s.next < upto; s.next++) {
    if (s.read[s.next]) continue;  // already read: nothing to gain
    s.fetched[s.next] = true;
    p.inos.push_back(s.files[s.next]);
    s.issued++;
  }
  return p;
}

DirPrefetch DirStreams::OnListing(uint64_t dir, const std::vector<uint64_t>& files) {
  std::lock_guard<std::mutex> l(mu_);
  listings_++;
  DirPrefetch p;
  if (const uint64_t tag = EndLocked(dir)) p.cancel.push_back(tag);
  RetireUnreadLocked(&p.cancel);
  if (files.empty() || !learner_.ShouldPrefetch(dir)) return p;
  const size_t n = std::min({files.size(), opt_.max_files, opt_.max_total_files});
  while ((streams_.size() >= opt_.max_dirs || total_files_ + n > opt_.max_total_files) &&
         !order_.empty()) {
    if (const uint64_t tag = EndLocked(order_.front())) p.cancel.push_back(tag);
  }
  Stream& s = streams_[dir];
  s.dir = dir;
  s.tag = next_tag_++;
  s.listed_at = listings_;
  s.files.assign(files.begin(), files.begin() + n);
  total_files_ += n;
  s.read.assign(s.files.size(), false);
  s.fetched.assign(s.files.size(), false);
  s.window = opt_.initial_files;
  for (size_t i = 0; i < s.files.size(); i++) file_dir_[s.files[i]] = {dir, i};
  order_.push_back(dir);
  started_++;
  DirPrefetch first = IssueLocked(s, opt_.initial_files);
  p.tag = first.tag;
  p.inos = std::move(first.inos);
  return p;
}

DirPrefetch DirStreams::OnRead(uint64_t ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto f = file_dir_.find(ino);
  if (f == file_dir_.end()) return {};
  auto it = streams_.find(f->second.first);
  if (it == streams_.end()) return {};
  Stream& s = it->second;
  const size_t idx = f->second.second;
  if (idx >= s.files.size() || s.read[idx]) return {};
  s.read[idx] = true;
  s.reads++;
  // A hit only if its blocks were fetched: files the window skipped over
  // (read out of listing order) were never issued.
  if (s.fetched[idx]) s.hits++;
  s.window = std::min(opt_.max_ahead, std::max<size_t>(s.window * 2, 1));
  if (s.next <= idx) s.next = idx + 1;  // skipped over: no use fetching behind
  return IssueLocked(s, idx + 1 + s.window);
}

void DirStreams::RetireUnreadLocked(std::vector<uint64_t>* tags) {
  for (auto& [dir, s] : streams_) {
    if (s.reads > 0 || s.next == 0 || listings_ - s.listed_at < opt_.unread_listings) continue;
    learner_.Record(dir, 0, s.issued);
    s.issued = 0;
    s.next = 0;
    s.fetched.assign(s.fetched.size(), false);  // cancelled
    s.window = opt_.initial_files;
    tags->push_back(s.tag);
  }
}

uint64_t DirStreams::streams_started() const {
  std::lock_guard<std::mutex> l(mu_);
  return started_;
}

}  // namespace sepfs::fs
