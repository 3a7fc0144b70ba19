#include "fs/cpu_latency.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace sepfs::fs {

namespace {
constexpr char kDevice[] = "/dev/cpu_dma_latency";
}  // namespace

CpuLatencyRequest::~CpuLatencyRequest() {
  if (fd_ >= 0) ::close(fd_);
}

Status CpuLatencyRequest::Hold(unsigned usec) {
  if (fd_ >= 0) return Status::InvalidArgument("CPU latency request already held");
  const int fd = ::open(kDevice, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, kDevice);
  // The device takes a binary 32-bit value; the request lives as long as fd.
  const int32_t value = static_cast<int32_t>(usec);
  const ssize_t n = ::write(fd, &value, sizeof value);
  if (n != static_cast<ssize_t>(sizeof value)) {
    const int err = n < 0 ? errno : EIO;
    ::close(fd);
    return Status::FromErrno(err, kDevice);
  }
  fd_ = fd;
  return Status::OK();
}

}  // namespace sepfs::fs
