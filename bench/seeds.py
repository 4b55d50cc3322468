#!/usr/bin/env python3
"""The five seeds' experiments, run by loadlab and set beside the seeds' conclusions.

    python3 bench/seeds.py run [--variant short|full] [--seeds 000,004] [--out DIR]
        runs `loadlab lab` on each seed's example (the release binary), and keeps in
        DIR/<seed>-<variant>/ what docs/seeds.md is made from: lab.json, comparison.csv,
        the lab's terminal output, experiment.json and each cell's summary.json, cell.json,
        capacity.json and probe.json where the lab put them (so `loadlab report DIR` judges
        it again), and meta.json (wall time, load average before and after, the commit). DIR defaults to
        bench/runs/seeds-<date>; commit it.

    python3 bench/seeds.py doc DIR [DIR ...]
        rewrites the generated blocks of docs/seeds.md from those directories (the latest
        run of each seed and variant wins): each conclusion's figures, and whether loadlab
        agrees, judged by the rule written beside it here. No figure is typed by hand.

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


def loadavg():
    return os.getloadavg()[0]


def run(args):
    out = Path(args.out or ROOT / "bench" / "runs" / f"seeds-{datetime.date.today()}")
    # `-dirty` when the binary may hold changes not yet committed.
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    for seed in args.seeds.split(","):
        name = SEEDS[seed]
        example = ROOT / "examples" / (f"{name}.short.yaml" if args.variant == "short" else f"{name}.yaml")
        if not example.exists():
            print(f"{seed}: no {example.name}; skipped")
            continue
        dest = out / f"{seed}-{args.variant}"
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
        meta = {"seed": seed, "variant": args.variant, "example": example.name,
                "wall_s": round(wall, 1), "load_before": before, "load_after": after,
                "commit": commit, "date": datetime.datetime.now().isoformat(timespec="seconds")}
        (dest / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{seed} {args.variant}: {wall:.0f} s, load average {before:.2f} → {after:.2f} → {dest}")


# ---------------------------------------------------------------- reading a lab

class Lab:
    """One seed's lab, as kept by `run`."""

    def __init__(self, path):
        self.path = path
        self.lab = json.loads((path / "lab.json").read_text())
        self.meta = json.loads((path / "meta.json").read_text())
        self.text = (path / "lab.txt").read_text()

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

    def mean(self, topology, workload, key):
        """The geometric mean over the rounds of a cell's measured `key` (None without)."""
        values = [c["measured"].get(key) for c in self.cells(topology, workload)]
        values = [v for v in values if isinstance(v, (int, float)) and v > 0]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    def verdict(self, measure, variant, baseline=None, topology=None, workload=None):
        for v in self.lab["verdicts"]:
            if v["measure"] == measure and v["variant"] == variant \
                    and (baseline is None or v["baseline"] == baseline) \
                    and (topology is None or v.get("topology") == topology) \
                    and (workload is None or v["workload"] == workload):
                return v
        return None

    def limits(self, topology, workload=None):
        kinds = []
        for c in self.cells(topology, workload):
            for l in c["limits"]:
                if l["kind"] not in kinds:
                    kinds.append(l["kind"])
        return kinds

    def summary(self, topology, workload, round_=1):
        slug = lambda s: re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", s.lower())).strip("-")
        base = self.path / slug(topology) / slug(workload)
        for p in [base / f"round-{round_}" / "summary.json", base / "summary.json"]:
            if p.exists():
                return json.loads(p.read_text())
        return None


def ratio(v):
    if v is None:
        return "—"
    if v["rounds"] > 1 and v["ci_low"] != v["ci_high"]:
        return f"×{v['ratio']:.2f} (×{v['ci_low']:.2f}–×{v['ci_high']:.2f}, {v['rounds']} rounds)"
    return f"×{v['ratio']:.2f} (1 round)"


def gained(v, least=1.0):
    """True when the verdict's ratio is over `least` and its whole interval over 1: a gain
    the rounds show, not one inside their noise."""
    return v is not None and v["ratio"] > least and v["ci_low"] > 1


def lost(v, most=1.0):
    """True when the verdict's ratio is under `most` and its whole interval under 1."""
    return v is not None and v["ratio"] < most and v["ci_high"] < 1


def num(x, digits=0):
    return "—" if x is None else f"{x:,.{digits}f}"


# ---------------------------------------------------------------- the conclusions
# Each returns rows (conclusion, figures, verdict): the verdict is "agrees" or "differs,
# because …", decided by the rule in the function from the lab's own figures.

def seed_000(lab):
    rows = []
    tops = lab.topologies()
    for workload in ["heavy 50ms", "heavy 20ms", "bbox sync"]:
        found = {t: lab.mean(t, workload, "breaking_point_rps") for t in tops}
        if all(v is None for v in found.values()):
            continue
        figures = "; ".join(f"{t}: {num(v, 1)} req/s" for t, v in found.items())
        ok = all(v is not None for v in found.values())
        rows.append((f"each topology has a breaking point (`{workload}`)", figures,
                     "agrees" if ok else "differs, because a search found no rate meeting the objective"))
        base = tops[0]
        gains = [(t, lab.verdict("breaking_point", t, base, workload=workload)) for t in tops[1:]]
        text = "; ".join(f"{t}: {ratio(v)}" for t, v in gains)
        host_capped = any("host" in lab.limits(t, workload) for t in tops[1:])
        scaled = all(gained(v, 1.3) for _, v in gains)
        verdict = "agrees" if scaled else "differs, because a topology with more processes did not raise it"
        if scaled and host_capped:
            verdict = "agrees, up to the host's cores: the verdicts say the host capped the larger topologies"
        rows.append((f"more processes raise the breaking point (`{workload}`, over {base})", text, verdict))
    for workload in ["bbox sync workers", "bbox async workers"]:
        probed = {t: lab.cells(t, workload) for t in tops}
        if not any(probed.values()):
            continue

        def reading(cells):
            m = cells[0]["measured"]
            how = m["behaviour"] if m.get("workers") is None else f"{m['behaviour']} {m['workers']} workers"
            return f"{how}, S {m['service_time_ms']:.0f} ms"
        figures = "; ".join(f"{t}: {reading(cs)}" for t, cs in probed.items() if cs)
        want = "async" if "async" in workload else "sync"
        kinds = all(cs and cs[0]["measured"]["behaviour"] == want for cs in probed.values())
        # The sync black box serves 3 requests at once per process.
        misses = [abs(cs[0]["measured"]["workers"] - 3 * cs[0]["processes"])
                  for cs in probed.values() if cs and want == "sync" and cs[0]["measured"].get("workers")]
        # A sync box read as async whose climb stopped below its workers: X·S connections
        # (Little's law) is where the probe's time ran out.
        short = [(t, round(cs[0]["measured"]["max_throughput_rps"] * cs[0]["measured"]["service_time_ms"] / 1000),
                  3 * cs[0]["processes"])
                 for t, cs in probed.items()
                 if cs and want == "sync" and cs[0]["measured"]["behaviour"] == "async"]
        if not kinds and short and all(reached < workers for _, reached, workers in short):
            verdict = "differs, because the probe's time ran out first: " + "; ".join(
                f"{t} climbed to {reached} connections of S ≈ 1 s, below its {workers} workers "
                "(its throughput still grew when the 90 s ran out)" for t, reached, workers in short)
        elif not kinds:
            verdict = f"differs, because a topology was not read as {want}"
        elif misses and max(misses) > 1:
            verdict = "differs, because a worker count was off by more than one (3 per process)"
        elif misses and max(misses) == 1:
            verdict = "agrees within one worker (3 per process)"
        else:
            verdict = "agrees"
        rows.append((f"{want} told from the latency's shape, workers and service time read (`{workload}`)",
                     figures, verdict))
    return rows


def seed_001(lab):
    rows = []
    for runtime in ["python", "node"]:
        one, six = f"{runtime} 1 replica", f"{runtime} 6 replicas"
        calc = [w for w in {c["workload"] for c in lab.cells()} if w.startswith("calc") and w.endswith("600/s")]
        ping = [w for w in {c["workload"] for c in lab.cells()} if w.startswith("ping") and w.endswith("600/s")]
        if not calc or not ping:
            continue
        vc = lab.verdict("throughput", six, one, workload=calc[0])
        vp = lab.verdict("throughput", six, one, workload=ping[0])
        lat = lab.verdict("latency_p99", six, one, workload=ping[0])
        calc_lat = lab.verdict("latency_p99", six, one, workload=calc[0])
        figures = (f"{calc[0]}: " + (f"throughput {ratio(vc)}" if vc else
                                     f"no throughput verdict (one replica kept up), p99 {ratio(calc_lat)}")
                   + f"; {ping[0]}: "
                   + (f"throughput {ratio(vp)}" if vp else f"no throughput verdict (under capacity), p99 {ratio(lat)}"))
        idle = vp is None or not vp["differs"]
        if vc is not None and not gained(vc):
            capped = "host" in lab.limits(six, calc[0])
            verdict = ("differs, because the rounds do not show a gain (the interval holds ×1)"
                       + (": the host capped six replicas (by the verdict)" if capped else ""))
        elif vc is None and calc_lat and calc_lat["ratio"] < 0.5:
            verdict = ("agrees: one replica kept up with the rate but queued near saturation, and six "
                       "cut that queue's p99" if idle else "differs, because the light endpoint's throughput changed")
        elif vc is None:
            verdict = ("agrees: one replica kept up with every rate offered, so there was nothing to scale"
                       if idle else "differs, because the light endpoint's throughput changed")
        elif gained(vc, 1.3) and idle:
            verdict = "agrees"
        elif vc["ratio"] <= 1.3:
            verdict = "differs, because the CPU-bound endpoint did not gain"
        else:
            verdict = "differs, because the light endpoint's throughput changed"
        rows.append((f"{runtime}: 6 replicas help only where 1 saturates", figures, verdict))
    node = lab.verdict("throughput", "node 1 replica", "python 1 replica",
                       workload=next((w for w in [c["workload"] for c in lab.cells()] if w.startswith("calc") and w.endswith("600/s")), None))
    if node:
        calc = node["workload"]

        def alone(topology):
            # One request alone: the least latency any round saw.
            mins = [lab.summary(topology, calc, r) for r in (1, 2, 3)]
            mins = [m["latency_ms"]["min"] for m in mins if m]
            return min(mins) if mins else None

        py, js = alone("python 1 replica"), alone("node 1 replica")
        why = ("differs, because one request took about as long in either runtime here: "
               f"{py:.0f} ms in python, {js:.0f} ms in node at the least (the cells' minimum "
               "latency), so one replica of either served the same"
               if py and js else "differs, because the two runtimes served it alike")
        rows.append(("the runtime matters (node against python, one replica, calc at 600/s)",
                     f"throughput {ratio(node)}",
                     "agrees" if node["differs"] else why))
    return rows


def seed_002(lab):
    rows = []
    before, after = "before (1 web)", "after (3 web)"
    s = lab.summary(before, "site users")
    limits = lab.limits(before, "site users")
    share429 = None
    if s:
        done = max(1, s["requests"]["completed"])
        share429 = 100.0 * s["status"].get("429", 0) / done
    web = None
    for c in lab.cells(before, "site users"):
        for l in c["limits"]:
            if (l["kind"] == "cpu_bound" and l["name"] == "loadlab-serve") or \
                    (l["kind"] == "at_quota" and l["name"] in ("service", "replica")):
                web = l
    if web and web["kind"] == "at_quota":
        used = f"used {web['used_high_pct']:.0f} % of its {web['cpus']} CPU quota, throttled in {web['throttled_pct']:.0f} % of periods"
    elif web:
        used = f"used {web['used_pct']:.0f} % of its core, waited {web['waited_pct']:.0f} % more"
    else:
        used = "not CPU-bound"
    figures = f"429s: {num(share429, 1)} % of requests; web process: {used}"
    rows.append(("the web tier's CPU is the bottleneck, with 429s", figures,
                 "agrees" if web and "rate_limited" in limits else "differs, because the web tier did not saturate"))
    v = lab.verdict("throughput", after, before, workload="site users")
    after_limits = lab.limits(after, "site users")
    if gained(v, 2.999):
        verdict = "agrees"
    elif not after_limits:
        verdict = ("differs, because the users' load, not the web tier, set the larger topology's "
                   "throughput: nothing limited it (a `capacity` workload measures the topologies themselves)")
    elif "host" in after_limits:
        verdict = "differs, because the host's 2 cores, shared with the generator, nginx and Redis, capped it (by the verdict)"
    elif "cpu_bound" in after_limits or "at_quota" in after_limits:
        verdict = "differs, because the larger topology was CPU-bound too, short of 3× its budget"
    else:
        verdict = "differs: " + ", ".join(after_limits) + " limited the larger topology"
    rows.append(("3 web instances and static files on nginx give 3–4× (the users' throughput)",
                 f"throughput {ratio(v)}", verdict + "; the seed's 3–4× also halved the per-page busy-wait"))
    cap = lab.summary(before, "page capacity")
    one = lab.mean(before, "page capacity", "breaking_point_rps")
    work = re.search(r"work_ms=(\d+)", cap["targets"][0]) if cap and cap.get("targets") else None
    if one and work:
        t = int(work.group(1))
        cpus = next((c.get("cpus") for c in lab.cells(before, "page capacity") if c.get("cpus")), None)
        share = cpus or 1.0
        expected = share * 1000 / t
        who = f"one instance of {cpus} CPU" if cpus else "one one-core instance"
        rows.append((f"capacity per CPU ≈ 1000/T (T = {t} ms of CPU a page)",
                     f"{who} broke at {one:.1f} req/s; {num(share, 2) if cpus else ''}{' × ' if cpus else ''}1000/T = {expected:.1f}",
                     "agrees" if abs(one / expected - 1) <= 0.15 else "differs by more than 15 %"))
    bp = lab.verdict("breaking_point", after, before, workload="page capacity")
    # A ratio over a baseline whose search missed its capacity is no finding.
    baseline_off = None
    if one and work:
        t = int(work.group(1))
        cpus = next((c.get("cpus") for c in lab.cells(before, "page capacity") if c.get("cpus")), None)
        expected = (cpus or 1.0) * 1000 / t
        if abs(one / expected - 1) > 0.15:
            baseline_off = (one, expected)
    if bp:
        found = {t: lab.mean(t, "page capacity", "breaking_point_rps") for t in (before, after)}
        rows.append(("… as a capacity: each topology's breaking point for a page",
                     "; ".join(f"{t}: {num(r, 1)} req/s" for t, r in found.items()) + f"; {ratio(bp)}",
                     (f"differs, because the baseline's search missed its capacity ({baseline_off[0]:.1f} "
                      f"req/s where its budget serves {baseline_off[1]:.1f}), so the ratio is not a finding")
                     if baseline_off else
                     # Three budgets like the one give at most ×3 here: a point estimate over
                     # 3 would be a coin flip under perfect scaling. It agrees when the rounds
                     # cannot tell it from 3× (their interval reaches 3, and stays over 1) and
                     # it is within a tenth of 3.
                     "agrees: ×3, the most three budgets like the one give, is inside the rounds' interval"
                     if gained(bp, 2.7) and bp["ci_high"] >= 3 else
                     "differs, because the larger topology's interval does not reach 3× (or it is under ×2.7)"
                     + (" (the host capped it, by the verdict)" if "host" in lab.limits(after, "page capacity") else "")))
    return rows


def seed_003(lab):
    rows = []
    tops = lab.topologies()
    one = tops[0]
    rates = {c["workload"]: lab.mean(one, c["workload"], "ok_rps") for c in lab.cells(one)}
    closed = {w: r for w, r in rates.items() if w.startswith("closed") and r}
    if len(closed) >= 2:
        hi, lo = max(closed.values()), min(closed.values())
        figures = "; ".join(f"{w}: {num(r)} ok/s" for w, r in rates.items())
        rows.append(("the tools disagree on one target", figures,
                     "agrees: each measured its own load model (the lab's explanation below)" if hi > 1.1 * lo
                     else "differs, because the closed models agreed within 10 %"))
    for t in tops[1:]:
        v = lab.verdict("throughput", t, one, workload=next(iter(closed), None))
        limits = lab.limits(t)
        text = f"{t} over {one}: {ratio(v)}"
        if "client" in t:
            verdict = "agrees" if gained(v, 2.5) else (
                "differs, because three instances did not reach ×2.5 with the interval over 1"
                + (" (the host capped it, by the verdict)" if "host" in limits else ""))
            rows.append(("client-side balancing scales linearly", text, verdict))
        else:
            verdict = "agrees" if v and v["ratio"] <= 1.2 else "differs, because the balanced topology gained"
            rows.append(("the balancer plateaus", text, verdict))
    return rows


def seed_004(lab):
    rows = []
    for base, variant in lab.lab.get("compare", []):
        for t in lab.topologies():
            v = lab.verdict("throughput", variant, base, topology=t)
            if not v:
                continue
            cost = 1 - v["ratio"]
            # About 40 %: the interval holds ×0.6, or the cost is 30 % or more.
            near = (v["ci_low"] <= 0.6 <= v["ci_high"] or v["ratio"] <= 0.70) and lost(v)
            if near:
                verdict = "agrees"
            elif not lost(v):
                verdict = "differs, because the rounds do not show a cost (the interval holds ×1)"
            else:
                verdict = f"differs, because logging cost {cost:.0%} here"
            rows.append((f"logging costs ~40 % of throughput ({t}, {base})", f"with log=1 {ratio(v)}", verdict))
    s = lab.summary("node profiled", "info log=1, c100")
    if s and s.get("profile") and s["profile"].get("top"):
        top = [f["function"] for f in s["profile"]["top"][:15]]
        formatting = [f for f in top if re.search(r"inspect|format|Write|write|stringify", f)]
        rows.append(("the flame graph shows string formatting and console writes",
                     "top functions with log=1: " + ", ".join(f"`{f}`" for f in formatting[:6]),
                     "agrees" if formatting else "differs, because no formatting or write function is in the top 15"))
    return rows


CONCLUSIONS = {"000": seed_000, "001": seed_001, "002": seed_002, "003": seed_003, "004": seed_004}


def block(seed, labs):
    out = []
    for lab in labs:
        m = lab.meta
        out.append(f"**{m['variant']}** (`{m['example']}`, commit {m['commit']}, {m['date']}): "
                   f"{m['wall_s'] / 60:.1f} min, load average {m['load_before']:.2f} before, "
                   f"{m['load_after']:.2f} after.\n")
        out.append("| conclusion | loadlab's figures | |")
        out.append("|---|---|---|")
        for conclusion, figures, verdict in CONCLUSIONS[seed](lab):
            out.append(f"| {conclusion} | {figures} | {verdict} |")
        explained = [l.strip() for l in lab.text.splitlines() if "the load models disagree" in l]
        for line in explained[:2]:
            out.append(f"\n> {line}")
        out.append("")
    return "\n".join(out)


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
    for seed in SEEDS:
        found = [labs[k] for k in [(seed, "short"), (seed, "full")] if k in labs]
        body = block(seed, found) if found else "_Not run yet._\n"
        pattern = re.compile(rf"(<!-- seeds:{seed} -->\n).*?(<!-- /seeds:{seed} -->)", re.S)
        if not pattern.search(text):
            sys.exit(f"docs/seeds.md has no block for seed {seed}")
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    DOC.write_text(text)
    print(f"wrote {DOC}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--variant", choices=["short", "full"], default="short")
    r.add_argument("--seeds", default=",".join(SEEDS))
    r.add_argument("--out")
    d = sub.add_parser("doc")
    d.add_argument("dirs", nargs="+")
    args = p.parse_args()
    {"run": run, "doc": doc}[args.cmd](args)


if __name__ == "__main__":
    main()
