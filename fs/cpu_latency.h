// A PM QoS request for the CPU wake-up latency (/dev/cpu_dma_latency), held
// while the mount serves. Every FUSE request wakes a daemon thread and every
// reply wakes the caller; on a VM whose idle vCPUs halt at once, each wake of
// a halted vCPU costs the host 50-300 us, which dominates a metadata call. A
// request of 0 us makes idle CPUs poll instead of halt, so a wake costs a few
// microseconds, at the price of idle CPUs that keep spinning (power, and host
// CPU on a VM). The kernel honours the lowest request of all processes, and
// drops this one when its descriptor closes (also if the daemon dies).
#pragma once

#include "vlog/status.h"

namespace sepfs::fs {

class CpuLatencyRequest {
 public:
  CpuLatencyRequest() = default;
  ~CpuLatencyRequest();
  CpuLatencyRequest(const CpuLatencyRequest&) = delete;
  CpuLatencyRequest& operator=(const CpuLatencyRequest&) = delete;

  // Asks for at most `usec` microseconds of wake-up latency until this object
  // is destroyed. Needs root (the device is 0600).
  [[nodiscard]] Status Hold(unsigned usec);

 private:
  int fd_ = -1;
};

}  // namespace sepfs::fs
