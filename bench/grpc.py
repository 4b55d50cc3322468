#!/usr/bin/env python3
"""gRPC side by side: loadlab, ghz and tonic's client calling one unary method of the same
server, in turns.

The server is `loadlab serve` (its gRPC face, one worker thread) pinned to CPU 1; each
generator is pinned to CPU 0 and offers the same rate of `Ping` calls for the same time, over
one connection that may carry `--streams` calls at once (ghz: `--connections 1 -c STREAMS`).
Rounds alternate the tools (A B C A B C). Printed per round and as medians: calls ended, their
statuses, the generator's CPU per call (user + system, from GNU time) and its peak RSS, and the
ratios loadlab / ghz and loadlab / tonic. Ratios inside one run are what hold on a shared
machine.

tonic is the alternative to the engine's own HTTP/2 path: bench/grpc-tonic, a client of ours on
tonic 0.14's channel (one connection, one thread, the encoded message passed through), built
here once; it measures transport and framing, as loadlab sends a message encoded once.

ghz measures each call from its send; loadlab, in the open model, from its intended start:
their latencies are printed, not compared.

Usage: python3 bench/grpc.py [--rate 5000] [--seconds 10] [--rounds 3] [--streams 50]
ghz comes from bench/install-peers.sh (bench/tools/bin/ghz) or PATH.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROOT, core_stalls, find, free_port, median, run_measured  # noqa: E402
from locust import wait_port  # noqa: E402

PROTO = ROOT / "crates/grpc/proto/loadlab/reference/v1/reference.proto"
METHOD = "loadlab.reference.v1.Reference/Ping"


def loadlab_cmd(binary, port, a, json_path):
    return [binary, "run", f"grpc://127.0.0.1:{port}/{METHOD}", "--proto", str(PROTO),
            "-R", str(a.rate), "-d", f"{a.seconds}s", "-c", "1", "--streams", str(a.streams),
            "-t", "1", "-q", "--json", str(json_path)]


def ghz_cmd(port, a, json_path):
    return [find("ghz"), "--insecure", "--proto", str(PROTO), "--call", METHOD.replace("/", "."),
            "-d", "{}", "--rps", str(a.rate), "-z", f"{a.seconds}s", "--connections", "1",
            "-c", str(a.streams), "--cpus", "1", "-O", "json", "-o", str(json_path),
            f"127.0.0.1:{port}"]


def tonic_binary():
    """Builds bench/grpc-tonic once; returns its binary."""
    manifest = ROOT / "bench" / "grpc-tonic" / "Cargo.toml"
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(manifest)],
                   check=True)
    return str(ROOT / "bench" / "grpc-tonic" / "target" / "release" / "grpc-tonic")


def tonic_cmd(binary, port, a):
    return [binary, f"http://127.0.0.1:{port}", f"/{METHOD}", str(a.rate), str(a.seconds),
            str(a.streams)]


def read_tonic(text):
    line = [l for l in text.splitlines() if l.startswith("{")][-1]
    s = json.loads(line)
    return {"calls": s["ok"] + s["failed"], "statuses": {"OK": s["ok"], "other": s["failed"]},
            "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"]}


def read_loadlab(path):
    s = json.loads(Path(path).read_text())
    return {"calls": s["requests"]["completed"], "statuses": s.get("grpc", {}),
            "p50_ms": s["latency_ms"]["p50"], "p99_ms": s["latency_ms"]["p99"]}


def read_ghz(path):
    s = json.loads(Path(path).read_text())
    lat = {d["percentage"]: d["latency"] / 1e6 for d in s.get("latencyDistribution") or []}
    return {"calls": s["count"], "statuses": s.get("statusCodeDistribution", {}),
            "p50_ms": lat.get(50, float("nan")), "p99_ms": lat.get(99, float("nan"))}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--streams", type=int, default=50)
    p.add_argument("--binary", default=str(ROOT / "target/release/loadlab"))
    a = p.parse_args()
    if not find("ghz"):
        sys.exit("error: ghz is missing: run bench/install-peers.sh")
    if not Path(a.binary).exists():
        sys.exit(f"error: {a.binary} is missing: cargo build --release")
    tonic = tonic_binary()
    port = free_port()
    server = subprocess.Popen(["taskset", "-c", "1", a.binary, "serve", "--port", str(port),
                               "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = {"loadlab": [], "ghz": [], "tonic": []}
    try:
        wait_port(port)
        print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}  load average "
              f"{os.getloadavg()[0]:.2f}  {a.rate} Ping calls/s for {a.seconds} s, "
              f"1 connection x {a.streams} streams, generators on CPU 0, server on CPU 1")
        print(f"# {core_stalls(0, 3)}")
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                for tool in ("loadlab", "ghz", "tonic"):
                    out = Path(tmp) / f"{tool}-{r}.json"
                    cmd = {"loadlab": lambda: loadlab_cmd(a.binary, port, a, out),
                           "ghz": lambda: ghz_cmd(port, a, out),
                           "tonic": lambda: tonic_cmd(tonic, port, a)}[tool]()
                    code, cpu_s, rss_mb, text = run_measured(cmd, 0, a.seconds + 60, Path(tmp) / f"{tool}-{r}.out")
                    if tool != "tonic" and not out.exists():
                        sys.exit(f"error: {tool} exited {code} without its JSON:\n{text[-2000:]}")
                    got = {"loadlab": lambda: read_loadlab(out), "ghz": lambda: read_ghz(out),
                           "tonic": lambda: read_tonic(text)}[tool]()
                    got.update(cpu_s=cpu_s, rss_mb=rss_mb, code=code)
                    got["us_per_call"] = cpu_s / max(got["calls"], 1) * 1e6
                    rows[tool].append(got)
                    print(f"round {r + 1}  {tool:8} calls {got['calls']:>7}  {got['statuses']}  "
                          f"cpu {cpu_s:6.2f} s  {got['us_per_call']:6.1f} us/call  rss {rss_mb:6.1f} MB  "
                          f"p50 {got['p50_ms']:.2f} ms  p99 {got['p99_ms']:.2f} ms  exit {code}")
    finally:
        server.kill()
        server.wait()
    m = {t: {k: median([x[k] for x in rows[t]]) for k in ("us_per_call", "rss_mb", "calls")} for t in rows}
    print("median  " + ";  ".join(f"{t} {m[t]['us_per_call']:.1f} us/call, {m[t]['rss_mb']:.1f} MB"
                                  for t in rows))
    print(f"ratio loadlab/ghz  CPU per call {m['loadlab']['us_per_call'] / m['ghz']['us_per_call']:.2f}  "
          f"peak RSS {m['loadlab']['rss_mb'] / m['ghz']['rss_mb']:.2f}  "
          f"calls {m['loadlab']['calls'] / m['ghz']['calls']:.2f}")
    print(f"ratio loadlab/tonic  CPU per call {m['loadlab']['us_per_call'] / m['tonic']['us_per_call']:.2f}  "
          f"peak RSS {m['loadlab']['rss_mb'] / m['tonic']['rss_mb']:.2f}  "
          f"calls {m['loadlab']['calls'] / m['tonic']['calls']:.2f}")
    print(f"# load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
