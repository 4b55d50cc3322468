#!/usr/bin/env python3
"""What exporting a run's series costs the generator: the same closed-model load on nginx with
no exporter, with --remote-write to a Prometheus, with --otlp to an OpenTelemetry Collector,
with both, and with --otlp plus --trace-sample 0.01 (a traceparent on one request in a
hundred, its client span exported), in turn round by round (each goes first in some round).

nginx (`worker_processes 1`), Prometheus 2.42 (remote-write receiver on) and the collector
(scripts/install-otelcol.sh) run on CPU 0, loadlab (release build, one thread, 50 connections)
on CPU 1. For each: requests per second and the generator's CPU per request (GNU time over the
whole process), and each one's ratio to the run without an exporter. Goal (issue 41): within
5 %.

    python3 bench/export.py [--seconds 10] [--rounds 3]

Run it alone on the machine; the load average is printed first.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the shared helpers: nginx, GNU time, parsers)

ROOT = Path(__file__).resolve().parent.parent
SERVER_CPU, CLIENT_CPU = 0, 1


def wait_for(url, what, timeout=30):
    """Waits until `url` answers 200; exits with a message after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"error: {what} did not answer at {url} in {timeout} s")


def start_prometheus(tmp, port):
    """Prometheus on 127.0.0.1:`port`, its remote-write receiver on, pinned to the server CPU."""
    conf = Path(tmp) / "prometheus.yml"
    conf.write_text("global:\n  scrape_interval: 1m\n")
    proc = subprocess.Popen(
        ["taskset", "-c", str(SERVER_CPU), "prometheus", f"--config.file={conf}",
         f"--storage.tsdb.path={Path(tmp) / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
         "--web.enable-remote-write-receiver"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"http://127.0.0.1:{port}/-/ready", "prometheus")
    return proc


def start_collector(tmp, port):
    """The collector scripts/install-otelcol.sh builds, OTLP/HTTP on `port`, writing to a file."""
    binary = subprocess.run(["bash", str(ROOT / "scripts" / "install-otelcol.sh")],
                            check=True, capture_output=True, text=True).stdout.strip()
    conf = Path(tmp) / "collector.yaml"
    conf.write_text(
        f"receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n"
        f"exporters:\n  file:\n    path: {Path(tmp) / 'otlp.jsonl'}\n"
        "service:\n  telemetry:\n    metrics:\n      level: none\n"
        "  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n"
        "    traces:\n      receivers: [otlp]\n      exporters: [file]\n")
    proc = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), binary, f"--config=file:{conf}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
        except urllib.error.HTTPError:
            return proc
        except OSError:
            time.sleep(0.2)
    sys.exit("error: the collector did not listen in 30 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    loadlab = bench.LOADLAB
    if not Path(loadlab).exists():
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    load = os.getloadavg()[0]
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out_dir = ROOT / "bench" / "runs" / f"{stamp}-export"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="loadlab-export-") as tmp:
        port, prom_port, otlp_port = bench.free_port(), bench.free_port(), bench.free_port()
        procs = [bench.start_nginx(tmp, port, SERVER_CPU),
                 start_prometheus(tmp, prom_port), start_collector(tmp, otlp_port)]
        modes = {
            "none": [],
            "remote write": ["--remote-write", f"http://127.0.0.1:{prom_port}/api/v1/write"],
            "otlp": [f"--otlp=http://127.0.0.1:{otlp_port}"],
            "both": ["--remote-write", f"http://127.0.0.1:{prom_port}/api/v1/write",
                     f"--otlp=http://127.0.0.1:{otlp_port}"],
            "otlp + traces 1 %": [f"--otlp=http://127.0.0.1:{otlp_port}", "--trace-sample", "0.01"],
        }
        results = {m: [] for m in modes}
        try:
            names = list(modes)
            for rnd in range(args.rounds):
                for mode in names[rnd % len(names):] + names[:rnd % len(names)]:
                    slug = "".join(c if c.isalnum() else "-" for c in mode)
                    j = Path(tmp) / f"{slug}-{rnd}.json"
                    argv = [loadlab, "run", f"http://127.0.0.1:{port}/", "-t", "1", "-c", "50", "-q",
                            "-d", f"{args.seconds}s", "--json", str(j), *modes[mode]]
                    raw = out_dir / f"{slug}-{rnd}.out"
                    code, cpu_s, _rss, text = bench.run_measured(argv, CLIENT_CPU, args.seconds * 3 + 30, raw)
                    if code != 0:
                        sys.exit(f"error: {mode} exited {code}:\n{text}")
                    s = json.loads(j.read_text())
                    done = s["requests"]["ok"]
                    results[mode].append((done / s["duration_s"], 1e6 * cpu_s / done, "not sent" in text))
                    time.sleep(1)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=10)
    base_cpu = bench.median([r[1] for r in results["none"]])
    lines = [f"# Export cost {stamp}\n",
             f"loadlab run -c 50 -t 1, {args.seconds} s per run, {args.rounds} rounds, nginx, Prometheus and the "
             f"collector on CPU {SERVER_CPU}, loadlab on CPU {CLIENT_CPU}; load average {load:.2f} at the start; "
             f"`python3 bench/export.py {' '.join(sys.argv[1:])}`\n",
             "| exporter | req/s (median; rounds) | CPU µs/request (median; rounds) | CPU / none | all sent |",
             "|---|---|---|---|---|"]
    for mode, rs in results.items():
        rps = [r[0] for r in rs]
        cpu = [r[1] for r in rs]
        lines.append(f"| {mode} | {bench.median(rps):,.0f}; {', '.join(f'{x:,.0f}' for x in rps)} "
                     f"| {bench.median(cpu):.2f}; {', '.join(f'{x:.2f}' for x in cpu)} "
                     f"| {bench.median(cpu) / base_cpu:.3f} | {'no' if any(r[2] for r in rs) else 'yes'} |")
    report = "\n".join(lines) + "\n"
    (out_dir / "README.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
