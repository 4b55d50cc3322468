#!/usr/bin/env python3
"""Which tier binds, as the probe reads it, on simulated two-tier boxes (no network, seconds).

    python3 bench/tiers_sim.py

A front pool of K1 workers holds each request for D1 ms and then waits for one of a back
pool's K2 workers for D2 ms (times +-3 %, the shape of tests/fixtures/shapebox.py's `tiers`),
driven in a closed loop of 1..19 clients for 30 simulated seconds each. For each box of the
analysis sweep's grid, the reading of `binding` in crates/analyze/src/probe.rs: `inner` when
the requests in service at the plateau, X * S, fall between whole numbers (by more than 0.2,
or 3 % of X * S); `outer` when they are a whole number (within 0.1, or 1.5 %) and the slowest
queued requests at the first step past the knee waited at least 0.6 S; else nothing. Prints
each box and the counts of (truth, reading).
"""
import heapq
import itertools
import random
from collections import Counter


def simulate(c, k1, d1, k2, d2, horizon_ms=30000.0, jitter=0.03, seed=1):
    """Closed loop of `c` clients: (throughput req/s, mean, p50, p99 latency ms) after a
    tenth of the horizon."""
    draw = random.Random(seed)
    events, front_queue, back_queue, started, latencies = [], [], [], {}, []
    free = {"front": k1, "back": k2}

    def took(d):
        return d * (1 + draw.uniform(-jitter, jitter))

    def arrive(client, now):
        started[client] = now
        if free["front"] > 0:
            free["front"] -= 1
            heapq.heappush(events, (now + took(d1), "front", client))
        else:
            front_queue.append(client)

    for client in range(c):
        arrive(client, client * 0.001)
    while events:
        now, stage, client = heapq.heappop(events)
        if now > horizon_ms:
            break
        if stage == "front":
            if free["back"] > 0:
                free["back"] -= 1
                heapq.heappush(events, (now + took(d2), "back", client))
            else:
                back_queue.append(client)
            continue
        free["back"] += 1
        if back_queue:
            free["back"] -= 1
            heapq.heappush(events, (now + took(d2), "back", back_queue.pop(0)))
        free["front"] += 1
        if front_queue:
            free["front"] -= 1
            heapq.heappush(events, (now + took(d1), "front", front_queue.pop(0)))
        if now > horizon_ms * 0.1:
            latencies.append(now - started[client])
        arrive(client, now)
    latencies.sort()
    n = len(latencies)
    return (n / (horizon_ms * 0.9) * 1000, sum(latencies) / n, latencies[n // 2],
            latencies[int(n * 0.99)])


def reading(rows):
    """The probe's `binding` rule on (c, X, mean, p50, p99) rows."""
    s, p50_alone, p99_alone = rows[0][2], rows[0][3], rows[0][4]
    plateau = sorted(r[1] for r in rows[-6:])[3]
    k_eff = plateau * s / 1000
    fraction = abs(k_eff - round(k_eff))
    if fraction > max(0.2, 0.03 * k_eff):
        return "inner", k_eff
    queued = next((r for r in rows if r[0] >= k_eff + 0.5 and r[4] > p99_alone + 0.1 * s), None)
    if queued and fraction <= max(0.1, 0.015 * k_eff) and queued[4] - p50_alone >= 0.6 * s:
        return "outer", k_eff
    return "nothing", k_eff


def main():
    counts = Counter()
    for k1, d1, k2, d2 in itertools.product([4, 8, 12], [5, 20], [2, 4, 6], [20, 50, 80]):
        truth = "outer" if k1 / (d1 + d2) <= k2 / d2 else "inner"
        rows = [(c,) + simulate(c, k1, d1, k2, d2) for c in range(1, 20)]
        read, k_eff = reading(rows)
        counts[(truth, read)] += 1
        print(f"front {k1} x {d1} ms, back {k2} x {d2} ms: {truth} binds; X*S = {k_eff:.2f}, "
              f"read {read}")
    for (truth, read), n in sorted(counts.items()):
        print(f"{truth} binds, read {read}: {n}")


if __name__ == "__main__":
    main()
