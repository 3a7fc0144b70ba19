// Readahead policy of the filesystem: when to ask the vLog Prefetcher for
// which blocks. Pure bookkeeping; the Filesystem looks the pointers up and
// issues the prefetches (file_read.cc).
//
//   SequentialDetector  one per open file handle: grows a window of blocks
//                       to prefetch ahead while reads continue where the
//                       previous one ended, resets it on a jump.
//   DirLearner          per directory: did prefetching the first blocks of
//                       a listing's files pay off lately? If not, stop.
//   DirStreams          the readdir trigger: the regular files of recent
//                       listings in listing order; prefetches a window of
//                       files ahead of the last one read ("list, then read
//                       every file"), cancels a listing nobody reads.
//   PrefetchEngine      what the Filesystem owns: cache, pool, streams.
//
// Thread safety: every class here may be used concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vlog/block_cache.h"
#include "vlog/prefetcher.h"
#include "vlog/value_log.h"

namespace sepfs::fs {

struct ReadaheadOptions {
  uint32_t initial_blocks = 4;        // first window after a sequential start
  // Window cap in blocks and in bytes. A new range goes out when less than
  // half a window is left, so the lead over the reader is half to a whole
  // window: with 4 MiB the kernel's 1 MiB readahead caught up with reads still
  // on the disk (a fifth of them waited); 32 MiB read a cold 2 GiB file
  // about 20% faster (bench/RESULTS.md). The engine caps it further by the
  // data cache's size (PrefetchEngine::window_bytes).
  uint32_t max_blocks = 512;
  uint64_t max_bytes = 32ull << 20;
  // A read starting within min(slack_bytes, 32 x its length) of where the
  // previous one ended still counts as sequential: with async reads and
  // several FUSE threads, the kernel's readahead requests arrive out of
  // order. Small random reads get a small tolerance. The kernel keeps two
  // 1 MiB readahead windows in flight (read_ahead_kb, raised at mount), 16
  // READs of 128 KiB, and a cold 2 GiB read saw them arrive up to 2 MiB
  // apart: with 1 MiB of slack the window reset at every such swap, and each
  // reset asked the prefetcher again for the blocks it already had (375 000
  // cache lookups for 32 768 blocks: bench/RESULTS.md).
  uint64_t slack_bytes = 4ull << 20;
  // No window opens before a sequential read reaches this offset: the
  // kernel's own readahead (read_ahead_kb, raised to 1 MiB at mount) already
  // asks for the start of the file in large requests, and prefetching it a
  // second time only adds copies (measured: photo-read 10-15% slower with
  // the window opening at offset 0). 0 = open at the first read.
  uint64_t start_bytes = 1ull << 20;
};

// Blocks [first, end) of one file.
struct BlockRange {
  uint64_t first = 0;
  uint64_t end = 0;
  bool empty() const { return first >= end; }
};

class SequentialDetector {
 public:
  explicit SequentialDetector(const ReadaheadOptions& options = {}) : opt_(options) {}

  // Reports a read of [off, off + len) of a file of file_size bytes, and
  // returns the blocks to prefetch now: the blocks after the read, up to
  // the window, that this detector has not returned before. Sequential
  // (starts at 0, or where the last read ended, within slack): the window
  // starts at initial_blocks and doubles up to the cap. A jump resets the
  // window to 0 (nothing is prefetched). To batch requests, a new range is
  // returned only when less than half a window is left ahead of the read.
  // Nothing is returned until a sequential read ends at start_bytes or later.
  // max_bytes, when smaller than the options', caps the window for this call.
  BlockRange OnRead(uint64_t off, uint64_t len, uint64_t file_size, uint32_t block_size,
                    uint64_t max_bytes = UINT64_MAX);
  uint64_t window() const;  // blocks

 private:
  static constexpr uint64_t kSlackReads = 32;
  const ReadaheadOptions opt_;
  mutable std::mutex mu_;
  bool started_ = false;
  uint64_t next_off_ = 0;   // where a sequential read would start
  uint64_t window_ = 0;     // blocks
  uint64_t issued_end_ = 0; // blocks below this were returned already
};

// Per-open-file state of a FUSE file handle (fi->fh).
struct FileHandle {
  SequentialDetector seq;
};

// Recent outcome of readdir-triggered prefetch, per directory: hits (files
// whose first blocks were prefetched and then read) and waste (prefetched,
// never read). Both counts are halved whenever together they pass memory
// files, so the ratio follows the last hundred or so files whatever the
// size of the listings (halving per listing kept listings of a few files
// below min_samples for ever: dbench's were prefetched on every listing,
// 0.3% of them read). A directory with at least min_samples and a hit
// ratio below min_hit_ratio is not prefetched, except for one probe listing
// in every probe_every. A directory without history is judged the same way
// by the score of all recent listings (ls -lR, find: only the first two
// directories of a walk that never reads are prefetched).
class DirLearner {
 public:
  struct Options {
    double min_samples = 48;  // two unread 32-file listings
    double memory = 128;      // at least 2 x min_samples
    double min_hit_ratio = 0.25;
    unsigned probe_every = 8;
    size_t max_dirs = 4096;  // forgets everything beyond this
  };
  DirLearner() : DirLearner(Options{}) {}
  explicit DirLearner(const Options& options) : opt_(options) {}

  bool ShouldPrefetch(uint64_t dir);
  void Record(uint64_t dir, uint64_t hits, uint64_t wasted);
  // Recent hit ratio of dir; 1 when it has no history.
  double HitRatio(uint64_t dir) const;

 private:
  struct Score {
    double hits = 0;
    double wasted = 0;
    unsigned skipped = 0;
  };
  const Options opt_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Score> dirs_;
  Score global_;  // every directory's listings; decides for new directories
};

// Files to prefetch for a directory stream; tag identifies the listing
// (Prefetcher::Cancel). Empty inos: nothing to do. cancel: tags of older
// listings whose outstanding prefetches nobody wants.
struct DirPrefetch {
  uint64_t tag = 0;
  std::vector<uint64_t> inos;
  std::vector<uint64_t> cancel;
};

class DirStreams {
 public:
  struct Options {
    size_t initial_files = 32;  // prefetched when the listing is taken
    size_t max_ahead = 256;     // files ahead of the last one read
    size_t max_files = 65536;         // files remembered per listing
    size_t max_dirs = 64;             // listings remembered (oldest dropped)
    size_t max_total_files = 262144;  // over all listings (oldest dropped;
                                      // about 80 bytes each)
    // A listing none of whose files was read while this many newer
    // listings (of any directory) were taken is scored as waste and
    // cancelled.
    size_t unread_listings = 4;
  };
  DirStreams() : DirStreams(Options{}) {}
  explicit DirStreams(const Options& options) : opt_(options) {}

  // A listing of dir was taken; files are its regular files in listing
  // order. Replaces (and scores) an older stream of dir, whose tag goes to
  // `cancel`. Returns the first files to prefetch, none if the learner
  // advises against it. Readdir has no close (no OPENDIR/RELEASEDIR), so a
  // listing ends for the learner when unread_listings newer ones were taken
  // and none of its files was read: its prefetch is scored as waste, its
  // tag goes to `cancel`, and later reads restart it from where they are
  // (ls -l, or a glob read much later).
  DirPrefetch OnListing(uint64_t dir, const std::vector<uint64_t>& files);
  // A read of ino. The first read of a listed file counts as a hit if its
  // blocks were prefetched, widens the window and returns the next files.
  DirPrefetch OnRead(uint64_t ino);

  DirLearner& learner() { return learner_; }
  uint64_t streams_started() const;

 private:
  struct Stream {
    uint64_t dir = 0;
    uint64_t tag = 0;
    std::vector<uint64_t> files;
    std::vector<bool> read;
    std::vector<bool> fetched;  // issued (and not cancelled since)
    size_t next = 0;    // files[0, next) were issued or skipped
    size_t window = 0;  // files ahead of the last read
    uint64_t issued = 0, hits = 0, reads = 0;
    uint64_t listed_at = 0;  // listings_ when it was taken
  };
  // Scores and forgets the stream of dir; returns its tag, 0 if there was
  // none (mu_ held).
  uint64_t EndLocked(uint64_t dir);
  DirPrefetch IssueLocked(Stream& s, size_t upto);
  // Scores and resets the unread streams with unread_listings newer
  // listings; adds their tags to *tags (mu_ held).
  void RetireUnreadLocked(std::vector<uint64_t>* tags);

  const Options opt_;
  DirLearner learner_;
  mutable std::mutex mu_;
  uint64_t next_tag_ = 1;
  uint64_t listings_ = 0;  // OnListing calls
  std::unordered_map<uint64_t, Stream> streams_;        // by dir
  std::deque<uint64_t> order_;                          // dirs, oldest first
  // Listed ino -> (dir, index in its stream); a file in two listings
  // belongs to the newer one.
  std::unordered_map<uint64_t, std::pair<uint64_t, size_t>> file_dir_;
  size_t total_files_ = 0;  // over streams_
  uint64_t started_ = 0;
};

// The prefetch machinery a Filesystem owns. Members are destroyed in
// reverse order: the pool (which joins its workers) before the cache.
struct PrefetchEngine {
  PrefetchEngine(vlog::ValueLog* vlog, uint64_t cache_bytes, uint64_t block_size,
                 unsigned threads)
      : cache(cache_bytes, /*num_shards=*/16, /*largest_entry=*/block_size),
        prefetcher(vlog, &cache, PoolOptions(threads)),
        window_bytes(cache_bytes / 8) {}
  static vlog::PrefetcherOptions PoolOptions(unsigned threads) {
    vlog::PrefetcherOptions o;
    o.threads = threads;
    return o;
  }
  vlog::BlockCache cache;
  vlog::Prefetcher prefetcher;
  DirStreams dirs;
  // A sequential reader's window takes at most this much of the cache, so
  // a few readers' windows fit in it beside what they have just read.
  const uint64_t window_bytes;
};

}  // namespace sepfs::fs
