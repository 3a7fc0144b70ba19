// Prefetcher: a bounded thread pool that reads upcoming vLog records into a
// BlockCache ahead of the reads that will want them (WiscKey 3.3.1: many
// small value reads in parallel instead of one after another).
//
// Prefetch() never blocks on I/O: requests already cached or already queued
// or being read are skipped, the rest join a bounded FIFO queue (requests
// that do not fit are dropped and counted). Each worker takes the oldest
// request plus the queued requests that are physically adjacent to it in the
// same segment, reads them with one ValueLog::ReadMany (one pread), and
// caches the verified data (marked as prefetched). A failed prefetch caches
// nothing.
//
// Read() serves FOREGROUND reads and never queues them behind prefetches:
//   - a request whose record is cached (exact pointer match) is copied, or
//     handed over without a copy when the request asks for it (ref; but
//     see LeaveSharedBuffer for records in place);
//   - a request whose record a worker is reading right now waits for that
//     read (no second I/O for the same bytes); if it failed, the caller
//     retries the record itself and reports that result;
//   - a request that is only queued is taken out of the queue and read by
//     the caller, like everything else, with one ValueLog::ReadMany.
// Records read by the caller are cached (not marked prefetched) when
// options.cache_foreground is set, except requests marked `once`.
//
// Records are read in place where the vLog can (ReadRequest::in_place:
// runs read directly into a shared buffer, no copy). A `once` request that
// takes such a record from the cache also drops it there, and any other
// request that reads it replaces the entry with a copy of its own, so that
// the buffer is freed once readers have read each of its records.
//
// Cancel(tag) drops queued, unstarted requests that carry `tag` (e.g. the
// prefetches of a directory listing nobody follows up on).
//
// The destructor drops the queue, lets running reads finish and joins the
// workers. The ValueLog and the BlockCache must outlive the Prefetcher.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vlog/block_cache.h"
#include "vlog/value_log.h"

namespace sepfs::vlog {

struct PrefetchRequest {
  BlockPtr ptr;
  uint64_t inode = 0;  // expected owner
  uint64_t block = 0;  // expected block number
  uint64_t tag = 0;    // for Cancel(); 0 = none
};

struct PrefetcherOptions {
  unsigned threads = 8;
  size_t max_queued = 4096;                  // requests waiting for a worker
  uint64_t max_queued_bytes = 128ull << 20;  // record bytes waiting for a worker
  uint64_t max_group_bytes = 1ull << 20;     // adjacent records merged into one read
  bool cache_foreground = true;              // cache records read by Read()
};

struct PrefetcherStats {
  uint64_t issued = 0;     // requests queued
  uint64_t skipped = 0;    // already cached, queued or being read
  uint64_t dropped = 0;    // queue full
  uint64_t cancelled = 0;  // removed by Cancel() or taken over by Read()
  uint64_t completed = 0;  // read and cached
  uint64_t failed = 0;     // read failed (nothing cached)
  uint64_t reads = 0;      // ReadMany calls by the workers
  uint64_t hits = 0;       // foreground requests served from prefetched data
  uint64_t waits = 0;      // foreground requests that waited for a running prefetch
  uint64_t wasted_bytes = 0;  // prefetched bytes evicted before any use
  uint64_t fg_requests = 0;   // foreground requests
  uint64_t fg_cache_hits = 0; // foreground requests served by the cache (any origin)
};

class Prefetcher {
 public:
  Prefetcher(ValueLog* vlog, BlockCache* cache, const PrefetcherOptions& options);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Queues what is not cached, queued or being read yet. Returns how many
  // requests were queued (none when the cache is disabled).
  size_t Prefetch(std::vector<PrefetchRequest> reqs);

  // Foreground read of reqs (see above). Each request's status says whether
  // it was read; returns the first error (EIO for a bad record).
  Status Read(std::span<ReadRequest> reqs);

  // Drops queued, unstarted requests carrying tag (tag != 0). Returns how many.
  size_t Cancel(uint64_t tag);

  PrefetcherStats stats() const;
  BlockCache* cache() const { return cache_; }

  // Tests: while paused, workers start no new reads.
  void TEST_Pause(bool paused);
  // Tests: requests queued or being read.
  size_t TEST_Pending() const;

 private:
  // One record queued or being read.
  struct Job {
    PrefetchRequest req;
    bool started = false;   // a worker is reading it
    bool done = false;      // finished (data set on success)
    bool dropped = false;   // cancelled or taken over before it started
    Status status;
    RecordRef data;
    bool in_place = false;  // data is a share of a larger read buffer
  };
  using JobRef = std::shared_ptr<Job>;
  static uint64_t KeyOf(const BlockPtr& p) {
    return (uint64_t{p.segment} << 32) | p.offset;
  }
  // Removes job (queued, unstarted) from pending_ and marks it dropped (mu_ held).
  void DropLocked(const JobRef& job);
  // Gives a foreground request its verified data: by reference or by copy.
  static void Deliver(ReadRequest& r, RecordRef data);
  // r found its record (*data) in place in a shared read buffer: the
  // record leaves that buffer. Taken whole by a reader that keeps it
  // (once), it leaves the cache; read any other way (e.g. in part, by a
  // READ not aligned to the blocks), the cache keeps a copy of its own, for
  // the read that takes the rest, and *data becomes that copy.
  void LeaveSharedBuffer(const ReadRequest& r, RecordRef* data);
  void WorkerLoop();
  void RunGroup(std::vector<JobRef>& group);

  ValueLog* const vlog_;
  BlockCache* const cache_;
  const PrefetcherOptions opt_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ non-empty, unpaused, or stop_
  std::condition_variable done_cv_;  // some job finished
  std::deque<JobRef> queue_;         // may hold dropped jobs, skipped by workers
  size_t queued_ = 0;                // live (not dropped) jobs in queue_
  uint64_t queued_bytes_ = 0;
  // Queued and running jobs by (segment, offset).
  std::unordered_map<uint64_t, JobRef> pending_;
  bool stop_ = false;
  bool paused_ = false;
  PrefetcherStats stats_;  // guarded by mu_ (wasted_bytes comes from the cache)
  std::vector<std::thread> workers_;
};

}  // namespace sepfs::vlog
