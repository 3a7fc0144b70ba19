// GC victim picker: which sealed segments a garbage collection should
// relocate next. A pure function of the segment list (no I/O, no clock, no
// state), so each policy is unit-tested on hand-made inputs; the relocation
// itself is vlog/gc_job.h (Titan's picker / job split).
//
// Terms, for one SegmentInfo s:
//   payload(s) = s.size - kSegmentHeaderSize   (record bytes written)
//   u(s)       = s.live_bytes / payload(s), clamped to [0, 1]  (utilization)
//   ratio(s)   = s.garbage_bytes / payload(s), clamped to [0, 1]
//                (= 1 - u(s) for the consistent infos ValueLog::Segments gives)
//   age(s)     = 1 + (now_seq - s.max_seq) if now_seq > s.max_seq, else 1.
//                An unknown max_seq (0) makes the segment as old as possible
//                (age = now_seq + 1): unknown segments predate this mount's
//                appends. The +1 keeps ages positive, so cost-benefit
//                degrades to "least utilized first" when every age is equal.
//
// A segment is a candidate only if it is sealed (!open), not damaged, has
// payload(s) > 0, s.garbage_bytes >= max(1, min_garbage_bytes), and its id
// is not in `exclude`. Policies then filter and order the candidates:
//
//   kGreedy       ratio >= min_garbage_ratio; most garbage bytes first.
//   kCostBenefit  ratio >= min_garbage_ratio; highest (1-u)*age/(1+u) first
//                 (Rosenblum & Ousterhout's LFS cleaner: cold segments with
//                 some garbage beat hot ones that will soon have more).
//   kOldest       the WiscKey baseline: the log tail first, i.e. lowest id
//                 (ids grow with creation) regardless of how much garbage it
//                 holds; min_garbage_ratio is ignored (but not the candidate
//                 rules above, so it never copies a segment that is all live).
//
// Ties (equal garbage bytes, equal score) go to the lower id. At most
// max_victims ids are returned, best first; none if no segment qualifies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "vlog/value_log.h"

namespace sepfs::vlog {

enum class GcPolicy { kGreedy, kCostBenefit, kOldest };

// Parses "greedy", "cost-benefit" (also "costbenefit", "cost_benefit") and
// "oldest"; false for anything else.
bool ParseGcPolicy(std::string_view name, GcPolicy* policy);
const char* GcPolicyName(GcPolicy policy);

struct PickOptions {
  GcPolicy policy = GcPolicy::kCostBenefit;
  // Segments whose garbage ratio is below this are not picked (kGreedy and
  // kCostBenefit only). In [0, 1].
  double min_garbage_ratio = 0.5;
  // Segments with fewer garbage bytes are not picked (all policies; values
  // below 1 count as 1: a segment without garbage is never worth a copy).
  uint64_t min_garbage_bytes = 1;
  size_t max_victims = 1;
  // The current sequence number (ValueLog::LastSeq()), for ages.
  uint64_t now_seq = 0;
  // Ids never to pick, e.g. segments being collected or whose collection
  // failed (corruption) until someone repairs them. Any order.
  std::vector<uint32_t> exclude;
};

// u(s) as defined above; 1 for a segment without payload.
double Utilization(const SegmentInfo& s);
// ratio(s) as defined above; 0 for a segment without payload.
double GarbageRatio(const SegmentInfo& s);
// The kCostBenefit score of s at now_seq, (1-u)*age/(1+u).
double CostBenefitScore(const SegmentInfo& s, uint64_t now_seq);

std::vector<uint32_t> PickVictims(const std::vector<SegmentInfo>& segs, const PickOptions& o);

}  // namespace sepfs::vlog
