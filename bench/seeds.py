#!/usr/bin/env python3
"""The five seeds' experiments, run by loadlab and set beside the seeds' own conclusions.

    python3 bench/seeds.py run [--variant short|full] [--seeds 000,004] [--out DIR]
        runs `loadlab lab` on each seed's example (the release binary), and keeps in
        DIR/<seed>-<variant>/ what docs/seeds.md is made from: lab.json, comparison.csv,
        the lab's terminal output, experiment.json and each cell's summary.json, cell.json,
        capacity.json and probe.json where the lab put them (so `loadlab report DIR` judges
        it again), and meta.json (wall time, load average before and after, the commit). DIR
        defaults to bench/runs/seeds-<date>; commit it.

    python3 bench/seeds.py doc DIR [DIR ...]
        rewrites the generated blocks of docs/seeds.md from those directories (the latest
        run of each seed and variant wins): each conclusion as the seed states it, with the
        line of its report, the rule that judges it, loadlab's figures and the verdict. No
        figure is typed by hand.

    python3 bench/seeds.py list
        prints every conclusion and its rule, and the ones loadlab cannot test with why.

Each conclusion below is one the seed's text states, in our words, with the line it stands on
in the seed's report (`SEED_FILES`). Its rule can say "differs" in both directions: a band
around the seed's figure where the seed gives one, the side of ×1 where it gives a direction
(with rounds, the whole 95 % interval must be on that side; with one round there is no
interval, and the row says so). The reason a row gives for differing is built from the
figures it prints.

Run `run` on a quiet machine (no build, no test suite, no other benchmark): the figures are
only as good as the machine was idle, and meta.json keeps the load average beside them.
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOADLAB = os.environ.get("LOADLAB_BIN", str(ROOT / "target" / "release" / "loadlab"))
DOC = ROOT / "docs" / "seeds.md"
SEEDS = {
    "000": "seed-000-topologies",
    "001": "seed-001-replicas",
    "002": "seed-002-visits",
    "003": "seed-003-turnomatic",
    "004": "seed-004-logging",
}
# Labs a seed's conclusions read beside its own, each run after it into a directory of the
# seed's named after the example: seed 002's web tier on Cloud Run's autoscaling.
EXTRAS = {"002": ["seed-002-cloud-run"]}
# The seeds' reports (Spanish), whose lines the conclusions cite; they are the project's
# reference texts, kept beside this repository in shared/seeds/.
SEED_FILES = {
    "000": "000_b86f4e54ab9d9833.txt",
    "001": "001_ad05dfd1f9e0be6d.txt",
    "002": "002_fbb219636338decb.txt",
    "003": "003_60f0be71c2ce580c.txt",
    "004": "004_c4cdb48353e3d336.txt",
}
# Student's t, two-sided 95 %, by degrees of freedom.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def loadavg():
    return os.getloadavg()[0]


def run(args):
    out = Path(args.out or ROOT / "bench" / "runs" / f"seeds-{datetime.date.today()}")
    # `-dirty` when the binary may hold changes not yet committed.
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    for seed in args.seeds.split(","):
        dest = out / f"{seed}-{args.variant}"
        if not run_example(seed, SEEDS[seed], args.variant, dest, commit):
            continue
        for name in EXTRAS.get(seed, []):
            run_example(seed, name, args.variant, dest / name, commit)


def run_example(seed, name, variant, dest, commit):
    """Runs the lab of example `name` (its `variant`) and keeps what docs/seeds.md is made of in
    `dest` (emptied first); False when the example has no such variant."""
    example = ROOT / "examples" / (f"{name}.short.yaml" if variant == "short" else f"{name}.yaml")
    if not example.exists():
        print(f"{seed}: no {example.name}; skipped")
        return False
    with tempfile.TemporaryDirectory() as tmp:
        before = loadavg()
        started = time.monotonic()
        done = subprocess.run([LOADLAB, "lab", str(example), "--out", tmp],
                              capture_output=True, text=True, timeout=4 * 3600)
        wall = time.monotonic() - started
        after = loadavg()
        if done.returncode != 0:
            sys.exit(f"{seed}: loadlab lab failed ({done.returncode}):\n{done.stderr[-2000:]}")
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for f in ["experiment.json", "lab.json", "comparison.csv"]:
            shutil.copy(Path(tmp) / f, dest / f)
        (dest / "lab.txt").write_text(done.stdout)
        # The lab directory's layout, without the bulky per-second files: enough for
        # `loadlab report DIR` to judge it again.
        for kept in ["summary.json", "cell.json", "capacity.json", "probe.json"]:
            for f in Path(tmp).rglob(kept):
                target = dest / f.parent.relative_to(tmp)
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy(f, target / kept)
    meta = {"seed": seed, "variant": variant, "example": example.name,
            "wall_s": round(wall, 1), "load_before": before, "load_after": after,
            "commit": commit, "date": datetime.datetime.now().isoformat(timespec="seconds")}
    (dest / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{seed} {variant} {name}: {wall:.0f} s, load average {before:.2f} → {after:.2f} → {dest}")
    return True


# ---------------------------------------------------------------- reading a lab

def slug(s):
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", s.lower())).strip("-")


class Lab:
    """One seed's lab, as kept by `run`."""

    def __init__(self, path):
        self.path = path
        self.lab = json.loads((path / "lab.json").read_text())
        self.meta = json.loads((path / "meta.json").read_text())
        self.text = (path / "lab.txt").read_text()
        self.variant = self.meta["variant"]
        # The labs run beside it (`EXTRAS`), by example name.
        self.extras = {p.name: Lab(p) for p in sorted(path.iterdir())
                       if p.is_dir() and (p / "meta.json").exists()}

    def extra(self, name):
        """The lab of example `name` run beside this one, or None."""
        return self.extras.get(name)

    def cells(self, topology=None, workload=None):
        return [c for c in self.lab["cells"]
                if (topology is None or c["topology"] == topology)
                and (workload is None or c["workload"] == workload)
                and not c.get("excluded")]

    def topologies(self):
        seen = []
        for c in self.lab["cells"]:
            if c["topology"] not in seen:
                seen.append(c["topology"])
        return seen

    def has(self, *topologies):
        return all(t in self.topologies() for t in topologies)

    def workload(self, prefix, suffix=""):
        """The first workload whose name starts with `prefix` and ends with `suffix`."""
        for c in self.lab["cells"]:
            w = c["workload"]
            if w.startswith(prefix) and w.endswith(suffix):
                return w
        return None

    def rounds(self):
        return sorted({c.get("round", 0) for c in self.lab["cells"]})

    def summary(self, topology, workload, round_=0):
        """The summary of a cell's round (from 0), or None."""
        if topology is None or workload is None:
            return None
        base = self.path / slug(topology) / slug(workload)
        for p in [base / f"round-{round_ + 1}" / "summary.json", base / "summary.json"]:
            if p.exists():
                return json.loads(p.read_text())
        return None

    def per_round(self, topology, workload, figure):
        """{round: figure(cell, summary)} over the cell's rounds, leaving out None."""
        out = {}
        if workload is None:
            return out
        for c in self.cells(topology, workload):
            r = c.get("round", 0)
            v = figure(c, self.summary(topology, workload, r))
            if v is not None:
                out[r] = v
        return out

    def mean(self, topology, workload, figure):
        """The geometric mean over the rounds of a positive figure (None without one)."""
        values = [v for v in self.per_round(topology, workload, figure).values() if v > 0]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    def average(self, topology, workload, figure):
        """The arithmetic mean over the rounds of a figure that may be 0 (a share of failures);
        None without one."""
        values = list(self.per_round(topology, workload, figure).values())
        return sum(values) / len(values) if values else None

    def limits(self, topology, workload=None):
        kinds = []
        for c in self.cells(topology, workload):
            for l in c["limits"]:
                if l not in kinds:
                    kinds.append(l)
        return kinds

    def limit_kinds(self, topology, workload=None):
        return sorted({l["kind"] for l in self.limits(topology, workload)})

    def successes(self, topology, kind):
        """{round: requests answered 2xx a second, summed over the workloads named `kind RATE`}:
        seed 001 counted its successes over all four phases of one test."""
        out = {}
        for c in self.cells(topology):
            if c["workload"].startswith(kind + " "):
                r = c.get("round", 0)
                out[r] = out.get(r, 0.0) + (c["measured"].get("ok_rps") or 0.0)
        return out

    def success_ratio(self, variant, baseline, kind):
        """Successes over every rate of `kind`, variant topology over baseline, paired by round; a
        side that answered nothing counts as 0.001 a second, so the ratio still has a side."""
        a, b = self.successes(variant, kind), self.successes(baseline, kind)
        return Ratio.of([(max(a[r], 1e-3), max(b[r], 1e-3)) for r in sorted(a) if r in b])

    def ratio(self, variant, baseline, figure):
        """Variant over baseline, paired by round: each a (topology, workload)."""
        a = self.per_round(*variant, figure)
        b = self.per_round(*baseline, figure)
        pairs = [(a[r], b[r]) for r in sorted(a) if r in b and a[r] > 0 and b[r] > 0]
        return Ratio.of(pairs)


class Ratio:
    """A ratio over paired rounds: the geometric mean and Student's t 95 % interval."""

    def __init__(self, value, low, high, rounds):
        self.value, self.low, self.high, self.rounds = value, low, high, rounds

    @staticmethod
    def of(pairs):
        if not pairs:
            return None
        logs = [math.log(a / b) for a, b in pairs]
        m = sum(logs) / len(logs)
        if len(logs) < 2:
            return Ratio(math.exp(m), None, None, 1)
        sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
        half = T95.get(len(logs) - 1, 1.96) * sd / math.sqrt(len(logs))
        return Ratio(math.exp(m), math.exp(m - half), math.exp(m + half), len(logs))

    def __str__(self):
        if self.rounds < 2:
            return f"{times(self.value)} (one round: no interval)"
        return f"{times(self.value)} ({times(self.low)}–{times(self.high)}, {self.rounds} rounds)"


def times(v):
    """A ratio as `×1.23`; with more digits where two would read ×1.00 for a ratio that is not
    1 (an interval wholly above ×1 must not print as ×1.00–×1.00) or ×0.00 for one above 0."""
    if 0 < v < 0.005:
        return f"×{v:.2g}"
    return f"×{v:.2f}" if v == 1 or round(v, 2) != 1 else f"×{v:.4f}"


# ---------------------------------------------------------------- figures of a cell

def ok_rps(c, s):
    return c["measured"].get("ok_rps")


def p50(c, s):
    return c["measured"].get("p50_ms")


def p99(c, s):
    return c["measured"].get("p99_ms")


def breaking(c, s):
    return c["measured"].get("breaking_point_rps")


def min_latency(c, s):
    return s["latency_ms"]["min"] if s else None


def cpu_per_request(c, s):
    return c.get("cpu_ms_per_request")


def service(s, names=("node", "python", "python3", "gunicorn", "loadlab-serve")):
    """The service's processes in a summary: not nginx, Redis or the consumers. (Seed 000's
    topologies are Node; their shared black box, a `loadlab serve`, is left out by name.)"""
    return [p for p in (s or {}).get("server", {}).get("processes", []) if p["name"] in names]


def service_cpu(c, s, names=("node", "python", "python3", "gunicorn", "loadlab-serve")):
    procs = service(s, names)
    return sum(p["cpu_pct_avg"] for p in procs) if procs else None


def service_rss(c, s, names=("node", "python", "python3", "gunicorn", "loadlab-serve")):
    procs = service(s, names)
    return sum(p["rss_mb_max"] for p in procs) if procs else None


def node_cpu_each(c, s):
    """The busiest Node process's average CPU %."""
    procs = service(s, ("node",))
    return max(p["cpu_pct_avg"] for p in procs) if procs else None


def share(s, status):
    """Share of the completed requests answered `status`, in %."""
    if not s:
        return None
    ended = max(1, s["requests"]["ok"] + s["requests"]["errors"])
    return 100.0 * s["status"].get(str(status), 0) / ended


def errors_pct(c, s):
    if not s:
        return None
    # `errors` counts every request that ended without a 2xx: answered otherwise, or not at all.
    r = s["requests"]
    return 100.0 * r["errors"] / max(1, r["ok"] + r["errors"])


def in_flight(c, s):
    """Requests in flight on average, by Little's law: throughput × mean latency."""
    if not s:
        return None
    return s["throughput"]["rps"] * s["latency_ms"]["mean"] / 1000.0


def phase(s, name):
    return next((p for p in (s or {}).get("phases", []) if p["name"] == name), None)


def ms_param(s, name):
    """A millisecond parameter (`ms=1000`) of the cell's target URL."""
    m = re.search(rf"[?&]{name}=(\d+)", (s or {}).get("targets", [""])[0])
    return int(m.group(1)) if m else None


def num(x, digits=0):
    return "—" if x is None else f"{x:,.{digits}f}"


# ---------------------------------------------------------------- judging

def side(r, above, what):
    """A direction: `what` over ×1 (above) or under it. With rounds, the whole interval must
    be on that side; with one round, the ratio must be more than 5 % off ×1."""
    if r is None:
        return None
    want = "above" if above else "below"
    if r.rounds >= 2:
        if (r.low > 1) if above else (r.high < 1):
            return "agrees"
        if (r.high < 1) if above else (r.low > 1):
            return f"differs: {what} is {times(r.value)}, {'below' if above else 'above'} ×1, the other way from the seed"
        return f"differs: the rounds cannot tell {what} from ×1 ({times(r.low)}–{times(r.high)})"
    if (r.value > 1.05) if above else (r.value < 0.95):
        return "agrees (one round: no interval)"
    if (r.value < 0.95) if above else (r.value > 1.05):
        return f"differs: {what} is ×{r.value:.2f}, the other way from the seed (one round: no interval)"
    return f"differs: {what} is ×{r.value:.2f}, within 5 % of ×1, not {want} it (one round: no interval)"


def band(x, lo, hi, what, unit="×"):
    """A figure inside the seed's band [lo, hi]; `x` a Ratio or a number."""
    if x is None:
        return None
    value = x.value if isinstance(x, Ratio) else x
    one = isinstance(x, Ratio) and x.rounds < 2
    note = " (one round: no interval)" if one else ""
    if unit == "×":
        show = times
        span = f"at most ×{hi:.2f}" if lo <= 0 else f"×{lo:.2f} or more" if hi == math.inf else f"×{lo:.2f}–×{hi:.2f}"
    else:
        show = lambda v: f"{v:,.0f}{unit}"
        span = f"{lo:,.0f}–{hi:,.0f}{unit}"
    if lo <= value <= hi:
        return "agrees" + note
    where = "under" if value < lo else "over"
    reach = ""
    if isinstance(x, Ratio) and x.rounds >= 2 and x.low <= hi and x.high >= lo:
        reach = f", though the rounds' interval (×{x.low:.2f}–×{x.high:.2f}) reaches it"
    return f"differs: {what} is {show(value)}, {where} the band {span}{reach}{note}"


def fig(label, x, digits=2):
    return f"{label} {x}" if isinstance(x, Ratio) else f"{label} {num(x, digits)}"


class Conclusion:
    """One conclusion a seed's text states: where (its line), what (our words), the rule that
    judges it, and the function that applies the rule to a lab (figures, verdict), or None
    when the lab has no cells for it."""

    def __init__(self, seed, line, says, rule, judge):
        self.seed, self.line, self.says, self.rule, self.judge = seed, line, says, rule, judge


class Untestable:
    """A conclusion loadlab cannot test, and why."""

    def __init__(self, seed, line, says, why):
        self.seed, self.line, self.says, self.why = seed, line, says, why


CONCLUSIONS = []
UNTESTABLE = []


def conclusion(seed, line, says, rule):
    def register(judge):
        CONCLUSIONS.append(Conclusion(seed, line, says, rule, judge))
        return judge
    return register


def compared(seed, line, says, rule, variant, baseline, figure, label, judge):
    """Registers a conclusion judged on one ratio: `variant` over `baseline`, each (topology,
    workload prefix[, suffix]), paired by round; `judge` turns the ratio into a verdict."""
    def judge_lab(lab):
        (ta, *wa), (tb, *wb) = variant, baseline
        r = lab.ratio((ta, lab.workload(*wa)), (tb, lab.workload(*wb)), figure)
        return r and (f"{label} {r}", judge(r))
    CONCLUSIONS.append(Conclusion(seed, line, says, rule, judge_lab))


def compared_successes(seed, line, says, variant, baseline, kind, above):
    """Registers a conclusion on seed 001's success counts: requests answered 200 over every
    rate of `kind`, `variant` topology over `baseline`, on the side of ×1 `above` says."""
    who = f"{variant} over {baseline}"
    rule = (f"requests answered 200 on {kind} over the four rates (the seed counted them over its four "
            f"phases), {who}, {'above' if above else 'below'} ×1")

    def judge_lab(lab):
        r = lab.success_ratio(variant, baseline, kind)
        if not r:
            return None
        verdict = side(r, above, f"{kind} successes, {who}")
        return f"ok/s over the four rates {r}", with_reason(verdict, held_by_the_front(lab, variant, baseline, kind))
    CONCLUSIONS.append(Conclusion(seed, line, says, rule, judge_lab))


def held_by_the_front(lab, variant, baseline, kind):
    """Why two sizes answered alike: at the highest rate both answered every request the front
    let through and none other failed, while the front closed the rest (its limit of requests
    at once, `lb_connections`), as words; None otherwise (the first round)."""
    w = wl(lab, kind)
    a, b = lab.summary(variant, w), lab.summary(baseline, w)
    if not a or not b:
        return None
    def closed_only(s):
        kinds = {k: v for k, v in s["errors"].items() if v}
        return set(kinds) == {"closed"} and set(s["status"]) == {"200"}
    if not (closed_only(a) and closed_only(b)):
        return None
    ok = [s["requests"]["ok"] / max(1e-9, s["duration_s"]) for s in (a, b)]
    return (f"at {w.split(' ')[-1]} both answered every request nginx passed on ({ok[0]:.0f} and {ok[1]:.0f} a "
            f"second) and nginx closed the rest, past its requests at once: the front, not the replicas, "
            f"set both counts")


def untestable(seed, line, says, why):
    UNTESTABLE.append(Untestable(seed, line, says, why))


def all_of(verdicts):
    """Several parts of one rule: agrees when every part does, else the first difference."""
    parts = [v for v in verdicts if v is not None]
    if not parts:
        return None
    for v in parts:
        if not v.startswith("agrees"):
            return v
    return parts[0]


# ---------------------------------------------------------------- seed 000

T11, T31, T13, T33 = "1 node x 1 worker", "3 replicas x 1 worker", "1 node x 3 workers", "3 replicas x 3 workers"


def shared_box(lab):
    """True when the lab's topologies call one black box, as the seed's did."""
    return "calling one shared black box" in lab.text


@conclusion("000", "255", "On one node with one worker, ping's latency stays flat (under 50 ms) early in the "
            "ramp and starts rising at about 4,000 requests into it: a first breaking point (at the "
            "ramp's 8.33 req/s², about 260 req/s).",
            "ping's breaking point on 1 x 1 (the rate at which p99 stays under 50 ms) within a factor of "
            "two of 260 req/s: 130–520")
def c000_255(lab):
    w = lab.workload("ping capacity")
    bp = lab.mean(T11, w, breaking)
    if bp is None:
        return None
    return (f"1 x 1: p99 < 50 ms up to {num(bp)} req/s",
            band(bp, 130, 520, "the rate ping held", unit=" req/s"))


@conclusion("000", "257", "On ping, one node with three workers answers about as fast as one node with one "
            "worker, while using more resources.",
            "median latency at the fixed ping rate, 1 x 3 over 1 x 1, within ×0.67–×1.5, and 1 x 3's "
            "service CPU above 1 x 1's")
def c000_257(lab):
    w = lab.workload("ping", "/s")
    r = lab.ratio((T13, w), (T11, w), p50)
    cpu = lab.ratio((T13, w), (T11, w), lambda c, s: service_cpu(c, s, ("node",)))
    if r is None or cpu is None:
        return None
    return (f"p50 {r}; service CPU {cpu}",
            all_of([band(r, 0.67, 1.5, "the median latency"), side(cpu, True, "the service CPU")]))


@conclusion("000", "261", "Replicated nodes keep the latency about flat as the load grows (p99 8–9 ms "
            "against 42–44 ms on one node).",
            "p99 at the fixed ping rate, 3 x 1 over 1 x 1, below ×1")
def c000_261a(lab):
    w = lab.workload("ping", "/s")
    r = lab.ratio((T31, w), (T11, w), p99)
    return r and (f"p99 {r}", side(r, False, "the p99"))


@conclusion("000", "261", "With replicated nodes the least latency is higher than on one node: the "
            "balancer's overhead.",
            "least latency at the fixed ping rate, 3 x 1 over 1 x 1, above ×1")
def c000_261b(lab):
    w = lab.workload("ping", "/s")
    r = lab.ratio((T31, w), (T11, w), min_latency)
    return r and (f"least latency {r}", side(r, True, "the least latency"))


@conclusion("000", "263", "Each replicated node uses less CPU than the one node does.",
            "the busiest node process's CPU at the fixed ping rate, 3 x 1 over 1 x 1, below ×1")
def c000_263(lab):
    w = lab.workload("ping", "/s")
    r = lab.ratio((T31, w), (T11, w), node_cpu_each)
    return r and (f"CPU of the busiest process {r}", side(r, False, "the busiest process's CPU"))


@conclusion("000", "392–396", "/heavy breaks at a low rate in every topology; those with more workers or "
            "nodes serve (slightly) more before they stop answering.",
            "each larger topology's breaking point for /heavy over 1 x 1's, above ×1")
def c000_392(lab):
    w = lab.workload("heavy", "ms")
    rows = [(t, lab.ratio((t, w), (T11, w), breaking)) for t in (T31, T13, T33) if lab.has(t)]
    rows = [(t, r) for t, r in rows if r]
    if not rows:
        return None
    found = {t: lab.mean(t, w, breaking) for t in [T11] + [t for t, _ in rows]}
    figures = "; ".join(f"{t}: {num(v, 1)} req/s" for t, v in found.items())
    figures += "; " + "; ".join(f"{t} {r}" for t, r in rows)
    return figures, all_of([side(r, True, f"{t}'s breaking point") for t, r in rows])


@conclusion("000", "392", "At /heavy's breaking point the CPU is at 100 % in every topology.",
            "every topology's /heavy search ended CPU-bound: its processes at their core or quota, or the "
            "host's cores full")
def c000_392b(lab):
    w = lab.workload("heavy", "ms")
    got = {t: lab.limit_kinds(t, w) for t in lab.topologies() if lab.cells(t, w)}
    if not got:
        return None
    figures = "; ".join(f"{t}: {', '.join(k) or 'no limit'}" for t, k in got.items())
    idle = [t for t, k in got.items() if not {"cpu_bound", "at_quota", "host"} & set(k)]
    return figures, "agrees" if not idle else f"differs: {', '.join(idle)} ended without a CPU limit"


@conclusion("000", "512", "At a constant 1 req/s of /heavy (5 s of CPU each), only three replicas of three "
            "workers keep up.",
            "3 x 3's breaking point for /heavy above both 3 x 1's and 1 x 3's")
def c000_512(lab):
    if not lab.has(T33, T31, T13):
        return None
    w = lab.workload("heavy", "ms")
    a, b = lab.ratio((T33, w), (T31, w), breaking), lab.ratio((T33, w), (T13, w), breaking)
    if a is None or b is None:
        return None
    verdict = all_of([side(a, True, "3 x 3 over 3 x 1"), side(b, True, "3 x 3 over 1 x 3")])
    if not verdict.startswith("agrees") and "host" in lab.limit_kinds(T33, w):
        verdict += "; the verdicts name the host's 2 cores as 3 x 3's cap (nine processes)"
    return f"3 x 3 over 3 x 1 {a}; over 1 x 3 {b}", verdict


@conclusion("000", "514", "Three single-worker replicas and one node of three workers serve /heavy alike "
            "(39 answers each in the endurance test).",
            "the breaking points of 1 x 3 and 3 x 1 for /heavy within ×0.8–×1.25 of each other")
def c000_514(lab):
    w = lab.workload("heavy", "ms")
    r = lab.ratio((T13, w), (T31, w), breaking)
    return r and (f"1 x 3 over 3 x 1 {r}", band(r, 0.8, 1.25, "1 x 3 over 3 x 1"))


@conclusion("000", "516", "Past its breaking point /heavy keeps the CPU busy although requests are not "
            "answered.",
            "/heavy offered about three times what 1 x 1 serves: the node process over 90 % of a core "
            "while most requests fail")
def c000_516(lab):
    w = lab.workload("heavy overload")
    s = lab.summary(T11, w)
    cpu = lab.mean(T11, w, lambda c, s: service_cpu(c, s, ("node",)))
    err = lab.mean(T11, w, errors_pct)
    if s is None or cpu is None or err is None:
        return None
    figures = f"1 x 1: node at {cpu:.0f} % of a core, {err:.0f} % of requests failed (timeouts)"
    if cpu < 90:
        return figures, f"differs: the node process used {cpu:.0f} % of a core"
    if err < 50:
        return figures, f"differs: only {err:.0f} % of requests failed"
    return figures, "agrees"


@conclusion("000", "626, 859", "The async black box answers in about the same time (1100 ms, 1050 at a "
            "constant 200 req/s) in every topology: the topologies change, the box they call does not.",
            "median latency at 200 req/s, each topology over 1 x 1, within ×0.9–×1.1")
def c000_626(lab):
    w = lab.workload("bbox async 200/s")
    rows = [(t, lab.ratio((t, w), (T11, w), p50)) for t in lab.topologies() if t != T11]
    rows = [(t, r) for t, r in rows if r]
    if not rows:
        return None
    base = lab.mean(T11, w, p50)
    figures = f"1 x 1: p50 {num(base)} ms; " + "; ".join(f"{t} {r}" for t, r in rows)
    return figures, all_of([band(r, 0.9, 1.1, f"{t}'s median") for t, r in rows])


@conclusion("000", "628, 1253", "The async black box's latency barely moves with the rate: it is asynchronous; "
            "the sync one saturates at a low rate: it is synchronous.",
            "the probe reads the async box as async and the sync box as sync, in every topology")
def c000_628(lab):
    got = {}
    for w, want in [("bbox async workers", "async"), ("bbox sync workers", "sync")]:
        for t in lab.topologies():
            cs = lab.cells(t, w)
            if cs:
                got[(t, want)] = cs[0]["measured"]["behaviour"]
    if not got:
        return None
    wrong = [f"{t}'s {want} box read {b}" for (t, want), b in got.items() if b != want]
    figures = "; ".join(sorted({f"{t}: {b}" for (t, want), b in got.items() if want == "sync"})) + " (sync box)"
    return figures, "agrees" if not wrong else "differs: " + "; ".join(wrong)


@conclusion("000", "740", "Under spikes to 1000 req/s on the async box, one node with one worker fails "
            "requests (1,545 of 43,500) as its resources run out; configurations with more workers fail none.",
            "errors under the spikes: 1 x 1 over 0.5 % of requests, every other topology under 0.1 %")
def c000_740(lab):
    w = lab.workload("bbox async spikes")
    errs = {t: lab.average(t, w, errors_pct) for t in lab.topologies()}
    if not w or errs.get(T11) is None:
        return None
    errs = {t: e for t, e in errs.items() if e is not None}
    figures = "; ".join(f"{t}: {e:.2f} % failed" for t, e in errs.items())
    if errs[T11] <= 0.5:
        return figures, f"differs: 1 x 1 failed {errs[T11]:.2f} % of requests under the spikes"
    others = [t for t in errs if t != T11 and errs[t] >= 0.1]
    return figures, "agrees" if not others else f"differs: {', '.join(others)} failed requests too"


@conclusion("000", "742", "During the spikes the async box's latency stays about the same (the largest "
            "latencies rise a little).",
            "median latency in each spike phase over the base phase's, within ×0.9–×1.2, in every topology")
def c000_742(lab):
    w = lab.workload("bbox async spikes")
    verdicts, figures = [], []
    for t in lab.topologies():
        rs = [lab.per_round(t, w, lambda c, s, n=n: (phase(s, n) or {}).get("latency_ms", {}).get("p50"))
              for n in ("spike 1", "spike 2", "base")]
        pairs = [(max(rs[0].get(k, 0), rs[1].get(k, 0)), rs[2][k]) for k in rs[2] if k in rs[0] and k in rs[1]]
        r = Ratio.of(pairs)
        if r:
            figures.append(f"{t}: spike over base {r}")
            verdicts.append(band(r, 0.9, 1.2, f"{t}'s spike median over its base"))
    return (("; ".join(figures), all_of(verdicts)) if figures else None)


@conclusion("000", "861", "At a constant 200 req/s, one node with one worker holds many more pending "
            "requests than the configurations with more workers or nodes: a bottleneck in the service "
            "that calls the box.",
            "requests in flight (throughput × mean latency) at 200 req/s, 1 x 1 over each other topology, "
            "above ×1.2")
def c000_861(lab):
    w = lab.workload("bbox async 200/s")
    rows = [(t, lab.ratio((T11, w), (t, w), in_flight)) for t in lab.topologies() if t != T11]
    rows = [(t, r) for t, r in rows if r]
    if not rows:
        return None
    held = {t: lab.mean(t, w, in_flight) for t in lab.topologies()}
    figures = "; ".join(f"{t}: {num(v, 0)} in flight" for t, v in held.items())
    return figures, all_of([band(r, 1.2, math.inf, f"1 x 1's pending over {t}'s") for t, r in rows])


@conclusion("000", "984", "The sync black box breaks at practically the same load in every topology: "
            "all call the one box, whose workers do not change.",
            "each topology's breaking point for the sync box over 1 x 1's, within ×0.8–×1.25")
def c000_984(lab):
    w = lab.workload("bbox sync", "sync") or lab.workload("bbox sync capacity")
    rows = [(t, lab.ratio((t, w), (T11, w), breaking)) for t in lab.topologies() if t != T11]
    rows = [(t, r) for t, r in rows if r]
    if not rows:
        return None
    found = {t: lab.mean(t, w, breaking) for t in lab.topologies()}
    figures = "; ".join(f"{t}: {num(v, 1)} req/s" for t, v in found.items())
    verdict = all_of([band(r, 0.8, 1.25, f"{t}'s breaking point over 1 x 1's") for t, r in rows])
    if not verdict.startswith("agrees") and not shared_box(lab):
        verdict += " (each instance had a box of its own here: the lab predates `shared_bbox`)"
    return figures, verdict


@conclusion("000", "986–992", "The sync box saturates at a very small rate: requests pile up and fail early "
            "in the ramp (56 of 1,821 answered), its latency climbing to 10 s.",
            "1 x 1's breaking point for the sync box within ×0.8–×1.25 of its workers over its service time "
            "(K/S, from the probe): it breaks where its workers run out (a step's percentile objective lets "
            "a queue grow for the step's length, so a search may pass K/S a little)")
def c000_986(lab):
    w = lab.workload("bbox sync", "sync") or lab.workload("bbox sync capacity")
    bp = lab.mean(T11, w, breaking)
    probe = lab.cells(T11, "bbox sync workers")
    if bp is None or not probe or not probe[0]["measured"].get("workers"):
        return None
    m = probe[0]["measured"]
    ideal = m["workers"] * 1000.0 / m["service_time_ms"]
    return (f"1 x 1 broke at {bp:.1f} req/s; K/S = {m['workers']}/{m['service_time_ms']:.0f} ms = {ideal:.1f} req/s",
            band(bp / ideal, 0.8, 1.25, "the breaking point over K/S"))


@conclusion("000", "1111", "Under spikes the sync box behaves about the same in every topology: one box "
            "serves them all.",
            "p90 latency under the spikes, each topology over 1 x 1, within ×0.8–×1.25")
def c000_1111(lab):
    w = lab.workload("bbox sync spikes")
    p90 = lambda c, s: s["latency_ms"]["p90"] if s else None
    rows = [(t, lab.ratio((t, w), (T11, w), p90)) for t in lab.topologies() if t != T11]
    rows = [(t, r) for t, r in rows if r]
    if not rows:
        return None
    return ("; ".join(f"{t} {r}" for t, r in rows),
            all_of([band(r, 0.8, 1.25, f"{t}'s p90 over 1 x 1's") for t, r in rows]))


@conclusion("000", "1113–1115", "The sync box serves the base rate, fails requests during the spikes, and "
            "once a spike passes its latency returns to about 1 s.",
            "on 1 x 1: some requests fail, and the last phase's median is within ×0.8–×1.2 of the first's")
def c000_1113(lab):
    w = lab.workload("bbox sync spikes")
    err = lab.average(T11, w, errors_pct)
    after = lab.per_round(T11, w, lambda c, s: (phase(s, "after") or {}).get("latency_ms", {}).get("p50"))
    base = lab.per_round(T11, w, lambda c, s: (phase(s, "base") or {}).get("latency_ms", {}).get("p50"))
    rec = Ratio.of([(after[k], base[k]) for k in after if k in base])
    if err is None or rec is None:
        return None
    peak = lab.mean(T11, w, lambda c, s: max(((phase(s, n) or {}).get("latency_ms", {}).get("p90") or 0)
                                            for n in ("spike 1", "spike 2")) or None)
    figures = f"1 x 1: {err:.2f} % failed; p90 in the spikes {num(peak)} ms; after over base {rec}"
    if err <= 0:
        return figures, (f"differs: no request failed; the spikes queued (p90 {num(peak)} ms) within the "
                         "timeout")
    return figures, band(rec, 0.8, 1.2, "the median after the spikes over before them")


@conclusion("000", "1223", "At a constant 2 req/s the sync box is stable: about 920 ms a request, none "
            "failing.",
            "at the constant rate under its capacity, no failures and a median within ×1.1 of the probe's "
            "service time")
def c000_1223(lab):
    w = lab.workload("bbox sync ", "/s")
    probe = lab.cells(T11, "bbox sync workers")
    med, err = lab.mean(T11, w, p50), lab.average(T11, w, errors_pct)
    if med is None or err is None or not probe:
        return None
    S = probe[0]["measured"]["service_time_ms"]
    figures = f"1 x 1: p50 {med:.0f} ms, S {S:.0f} ms, {err:.2f} % failed"
    if err > 0.1:
        return figures, f"differs: {err:.2f} % of requests failed"
    return figures, band(med / S, 0.95, 1.1, "the median over S")


@conclusion("000", "1430", "The sync box has exactly 3 workers: 4 concurrent requests double the latency "
            "where 3 do not.",
            "the probe reads 3 workers on every topology (they share one box)")
def c000_1430(lab):
    got = {t: cs[0]["measured"].get("workers") for t in lab.topologies()
           for cs in [lab.cells(t, "bbox sync workers")] if cs}
    if not got:
        return None
    figures = "; ".join(f"{t}: {w if w is not None else 'no'} workers" for t, w in got.items())
    wrong = [t for t, w in got.items() if w != 3]
    if not wrong:
        return figures, "agrees"
    why = "differs: " + ", ".join(f"{t} read {got[t]}" for t in wrong)
    if not shared_box(lab):
        why += " (each instance had a box of its own here: the lab predates `shared_bbox`)"
    return figures, why


@conclusion("000", "1490, 1271–1287", "The async box takes about 1100 ms a request, the sync box about 905 ms.",
            "the probe's service time within 10 % of the box's delay: the seed's 1100 and 905 ms in the "
            "full variant, the short variant's scaled 120 and 100 ms")
def c000_1490(lab):
    delays = {"bbox async workers": 1100, "bbox sync workers": 905}
    if lab.variant == "short":
        delays = {"bbox async workers": 120, "bbox sync workers": 100}
    if not shared_box(lab):
        return None
    got = {(t, w): cs[0]["measured"]["service_time_ms"] for w in delays for t in lab.topologies()
           for cs in [lab.cells(t, w)] if cs}
    if not got:
        return None
    figures = "; ".join(f"{w.split()[1]} on {t}: S {s:.0f} ms" for (t, w), s in got.items() if t == T11)
    return figures, all_of([band(s / delays[w], 0.9, 1.1, f"{w.split()[1]} S on {t} over {delays[w]} ms")
                            for (t, w), s in got.items()])


untestable("000", "398", "A service like /heavy has poor availability.",
           "a judgement drawn from the /heavy rows above, with no measurement of its own")
untestable("000", "630, 744, 863, 994", "The containers' CPU and memory while the black boxes are loaded "
           "(memory near its minimum, CPU spread over the workers and rising with the load).",
           "read off charts of the containers whose figures the text does not give; every cell of the lab "
           "reports each process's CPU and memory beside it")
untestable("000", "1225", "The sync box's memory grows slowly during the endurance test: maybe a leak.",
           "a property of the course's own black box; loadlab's black box is its own")


# ---------------------------------------------------------------- seed 001

P1, P6, N1, N6 = "python 1 replica", "python 6 replicas", "node 1 replica", "node 6 replicas"


def wl(lab, kind, rate="600/s"):
    return lab.workload(kind, rate)


@conclusion("001", "73, 92", "On ping, arrivals and successful answers match one to one in either runtime: "
            "no errors.",
            "every ping cell of one replica, either runtime, at least 99.9 % answered 2xx")
def c001_73(lab):
    worst = []
    for t in (P1, N1):
        for c in lab.cells(t):
            if c["workload"].startswith("ping"):
                e = errors_pct(c, lab.summary(t, c["workload"], c.get("round", 0)))
                if e is not None:
                    worst.append((e, t, c["workload"]))
    if not worst:
        return None
    e, t, w = max(worst)
    return f"worst: {t}, {w}: {e:.2f} % failed", ("agrees" if e <= 0.1 else f"differs: {t} failed {e:.2f} % at {w}")


compared("001", "89", "On ping, Node's response time grows with the throughput.",
         "node's median latency on ping, one replica, 600/s over 50/s, above ×1",
         (N1, "ping", "600/s"), (N1, "ping", "50/s"), p50, "p50",
         lambda r: side(r, True, "node's ping median, 600/s over 50/s"))


compared("001", "91", "On ping, Node's p99 latency is much lower than Python's.",
         "p99 of ping at 600/s, node over python, one replica, below ×1",
         (N1, "ping", "600/s"), (P1, "ping", "600/s"), p99, "p99",
         lambda r: side(r, False, "node's p99 over python's"))


compared("001", "93", "On ping, Node uses less CPU than Python.",
         "CPU per request on ping at 600/s, node over python, one replica, below ×1",
         (N1, "ping", "600/s"), (P1, "ping", "600/s"), cpu_per_request, "CPU per request",
         lambda r: side(r, False, "node's CPU per request over python's"))


@conclusion("001", "77, 90, 112, 156", "Python's memory stays flat whatever the load (ping, delay, calc); "
            "so does Node's on ping.",
            "the service's peak memory at 600/s over at 50/s within ×0.9–×1.15: python on every endpoint, "
            "node on ping")
def c001_77(lab):
    rows, verdicts = [], []
    for t, kinds in [(P1, ("ping", "delay", "calc")), (N1, ("ping",))]:
        for k in kinds:
            r = lab.ratio((t, wl(lab, k)), (t, wl(lab, k, "50/s")), service_rss)
            if r:
                rows.append(f"{t.split()[0]} {k} {r}")
                verdicts.append(band(r, 0.9, 1.15, f"{t.split()[0]}'s memory on {k}"))
    return ("; ".join(rows), all_of(verdicts)) if rows else None


@conclusion("001", "110, 132", "Python's blocking delay queues the requests at its one instance; many wait "
            "past nginx's 60 s and get a timeout (504).",
            "python, one replica, delay at 600/s: under 10 % of the offered rate answered, and some 504s")
def c001_110(lab):
    w = wl(lab, "delay")
    s = lab.summary(P1, w)
    if s is None:
        return None
    served = 100.0 * s["requests"]["ok"] / max(1, s["requests"]["sent"] + s["requests"].get("dropped", 0))
    s504 = share(s, 504)
    figures = f"{served:.1f} % answered 200; 504s {s504:.1f} % of the answers"
    if served >= 10:
        return figures, f"differs: {served:.1f} % of the offered requests were answered"
    if s504 <= 0:
        return figures, "differs: no 504: nginx timed out no request (its timeout is the topology's proxy_timeout)"
    return figures, "agrees"


@conclusion("001", "134", "Node answers 99 % of the delay requests within the delay (10 s): nothing blocks, "
            "though many connections are refused.",
            "node, one replica, delay at 600/s: p99 of the answered requests within ×1.1 of the delay")
def c001_134(lab):
    w = wl(lab, "delay")
    s = lab.summary(N1, w)
    if s is None:
        return None
    delay = ms_param(s, "ms")
    lat = s.get("answered_latency_ms") or s["latency_ms"]
    return (f"p99 {lat['p99']:.0f} ms for a {delay} ms delay",
            band(lat["p99"] / delay, 1.0, 1.1, "p99 over the delay"))


compared_successes("001", "136–138", "On the blocking delay Node processes about 4 times what Python "
                   "does (it accepted 15,479 requests to Python's 3,841; the seed's 4× counts requests its "
                   "containers accepted, which Docker's backlog set, so only its direction carries over).",
                   N1, P1, "delay", True)


compared("001", "138", "Node's capacity on the delay costs it more memory than Python uses.",
         "peak memory on delay at 600/s, node over python, one replica, above ×1",
         (N1, "delay", "600/s"), (P1, "delay", "600/s"), service_rss, "memory",
         lambda r: side(r, True, "node's memory over python's"))


compared("001", "124", "Node's memory on the delay grows with the traffic (it holds more requests at once).",
         "node's peak memory on delay, 600/s over 50/s, one replica, above ×1",
         (N1, "delay", "600/s"), (N1, "delay", "50/s"), service_rss, "memory",
         lambda r: side(r, True, "node's memory at 600/s over 50/s"))


@conclusion("001", "158", "On calc Python's requests queue: far more arrive than it can process.",
            "python, one replica, calc at 600/s: under half the offered rate answered")
def c001_158(lab):
    w = wl(lab, "calc")
    cs = lab.cells(P1, w)
    if not cs:
        return None
    m = cs[0]["measured"]
    served = 100.0 * m["ok_rps"] / m["offered_rps"]
    return f"{m['ok_rps']:.2f} of {m['offered_rps']:.0f} req/s answered", (
        "agrees" if served < 50 else f"differs: {served:.0f} % of the offered rate was answered")


@conclusion("001", "189", "On calc Node uses far more CPU than Python (83 % against 11 %).",
            "the service's CPU on calc at 600/s, node over python, one replica, above ×1")
def c001_189a(lab):
    w = wl(lab, "calc")
    r = lab.ratio((N1, w), (P1, w), service_cpu)
    if r is None:
        return None
    verdict = side(r, True, "node's CPU over python's")
    quota = [t for t in (N1, P1) if any(l["kind"] == "at_quota" for l in lab.limits(t, w))]
    if not verdict.startswith("agrees") and len(quota) == 2:
        verdict += ": both used their whole CPU quota"
    return f"CPU {r}", verdict


compared("001", "189", "On calc Node uses more memory than Python (90 MB against 30 MB).",
         "peak memory on calc at 600/s, node over python, one replica, above ×1",
         (N1, "calc", "600/s"), (P1, "calc", "600/s"), service_rss, "memory",
         lambda r: side(r, True, "node's memory over python's"))


@conclusion("001", "190, 240", "On intensive maths (calc) Python does better than Node (1,667 answers "
            "against 1,033 on one container).",
            "requests answered 200 on calc over the four rates, python over node, one replica, above ×1")
def c001_190(lab):
    w = wl(lab, "calc")
    r = lab.success_ratio(P1, N1, "calc")
    if r is None:
        return None
    verdict = side(r, True, "python's calc successes over node's")
    s = lab.summary(P1, w)
    if s and ms_param(s, "from") is None and not verdict.startswith("agrees"):
        verdict += " (calc summed sin from 0 here, not over the seed's 5 to 6 million)"
    fastest = {t: lab.mean(t, lab.workload("calc", "50/s"), min_latency) for t in (P1, N1)}
    if not verdict.startswith("agrees") and None not in fastest.values() and fastest[P1] < fastest[N1]:
        verdict += (f": yet python's fastest calc answer at 50/s took {fastest[P1]:.0f} ms to node's "
                    f"{fastest[N1]:.0f}, so each request cost python less, as the seed found; "
                    f"fewer of python's were answered within nginx's timeout")
    return f"ok/s over the four rates {r}", verdict


@conclusion("001", "191", "On calc both runtimes refuse about as many requests, but of those they accept "
            "Python answers more with 504 (gateway timeout) than Node.",
            "share of 504s on calc at 600/s, python over node, one replica, above ×1")
def c001_191(lab):
    w = wl(lab, "calc")
    a, b = lab.summary(P1, w), lab.summary(N1, w)
    if a is None or b is None:
        return None
    pa, pb = share(a, 504), share(b, 504)
    figures = f"504s: python {pa:.1f} %, node {pb:.1f} % (the first round)"
    if pa == 0 and pb == 0:
        return figures, "differs: neither answered 504 (nginx timed out nothing within the cell)"
    if pa > pb:
        return figures, "agrees"
    why = ""
    if pa == 0:
        # The reason from the cell's own figures: nginx timed out none of python's calcs.
        why = (f": nginx timed out none of python's calcs (the slowest ended in "
               f"{num(a['latency_ms']['max'])} ms): its one sync worker serves its queue in order")
    return figures, "differs: python's share of 504s is not above node's" + why


compared_successes("001", "209–211", "Six containers raise Python's successes on the delay (5 to 36).",
                   P6, P1, "delay", True)


compared_successes("001", "219, 236", "Six containers lower Node's successes on the delay (15,479 to "
                   "13,269).", N6, N1, "delay", False)


compared("001", "220", "Node's delay latencies (min, median, max, percentiles) stay about the same with "
         "six containers.",
         "median latency on delay at 600/s, node 6 over 1 replica, within ×0.9–×1.1",
         (N6, "delay", "600/s"), (N1, "delay", "600/s"), p50, "p50",
         lambda r: band(r, 0.9, 1.1, "node's delay median, 6 over 1"))


compared_successes("001", "224–226", "Six containers raise Python's successes on calc (1,667 to 2,299).",
                   P6, P1, "calc", True)


compared_successes("001", "230", "Six containers raise Node's successes on calc (1,033 to 4,238).",
                   N6, N1, "calc", True)


@conclusion("001", "234, 236", "Scaling helps mainly where the nodes are saturated (Python's delay, Node's "
            "calc); on ping the gain is insignificant.",
            "successes over the four rates, 6 over 1 replica: ping's within ×0.95–×1.05 in both runtimes, "
            "python's delay and node's calc gaining over ×1.5")
def c001_234(lab):
    parts = [("python ping", lab.success_ratio(P6, P1, "ping"), (0.95, 1.05)),
             ("node ping", lab.success_ratio(N6, N1, "ping"), (0.95, 1.05)),
             ("python delay", lab.success_ratio(P6, P1, "delay"), (1.5, math.inf)),
             ("node calc", lab.success_ratio(N6, N1, "calc"), (1.5, math.inf))]
    parts = [(n, r, b) for n, r, b in parts if r]
    if len(parts) < 4:
        return None
    figures = "; ".join(f"{n} {r}" for n, r, _ in parts)
    verdicts = [band(r, lo, hi, f"{n}'s gain") for n, r, (lo, hi) in parts]
    return figures, all_of(verdicts)


def answered_without_a_replica(lab, topology, workload):
    """Why a cell's median or CPU per request says nothing of its replicas' work: most of its
    answers were nginx's own 502s, given in under a millisecond (no replica computed them), as
    words; None when fewer than half were (the first round)."""
    s = lab.summary(topology, workload)
    if not s:
        return None
    s502 = share(s, 502)
    median = s["latency_ms"].get("p50")
    if s502 is None or s502 < 50 or median is None or median >= 1:
        return None
    return (f"{s502:.1f} % of the answers with {topology} were nginx's 502s in a median {median:.2f} ms, "
            f"answered before any replica computed them; the seed's annex has no 502 on Node's calc "
            f"with six containers")


def served_out_of_order(lab, topology, workload):
    """Why one replica's calc median is far under nginx's timeout although its queue outlasted
    it: half its answers came quickly while a share were nginx's 504s at the timeout (the
    slowest answer), as words; None when it answered no 504 (the first round)."""
    s = lab.summary(topology, workload)
    if not s:
        return None
    answers = sum(s["status"].values())
    n504 = s["status"].get("504", 0)
    median, slowest = s["latency_ms"].get("p50"), s["latency_ms"].get("max")
    if not answers or not n504 or median is None or not slowest or median > slowest / 2:
        return None
    return (f"{topology} answered half its calcs within {median:,.0f} ms while {100 * n504 / answers:.0f} % of "
            f"its HTTP answers were nginx's 504s at {slowest / 1000:.1f} s: it served its queue out of order, "
            f"where the seed's one container reached its median request at nginx's 60 s (60,010 ms, line 249)")


def with_reason(verdict, reason):
    """A verdict that differs, with the measured reason when there is one."""
    return verdict if verdict.startswith("agrees") or not reason else f"{verdict}: {reason}"


@conclusion("001", "240", "Scaling Node did not improve its calc response time; it even worsened it.",
            "median latency on calc at 600/s, node 6 over 1 replica, not below ×0.9")
def c001_240a(lab):
    w = wl(lab, "calc")
    r = lab.ratio((N6, w), (N1, w), p50)
    if r is None:
        return None
    verdict = band(r, 0.9, math.inf, "node's calc median, 6 over 1")
    reason = answered_without_a_replica(lab, N6, w) or served_out_of_order(lab, N1, w)
    return f"p50 {r}", with_reason(verdict, reason)


@conclusion("001", "240", "A calc request costs Node the same whatever the number of nodes.",
            "CPU per request on calc at 600/s, node 6 over 1 replica, within ×0.8–×1.25")
def c001_240b(lab):
    w = wl(lab, "calc")
    r = lab.ratio((N6, w), (N1, w), cpu_per_request)
    if r is None:
        return None
    verdict = band(r, 0.8, 1.25, "node's CPU per calc request, 6 over 1")
    return f"CPU per request {r}", with_reason(verdict, answered_without_a_replica(lab, N6, w))


untestable("001", "75", "Artillery's traffic does not arrive at a constant rate.",
           "about the seed's load generator, not the service; loadlab schedules arrivals from a fixed origin "
           "and reports its own lag")
untestable("001", "122", "On the delay Node makes better use of the instance's cores than Python.",
           "read off a per-core chart the text does not give in figures; a Node process serves on one thread")
untestable("001", "238–240", "The technology chosen changes the results, and changing it can lower costs.",
           "a judgement drawn from the runtime rows above (delay and calc), with no measurement of its own")


# ---------------------------------------------------------------- seed 002

B, S1, W3, A = "before (1 web)", "1 web, statics on nginx", "3 web", "after (3 web)"
USERS, USERS_H = "site users", "site users, half sleep"
PAGE, PAGE_H = "page capacity", "page capacity, half sleep"


def pages(s):
    """The page requests (not static files) of a users summary, merged."""
    by = (s or {}).get("requests_by_name", {})
    return [v for k, v in by.items() if "/site/" in k and not k.endswith(" static")]


@conclusion("002", "60", "Past a certain rate the application answers errors and its response time "
            "deteriorates.",
            "the users before the changes: over 1 % of requests fail, and p95 at the 40-user step at least "
            "twice the first step's")
def c002_60(lab):
    s = lab.summary(B, USERS)
    if s is None:
        return None
    err = errors_pct(None, s)
    first, forty = phase(s, s["phases"][0]["name"]) if s.get("phases") else None, phase(s, "40 users")
    if first is None or forty is None:
        return None
    grow = forty["latency_ms"]["p95"] / max(1e-3, first["latency_ms"]["p95"])
    figures = f"{err:.1f} % failed; p95 {first['latency_ms']['p95']:.0f} ms at {first['name']}, {forty['latency_ms']['p95']:.0f} ms at 40 users"
    if err <= 1:
        return figures, f"differs: {err:.1f} % of requests failed"
    return figures, "agrees" if grow >= 2 else f"differs: p95 grew ×{grow:.2f} from the first step to 40 users"


@conclusion("002", "75", "Three load regions: normal at about 20 users, deteriorated (few errors) at about 40, "
            "failing beyond.",
            "the users before the changes: p90 under 1 s at 10 and 20 users, over 1 s at 40 (the regions of "
            "latency; the summary has no errors per step, so the third region is not judged)")
def c002_75(lab):
    s = lab.summary(B, USERS)
    if s is None or not s.get("phases"):
        return None
    p = {ph["name"]: ph["latency_ms"]["p90"] for ph in s["phases"]}
    if not {"10 users", "20 users", "40 users"} <= set(p):
        return None
    figures = "; ".join(f"{n}: p90 {v:,.0f} ms" for n, v in p.items())
    low = [n for n in ("10 users", "20 users") if n in p and p[n] >= 1000]
    if low:
        return figures, f"differs: {', '.join(low)} already had p90 over 1 s"
    if p.get("40 users", 0) < 1000:
        return figures, "differs: 40 users still had p90 under 1 s"
    return figures, "agrees"


@conclusion("002", "77", "The errors are all 429s (Cloud Run had no instance free).",
            "the users before the changes: every failed request answered 429")
def c002_77a(lab):
    s = lab.summary(B, USERS)
    if s is None:
        return None
    failed = s["requests"]["errors"]
    n429 = s["status"].get("429", 0)
    figures = f"{failed} failed, {n429} of them 429"
    if failed == 0:
        return figures, "differs: no request failed"
    return figures, "agrees" if n429 == failed else f"differs: {failed - n429} failed otherwise"


def web_budget(s):
    """The web instance's CPU budget in a summary (its `service` group, or the first `replica N`
    group: the replicas' budgets are alike), or None."""
    budgets = ((s or {}).get("server") or {}).get("budgets") or []
    return next((b for b in budgets
                 if (b["name"] == "service" or b["name"].split(" ")[0] == "replica") and b.get("cpus")),
                None)


def busiest_seconds(s):
    """Each web instance's busiest second as a share of its CPU quota, in %, and the quota's
    budget; None without a quota or a watched instance."""
    budget = web_budget(s)
    procs = service(s)
    if budget is None or not procs:
        return None
    return [p["cpu_pct_max"] / budget["cpus"] for p in procs], budget


@conclusion("002", "77", "The web tier's CPU climbs to 100 % as the response time rises: it is the bottleneck.",
            "the users before the changes: the web instance's busiest second at its CPU quota (≥ 90 % of it; "
            "the text's 100 % is a peak on a chart, not the run's average)")
def c002_77b(lab):
    read = busiest_seconds(lab.summary(B, USERS))
    if read is None:
        return None
    shares, budget = read
    busiest = max(shares)
    figures = (f"web instance's busiest second {busiest:.0f} % of its {budget['cpus']} CPU "
               f"({budget['quota_used_pct']:.0f} % over the run), throttled in {budget['throttled_pct']:.0f} % "
               f"of periods (the first round)")
    if busiest >= 90.0:
        return figures, "agrees"
    return figures, f"differs: its busiest second used {busiest:.0f} % of its CPU quota"


@conclusion("002", "88, 159", "A busy-wait caps each instance at a few requests a second: a CPU serves about "
            "1000/T requests a second for T ms of CPU each.",
            "one web instance's breaking point for a page within 15 % of its CPUs × 1000/T")
def c002_88(lab):
    cap = lab.summary(B, PAGE)
    bp = lab.mean(B, PAGE, breaking)
    T = ms_param(cap, "work_ms")
    cpus = next((c.get("cpus") for c in lab.cells(B, PAGE) if c.get("cpus")), None) or 1.0
    if bp is None or not T:
        return None
    expected = cpus * 1000.0 / T
    return (f"{bp:.1f} req/s; {cpus} × 1000/{T} = {expected:.1f}",
            band(bp / expected, 0.85, 1.15, "the breaking point over CPUs × 1000/T"))


@conclusion("002", "90, 147", "The visit counter and its store keep up, before and after the changes: the "
            "queue's messages are taken at once, without a backlog.",
            "the visits stream's consumer lag stayed at most 10 messages in the users' cells, before and after")
def c002_90(lab):
    lags = {}
    for t in (B, A):
        s = lab.summary(t, USERS)
        for st in (s or {}).get("server", {}).get("stores", []):
            for stream in st.get("streams", []):
                lags[t] = max(lags.get(t, 0), stream.get("lag_max") or 0)
    if not lags:
        return None
    figures = "; ".join(f"{t}: lag at most {v}" for t, v in lags.items())
    high = [t for t, v in lags.items() if v > 10]
    return figures, "agrees" if not high else f"differs: {', '.join(high)} fell behind"


@conclusion("002", "120", "Replacing half the busy-wait with a blocking sleep alone lets the system take 40 "
            "users without deteriorating.",
            "the users on one web instance with the sleep: at 40 users p90 under 1 s and under 1 % failed")
def c002_120(lab):
    s = lab.summary(B, USERS_H)
    if s is None:
        return None
    forty = phase(s, "40 users")
    err = errors_pct(None, s)
    if forty is None:
        return None
    figures = f"40 users: p90 {forty['latency_ms']['p90']:,.0f} ms; {err:.1f} % failed over the run"
    if forty["latency_ms"]["p90"] >= 1000:
        return figures, f"differs: p90 at 40 users was {forty['latency_ms']['p90']:,.0f} ms"
    return figures, "agrees" if err < 1 else f"differs: {err:.1f} % of requests failed"


@conclusion("002", "124", "After the four changes the rate at which errors start rose 3 to 4 times "
            "(to about 12 req/s).",
            "the breaking point for a page after the changes (3 web, statics on nginx, half sleep) over "
            "before them, within ×3–×4 (the API's change is not modelled)")
def c002_124(lab):
    r = lab.ratio((A, PAGE_H), (B, PAGE), breaking)
    if r is None:
        r = lab.ratio((A, PAGE), (B, PAGE), breaking)
        if r is None:
            return None
        return f"3 web over 1 web, the same page {r}", band(r, 3, 4, "the gain") + " (the lab predates the sleep variant)"
    return f"breaking point {r}", band(r, 3, 4, "the gain")


@conclusion("002", "128, 143", "After the changes the median response time stays about constant: requests "
            "queue for an instance, the limit is throughput.",
            "the users after the changes: the pages' median latency within ×1.5 of the least a page took "
            "(a page served without waiting)")
def c002_128(lab):
    s = lab.summary(A, USERS_H) or lab.summary(A, USERS)
    ps = pages(s)
    if not ps:
        return None
    med = sorted(p["latency_ms"]["p50"] for p in ps)[len(ps) // 2]
    least = min(p["latency_ms"]["min"] for p in ps)
    return (f"pages' median p50 {med:.0f} ms, least {least:.0f} ms",
            band(med / least, 1.0, 1.5, "the median over the least"))


@conclusion("002", "145", "After the changes the limit is still the CPU time each request takes.",
            "the users after the changes: at least half the web instances' busiest second at their CPU quota "
            "(≥ 90 % of it, as row 4 reads the seed's chart)")
def c002_145(lab):
    w = USERS_H if lab.cells(A, USERS_H) else USERS
    if not lab.cells(A, w):
        return None
    read = busiest_seconds(lab.summary(A, w))
    if read is None:
        return None
    shares, budget = read
    at = sum(1 for x in shares if x >= 90.0)
    figures = (f"{at} of {len(shares)} web instances' busiest second at ≥ 90 % of its {budget['cpus']} CPU "
               f"(the busiest {max(shares):.0f} %, the least {min(shares):.0f} %; the first round)")
    if 2 * at >= len(shares):
        return figures, "agrees"
    return figures, (f"differs: {len(shares) - at} of {len(shares)} web instances never used 90 % of their "
                     f"CPU quota in a second (the busiest {max(shares):.0f} %)")


@conclusion("002", "157", "A process blocked waiting for a back end leaves its CPU to other clients: the "
            "same response time, more throughput.",
            "one web instance, the page with half its busy-wait a sleep over the page as it was: breaking point "
            "above ×1 and least latency within ×0.8–×1.25")
def c002_157(lab):
    r = lab.ratio((B, PAGE_H), (B, PAGE), breaking)
    m = lab.ratio((B, PAGE_H), (B, PAGE), min_latency)
    if r is None or m is None:
        return None
    verdict = all_of([side(r, True, "the breaking point"), band(m, 0.8, 1.25, "the least latency")])
    # A CPU quota stretches a busy-wait (it runs only in the quota's share of each period) and
    # not a sleep: say so when the page as it was took far longer than its busy-wait.
    least = lab.mean(B, PAGE, min_latency)
    T = ms_param(lab.summary(B, PAGE), "work_ms")
    budget = web_budget(lab.summary(B, PAGE))
    if not verdict.startswith("agrees") and least and T and budget and least > 1.5 * T:
        verdict += (f": alone, the page as it was took {least:.0f} ms for its {T} ms busy-wait (×{least / T:.1f}); "
                    f"on {budget['cpus']} CPU the busy-wait is throttled and the sleep is not, where the "
                    f"seed's instances had a whole CPU")
    return f"breaking point {r}; least latency {m}", verdict


CR2, CR6, CLOUD_RUN = "Cloud Run, max 2", "Cloud Run, max 6", "seed-002-cloud-run"


@conclusion("002", "105", "Cloud Run kept an instance idle a significant fraction of the time, raised "
            "preemptively and soon found unnecessary, even when one instance sufficed.",
            "the web tier (loadlab's site has no API tier) on Cloud Run's autoscaling (`seed-002-cloud-run`), "
            "at most 6 instances, under the users of the second test (half sleep: where the instances allowed "
            "outnumber what the load needs, as the API's did): the autoscaler raised an instance past the first and took one away again, and "
            "in at least 10 % of the seconds a ready instance served nothing while the others had room for "
            "every request (\"soon\" is not judged: the KPA waits its stable window)")
def c002_105(lab):
    cr = lab.extra(CLOUD_RUN)
    a = ((cr.summary(CR6, USERS_H) if cr else None) or {}).get("autoscale")
    if a is None:
        return None
    downs = [d for d in a["decisions"] if d["to"] < d["from"]]
    share = 100.0 * a["idle_seconds"] / max(1, a["seconds"])
    figures = (f"{a['ready_most']} ready at most, {len(downs)} scale-down(s); an instance idle in "
               f"{a['idle_seconds']} of {a['seconds']} s ({share:.0f} %), {a['idle_instance_seconds']:.0f} of "
               f"{a['instance_seconds']:.0f} instance-seconds")
    if a["ready_most"] < 2:
        return figures, "differs: no instance was raised past the first"
    if not downs:
        return figures, "differs: no instance was taken away again"
    if share < 10.0:
        return figures, f"differs: a ready instance was idle in only {share:.0f} % of the seconds"
    return figures, "agrees"


untestable("002", "77, 86", "The API's load stays low and it answers quickly: it is not the bottleneck.",
           "loadlab's site has no API tier (its pages record visits on the queue themselves); the seed found "
           "its API idle throughout, so the lab leaves it out")
untestable("002", "113–114", "Second test: the API's instances 2 → 1.",
           "no API tier (above); the seed made this change for cost (line 105), not for capacity")
untestable("002", "157", "Hence: optimal algorithms, caching, queues for deferred work, sharing results.",
           "advice drawn from the experiment, with no measurement of its own")


# ---------------------------------------------------------------- seed 003

D, L1, L2, L3, C2, C3 = ("1 instance", "1 instance behind nginx", "2 instances", "3 instances",
                         "2 instances client-balanced", "3 instances client-balanced")
AC, W2, LT = "closed c100 p10 (autocannon)", "open", "closed c100 (loadtest)"


def w2(lab):
    return lab.workload("open")


@conclusion("003", "31, 46, 73, 283", "The three tools disagree on one target: autocannon 10,000, wrk2 8,500, "
            "loadtest 5,800 req/s.",
            "on 1 instance: autocannon's load model over loadtest's within ×1.5–×2.0 (the seed's ×1.72), and "
            "wrk2's between them")
def c003_283(lab):
    a, l = lab.mean(D, AC, ok_rps), lab.mean(D, LT, ok_rps)
    w = lab.mean(D, w2(lab), ok_rps)
    r = lab.ratio((D, AC), (D, LT), ok_rps)
    if r is None or w is None:
        return None
    figures = f"autocannon's model {num(a)}, wrk2's {num(w)}, loadtest's {num(l)} ok/s; autocannon over loadtest {r}"
    order = "agrees" if l < w < a else f"differs: wrk2's model served {num(w)} ok/s, not between the other two"
    return figures, all_of([band(r, 1.5, 2.0, "autocannon's over loadtest's"), order])


@conclusion("003", "39–42", "wrk2 offered 20,000 req/s and got about 8,400, at a mean latency of 3 s: the "
            "target was saturated.",
            "on 1 instance, the open model at twice its capacity: under 90 % of the offered rate served and the "
            "mean latency over 1 s")
def c003_39(lab):
    w = w2(lab)
    cs, s = lab.cells(D, w), lab.summary(D, w)
    if not cs or s is None:
        return None
    m = cs[0]["measured"]
    got = m["ok_rps"] / m["offered_rps"]
    mean = s["latency_ms"]["mean"]
    figures = f"{num(m['ok_rps'])} of {num(m['offered_rps'])} req/s, mean {mean:,.0f} ms"
    if got >= 0.9:
        return figures, f"differs: {got:.0%} of the offered rate was served (the open model's rate is under capacity here)"
    return figures, "agrees" if mean > 1000 else f"differs: the mean latency was {mean:,.0f} ms"


@conclusion("003", "242 (against 31)", "One instance behind the balancer served more than one instance reached "
            "directly (11,200 against 10,000 req/s).",
            "autocannon's model, 1 instance behind nginx over 1 instance, within ×1.0–×1.25 (the seed's ×1.12)")
def c003_242(lab):
    r = lab.ratio((L1, AC), (D, AC), ok_rps)
    return r and (f"ok/s {r}", band(r, 1.0, 1.25, "behind nginx over direct"))


@conclusion("003", "269", "Two instances behind the balancer served more than one (14,000 against 11,200).",
            "autocannon's model, 2 over 1 instance behind nginx, within ×1.1–×1.4 (the seed's ×1.25)")
def c003_269(lab):
    r = lab.ratio((L2, AC), (L1, AC), ok_rps)
    return r and (f"ok/s {r}", band(r, 1.1, 1.4, "2 over 1 behind nginx"))


@conclusion("003", "273", "Three instances behind the balancer give practically the same as two.",
            "autocannon's model, 3 over 2 instances behind nginx, within ×0.9–×1.1")
def c003_273(lab):
    r = lab.ratio((L3, AC), (L2, AC), ok_rps)
    return r and (f"ok/s {r}", band(r, 0.9, 1.1, "3 over 2 behind nginx"))


@conclusion("003", "273, 294", "The balancer is the limit, at about 14,000 req/s.",
            "with 3 instances behind nginx under autocannon's model, nginx at its CPU quota and no instance at its own")
def c003_294(lab):
    if not lab.cells(L3, AC):
        return None
    ls = lab.limits(L3, AC)
    nginx = [l for l in ls if l["kind"] in ("at_quota", "cpu_bound") and l.get("name") == "nginx"]
    inst = [l for l in ls if l["kind"] in ("at_quota", "cpu_bound") and l.get("name") not in ("nginx", "redis-server")]
    figures = "limits: " + (", ".join(sorted({f"{l['kind']} {l.get('name', '')}".strip() for l in ls})) or "none")
    if not nginx:
        return figures, "differs: nginx did not reach its quota"
    return figures, "agrees" if not inst else "differs: the instances reached their quota too"


@conclusion("003", "277, 289, 296", "Balancing in the client (DNS-style) scales linearly: 37,000 req/s on two "
            "servers, 55,500 on three (18,500 each).",
            "autocannon's model over 1 instance: 2 client-balanced within ×1.8–×2.2, 3 within ×2.7–×3.3")
def c003_277(lab):
    parts = [(t, lab.ratio((t, AC), (D, AC), ok_rps), b) for t, b in ((C2, (1.8, 2.2)), (C3, (2.7, 3.3)))]
    parts = [(t, r, b) for t, r, b in parts if r]
    if not parts:
        return None
    verdict = all_of([band(r, lo, hi, f"{t} over 1 instance") for t, r, (lo, hi) in parts])
    if not verdict.startswith("agrees") and any("host" in lab.limit_kinds(t, AC) for t, _, _ in parts):
        verdict += "; the verdicts name the host as the cap"
    return "; ".join(f"{t} {r}" for t, r, _ in parts), verdict


untestable("003", "75–215, 283–285", "The same test against a local, a managed (AWS) and a remote Redis "
           "(autocannon 10,000 / 26,000 / 18,500).",
           "the seed draws no conclusion from them, and loadlab has no managed or remote Redis: every "
           "topology here shares one local redis-server")
untestable("003", "294", "Amazon might raise its balancer's limit.",
           "about the provider's service, not something a local lab can test")


# ---------------------------------------------------------------- seed 004

NOLOG_50, LOG_50, NOLOG_C, LOG_C = "info, 50 x 20", "info log=1, 50 x 20", "info, c100", "info log=1, c100"


@conclusion("004", "8", "With Artillery's 50 connections × 20 requests, the service answers almost twice as "
            "many requests a second without logging as with it.",
            "throughput with log=1 over without, node on a terminal, 50 × 20: within ×0.50–×0.60 "
            "(1.7 to 2 times without)")
def c004_8(lab):
    r = lab.ratio(("node tty", LOG_50), ("node tty", NOLOG_50), ok_rps)
    return r and (f"with log=1 {r}", band(r, 0.5, 0.6, "with over without"))


@conclusion("004", "18", "With autocannon's 100 connections for 20 s: 14,000 requests without logging, 10,000 "
            "with it (the seed calls it a 40 % difference: 14 over 10; the cost is 29 %).",
            "throughput with log=1 over without, node on a terminal, c100: within ×0.64–×0.78 (the seed's "
            "×0.71, ±10 %)")
def c004_18(lab):
    r = lab.ratio(("node tty", LOG_C), ("node tty", NOLOG_C), ok_rps)
    return r and (f"with log=1 {r}", band(r, 0.64, 0.78, "with over without"))


@conclusion("004", "37", "V8's tick profile (--prof): the JavaScript with logging takes more ticks.",
            "the service's CPU per request with log=1 over without, node on a terminal, c100: above ×1")
def c004_37(lab):
    per = lambda c, s: (service_cpu(c, s) or 0) / max(1e-9, c["measured"].get("ok_rps") or 0) or None
    r = lab.ratio(("node tty", LOG_C), ("node tty", NOLOG_C), per)
    return r and (f"CPU per request {r}", side(r, True, "the CPU per request"))


def profile_top(lab, workload):
    s = lab.summary("node profiled", workload)
    return (s or {}).get("profile", {}).get("top") or None


CONSOLE = re.compile(r"^(consoleCall|log|formatWithOptions\w*|inspect|formatValue|formatRaw)\b")


@conclusion("004", "41", "Under --inspect, with logging the service spends much of its time building "
            "formatted strings and in console calls.",
            "the profile with log=1: console.log's calls (consoleCall and the formatting under it) hold at "
            "least 10 % of the samples, and at most 2 % without")
def c004_41(lab):
    on, off = profile_top(lab, LOG_C), profile_top(lab, NOLOG_C)
    if not on or not off:
        return None
    held = lambda top: max([f["total_pct"] for f in top if CONSOLE.match(f["function"])] or [0.0])
    a, b = held(on), held(off)
    figures = f"console and formatting: {a:.1f} % of samples with log=1, {b:.1f} % without"
    if a < 10:
        return figures, f"differs: they held {a:.1f} % with log=1"
    return figures, "agrees" if b <= 2 else f"differs: they held {b:.1f} % without logging too"


@conclusion("004", "44", "The two flame graphs look quite similar, and the service is non-blocking in both "
            "(no hot area).",
            "the self time the two profiles share (Σ min over their top functions, over the smaller total) "
            "at least 50 %, and no function over 30 % of either")
def c004_44(lab):
    on, off = profile_top(lab, LOG_C), profile_top(lab, NOLOG_C)
    if not on or not off:
        return None
    a = {f["function"]: f["self_pct"] for f in on}
    b = {f["function"]: f["self_pct"] for f in off}
    shared = sum(min(v, b[k]) for k, v in a.items() if k in b) / max(1e-9, min(sum(a.values()), sum(b.values())))
    hottest = max(list(a.values()) + list(b.values()))
    figures = f"shared self time {shared:.0%}; hottest function {hottest:.0f} %"
    if shared < 0.5:
        return figures, f"differs: the profiles share {shared:.0%} of their self time"
    return figures, "agrees" if hottest <= 30 else f"differs: one function held {hottest:.0f} % of the samples"


@conclusion("004", "46", "Logging every request to the console notably hurts the server: it should not go "
            "to production.",
            "throughput with log=1 over without, on the stdouts a service has in production (a container's "
            "drained pipe, a file), c100: below ×1 on both")
def c004_46(lab):
    parts = [(t, lab.ratio((t, LOG_C), (t, NOLOG_C), ok_rps)) for t in ("node pipe", "node file")]
    parts = [(t, r) for t, r in parts if r]
    if not parts:
        return None
    return "; ".join(f"{t} {r}" for t, r in parts), all_of([side(r, False, f"{t}'s throughput") for t, r in parts])


untestable("004", "37", "With logging the shared libraries' ticks rise too.",
           "V8's tick counts by library are not in loadlab's profile, which counts samples by function")


# ---------------------------------------------------------------- beyond the seeds

def beyond_004(lab):
    """Figures the lab adds beside seed 004 (other stdouts, the Rust service): not judged."""
    rows = []
    for t in lab.topologies():
        if t in ("node tty", "node profiled"):
            continue
        for base, variant in lab.lab.get("compare", []):
            r = lab.ratio((t, variant), (t, base), ok_rps)
            if r:
                rows.append(f"{t}, {base}: with log=1 {r}")
    return rows


def beyond_002(lab):
    """What each of seed 002's changes bought alone, and all together (not judged: the seed
    measured them only together)."""
    rows = []
    for what, variant, baseline, figure in [
            ("three web instances (the page's breaking point)", (W3, PAGE), (B, PAGE), breaking),
            ("half the busy-wait a sleep (the page's breaking point)", (B, PAGE_H), (B, PAGE), breaking),
            ("static files from nginx (the users' pages answered)", (S1, USERS), (B, USERS), ok_rps),
            ("all of them (the page's breaking point)", (A, PAGE_H), (B, PAGE), breaking)]:
        r = lab.ratio(variant, baseline, figure)
        if r:
            rows.append(f"{what} {r}")
    return rows


# ---------------------------------------------------------------- the page

def rows_of(seed, lab):
    out = []
    for i, c in enumerate([c for c in CONCLUSIONS if c.seed == seed], 1):
        try:
            got = c.judge(lab)
        except (KeyError, TypeError, ZeroDivisionError, ValueError, IndexError, StopIteration) as e:
            got = ("—", f"not judged: the lab's files lack a figure the rule reads ({type(e).__name__})")
        if got is None or got[1] is None:
            got = None
        out.append((i, c, got))
    return out


def block(seed, labs):
    ours = [c for c in CONCLUSIONS if c.seed == seed]
    out = [f"The seed's conclusions, each with its line in `{SEED_FILES[seed]}`, and the rule loadlab's "
           "figures are judged by:\n", "| # | the seed concluded (line) | judged by |", "|---|---|---|"]
    for i, c in enumerate(ours, 1):
        out.append(f"| {i} | {c.says} ({c.line}) | {c.rule} |")
    out.append("")
    for lab in labs:
        m = lab.meta
        rows = rows_of(seed, lab)
        agree = sum(1 for _, _, g in rows if g and g[1].startswith("agrees"))
        differ = sum(1 for _, _, g in rows if g and g[1].startswith("differs"))
        missing = sum(1 for _, _, g in rows if g is None or not g[1].startswith(("agrees", "differs")))
        out.append(f"**{m['variant']}** (`{m['example']}`, commit {m['commit']}, {m['date']}): "
                   f"{m['wall_s'] / 60:.1f} min, load average {m['load_before']:.2f} before, "
                   f"{m['load_after']:.2f} after. {agree} agree, {differ} differ, {missing} not measured "
                   "by this lab.\n")
        for x in lab.extras.values():
            xm = x.meta
            out.append(f"With `{xm['example']}` (commit {xm['commit']}, {xm['date']}): "
                       f"{xm['wall_s'] / 60:.1f} min, load average {xm['load_before']:.2f} before, "
                       f"{xm['load_after']:.2f} after.\n")
        out.append("| # | loadlab's figures | verdict |")
        out.append("|---|---|---|")
        for i, c, got in rows:
            figures, verdict = got if got else ("—", "not measured: the lab has no cell for it")
            out.append(f"| {i} | {figures} | {verdict} |")
        if seed == "004":
            extra = beyond_004(lab)
            if extra:
                out.append("\nBeyond the seed (not judged): " + "; ".join(extra) + ".")
        if seed == "002":
            extra = beyond_002(lab)
            if extra:
                out.append("\nWhat each change bought (not judged; the seed made them together): "
                           + "; ".join(extra) + ".")
        explained = [l.strip() for l in lab.text.splitlines() if "the load models disagree" in l]
        for line in explained[:1]:
            out.append(f"\n> {line}")
        out.append("")
    gone = [u for u in UNTESTABLE if u.seed == seed]
    if gone:
        out.append("Not testable here:\n")
        for u in gone:
            out.append(f"- {u.says} ({u.line}): {u.why}.")
        out.append("")
    return "\n".join(out)


def tally(labs):
    lines = ["| seed | conclusions | not testable | full: agree / differ / not measured | short: agree / differ / not measured |",
             "|---|---|---|---|---|"]
    for seed in SEEDS:
        n = sum(1 for c in CONCLUSIONS if c.seed == seed)
        u = sum(1 for c in UNTESTABLE if c.seed == seed)
        cols = []
        for variant in ("full", "short"):
            lab = labs.get((seed, variant))
            if lab is None:
                cols.append("not run")
                continue
            rows = rows_of(seed, lab)
            a = sum(1 for _, _, g in rows if g and g[1].startswith("agrees"))
            d = sum(1 for _, _, g in rows if g and g[1].startswith("differs"))
            cols.append(f"{a} / {d} / {n - a - d} ({lab.meta['date'][:10]})")
        lines.append(f"| {seed} | {n} | {u} | {cols[0]} | {cols[1]} |")
    return "\n".join(lines) + "\n"


def doc(args):
    labs = {}
    for d in args.dirs:
        for sub in sorted(Path(d).iterdir()):
            if (sub / "meta.json").exists():
                lab = Lab(sub)
                key = (lab.meta["seed"], lab.meta["variant"])
                if key not in labs or labs[key].meta["date"] < lab.meta["date"]:
                    labs[key] = lab
    text = DOC.read_text()
    blocks = {"summary": tally(labs)}
    for seed in SEEDS:
        found = [labs[k] for k in [(seed, "full"), (seed, "short")] if k in labs]
        blocks[seed] = block(seed, found)
    for key, body in blocks.items():
        pattern = re.compile(rf"(<!-- seeds:{key} -->\n).*?(<!-- /seeds:{key} -->)", re.S)
        if not pattern.search(text):
            sys.exit(f"docs/seeds.md has no block seeds:{key}")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    DOC.write_text(text)
    print(f"wrote {DOC}")


def listing(args):
    for seed in SEEDS:
        print(f"seed {seed} ({SEED_FILES[seed]})")
        for c in [c for c in CONCLUSIONS if c.seed == seed]:
            print(f"  line {c.line}: {c.says}\n      rule: {c.rule}")
        for u in [u for u in UNTESTABLE if u.seed == seed]:
            print(f"  line {u.line}: {u.says}\n      not testable: {u.why}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--variant", choices=["short", "full"], default="short")
    r.add_argument("--seeds", default=",".join(SEEDS))
    r.add_argument("--out")
    d = sub.add_parser("doc")
    d.add_argument("dirs", nargs="+")
    sub.add_parser("list")
    args = p.parse_args()
    {"run": run, "doc": doc, "list": listing}[args.cmd](args)


if __name__ == "__main__":
    main()
