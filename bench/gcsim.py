#!/usr/bin/env python3
"""gcsim: trace-driven simulation of the sepfs vLog collector's stream policies.

Counts records, not bytes: every block is one record, every segment holds
SEG records. It replays the bench/gc-bench update workload (load N blocks,
then overwrite Zipf-chosen blocks, FACTOR x N writes, coalesced per ROUND
writes the way the page cache merges repeated writes between two fsyncs)
against a store of N * (1 + SPARE) records, with the triggers of fs/gc.cc
(free space below max(LOW segments, capacity/20): any garbage; else sealed
garbage above 50%: victims with >= 50% garbage) and the pickers of vlog/gc_picker.cc.

Policies (where each record goes):
  wisckey   one stream, oldest segment first (the baseline)
  hotcold   user writes hot, GC survivors cold (-o gc_streams=2)
  lifetime  the rule of fs/gc.h (-o gc_streams=4): user overwrite of a record
            younger than scale/4 -> hot, other user writes -> warm; survivors
            younger than scale -> cold, older or from a frozen segment ->
            frozen; scale = live records
  oracle    every record grouped by its block's true update probability
            into 8 classes (an upper bound for any frequency-based estimate)

Prints update-phase write amplification (user + moved) / user.

  bench/gcsim.py                          # the table of docs/gc.md (a few minutes)
  bench/gcsim.py --blocks=8192 --zipf=0.99 --policies=hotcold,lifetime
"""
import argparse
import bisect
import random


class Sim:
    def __init__(self, policy, picker, n, seg, spare, low):
        self.policy, self.picker, self.n, self.seg = policy, picker, n, seg
        self.capacity = int(n * (1 + spare))  # records, like --capacity in bytes
        self.low = max(low * seg, self.capacity // 20)  # records
        self.where = [-1] * n  # segment of each block's live record
        self.born = [0] * n  # seq of each block's live record
        self.blocks = {}  # segment -> set of blocks whose live record it holds
        self.size, self.max_seq, self.stream = {}, {}, {}
        self.open = {}  # stream -> segment appended to
        self.next_id, self.seq, self.user, self.moved = 0, 0, 0, 0
        self.used = 0  # records in all segments, as TotalBytes counts file sizes
        self.expect = None  # oracle: expected writes between two updates of a block

    def append(self, stream, b):
        i = self.open.get(stream)
        if i is None or self.size[i] >= self.seg:
            i = self.next_id
            self.next_id += 1
            self.blocks[i], self.size[i], self.stream[i] = set(), 0, stream
            self.open[stream] = i
        self.seq += 1
        self.used += 1
        self.size[i] += 1
        self.max_seq[i] = self.seq
        old = self.where[b]
        if old in self.blocks:
            self.blocks[old].discard(b)
        self.blocks[i].add(b)
        self.where[b], self.born[b] = i, self.seq

    def oracle_class(self, b):
        t, k = self.n / 8, 0
        while k < 7 and self.expect[b] >= t:
            t, k = t * 2, k + 1
        return "c%d" % k

    def user_stream(self, b):
        if self.policy == "wisckey":
            return "one"
        if self.policy == "hotcold":
            return "hot"
        if self.policy == "oracle":
            return self.oracle_class(b) if self.expect else "new"
        if self.where[b] < 0:
            return "warm"
        return "hot" if self.seq - self.born[b] < self.n / 4 else "warm"

    def survivor_stream(self, b, victim_stream):
        if self.policy == "wisckey":
            return "one"
        if self.policy == "hotcold":
            return "cold"
        if self.policy == "oracle":
            return self.oracle_class(b) if self.expect else "new"
        if victim_stream == "frozen":
            return "frozen"
        return "cold" if self.seq - self.born[b] < self.n else "frozen"

    def sealed(self):
        return [i for i in self.blocks if self.open.get(self.stream[i]) != i]

    def pick(self, min_ratio):
        best = None
        for i in self.sealed():
            garbage = self.size[i] - len(self.blocks[i])
            if garbage <= 0:
                continue
            ratio = garbage / self.size[i]
            if self.picker == "oldest":
                key = (0, i)
            elif ratio < min_ratio:
                continue
            elif self.picker == "greedy":
                key = (-garbage, i)
            else:
                u, age = 1 - ratio, 1 + self.seq - self.max_seq[i]
                key = (-(1 - u) * age / (1 + u), i)
            if best is None or key < best[0]:
                best = (key, i)
        return None if best is None else best[1]

    def collect_while_needed(self):
        while True:
            low = self.capacity - self.used < self.low
            if not low:
                sealed = self.sealed()
                size = sum(self.size[i] for i in sealed)
                live = sum(len(self.blocks[i]) for i in sealed)
                if not size or size - live <= 0.5 * size:
                    return
            victim = self.pick(0.0 if low else 0.5)
            if victim is None:
                return
            survivors = sorted(self.blocks.pop(victim))
            self.used -= self.size[victim]
            for b in survivors:
                self.append(self.survivor_stream(b, self.stream[victim]), b)
                self.moved += 1

    def write(self, b):
        self.append(self.user_stream(b), b)
        self.user += 1


def zipf_cdf(n, theta):
    total, cdf = 0.0, []
    for r in range(1, n + 1):
        total += 1.0 / r**theta
        cdf.append(total)
    return [c / total for c in cdf]


def run(policy, a, theta):
    picker = "oldest" if policy == "wisckey" else a.picker
    sim = Sim(policy, picker, a.blocks, a.segment, a.spare, a.low)
    rng = random.Random(a.seed)
    for b in range(a.blocks):
        sim.write(b)
        if b % 8 == 0:
            sim.collect_while_needed()
    user0, moved0 = sim.user, sim.moved
    cdf = zipf_cdf(a.blocks, theta)
    perm = list(range(a.blocks))
    rng.shuffle(perm)
    if policy == "oracle":
        sim.expect = [0.0] * a.blocks
        prev = 0.0
        for rank, c in enumerate(cdf):
            sim.expect[perm[rank]] = 1.0 / max(c - prev, 1e-12)
            prev = c
    done, count = 0, 0
    while done < a.factor * a.blocks:
        k = min(a.round, a.factor * a.blocks - done)
        done += k
        batch = dict.fromkeys(perm[bisect.bisect_left(cdf, rng.random())] for _ in range(k))
        for b in batch:  # each distinct block once per round, first-write order
            sim.write(b)
            count += 1
            if count % 8 == 0:
                sim.collect_while_needed()
    user, moved = sim.user - user0, sim.moved - moved0
    return user, moved


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, default=65536, help="live blocks (default: 4 GiB of 64 KiB)")
    p.add_argument("--segment", type=int, default=256, help="records per segment (16 MiB)")
    p.add_argument("--spare", type=float, default=0.30)
    p.add_argument("--low", type=int, default=4, help="low-water mark, segments")
    p.add_argument("--factor", type=int, default=3)
    p.add_argument("--round", type=int, default=1024, help="writes per fsync round (64 MiB)")
    p.add_argument("--zipf", default="0.9,0.99")
    p.add_argument("--policies", default="wisckey,hotcold,lifetime,oracle")
    p.add_argument("--picker", default="cost-benefit", choices=["cost-benefit", "greedy"])
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    print("| zipf | policy | user writes | moved | WA | WA / wisckey |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for theta in (float(z) for z in a.zipf.split(",")):
        base = None
        for policy in a.policies.split(","):
            user, moved = run(policy, a, theta)
            wa = (user + moved) / user
            base = wa if policy == "wisckey" else base
            rel = "%.2f" % (wa / base) if base else "n/a"
            print("| %s | %s | %d | %d | %.2f | %s |" % (theta, policy, user, moved, wa, rel),
                  flush=True)


if __name__ == "__main__":
    main()
