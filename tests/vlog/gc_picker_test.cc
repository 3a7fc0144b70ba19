// The GC victim picker: a pure function, tested on hand-made segment lists.
#include "vlog/gc_picker.h"

#include <vector>

#include <gtest/gtest.h>

namespace sepfs::vlog {
namespace {

using Ids = std::vector<uint32_t>;

// A sealed segment with `payload` record bytes of which `live` are live.
SegmentInfo Seg(uint32_t id, uint64_t payload, uint64_t live, uint64_t max_seq = 0) {
  SegmentInfo s;
  s.id = id;
  s.size = kSegmentHeaderSize + payload;
  s.live_bytes = live;
  s.garbage_bytes = payload - live;
  s.max_seq = max_seq;
  return s;
}

PickOptions Opts(GcPolicy policy, double min_ratio, size_t max_victims, uint64_t now_seq = 0) {
  PickOptions o;
  o.policy = policy;
  o.min_garbage_ratio = min_ratio;
  o.max_victims = max_victims;
  o.now_seq = now_seq;
  return o;
}

TEST(GcPickerTest, GreedyMostGarbageBytesFirst) {
  std::vector<SegmentInfo> segs = {Seg(1, 1000, 900), Seg(2, 1000, 100), Seg(3, 4000, 3000),
                                   Seg(4, 1000, 500)};
  // garbage: 1:100 2:900 3:1000 4:500
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.0, 10)), (Ids{3, 2, 4, 1}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.0, 2)), (Ids{3, 2}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.0, 1)), (Ids{3}));
  EXPECT_TRUE(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.0, 0)).empty());
}

TEST(GcPickerTest, GreedyThresholdIsInclusive) {
  std::vector<SegmentInfo> segs = {Seg(1, 1000, 500),   // ratio 0.5
                                   Seg(2, 1000, 501),   // 0.499
                                   Seg(3, 4000, 2500),  // 0.375, most garbage bytes
                                   Seg(4, 1000, 0)};    // 1.0
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.5, 10)), (Ids{4, 1}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 1.0, 10)), (Ids{4}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.3, 10)), (Ids{3, 4, 1, 2}));
}

TEST(GcPickerTest, TiesGoToTheLowerId) {
  std::vector<SegmentInfo> segs = {Seg(9, 1000, 400, 50), Seg(3, 1000, 400, 50),
                                   Seg(5, 1000, 400, 50), Seg(7, 1000, 100, 50)};
  for (GcPolicy p : {GcPolicy::kGreedy, GcPolicy::kCostBenefit}) {
    EXPECT_EQ(PickVictims(segs, Opts(p, 0.0, 10, 100)), (Ids{7, 3, 5, 9})) << GcPolicyName(p);
  }
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kOldest, 0.0, 10, 100)), (Ids{3, 5, 7, 9}));
}

TEST(GcPickerTest, OpenDamagedEmptyAndCleanSegmentsAreNeverPicked) {
  SegmentInfo open = Seg(1, 1000, 0);
  open.open = true;
  SegmentInfo damaged = Seg(2, 1000, 0);
  damaged.damaged = true;
  SegmentInfo empty = Seg(3, 0, 0);
  SegmentInfo all_live = Seg(4, 1000, 1000);
  SegmentInfo overcounted = Seg(5, 1000, 1000);
  overcounted.live_bytes = 2000;  // live above payload (a caller bug): clamped, no garbage
  std::vector<SegmentInfo> segs = {open, damaged, empty, all_live, overcounted};
  for (GcPolicy p : {GcPolicy::kGreedy, GcPolicy::kCostBenefit, GcPolicy::kOldest}) {
    EXPECT_TRUE(PickVictims(segs, Opts(p, 0.0, 10, 1000)).empty()) << GcPolicyName(p);
  }
  segs.push_back(Seg(6, 1000, 999));  // one byte of garbage
  for (GcPolicy p : {GcPolicy::kGreedy, GcPolicy::kCostBenefit, GcPolicy::kOldest}) {
    EXPECT_EQ(PickVictims(segs, Opts(p, 0.0, 10, 1000)), (Ids{6})) << GcPolicyName(p);
  }
}

TEST(GcPickerTest, ExcludeListAndMinGarbageBytes) {
  std::vector<SegmentInfo> segs = {Seg(1, 1000, 0), Seg(2, 1000, 200), Seg(3, 1000, 900)};
  for (GcPolicy p : {GcPolicy::kGreedy, GcPolicy::kCostBenefit, GcPolicy::kOldest}) {
    PickOptions o = Opts(p, 0.0, 10, 10);
    o.exclude = {1};
    EXPECT_EQ(PickVictims(segs, o), (Ids{2, 3})) << GcPolicyName(p);
    o.min_garbage_bytes = 101;
    EXPECT_EQ(PickVictims(segs, o), (Ids{2})) << GcPolicyName(p);
    o.exclude = {2, 1};
    EXPECT_TRUE(PickVictims(segs, o).empty()) << GcPolicyName(p);
  }
}

TEST(GcPickerTest, CostBenefitScoreFormula) {
  // u = 0.25, age = 1 + (1000 - 200) = 801: (0.75 * 801) / 1.25.
  EXPECT_DOUBLE_EQ(CostBenefitScore(Seg(1, 1000, 250, 200), 1000), 0.75 * 801 / 1.25);
  // max_seq above now_seq (e.g. a stale now_seq): age 1.
  EXPECT_DOUBLE_EQ(CostBenefitScore(Seg(1, 1000, 250, 2000), 1000), 0.75 / 1.25);
  // Unknown max_seq: as old as possible.
  EXPECT_DOUBLE_EQ(CostBenefitScore(Seg(1, 1000, 0, 0), 1000), 1001.0);
  EXPECT_DOUBLE_EQ(CostBenefitScore(Seg(1, 1000, 1000, 5), 1000), 0.0);
  EXPECT_DOUBLE_EQ(Utilization(Seg(1, 1000, 250)), 0.25);
  EXPECT_DOUBLE_EQ(Utilization(Seg(1, 0, 0)), 1.0);
}

TEST(GcPickerTest, CostBenefitPrefersOldColdSegmentsOverYoungHotOnes) {
  // Segment 1: old (max_seq 100), 40% garbage. Segment 2: young (max_seq
  // 9900), 80% garbage. Greedy takes 2; cost-benefit takes 1 because 2 is
  // still being overwritten and will be cheaper to collect later.
  std::vector<SegmentInfo> segs = {Seg(1, 1000, 600, 100), Seg(2, 1000, 200, 9900)};
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kGreedy, 0.3, 2, 10000)), (Ids{2, 1}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kCostBenefit, 0.3, 2, 10000)), (Ids{1, 2}));
  // The threshold applies to cost-benefit too.
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kCostBenefit, 0.5, 2, 10000)), (Ids{2}));
}

TEST(GcPickerTest, CostBenefitWithEqualAgesIsLeastUtilizedFirst) {
  std::vector<SegmentInfo> segs = {Seg(1, 1000, 700, 50), Seg(2, 4000, 1000, 50),
                                   Seg(3, 1000, 500, 50)};
  // u: 0.7, 0.25, 0.5. now_seq 0 (not given): every age is 1.
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kCostBenefit, 0.0, 3, 0)), (Ids{2, 3, 1}));
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kCostBenefit, 0.0, 3, 1000)), (Ids{2, 3, 1}));
}

TEST(GcPickerTest, CostBenefitTreatsUnknownMaxSeqAsOldest) {
  // Same utilization; the segment whose max_seq is unknown (0, e.g. sealed
  // before this mount) counts as the oldest.
  std::vector<SegmentInfo> segs = {Seg(4, 1000, 500, 10), Seg(8, 1000, 500, 0)};
  EXPECT_EQ(PickVictims(segs, Opts(GcPolicy::kCostBenefit, 0.0, 2, 100)), (Ids{8, 4}));
}

TEST(GcPickerTest, OldestIgnoresTheRatioButNeedsGarbage) {
  std::vector<SegmentInfo> segs = {Seg(7, 1000, 10), Seg(2, 1000, 1000), Seg(5, 1000, 990),
                                   Seg(3, 1000, 999)};
  PickOptions o = Opts(GcPolicy::kOldest, 0.9, 1);
  EXPECT_EQ(PickVictims(segs, o), (Ids{3}));  // 2 is all live; 3 has 1 byte of garbage
  o.max_victims = 10;
  EXPECT_EQ(PickVictims(segs, o), (Ids{3, 5, 7}));
  // Greedy with the same ratio threshold only takes 7.
  o.policy = GcPolicy::kGreedy;
  EXPECT_EQ(PickVictims(segs, o), (Ids{7}));
}

TEST(GcPickerTest, StreamDoesNotMatterToThePicker) {
  SegmentInfo hot = Seg(1, 1000, 500, 10);
  SegmentInfo cold = Seg(2, 1000, 400, 10);
  cold.stream = Stream::kCold;
  EXPECT_EQ(PickVictims({hot, cold}, Opts(GcPolicy::kGreedy, 0.0, 2)), (Ids{2, 1}));
}

TEST(GcPickerTest, PolicyNames) {
  GcPolicy p;
  for (GcPolicy want : {GcPolicy::kGreedy, GcPolicy::kCostBenefit, GcPolicy::kOldest}) {
    ASSERT_TRUE(ParseGcPolicy(GcPolicyName(want), &p));
    EXPECT_EQ(p, want);
  }
  EXPECT_TRUE(ParseGcPolicy("costbenefit", &p));
  EXPECT_EQ(p, GcPolicy::kCostBenefit);
  EXPECT_FALSE(ParseGcPolicy("wisckey", &p));
  EXPECT_FALSE(ParseGcPolicy("", &p));
}

}  // namespace
}  // namespace sepfs::vlog
