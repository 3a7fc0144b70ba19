// GC job: relocates the live records of one sealed segment and deletes it.
//
// The job reaches the filesystem's metadata only through GcIndex, which the
// filesystem implements (vlog/ knows nothing of fs/). Which segment to
// collect is decided apart from the job, by vlog/gc_picker.h.
//
// CollectSegment(vlog, index, victim) does, in this order (the order is the
// crash-safety contract):
//
//   1. Scan the victim front to back (ValueLog::ScanSegment, sequential
//      reads). A record is live iff index->IsLive(inode, block, ptr): the
//      index maps (inode, block) to exactly this record right now.
//      A victim whose live count releases brought down to zero since the
//      counts were installed (SegmentInfo::emptied) is not read at (1) and
//      (2): the count is exact (each record counts from its append until
//      its pointer is replaced or removed), a sealed segment never gains a
//      record, and so no pointer names it. Batch deletes leave such
//      segments, which went back through the disk and the checksum at full
//      size before (as LFS's cleaner and F2FS free a segment of no valid
//      blocks by its usage count alone). A count that is zero since the
//      mount is not trusted so: a checkpoint an older binary left stale
//      knows nothing of the segments it wrote since, and installs zero.
//   2. Collect live records into a batch of at most about batch_bytes record
//      bytes (bounded memory); when it is full, and at the end of the scan:
//      a. sort the batch by (inode, block), so a file's blocks become
//         contiguous in the destination (sequential reads stay sequential);
//      b. Append each record to o.dest, or to o.old_dest if it is at least
//         o.old_after_seqs sequence numbers old (fresh seq numbers);
//      c. vlog->Sync(): the copies are durable BEFORE any pointer moves;
//      d. index->SwapPointers(batch): one atomic, durable compare-and-set
//         batch; a relocation whose (inode, block) no longer maps to `from`
//         (a concurrent user write or delete) is not installed — the user's
//         change wins;
//      e. live accounting: Release(from) for each installed relocation (the
//         old copy is garbage now), Release(to) for each one that lost the
//         race (the new copy was never referenced).
//   3. After the last batch: index->Quiesce(DeleteSegment(victim)), so no
//      reader can still follow a pointer into the victim that it read before
//      the swap.
//
// A crash at any step loses nothing: before (d) is durable the copies are
// unreferenced garbage (a later GC of their segment finds them dead) and the
// old pointers still point into the intact victim; after (d) every pointer
// into the victim is gone, so it is all garbage, and if the deletion did not
// happen it is simply collected again (finding nothing live).
//
// Failures: any error stops the job WITHOUT deleting the victim and is
// returned; batches already swapped stay swapped (that is consistent). The
// copies of the failed batch are released as garbage. A damaged record in
// the victim (ScanSegment reports it) is passed over: the scan goes on at
// the next whole record. Once every whole record is relocated, the victim's
// live count says whether any live byte is in the damage: if so the job
// aborts with Corruption (errno EIO), since deleting the victim could lose
// data, and the caller should exclude the segment from picking
// (PickOptions::exclude) until it is repaired; if not (bytes appended to a
// sealed file, a file extended with zeros, damage among dead records only)
// the victim is collected as usual.
//
// Thread safety: jobs on different victims may run concurrently with each
// other and with user I/O, provided the GcIndex is thread-safe. Two jobs on
// the same victim are a caller bug (the second fails in DeleteSegment,
// nothing is lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "vlog/format.h"
#include "vlog/status.h"
#include "vlog/value_log.h"

namespace sepfs::vlog {

// One live record moved by GC: (inode, block) was at `from`, its copy is at `to`.
struct Relocation {
  uint64_t inode = 0, block = 0;
  BlockPtr from, to;
};

// The metadata view GC needs; implemented by the filesystem.
class GcIndex {
 public:
  virtual ~GcIndex() = default;

  // *live = the index maps (inode, block) exactly to ptr right now (all of
  // segment, offset, length and seq equal). A record whose pointer is being
  // installed (appended, not yet referenced) must be waited for, not called
  // dead: the job deletes the victim once no record of it is live.
  virtual Status IsLive(uint64_t inode, uint64_t block, const BlockPtr& ptr, bool* live) = 0;

  // For each relocation whose (inode, block) still maps exactly to `from`,
  // replace it by `to`, all in one atomic durable batch (compare-and-set: a
  // concurrent user write wins). Sets swapped->size() == relocs.size() and
  // (*swapped)[i] tells whether relocs[i] was installed. On a non-OK return
  // none may have been installed. The index must not call
  // ValueLog::Release for these swaps: the job does the accounting.
  virtual Status SwapPointers(const std::vector<Relocation>& relocs,
                              std::vector<bool>* swapped) = 0;

  // Calls fn() once no reader can still follow a pointer it read before
  // the swap (the fs waits for the readers that hold, from the lookup until
  // the read, the lock it takes exclusively). Returns fn's status.
  virtual Status Quiesce(const std::function<Status()>& fn) = 0;
};

// Time source for rate limiting; tests inject a fake one.
class GcClock {
 public:
  virtual ~GcClock() = default;
  virtual uint64_t NowMicros() = 0;  // monotonic
  virtual void SleepMicros(uint64_t micros) = 0;
  // steady_clock and this_thread::sleep_for. Never deleted.
  static GcClock* Default();
};

struct GcJobOptions {
  // Stream the survivors are appended to (HashKV: GC survivors are cold).
  Stream dest = Stream::kCold;
  // Survivors whose record is at least old_after_seqs sequence numbers
  // older than the newest seq at the start of the job go to old_dest
  // instead: data that has lived long is likely to live long (separating
  // survivors by age). 0 = off, everything goes to dest.
  Stream old_dest = Stream::kFrozen;
  uint64_t old_after_seqs = 0;
  // Live record bytes (headers included) gathered before a batch is
  // relocated. Bounds memory to about batch_bytes plus one record. 0: every
  // record is its own batch.
  size_t batch_bytes = 16u << 20;
  // Bounds the job's I/O (record bytes read from the victim plus record
  // bytes appended) to this rate by sleeping between records and batches.
  // 0 = unlimited.
  uint64_t max_bytes_per_sec = 0;
  GcClock* clock = nullptr;  // nullptr: GcClock::Default()
};

struct GcJobStats {
  uint64_t records_scanned = 0;    // intact records read from the victim
  uint64_t bytes_scanned = 0;      // their record bytes
  uint64_t live_records = 0;       // found live by IsLive
  uint64_t records_relocated = 0;  // whose pointer was swapped
  uint64_t bytes_moved = 0;        // record bytes appended (including lost races)
  uint64_t records_lost_race = 0;  // copied, but a user write won the swap
  uint64_t batches = 0;            // SwapPointers calls
  uint64_t bytes_freed = 0;        // size of the victim's file, once deleted
  uint64_t damaged_collected = 0;  // 1: the victim had damaged records, none of them live
  uint64_t collected_unread = 0;   // 1: nothing in the victim was live: deleted unread
  double seconds = 0;              // wall time of the job (per the clock)
  double seconds_throttled = 0;    // of which spent sleeping for the rate limit
};

// Collects segment `victim` as described at the top of this file. *stats is
// reset and then reports the work done, also on failure.
// Errors: NotFound (unknown victim), EBUSY (the victim is open: seal it
// first), InvalidArgument (bad dest or old_dest stream), Corruption (damaged victim,
// or live bytes in damaged records: victim kept, the whole records relocated), and
// whatever the vlog or the index return. The scan goes on past a damaged record at the
// next whole one; when no live byte is in damaged records, the victim is collected
// (stats->damaged_collected).
Status CollectSegment(ValueLog* vlog, GcIndex* index, uint32_t victim, const GcJobOptions& o,
                      GcJobStats* stats);

}  // namespace sepfs::vlog
