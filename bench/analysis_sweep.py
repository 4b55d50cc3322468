#!/usr/bin/env python3
"""Checks probe and capacity on black boxes whose parameters are drawn at random.

Each box is `loadlab serve` with `--bbox-workers K --bbox-delay S` (K in 2-12, S in 50-400 ms,
seeded), on 127.0.0.1. For each: `loadlab probe` (its worker count must be K, observed, and its
plateau near K/S) and `loadlab capacity --slo 'p99<2S'` (within 15 % of K/S, never above
1.05 x K/S, the search within 150 s). Prints one row per box and a verdict line; writes the
rows as JSON next to the other bench runs.

With --jitter, the boxes are a Python service loadlab did not write instead
(crates/cli/tests/fixtures/shapebox.py, its `pool` shape): K threads (1-32) holding each request for a time
around S (5-600 ms) drawn uniform within +-10, 20 or 50 % or exponential. Only the probe runs
there (an SLO of 2S means nothing for exponential times); its worker count must be K, observed
or not.

With --shapes, boxes of every shape of crates/cli/tests/fixtures/shapebox.py with parameters
drawn from the seed: pools with exponential and lognormal times (the worker count must be
exact, or within 1 for "close"), contended services (kind contended, peak concurrency within
20 %, peak throughput within 10 %, and `capacity --slo 'p99<3D'` within 0.7-1.05 x the peak:
past it throughput collapses), token buckets (kind rate_limited, the rate within 5 %, and
where a closed loop is refused by the burst while under the rate, the burst named: the most
connections run without refusals at or under it, the first refused over it) and two tiers (the binding tier's rate within 10 %). Counts
exact / close / wrong per shape.

Usage: python3 bench/analysis_sweep.py [--boxes 6] [--seed 12] [--jitter | --shapes [--only exp,lognormal]]
       [--binary target/release/loadlab]
Minutes, not seconds: this belongs in bench/, not in the tests.
"""

import argparse
import datetime
import json
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def run_json(cmd, timeout):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        started = time.time()
        subprocess.run(cmd + ["--json", out.name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=timeout)
        took = time.time() - started
        return json.loads(Path(out.name).read_text()), took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boxes", type=int, default=6)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--box", action="append", default=[],
                    help="K:S_MS (with --jitter K:S_MS:SPREAD), a box to add to the random ones")
    ap.add_argument("--jitter", action="store_true",
                    help="probe Python boxes whose service times vary instead")
    ap.add_argument("--shapes", action="store_true",
                    help="probe Python boxes of every shape of shapebox.py instead")
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "loadlab"))
    ap.add_argument("--only", default="",
                    help="with --shapes: a comma-separated list of the shapes to run "
                         "(exp, lognormal, contended, bucket, tiers)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    rows, lines = [], []

    def say(line):
        print(line, flush=True)
        lines.append(line)

    if a.jitter:
        return jitter_sweep(a, rng, say, rows, lines)
    if a.shapes:
        return shape_sweep(a, rng, say, rows, lines)
    say(f"# analysis sweep: {a.boxes} random black boxes, seed {a.seed}\n")
    say("| K | S ms | K/S | probe K | observed | plateau | plateau/(K/S) | probe s "
        "| capacity | capacity/(K/S) | capacity s |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    boxes = [tuple(int(x) for x in b.split(":")) for b in a.box]
    boxes += [(rng.randint(2, 12), rng.randint(50, 400)) for _ in range(a.boxes)]
    for k, s_ms in boxes:
        port = free_port()
        server = subprocess.Popen([a.binary, "serve", "--port", str(port), "--bbox-workers",
                                   str(k), "--bbox-delay", f"{s_ms}ms"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(port)
            url = f"http://127.0.0.1:{port}/bbox/sync"
            probe, probe_s = run_json([a.binary, "probe", url], 120)
            cap, cap_s = run_json([a.binary, "capacity", url, "--slo", f"p99<{2 * s_ms}ms",
                                   "--max-time", "150s"], 200)
        finally:
            server.terminate()
            server.wait(timeout=10)
        ks = k * 1000.0 / s_ms
        found = cap.get("max_rate_rps") or 0.0
        row = dict(workers=k, service_ms=s_ms, k_over_s=ks, probe_workers=probe.get("workers"),
                   observed=probe.get("workers_observed"), plateau=probe.get("max_throughput_rps"),
                   probe_s=probe_s, capacity=found, capacity_s=cap_s)
        rows.append(row)
        say(f"| {k} | {s_ms} | {ks:.1f} | {row['probe_workers']} | {row['observed']} "
            f"| {row['plateau']:.1f} | {row['plateau'] / ks:.3f} | {probe_s:.0f} "
            f"| {found:.1f} | {found / ks:.3f} | {cap_s:.0f} |")
    ok = [r["probe_workers"] == r["workers"] and r["observed"]
          and 0.85 <= r["capacity"] / r["k_over_s"] <= 1.05 and r["capacity_s"] <= 150
          for r in rows]
    say(f"\n{sum(ok)} of {len(rows)} boxes: exact observed worker count, capacity within "
        f"0.85-1.05 x K/S, search within 150 s")
    save("analysis-sweep", rows, lines)
    return 0 if all(ok) else 1


def shape_box(rng, shape):
    """A box of `shape` with parameters drawn from `rng`: its shapebox.py arguments and what
    the probe should read (kind, and the figure it is judged on)."""
    if shape in ("exp", "lognormal"):
        k, d = rng.choice([2, 3, 4, 6, 8, 12, 16]), rng.choice([20, 40, 80, 150, 300])
        dist = "exp" if shape == "exp" else f"lognormal:{rng.choice([0.5, 0.75, 1.0])}"
        return ["pool", str(k), str(d), dist], dict(kind="sync", workers=k, rate=k * 1000.0 / d)
    if shape == "contended":
        d, a_, b = rng.choice([10, 20, 40]), rng.choice([0.0, 0.02, 0.05]), rng.choice(
            [0.002, 0.005, 0.01, 0.02])
        n = ((1 - a_) / b) ** 0.5
        x = n * 1000.0 / (d * (1 + a_ * (n - 1) + b * n * (n - 1)))
        return ["contended", str(d), str(a_), str(b)], dict(kind="contended", peak=n, rate=x)
    if shape == "bucket":
        r, d = rng.choice([50, 100, 200, 400]), rng.choice([5, 10, 20, 100, 228])
        burst = max(1, r // rng.choice([2, 4, 10, 20]))
        # The probe's closed loop climbs these connections (analyze::probe::LADDER), to 64; c
        # of them send c requests at once every d ms. It is refused from the first count past
        # the burst, or from the first that offers more than the rate, whichever comes first.
        ladder = list(range(1, 13)) + [14, 16, 20, 24, 32, 40, 48, 64]
        past_burst = next((c for c in ladder if c > burst), None)
        if past_burst is None and not any(c * 1000.0 / d > r for c in ladder):
            # Neither the burst nor the rate within 64 connections: nothing would be refused,
            # and nothing says there is a limiter.
            d = 5
        past_rate = next((c for c in ladder if c * 1000.0 / d > r), None)
        # Refused by the burst while under 90 % of the rate: the probe must name the burst too.
        burst_shows = (past_burst is not None and past_burst * 1000.0 / d < 0.9 * r
                       and (past_rate is None or past_burst <= past_rate))
        return ["bucket", str(r), str(burst), str(d)], dict(
            kind="rate_limited", rate=float(r), burst=burst if burst_shows else None)
    k1, d1, k2, d2 = (rng.choice([4, 8, 12]), rng.choice([5, 20]), rng.choice([2, 4, 6]),
                      rng.choice([20, 50, 80]))
    # The front holds its worker through the back's time too; the tighter tier binds.
    rate = min(k1 * 1000.0 / (d1 + d2), k2 * 1000.0 / d2)
    return ["tiers", str(k1), str(d1), str(k2), str(d2)], dict(kind="sync", rate=rate)


def capacity_of(a, box, args, slo_ms):
    """`loadlab capacity` on a fresh shapebox.py box of `args` with p99 < `slo_ms`: the rate
    found, or None."""
    server = subprocess.Popen(["python3", str(box), "0", str(a.seed)] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(server.stdout.readline())
        cap, _ = run_json([a.binary, "capacity", f"http://127.0.0.1:{port}/", "--slo",
                           f"p99<{slo_ms}ms,errors<1%", "--max-time", "120s"], 200)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return cap.get("max_rate_rps")


def shape_sweep(a, rng, say, rows, lines):
    """The probe on boxes of each shape; 0 when every kind is right and its figure close."""
    box = ROOT / "crates" / "cli" / "tests" / "fixtures" / "shapebox.py"
    shapes = ["exp", "lognormal", "contended", "bucket", "tiers"]
    if a.only:
        shapes = [s for s in shapes if s in a.only.split(",")]
    say(f"# analysis sweep, shapes: {a.boxes} random boxes of each of {', '.join(shapes)}, "
        f"seed {a.seed}\n")
    say("| shape | box | want | probe kind | probe figure | verdict | probe s |")
    say("|---|---|---|---|---|---|---|")
    counts = {}
    for shape in shapes:
        for _ in range(a.boxes):
            args, want = shape_box(rng, shape)
            server = subprocess.Popen(["python3", str(box), "0", str(a.seed)] + args,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                port = int(server.stdout.readline())
                # The probe's own budget: 60 s, or 5 min for widely varying times.
                probe, probe_s = run_json([a.binary, "probe", f"http://127.0.0.1:{port}/"], 420)
            finally:
                server.terminate()
                server.wait(timeout=10)
            kind = probe.get("kind")
            x = probe.get("max_throughput_rps") or 0.0
            if shape in ("exp", "lognormal"):
                got = probe.get("workers")
                figure = f"K {got} {probe.get('workers_range') or ''} of {want['workers']}"
                exact = kind == want["kind"] and got == want["workers"]
                close = kind == want["kind"] and got is not None and abs(got - want["workers"]) <= 1
            elif shape == "contended":
                peak = (probe.get("usl") or {}).get("peak_concurrency") or 0.0
                figure = (f"peak {peak:.1f} of {want['peak']:.1f}, {x:.1f} of "
                          f"{want['rate']:.1f} req/s")
                exact = (kind == want["kind"] and abs(peak - want["peak"]) <= 0.2 * want["peak"]
                         and abs(x - want["rate"]) <= 0.1 * want["rate"])
                close = kind == want["kind"]
            elif shape == "bucket":
                limit = probe.get("rate_limit") or {}
                seen, least = limit.get("burst_refused_from"), limit.get("burst_allowed")
                figure = f"{x:.1f} of {want['rate']:.1f} req/s"
                burst_right = True
                if want["burst"] is not None:
                    figure += f", burst {least}-{seen} for {want['burst']}"
                    burst_right = (seen is not None and least is not None
                                   and least <= want["burst"] < seen)
                exact = (kind == want["kind"] and abs(x - want["rate"]) <= 0.05 * want["rate"]
                         and burst_right)
                close = kind == want["kind"]
            else:
                figure = f"{x:.1f} of {want['rate']:.1f} req/s"
                exact = kind == want["kind"] and abs(x - want["rate"]) <= 0.1 * want["rate"]
                close = kind == want["kind"]
            if shape == "contended":
                # capacity past a peak: throughput collapses under overload, and the rates under
                # the peak must still be judged on their own steps.
                found = capacity_of(a, box, args, 3 * int(args[1]))
                figure += f"; capacity {found:.1f}" if found else "; capacity none"
                if not found or not 0.7 * want["rate"] <= found <= 1.05 * want["rate"]:
                    exact = close = False
            verdict = "exact" if exact else "close" if close else "wrong"
            counts.setdefault(shape, {"exact": 0, "close": 0, "wrong": 0})[verdict] += 1
            rows.append(dict(shape=shape, box=args, want=want, kind=kind, figure=figure,
                             verdict=verdict, probe_s=probe_s,
                             stopped=probe.get("stopped_because")))
            say(f"| {shape} | {' '.join(args)} | {want['kind']} | {kind} | {figure} | {verdict} "
                f"| {probe_s:.0f} |")
    say("")
    for shape, c in counts.items():
        say(f"- {shape}: {c['exact']} exact, {c['close']} close (kind right), {c['wrong']} wrong")
    save("analysis-sweep-shapes", rows, lines)
    return 0 if all(c["wrong"] == 0 for c in counts.values()) else 1


def save(name, rows, lines):
    """Writes the rows as JSON and the printed lines as README.md into a new bench run."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = ROOT / "bench" / "runs" / f"{stamp}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "README.md").write_text("\n".join(lines) + "\n")


def jitter_sweep(a, rng, say, rows, lines):
    """The probe on Python boxes whose service times vary; 0 when every worker count is K."""
    box = ROOT / "crates" / "cli" / "tests" / "fixtures" / "shapebox.py"
    say(f"# analysis sweep, varying service times: {a.boxes} random Python boxes, seed {a.seed}\n")
    say("| K | S ms | spread | probe K | observed | probe S ms | plateau/(K/S) | probe s | why it stopped |")
    say("|---|---|---|---|---|---|---|---|---|")
    boxes = [(int(k), int(s_ms), spread) for k, s_ms, spread in (b.split(":") for b in a.box)]
    boxes += [(rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32]),
               rng.choice([5, 10, 20, 40, 80, 150, 300, 600]),
               rng.choice(["0.1", "0.2", "0.5", "exp"])) for _ in range(a.boxes)]
    for k, s_ms, spread in boxes:
        dist = "exp" if spread == "exp" else f"uniform:{spread}"
        server = subprocess.Popen(["python3", str(box), "0", str(a.seed), "pool", str(k),
                                   str(s_ms), dist],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(server.stdout.readline())
            probe, probe_s = run_json([a.binary, "probe", f"http://127.0.0.1:{port}/",
                                       "--max-time", "90s"], 200)
        finally:
            server.terminate()
            server.wait(timeout=10)
        ks = k * 1000.0 / s_ms
        row = dict(workers=k, service_ms=s_ms, spread=spread, probe_kind=probe.get("kind"),
                   probe_workers=probe.get("workers"), observed=probe.get("workers_observed"),
                   probe_service_ms=probe.get("service_time_ms"),
                   plateau=probe.get("max_throughput_rps"), probe_s=probe_s,
                   stopped=probe.get("stopped_because"))
        rows.append(row)
        say(f"| {k} | {s_ms} | {spread} | {row['probe_workers']} | {row['observed']} "
            f"| {row['probe_service_ms']:.1f} | {(row['plateau'] or 0) / ks:.3f} | {probe_s:.0f} "
            f"| {row['stopped']} |")
    ok = [r["probe_kind"] == "sync" and r["probe_workers"] == r["workers"] for r in rows]
    say(f"\n{sum(ok)} of {len(rows)} boxes: exact worker count")
    save("analysis-sweep-jitter", rows, lines)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
