// MountOptions: the -o options sepfs understands itself; the rest are passed
// to libfuse / the kernel (allow_other, ro, nosuid, ...).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vlog/status.h"

namespace sepfs::fs {

// Bounds of the options given in seconds. inf or 1e300 would overflow the
// clocks they are added to (the flusher then spins); a flush interval of
// nanoseconds spins it too.
constexpr double kMaxSeconds = 1e6;
constexpr double kMinFlushInterval = 0.001;

// FUSE worker threads when threads= is not given: twice the CPUs, at
// least 4 and at most 32. Enough for requests that wait (fsync, reads from the disk) to
// leave threads for the rest (varmail needs 4 on 2 CPUs), and no more: on
// 2 CPUs, 8 threads ran fileserver and dbench 10% slower than 4, the extra
// threads only preempting the application (bench/RESULTS.md).
unsigned DefaultFuseThreads();
// Threads per CPU queue with io_uring at most: 4 kept varmail's fsyncs
// from holding up the rest of a CPU on 2 CPUs (2 did not).
constexpr unsigned kMaxUringThreadsPerQueue = 4;

struct MountOptions {
  bool writeback_cache = true;     // nowriteback
  // flush_on_close: close(2) waits for the vLog write and reports its errors.
  bool flush_on_close = false;
  // open_requests: every open(2) of an existing file asks the daemon (one
  // round trip) and its last close sends RELEASE, which writes the file's
  // dirty blocks to the vLog. By default the kernel opens files by itself
  // (FUSE no-open support): those blocks then go with the flusher (within
  // flush_interval), an fsync, or a RELEASE of a handle from create.
  bool open_requests = false;
  // nokillpriv: the kernel clears set-id bits, asking for security.capability
  // before every write.
  bool killpriv_v2 = true;
  bool readdirplus = true;         // noreaddirplus
  bool parallel_dirops = true;     // noparallel_dirops
  // nodefault_permissions: the kernel does not check permissions, and
  // sepfs does not either (beyond FUSE_ACCESS). Saves the GETATTR of a
  // directory the kernel sends before the first operation in it after each
  // change, but is safe only where every process that can reach the mount
  // may do anything: refused with allow_other and allow_root; see README.md
  // for the cases (NFS/SMB export, setfsuid, root without capabilities).
  bool default_permissions = true;
  bool read_only = false;          // ro (also passed on)
  // buffered_vlog: vLog appends and record reads go through the page cache
  // instead of O_DIRECT (vlog::Options::direct_writes, direct_reads).
  // Direct I/O spares the kernel a page allocation and a copy per byte;
  // buffered I/O keeps records cached for reads that miss the data cache.
  bool direct_io = true;
  // max_write=BYTES, 64 KiB to 1 MiB: the largest write request, and with a
  // page more the size of the buffer libfuse reads every request into, so no
  // less than a SETXATTR of a 64 KiB value (below, such a SETXATTR is E2BIG).
  unsigned max_write = 1u << 20;
  // max_read=BYTES: largest read request. The kernel cuts its readahead
  // into requests of this size and sends them at once, so the daemon's
  // threads read the disk and copy into the page cache side by side: with
  // 128 KiB instead of 1 MiB a loop reading whole photos ran 25-40% faster,
  // sequential and random reads no slower (bench/RESULTS.md). Passed to the
  // kernel at mount and repeated in the INIT reply, which libfuse insists on.
  // max_read is what is used: the value asked for, at most max_write.
  unsigned max_read_asked = 128u << 10;
  unsigned max_read = 128u << 10;
  // max_dirty_ratio=PCT: the share of the kernel's dirty-page limit this
  // mount's page cache may hold (the kernel gives a FUSE mount 1%); 0 keeps
  // the kernel's setting. At most 50, so the daemon's own writes to the disk
  // below keep room. Needs root; otherwise the kernel's setting stays.
  unsigned max_dirty_ratio = 40;
  // recycle_segments=N: files of collected vLog segments kept for new
  // segments (StoreOptions::recycle_segments); 0 removes them at once.
  unsigned recycle_segments = 2;
  // cpu_latency=US: hold a PM QoS CPU wake-up latency request of US
  // microseconds while mounted (fs/cpu_latency.h). 0 makes idle CPUs poll,
  // which cuts a FUSE round trip several-fold on VMs whose idle vCPUs halt,
  // and costs power. Off unless asked for; needs root.
  std::optional<unsigned> cpu_latency;
  // io_uring: requests come over io_uring when the kernel offers it (Linux
  // 6.14+ with the fuse module's enable_uring parameter on;
  // fs/fuse_uring.h), each served on the CPU its caller runs on. Off by
  // default (noio_uring): metadata round trips gain, but streaming reads
  // and writes lose the second CPU (bench/RESULTS.md).
  bool io_uring = false;
  // noidle_handoff: io_uring threads commit their replies at SCHED_OTHER
  // (fs/fuse_uring.h, "Idle handoff"), and callers migrate between CPUs.
  bool idle_handoff = true;
  // Every change to the namespace and attributes goes through this mount,
  // and the kernel invalidates what it changes, so long timeouts are safe.
  double attr_timeout = 60.0;      // attr_timeout=SEC (0..kMaxSeconds)
  double entry_timeout = 60.0;     // entry_timeout=SEC (0..kMaxSeconds)
  double flush_interval = 5.0;     // flush_interval=SEC (kMinFlushInterval..kMaxSeconds)
  unsigned cache_mb = 64;          // cache_mb=N: metadata block cache
  // threads=N: FUSE worker threads for /dev/fuse, and with io_uring also
  // min(N, kMaxUringThreadsPerQueue) per CPU queue.
  unsigned threads = DefaultFuseThreads();
  bool prefetch_seq = true;        // noprefetch_seq: no sequential-read prefetch
  bool prefetch_dir = true;        // noprefetch_dir: no readdir-triggered prefetch
  unsigned prefetch_threads = 8;   // prefetch_threads=N
  unsigned data_cache_mb = 256;    // data_cache_mb=N: vLog block cache
  unsigned checkpoint_mb = 256;    // checkpoint_mb=N: vLog MiB between recovery checkpoints
  std::string gc = "hotcold";      // gc=hotcold|wisckey|off
  std::string gc_picker;           // gc_picker=greedy|cost-benefit|oldest ("" = policy default)
  unsigned gc_streams = 4;         // gc_streams=4|2: lifetime classes or plain hot/cold
  std::vector<std::string> passthrough;  // options for libfuse
};

// Parses one comma-separated -o string into *opts (may be called repeatedly).
// Unknown sepfs-looking values (bad numbers, out of bounds, inf or nan) are
// EINVAL with the option named.
Status ParseMountOptions(const std::string& text, MountOptions* opts);

}  // namespace sepfs::fs
