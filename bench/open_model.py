#!/usr/bin/env python3
"""The open model's cost, evenness and ceiling beside its peers, in one run (issue 25).

Three parts, each on the same nginx (`worker_processes 1`, `return 200`) pinned to CPU 0 and
every generator pinned to CPU 1, rounds alternating the tools' order:

- pacing: 5,000 req/s offered. CPU µs per request (GNU time over the whole process), the
  rate achieved, and how evenly the requests reached the server: tcpdump (on CPU 0, beside
  nginx) stamps every request segment on loopback, and the CV of the gaps between them is
  the server's view of the pacing (1 s cut at each end). loadlab runs with exact pacing and
  with each --pacing-slack given; oha with `-q` (its 50 connections).
- ceiling: loadlab's closed-model rate on one thread (50 connections), then the open model
  offered 85 % of it on the same thread: achieved over offered and the schedule lag p99. wrk
  runs the closed model beside it, for loadlab's closed-model CPU per request against wrk's.
- h2: HTTP/2 against nginx, 4 connections × 25 streams, loadlab against h2load, over TLS and
  over h2c (prior knowledge).

With --logging-server, the second setup: nginx writes an access log (to a file, through a
64 KB buffer: a server doing a little work per request) and runs on CPU 1, every generator on
CPU 0 (the core that takes more of the kernel's own work on this kind of machine).

Every row: the median of the rounds and their spread (min–max). The load average is read
first: above 0.5 the benchmark refuses to start (--force runs anyway and says so in its
README), since a figure taken while something else runs is not a figure.

Usage: python3 bench/open_model.py [--rounds 5] [--seconds 10] [--only pacing,ceiling,h2]
       [--slack 500us,1ms] [--logging-server] [--force]
Peers (oha 1.16, wrk, h2load, tcpdump) come from bench/install-peers.sh.
"""

import argparse
import datetime
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: tools, nginx, GNU time, parsers)

SERVER_CPU, CLIENT_CPU = 0, 1
PACING_RATE = 5_000
CEILING_SHARE = 0.85


def spread(xs):
    """(median, min, max) of the numbers in `xs` (NaNs left out); `None` when none is left."""
    xs = [x for x in xs if x == x]
    if not xs:
        return None
    return bench.median(xs), min(xs), max(xs)


def cell(xs, fmt="{:.2f}"):
    """'median (min–max)' of `xs`, each formatted by `fmt`; '—' without numbers."""
    s = spread(xs)
    if s is None:
        return "—"
    m, lo, hi = s
    return f"{fmt.format(m)} ({fmt.format(lo)}–{fmt.format(hi)})"


# ---------------------------------------------------------------- request stamps on loopback

def start_capture(port, path):
    """tcpdump stamping the client's segments that carry data to `port` (each request is one
    write, so one segment with PSH); returns the process once it listens."""
    cmd = ["taskset", "-c", str(SERVER_CPU), bench.find("tcpdump"), "-i", "lo", "-n", "-s", "80",
           "-B", "32768", "--time-stamp-precision", "nano", "-w", str(path),
           f"tcp dst port {port} and (tcp[tcpflags] & tcp-push != 0)"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line = proc.stderr.readline().decode(errors="replace")
    if "listening" not in line:
        proc.kill()
        sys.exit(f"error: tcpdump did not start: {line.strip()}")
    return proc


def stop_capture(proc):
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pcap_times(path):
    """Seconds of every captured segment (pcap, nanosecond or microsecond stamps)."""
    data = Path(path).read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    scale = {0xA1B23C4D: 1e-9, 0xA1B2C3D4: 1e-6}.get(magic)
    if scale is None:
        sys.exit(f"error: {path} is not a little-endian pcap file")
    times, pos = [], 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[pos:pos + 16])
        times.append(sec + frac * scale)
        pos += 16 + incl
    return times


def gap_cv(times, cut_s=1.0):
    """The CV of the gaps between consecutive requests, the first and last `cut_s` cut."""
    if len(times) < 3:
        return float("nan")
    lo, hi = times[0] + cut_s, times[-1] - cut_s
    kept = [t for t in times if lo <= t <= hi]
    gaps = [b - a for a, b in zip(kept, kept[1:])]
    if len(gaps) < 2:
        return float("nan")
    mean = sum(gaps) / len(gaps)
    var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
    return var ** 0.5 / mean


# ---------------------------------------------------------------- one measured run

def measured(argv, parser, j, out_dir, name, secs, capture_port=None, tmp=None):
    """Runs `argv` on the client CPU; returns a dict of its figures (None when it failed)."""
    raw = out_dir / f"{name}.out"
    cap = None
    if capture_port:
        pcap = Path(tmp) / f"{name}.pcap"
        cap = start_capture(capture_port, pcap)
    try:
        code, cpu, rss, text = bench.run_measured(argv, CLIENT_CPU, secs * 3 + 30, raw)
    finally:
        if cap:
            stop_capture(cap)
    try:
        rps, done, p50, p99 = parser(text, j, secs)
    except Exception as e:  # a tool's output we could not read
        print(f"  {name}: could not read its output ({e}); see {raw}", file=sys.stderr)
        return None
    r = {"rps": rps, "done": done, "cpu_us": cpu / max(done, 1) * 1e6, "p50": p50, "p99": p99,
         "lag": float("nan"), "gap_cv": float("nan"), "own_gap_cv": float("nan"), "code": code}
    if j and Path(j).exists():
        bench.shutil.copy(j, out_dir / f"{name}.json")
        if "loadlab" in name:
            s = json.loads(Path(j).read_text())
            r["lag"] = s["generator"]["schedule_lag_ms_p99"]
            r["offered"] = s["throughput"].get("offered_rps") or float("nan")
            pacing = s["generator"].get("pacing")
            if pacing:
                r["own_gap_cv"] = pacing["arrival_gap_cv"]
    if cap:
        r["gap_cv"] = gap_cv(pcap_times(pcap))
    time.sleep(1)
    return r


def loadlab(*flags):
    return lambda url, secs, j: ([bench.LOADLAB, "run", url, "-t", "1", "-q", "-d", f"{secs}s", "--json", j, *flags],
                                 bench.parse_loadlab)


def rounds_of(tools, rounds, run_one):
    """Runs each tool once a round, the order of all but the first reversed every other round."""
    results = {t: [] for t in tools}
    for rnd in range(rounds):
        names = list(tools)
        if rnd % 2:
            names = [names[0]] + names[1:][::-1]
        for t in names:
            results[t].append(run_one(t, rnd))
    return results


def column(results, tool, key):
    return [r[key] for r in results[tool] if r]


# ---------------------------------------------------------------- parts

def part_pacing(args, url, port, out_dir, tmp):
    tools = {"loadlab (exact)": loadlab("-R", str(PACING_RATE))}
    for s in filter(None, args.slack.split(",")):
        tools[f"loadlab (slack {s})"] = loadlab("-R", str(PACING_RATE), "--pacing-slack", s)
    tools["oha -q"] = lambda url, secs, j: (
        [bench.find("oha"), "-q", str(PACING_RATE), "-z", f"{secs}s", "--no-tui", "--output-format", "json", "-o", j, url],
        bench.parse_oha)

    def run_one(tool, rnd):
        name = f"pacing-{tool.split()[0]}-{'-'.join(tool.split()[1:]).strip('()')}-{rnd}"
        j = str(Path(tmp) / f"{name}.json")
        argv, parser = tools[tool](url, args.seconds, j)
        return measured(argv, parser, j, out_dir, name, args.seconds, capture_port=port, tmp=tmp)

    res = rounds_of(tools, args.rounds, run_one)
    oha = bench.median(column(res, "oha -q", "cpu_us"))
    rows = [f"\n## pacing: {PACING_RATE:,} req/s offered, one generator core\n",
            "CPU µs/req over the whole process; gap CV at the server from tcpdump's stamps of each "
            "request on loopback; loadlab's own gap CV is its summary's `generator.pacing.arrival_gap_cv`.\n",
            "| tool (pacing) | req/s | CPU µs/req | vs oha | gap CV at the server | loadlab's own gap CV | p50 ms | p99 ms |",
            "|---|---|---|---|---|---|---|---|"]
    for tool in tools:
        cpu = column(res, tool, "cpu_us")
        ratio = bench.median(cpu) / oha if cpu and oha == oha else float("nan")
        rows.append(f"| {tool} | {cell(column(res, tool, 'rps'), '{:,.0f}')} | {cell(cpu)} | {ratio:.2f} | "
                    f"{cell(column(res, tool, 'gap_cv'))} | {cell(column(res, tool, 'own_gap_cv'), '{:.3f}')} | "
                    f"{cell(column(res, tool, 'p50'))} | {cell(column(res, tool, 'p99'))} |")
    return "\n".join(rows)


def part_ceiling(args, url, out_dir, tmp):
    rows = [f"\n## ceiling: the open model at {CEILING_SHARE:.0%} of loadlab's closed rate, one thread\n",
            "| round | closed req/s (loadlab -c 50) | closed CPU µs/req loadlab / wrk | offered req/s | achieved / offered | lag p99 ms | CPU µs/req (open) |",
            "|---|---|---|---|---|---|---|"]
    kept = []
    for rnd in range(args.rounds):
        j = str(Path(tmp) / f"closed-{rnd}.json")
        argv, parser = loadlab("-c", "50")(url, args.seconds, j)
        closed = measured(argv, parser, j, out_dir, f"ceiling-loadlab-closed-{rnd}", args.seconds)
        wrk = measured([bench.find("wrk"), "-t1", "-c50", f"-d{args.seconds}s", url], bench.parse_wrk, None, out_dir,
                       f"ceiling-wrk-closed-{rnd}", args.seconds)
        if not closed:
            rows.append(f"| {rnd} | failed | | | | | |")
            continue
        rate = int(closed["rps"] * CEILING_SHARE)
        j = str(Path(tmp) / f"open-{rnd}.json")
        argv, parser = loadlab("-R", str(rate), "-c", "50")(url, args.seconds, j)
        opened = measured(argv, parser, j, out_dir, f"ceiling-loadlab-open-{rnd}", args.seconds)
        if not opened:
            rows.append(f"| {rnd} | {closed['rps']:,.0f} | | {rate:,} | failed | | |")
            continue
        held = opened["rps"] / rate
        kept.append((held, opened["lag"], closed["cpu_us"] / wrk["cpu_us"] if wrk else float("nan")))
        rows.append(f"| {rnd} | {closed['rps']:,.0f} | {closed['cpu_us']:.2f} / {wrk['cpu_us'] if wrk else float('nan'):.2f} | "
                    f"{rate:,} | {held:.4f} | {opened['lag']:.2f} | {opened['cpu_us']:.2f} |")
    if kept:
        rows.append(f"\nAchieved/offered {cell([k[0] for k in kept], '{:.4f}')}, lag p99 {cell([k[1] for k in kept])} ms, "
                    f"closed CPU/req loadlab over wrk {cell([k[2] for k in kept])}.")
    return "\n".join(rows)


def part_h2(args, urls, out_dir, tmp):
    rows = ["\n## h2: HTTP/2, 4 connections × 25 streams, one generator core\n",
            "| transport | loadlab req/s | h2load req/s | loadlab / h2load | rounds ≥ 1.0 |",
            "|---|---|---|---|---|"]
    for transport, url in urls.items():
        ratios, ours, theirs = [], [], []
        for rnd in range(args.rounds):
            order = ["loadlab", "h2load"] if rnd % 2 == 0 else ["h2load", "loadlab"]
            got = {}
            for tool in order:
                name = f"h2-{transport}-{tool}-{rnd}"
                j = str(Path(tmp) / f"{name}.json")
                if tool == "loadlab":
                    argv, parser = loadlab("--http2", "-c", "4", "--streams", "25", "--insecure")(url, args.seconds, j)
                else:
                    argv, parser = ([bench.find("h2load"), "-t", "1", "-c", "4", "-m", "25", "-D", str(args.seconds), url],
                                    bench.parse_h2load)
                got[tool] = measured(argv, parser, j, out_dir, name, args.seconds)
            if got["loadlab"] and got["h2load"]:
                ours.append(got["loadlab"]["rps"])
                theirs.append(got["h2load"]["rps"])
                ratios.append(ours[-1] / theirs[-1])
        wins = sum(1 for r in ratios if r >= 1.0)
        rows.append(f"| {transport} | {cell(ours, '{:,.0f}')} | {cell(theirs, '{:,.0f}')} | {cell(ratios)} | {wins} of {len(ratios)} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--only", default="pacing,ceiling,h2")
    ap.add_argument("--slack", default="500us,1ms", help="loadlab --pacing-slack values to run beside exact pacing")
    ap.add_argument("--force", action="store_true", help="run even when the load average is above 0.5")
    ap.add_argument("--logging-server", action="store_true",
                    help="the second setup: nginx logs every request to a file (64 KB buffer) on CPU 1, generators on CPU 0")
    args = ap.parse_args()
    global SERVER_CPU, CLIENT_CPU
    if args.logging_server:
        SERVER_CPU, CLIENT_CPU = 1, 0
    load = os.getloadavg()
    if load[0] > 0.5 and not args.force:
        sys.exit(f"error: the load average is {load[0]:.2f} (above 0.5): something else is running; "
                 "wait for it, or pass --force and read the figures with that in mind")
    missing = [t for t in ("oha", "wrk", "h2load", "tcpdump") if not bench.find(t)]
    if missing:
        sys.exit(f"error: {', '.join(missing)} missing; run bash bench/install-peers.sh")
    if not Path(bench.LOADLAB).exists():
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "loadlab"], cwd=bench.ROOT, check=True)
    version = subprocess.run([bench.find("oha"), "--version"], capture_output=True, text=True).stdout.strip()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out_dir = bench.ROOT / "bench" / "runs" / f"{stamp}-open-model{'-logging' if args.logging_server else ''}"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = [f"# Open model {stamp}\n",
              f"`python3 bench/open_model.py {' '.join(sys.argv[1:])}`: {args.seconds} s per run, {args.rounds} rounds, "
              f"nginx on CPU {SERVER_CPU}{' logging every request to a file (64 KB buffer)' if args.logging_server else ', no access log'}, "
              f"generators on CPU {CLIENT_CPU}; load average at the start "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}{' (--force)' if load[0] > 0.5 else ''}; {version}; "
              f"{bench.core_stalls(CLIENT_CPU)}.\n"]
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="loadlab-open-") as tmp:
        port, tls_port, h2c_port = bench.free_port(), bench.free_port(), bench.free_port()
        nginx = bench.start_nginx(tmp, port, SERVER_CPU, tls_port, h2c_port, access_log=args.logging_server)
        url = f"http://127.0.0.1:{port}/"
        try:
            if "pacing" in only:
                report.append(part_pacing(args, url, port, out_dir, tmp))
                print(report[-1], flush=True)
            if "ceiling" in only:
                report.append(part_ceiling(args, url, out_dir, tmp))
                print(report[-1], flush=True)
            if "h2" in only:
                urls = {"TLS (h2)": f"https://127.0.0.1:{tls_port}/", "h2c": f"http://127.0.0.1:{h2c_port}/"}
                report.append(part_h2(args, urls, out_dir, tmp))
                print(report[-1], flush=True)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    end = os.getloadavg()
    report.append(f"\nLoad average at the end: {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}.")
    (out_dir / "README.md").write_text("\n".join(report) + "\n")
    print(f"results in {out_dir.relative_to(bench.ROOT)}")


if __name__ == "__main__":
    main()
