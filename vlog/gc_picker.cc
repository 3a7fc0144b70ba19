#include "vlog/gc_picker.h"

#include <algorithm>

namespace sepfs::vlog {
namespace {

uint64_t Payload(const SegmentInfo& s) {
  return s.size > kSegmentHeaderSize ? s.size - kSegmentHeaderSize : 0;
}

bool IsCandidate(const SegmentInfo& s, const PickOptions& o) {
  if (s.open || s.damaged || Payload(s) == 0) return false;
  if (s.garbage_bytes < std::max<uint64_t>(1, o.min_garbage_bytes)) return false;
  return std::find(o.exclude.begin(), o.exclude.end(), s.id) == o.exclude.end();
}

}  // namespace

bool ParseGcPolicy(std::string_view name, GcPolicy* policy) {
  if (name == "greedy") {
    *policy = GcPolicy::kGreedy;
  } else if (name == "cost-benefit" || name == "costbenefit" || name == "cost_benefit") {
    *policy = GcPolicy::kCostBenefit;
  } else if (name == "oldest") {
    *policy = GcPolicy::kOldest;
  } else {
    return false;
  }
  return true;
}

const char* GcPolicyName(GcPolicy policy) {
  switch (policy) {
    case GcPolicy::kGreedy:
      return "greedy";
    case GcPolicy::kCostBenefit:
      return "cost-benefit";
    case GcPolicy::kOldest:
      return "oldest";
  }
  return "unknown";
}

double Utilization(const SegmentInfo& s) {
  const uint64_t payload = Payload(s);
  if (payload == 0) return 1.0;
  return std::min(1.0, static_cast<double>(s.live_bytes) / static_cast<double>(payload));
}

double GarbageRatio(const SegmentInfo& s) {
  const uint64_t payload = Payload(s);
  if (payload == 0) return 0.0;
  return std::min(1.0, static_cast<double>(s.garbage_bytes) / static_cast<double>(payload));
}

double CostBenefitScore(const SegmentInfo& s, uint64_t now_seq) {
  const double u = Utilization(s);
  const uint64_t age = 1 + (now_seq > s.max_seq ? now_seq - s.max_seq : 0);
  return (1.0 - u) * static_cast<double>(age) / (1.0 + u);
}

std::vector<uint32_t> PickVictims(const std::vector<SegmentInfo>& segs, const PickOptions& o) {
  struct Cand {
    uint32_t id;
    uint64_t garbage;
    double score;
  };
  std::vector<Cand> cands;
  for (const SegmentInfo& s : segs) {
    if (!IsCandidate(s, o)) continue;
    if (o.policy != GcPolicy::kOldest && GarbageRatio(s) < o.min_garbage_ratio) continue;
    const double score =
        o.policy == GcPolicy::kCostBenefit ? CostBenefitScore(s, o.now_seq) : 0.0;
    cands.push_back({s.id, s.garbage_bytes, score});
  }
  auto better = [&](const Cand& a, const Cand& b) {
    switch (o.policy) {
      case GcPolicy::kGreedy:
        if (a.garbage != b.garbage) return a.garbage > b.garbage;
        break;
      case GcPolicy::kCostBenefit:
        if (a.score != b.score) return a.score > b.score;
        break;
      case GcPolicy::kOldest:
        break;
    }
    return a.id < b.id;
  };
  const size_t n = std::min(o.max_victims, cands.size());
  std::partial_sort(cands.begin(), cands.begin() + n, cands.end(), better);
  std::vector<uint32_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(cands[i].id);
  return out;
}

}  // namespace sepfs::vlog
