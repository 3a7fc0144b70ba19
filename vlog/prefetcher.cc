#include "vlog/prefetcher.h"

#include <algorithm>
#include <cstring>

namespace sepfs::vlog {

namespace {

bool SameRecord(const PrefetchRequest& a, const BlockPtr& ptr, uint64_t inode, uint64_t block) {
  return a.ptr == ptr && a.inode == inode && a.block == block;
}

}  // namespace

Prefetcher::Prefetcher(ValueLog* vlog, BlockCache* cache, const PrefetcherOptions& options)
    : vlog_(vlog), cache_(cache), opt_(options) {
  const unsigned n = std::max(1u, opt_.threads);
  workers_.reserve(n);
  for (unsigned i = 0; i < n; i++) workers_.emplace_back([this] { WorkerLoop(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    for (const JobRef& j : queue_) {
      if (!j->dropped) DropLocked(j);
    }
    queue_.clear();
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void Prefetcher::DropLocked(const JobRef& job) {
  job->dropped = true;
  queued_--;
  queued_bytes_ -= job->req.ptr.length;
  auto it = pending_.find(KeyOf(job->req.ptr));
  if (it != pending_.end() && it->second == job) pending_.erase(it);
}

size_t Prefetcher::Prefetch(std::vector<PrefetchRequest> reqs) {
  if (!cache_->enabled() || reqs.empty()) return 0;  // nowhere to keep the data
  // Physically adjacent requests end up next to each other in the queue,
  // where a worker merges them into one read.
  std::sort(reqs.begin(), reqs.end(), [](const PrefetchRequest& a, const PrefetchRequest& b) {
    return a.ptr.segment != b.ptr.segment ? a.ptr.segment < b.ptr.segment
                                          : a.ptr.offset < b.ptr.offset;
  });
  size_t queued = 0, skipped = 0, dropped = 0;
  std::vector<bool> cached(reqs.size());
  for (size_t i = 0; i < reqs.size(); i++) {
    cached[i] = cache_->Contains(reqs[i].ptr, reqs[i].inode, reqs[i].block);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < reqs.size(); i++) {
      const PrefetchRequest& r = reqs[i];
      if (stop_) {
        dropped++;
        continue;
      }
      if (cached[i] || pending_.count(KeyOf(r.ptr))) {
        skipped++;
        continue;
      }
      if (queued_ >= opt_.max_queued || queued_bytes_ + r.ptr.length > opt_.max_queued_bytes) {
        dropped++;
        continue;
      }
      auto job = std::make_shared<Job>();
      job->req = r;
      pending_[KeyOf(r.ptr)] = job;
      queue_.push_back(std::move(job));
      queued_++;
      queued_bytes_ += r.ptr.length;
      queued++;
    }
    stats_.issued += queued;
    stats_.skipped += skipped;
    stats_.dropped += dropped;
  }
  if (queued == 1) {
    work_cv_.notify_one();
  } else if (queued > 1) {
    work_cv_.notify_all();
  }
  return queued;
}

size_t Prefetcher::Cancel(uint64_t tag) {
  if (tag == 0) return 0;
  size_t n = 0;
  std::lock_guard<std::mutex> l(mu_);
  for (const JobRef& j : queue_) {
    if (!j->dropped && j->req.tag == tag) {
      DropLocked(j);
      n++;
    }
  }
  // Dropped jobs stay in queue_ until a worker pops them; trim the front.
  while (!queue_.empty() && queue_.front()->dropped) queue_.pop_front();
  stats_.cancelled += n;
  return n;
}

void Prefetcher::WorkerLoop() {
  std::vector<JobRef> group;
  for (;;) {
    group.clear();
    {
      std::unique_lock<std::mutex> l(mu_);
      work_cv_.wait(l, [&] { return stop_ || (!paused_ && queued_ > 0); });
      if (stop_) return;
      while (!queue_.empty() && group.empty()) {
        JobRef j = std::move(queue_.front());
        queue_.pop_front();
        if (!j->dropped) group.push_back(std::move(j));
      }
      if (group.empty()) continue;
      const BlockPtr& first = group.front()->req.ptr;
      uint64_t end = first.offset + first.record_size();
      uint64_t bytes = first.record_size();
      while (!queue_.empty() && group.size() < 256) {
        const JobRef& j = queue_.front();
        if (j->dropped) {
          queue_.pop_front();
          continue;
        }
        const BlockPtr& p = j->req.ptr;
        if (p.segment != first.segment || p.offset != end ||
            bytes + p.record_size() > opt_.max_group_bytes) {
          break;
        }
        end += p.record_size();
        bytes += p.record_size();
        group.push_back(j);
        queue_.pop_front();
      }
      for (const JobRef& j : group) {
        j->started = true;
        queued_--;
        queued_bytes_ -= j->req.ptr.length;
      }
    }
    RunGroup(group);
  }
}

void Prefetcher::RunGroup(std::vector<JobRef>& group) {
  std::vector<ReadRequest> rr(group.size());
  std::vector<std::shared_ptr<std::string>> bufs(group.size());
  std::vector<RecordRef> data(group.size());
  for (size_t i = 0; i < group.size(); i++) {
    const PrefetchRequest& q = group[i]->req;
    bufs[i] = cache_->NewBuffer(q.ptr.length);
    rr[i].ptr = q.ptr;
    rr[i].inode = q.inode;
    rr[i].block = q.block;
    rr[i].buf = bufs[i]->data();
    rr[i].in_place = &data[i];
    rr[i].quiet = true;  // a failure only means no prefetch: the reader reports it
  }
  (void)vlog_->ReadMany(rr);  // per-request statuses below
  // Cached before the jobs are marked done: a reader that finds neither a
  // pending job nor a cache entry is never possible for a good record.
  for (size_t i = 0; i < group.size(); i++) {
    if (!rr[i].status.ok()) continue;
    if (data[i] == nullptr) data[i] = RefOf(std::move(bufs[i]));
    cache_->Insert(rr[i].ptr, rr[i].inode, rr[i].block, data[i], /*prefetched=*/true,
                   rr[i].in_place_share);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stats_.reads++;
    for (size_t i = 0; i < group.size(); i++) {
      Job& j = *group[i];
      j.done = true;
      j.status = rr[i].status;
      if (j.status.ok()) {
        j.data = std::move(data[i]);
        j.in_place = rr[i].in_place_share > 0;
        stats_.completed++;
      } else {
        stats_.failed++;
      }
      auto it = pending_.find(KeyOf(j.req.ptr));
      if (it != pending_.end() && it->second == group[i]) pending_.erase(it);
    }
  }
  done_cv_.notify_all();
}

void Prefetcher::Deliver(ReadRequest& r, RecordRef data) {
  if (r.ref != nullptr) {
    *r.ref = std::move(data);
  } else if (r.ptr.length > 0) {
    std::memcpy(r.buf, data->data(), r.ptr.length);
  }
}

void Prefetcher::LeaveSharedBuffer(const ReadRequest& r, RecordRef* data) {
  if (r.once) {
    cache_->Erase(r.ptr);
    return;
  }
  std::shared_ptr<std::string> own = cache_->NewBuffer(r.ptr.length);
  if (r.ptr.length > 0) std::memcpy(own->data(), (*data)->data(), r.ptr.length);
  *data = RefOf(std::move(own));
  cache_->Insert(r.ptr, r.inode, r.block, *data, /*prefetched=*/false);
}

Status Prefetcher::Read(std::span<ReadRequest> reqs) {
  uint64_t cache_hits = 0, pf_hits = 0, waited = 0, taken = 0;
  std::vector<size_t> misses;
  for (size_t i = 0; i < reqs.size(); i++) {
    ReadRequest& r = reqs[i];
    CacheHit h = cache_->Lookup(r.ptr, r.inode, r.block);
    if (h.data != nullptr && h.data->size() == r.ptr.length) {
      if (h.in_place) LeaveSharedBuffer(r, &h.data);
      Deliver(r, std::move(h.data));
      r.status = Status::OK();
      cache_hits++;
      if (h.prefetched) pf_hits++;
    } else {
      misses.push_back(i);
    }
  }
  std::vector<size_t> direct;
  std::vector<std::pair<size_t, JobRef>> waits;
  if (!misses.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i : misses) {
      const ReadRequest& r = reqs[i];
      auto it = pending_.find(KeyOf(r.ptr));
      if (it == pending_.end() || !SameRecord(it->second->req, r.ptr, r.inode, r.block)) {
        direct.push_back(i);
      } else if (it->second->started) {
        waits.emplace_back(i, it->second);
      } else {
        DropLocked(it->second);  // not started: the caller reads it now
        taken++;
        direct.push_back(i);
      }
    }
  }
  // The caller's own reads run while the prefetches it waits for finish.
  auto read_direct = [&](const std::vector<size_t>& which) {
    if (which.empty()) return;
    const bool keep = opt_.cache_foreground && cache_->enabled();
    std::vector<ReadRequest> sub(which.size());
    // Records to cache or hand over are read in place or into a cache
    // buffer; the others straight into the caller's buffer.
    std::vector<std::shared_ptr<std::string>> bufs(which.size());
    std::vector<RecordRef> data(which.size());
    for (size_t k = 0; k < which.size(); k++) {
      const ReadRequest& r = reqs[which[k]];
      sub[k].ptr = r.ptr;
      sub[k].inode = r.inode;
      sub[k].block = r.block;
      if (keep || r.ref != nullptr) {
        bufs[k] = cache_->NewBuffer(r.ptr.length);
        sub[k].buf = bufs[k]->data();
        sub[k].in_place = &data[k];
      } else {
        sub[k].buf = r.buf;
      }
    }
    (void)vlog_->ReadMany(sub);
    for (size_t k = 0; k < which.size(); k++) {
      ReadRequest& r = reqs[which[k]];
      r.status = std::move(sub[k].status);
      if (!r.status.ok() || bufs[k] == nullptr) continue;
      if (data[k] == nullptr) data[k] = RefOf(std::move(bufs[k]));
      if (keep && !r.once) {
        cache_->Insert(r.ptr, r.inode, r.block, data[k], /*prefetched=*/false,
                       sub[k].in_place_share);
      }
      Deliver(r, std::move(data[k]));
    }
  };
  read_direct(direct);
  std::vector<size_t> retry;
  for (auto& [i, job] : waits) {
    RecordRef data;
    bool in_place = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      done_cv_.wait(l, [&] { return job->done; });
      data = job->data;
      in_place = job->in_place;
    }
    waited++;
    ReadRequest& r = reqs[i];
    if (data != nullptr && data->size() == r.ptr.length) {
      // The worker cached it as an unused prefetch; it was used now.
      cache_->MarkUsed(r.ptr, r.inode, r.block);
      if (in_place) LeaveSharedBuffer(r, &data);
      Deliver(r, std::move(data));
      r.status = Status::OK();
      pf_hits++;
    } else {
      retry.push_back(i);  // the prefetch failed: read (and report) it ourselves
    }
  }
  read_direct(retry);
  {
    std::lock_guard<std::mutex> l(mu_);
    stats_.fg_requests += reqs.size();
    stats_.fg_cache_hits += cache_hits;
    stats_.hits += pf_hits;
    stats_.waits += waited;
    stats_.cancelled += taken;
  }
  for (const ReadRequest& r : reqs) {
    if (!r.status.ok()) return r.status;
  }
  return Status::OK();
}

PrefetcherStats Prefetcher::stats() const {
  PrefetcherStats s;
  {
    std::lock_guard<std::mutex> l(mu_);
    s = stats_;
  }
  s.wasted_bytes = cache_->stats().evicted_unused_bytes;
  return s;
}

void Prefetcher::TEST_Pause(bool paused) {
  {
    std::lock_guard<std::mutex> l(mu_);
    paused_ = paused;
  }
  work_cv_.notify_all();
}

size_t Prefetcher::TEST_Pending() const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.size();
}

}  // namespace sepfs::vlog
