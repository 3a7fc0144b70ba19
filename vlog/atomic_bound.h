// Lock-free "raise to at least" / "lower to at most" on std::atomic.
//
// Both leave the atomic at max(old, v) (or min(old, v)) even when other
// threads raise or lower it at the same time, and never move it the other
// way. `order` applies to the load and to the successful exchange.

#ifndef SEPFS_VLOG_ATOMIC_BOUND_H_
#define SEPFS_VLOG_ATOMIC_BOUND_H_

#include <atomic>

namespace sepfs {

template <typename T>
void RaiseAtLeast(std::atomic<T>& a, T v, std::memory_order order = std::memory_order_seq_cst) {
  T cur = a.load(order);
  while (cur < v && !a.compare_exchange_weak(cur, v, order)) {
  }
}

template <typename T>
void LowerAtMost(std::atomic<T>& a, T v, std::memory_order order = std::memory_order_seq_cst) {
  T cur = a.load(order);
  while (cur > v && !a.compare_exchange_weak(cur, v, order)) {
  }
}

}  // namespace sepfs

#endif  // SEPFS_VLOG_ATOMIC_BOUND_H_
