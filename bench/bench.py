#!/usr/bin/env python3
"""Side-by-side benchmark of loadlab against peer load generators on one target.

Each scenario runs loadlab and every peer tool that is installed against the same nginx
(`worker_processes 1`, `return 200`), nginx pinned to one core and the generator to another,
alternating tools round by round, and prints ratios to loadlab. Ratios inside one run are
what hold on a shared, noisy machine; absolute numbers are not comparable across runs.

Add a row: append a Scenario to SCENARIOS with a command builder per tool.

Usage: python3 bench/bench.py [--seconds 10] [--rounds 3] [--only closed-50,open-5000,open-ceiling]
                              [--logging-server]
With --logging-server, the second setup: nginx writes an access log (to a file, through a 64 KB
buffer) and runs on CPU 1, the generators on CPU 0.
Peers are installed by bench/install-peers.sh into bench/tools (never committed).
"""

import argparse
import csv
import datetime
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "bench" / "tools"


def find(name):
    """Path of a tool: bench/tools first, then PATH."""
    for candidate in [TOOLS / "bin" / name, TOOLS / "node" / "node_modules" / ".bin" / name]:
        if candidate.exists():
            return str(candidate)
    return shutil.which(name)


STALL_PROBE = """
import sys, time
end = time.perf_counter_ns() + int(float(sys.argv[1]) * 1e9)
last, gaps = time.perf_counter_ns(), []
while last < end:
    now = time.perf_counter_ns()
    if now - last > 100_000:
        gaps.append(now - last)
    last = now
print(len(gaps), sum(gaps), sum(1 for g in gaps if g > 1_000_000), max(gaps, default=0))
"""


def core_stalls(cpu, seconds=5):
    """How often the core a generator gets is taken from a process that never sleeps: a spin
    loop pinned to `cpu` for `seconds` counts the gaps of over 0.1 ms between its clock reads
    (the hypervisor's steal, kernel threads, interrupts). A stall of a few milliseconds at 85 %
    load is a backlog that takes several times as long to clear, so these are the floor under
    the schedule lag any generator can keep there. One line for a benchmark's README."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    out = subprocess.run(pin + [sys.executable, "-c", STALL_PROBE, str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 30).stdout.split()
    n, total_ns, over_1ms, longest = (int(x) for x in out)
    return (f"the generator's core (CPU {cpu}) idle, a spin loop for {seconds} s: {n} stalls over 0.1 ms, "
            f"{over_1ms} over 1 ms, the longest {longest / 1e6:.2f} ms, {total_ns / 1e6:.1f} ms in all")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Result:
    tool: str
    rps: float
    cpu_s: float
    max_rss_mb: float
    requests: int
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    note: str = ""
    lag_ms: float = float("nan")  # loadlab's schedule lag p99 (open model)


def run_measured(cmd, cpu, timeout, stdout_path):
    """Runs cmd pinned to `cpu`; returns (returncode, cpu seconds, peak RSS MB, stdout).

    CPU and peak RSS come from GNU time, whose small fork is the only thing between it and
    the tool (Python's own rusage would count the interpreter's forked image in the RSS).
    """
    time_file = str(stdout_path) + ".time"
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    full = ["/usr/bin/time", "-f", "%U %S %M", "-o", time_file] + pin + cmd
    with open(stdout_path, "wb") as out:
        proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    text = Path(stdout_path).read_text(errors="replace")
    user, system, rss_kb = Path(time_file).read_text().split()[-3:]
    return code, float(user) + float(system), int(rss_kb) / 1024.0, text


# ---------------------------------------------------------------- parsers per tool

def parse_loadlab(text, json_path, secs):
    # Successful responses only: a server that closes pipelined connections (gunicorn's sync
    # workers) ends most requests as `closed` errors, which `completed` would count.
    s = json.loads(Path(json_path).read_text())
    done = s["requests"]["ok"]
    return done / s["duration_s"], done, s["latency_ms"]["p50"], s["latency_ms"]["p99"]


def parse_wrk(text, _json, secs):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    done = int(re.search(r"(\d+) requests in", text).group(1))
    return rps, done, float("nan"), float("nan")


def parse_oha(text, json_path, secs):
    s = json.loads(Path(json_path).read_text())
    summary = s["summary"]
    done = sum(s.get("statusCodeDistribution", {}).values())
    pct = s.get("latencyPercentiles", {})
    p50 = pct.get("p50", float("nan")) * 1000
    p99 = pct.get("p99", float("nan")) * 1000
    return summary["requestsPerSec"], done, p50, p99


def parse_autocannon(text, json_path, secs):
    s = json.loads(Path(json_path).read_text())
    done = s["requests"]["total"]
    return done / s["duration"], done, s["latency"]["p50"], s["latency"]["p99"]


def parse_hey(text, _json, secs):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    total = re.search(r"\[200\]\s+(\d+) responses", text)
    return rps, int(total.group(1)) if total else 0, float("nan"), float("nan")


def parse_h2load(text, _json, secs):
    rps = float(re.search(r"finished in [\d.]+s, ([\d.]+) req/s", text).group(1))
    done = int(re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", text).group(1))
    return rps, done, float("nan"), float("nan")


def parse_vegeta(text, json_path, secs):
    s = json.loads(Path(json_path).read_text())
    return s["throughput"], s["requests"], s["latencies"]["50th"] / 1e6, s["latencies"]["99th"] / 1e6


def parse_k6(text, json_path, secs):
    s = json.loads(Path(json_path).read_text())
    m = s["metrics"]
    reqs = m["http_reqs"]
    dur = m["http_req_duration"]
    return reqs["rate"], int(reqs["count"]), dur.get("med", float("nan")), dur.get("p(99)", float("nan"))


# ---------------------------------------------------------------- scenarios

@dataclass
class Scenario:
    name: str
    what: str
    # tool -> function(url, secs, json_path, tmpdir) -> (argv, parser) ; argv None if n/a
    tools: dict = field(default_factory=dict)
    # "http": nginx's plain port; "https": its TLS port (self-signed, HTTP/2 by ALPN)
    scheme: str = "http"


# The loadlab under test: the release build, or another binary named by LOADLAB_BIN (to set
# two builds side by side: the same benchmark run once with each).
LOADLAB = os.environ.get("LOADLAB_BIN") or str(ROOT / "target" / "release" / "loadlab")


def loadlab_cmd(*flags):
    return lambda url, secs, j, tmp: ([LOADLAB, "run", url, "-t", "1", "-q", "-d", f"{secs}s", "--json", j, *flags], parse_loadlab)


def with_binary(build, binary):
    """The same loadlab command run with another loadlab binary."""
    def rebuilt(url, secs, j, tmp):
        argv, parser = build(url, secs, j, tmp)
        return [binary if a == LOADLAB else a for a in argv], parser
    return rebuilt


def vegeta_cmd(rate):
    def build(url, secs, j, tmp):
        vegeta = find("vegeta")
        script = f"echo 'GET {url}' | {vegeta} attack -rate {rate} -duration {secs}s -max-workers 2000 | {vegeta} report -type json > {j}"
        return ["sh", "-c", script], parse_vegeta
    return build


def k6_cmd(rate, requests=1, own_connections=False):
    """k6's constant-arrival-rate executor: each iteration sends `requests` GETs; with
    `own_connections` no connection is reused across iterations (a user per iteration)."""
    def build(url, secs, j, tmp):
        script = Path(tmp) / f"k6-{rate}-{requests}.js"
        reuse = " noVUConnectionReuse: true," if own_connections else ""
        script.write_text(
            "import http from 'k6/http';\n"
            f"export const options = {{ discardResponseBodies: true,{reuse} summaryTrendStats: ['med','p(99)'],\n"
            f"  scenarios: {{ a: {{ executor: 'constant-arrival-rate', rate: {rate}, timeUnit: '1s',\n"
            f"  duration: '{secs}s', preAllocatedVUs: 100, maxVUs: 2000 }} }} }};\n"
            f"export default function () {{ for (let i = 0; i < {requests}; i++) http.get('{url}'); }}\n"
        )
        return [find("k6"), "run", "--quiet", "--summary-export", j, str(script)], parse_k6
    return build


USERS_RATE = 1000  # users arriving per second in the users-flow row
USERS_REQUESTS = 3  # requests each user sends, on its own connection


def loadlab_users_cmd():
    """loadlab running a scenario file: each arriving user sends 3 requests on a connection of
    its own (Artillery's and k6's virtual users, not pooled arrivals)."""
    def build(url, secs, j, tmp):
        flow = Path(tmp) / "users.yml"
        flow.write_text(
            "config:\n  target: \"http://127.0.0.1:9\"\n"
            f"  phases:\n    - duration: {secs}\n      arrivalRate: {USERS_RATE}\n"
            "scenarios:\n  - flow:\n      - loop:\n          - get: { url: \"/\" }\n"
            f"        count: {USERS_REQUESTS}\n"
        )
        base = url.rstrip("/")
        return [LOADLAB, "run", str(flow), "--target", base, "-t", "1", "-q", "--json", j], parse_loadlab
    return build


def oha_cmd(*flags):
    return lambda url, secs, j, tmp: ([find("oha"), *flags, "-z", f"{secs}s", "--no-tui", "--output-format", "json", "-o", j, url], parse_oha)


def wrk_cmd(*flags):
    return lambda url, secs, j, tmp: ([find("wrk"), "-t1", *flags, f"-d{secs}s", url], parse_wrk)


SCENARIOS = [
    Scenario(
        "closed-50",
        "closed model, 50 connections",
        {
            "loadlab": loadlab_cmd("-c", "50"),
            "wrk": lambda url, secs, j, tmp: ([find("wrk"), "-t1", "-c50", f"-d{secs}s", url], parse_wrk),
            "oha": lambda url, secs, j, tmp: ([find("oha"), "-c", "50", "-z", f"{secs}s", "--no-tui", "--output-format", "json", "-o", j, url], parse_oha),
            "autocannon": lambda url, secs, j, tmp: (["sh", "-c", f"{find('autocannon')} -c 50 -d {secs} --json {url} > {j} 2>/dev/null"], parse_autocannon),
            "hey": lambda url, secs, j, tmp: ([find("hey"), "-c", "50", "-z", f"{secs}s", url], parse_hey),
        },
    ),
    Scenario(
        "open-5000",
        "open model, 5,000 req/s offered",
        {
            "loadlab": loadlab_cmd("-R", "5000"),
            "vegeta": vegeta_cmd(5000),
            "k6": k6_cmd(5000),
        },
    ),
    Scenario(
        "users-flow",
        f"open model, {USERS_RATE} users/s, each {USERS_REQUESTS} requests on its own connection",
        {
            "loadlab": loadlab_users_cmd(),
            "k6": k6_cmd(USERS_RATE, USERS_REQUESTS, own_connections=True),
        },
    ),
    Scenario(
        "conns-2000",
        "closed model, 2,000 keep-alive connections (memory)",
        {
            "loadlab": loadlab_cmd("-c", "2000"),
            "wrk": lambda url, secs, j, tmp: ([find("wrk"), "-t1", "-c2000", f"-d{secs}s", url], parse_wrk),
            "oha": lambda url, secs, j, tmp: ([find("oha"), "-c", "2000", "-z", f"{secs}s", "--no-tui", "--output-format", "json", "-o", j, url], parse_oha),
        },
    ),
    Scenario(
        "https-closed-50",
        "HTTPS (TLS 1.3, HTTP/1.1), closed model, 50 keep-alive connections",
        {
            "loadlab": loadlab_cmd("-c", "50", "--insecure"),
            "wrk": wrk_cmd("-c50"),
            "oha": oha_cmd("-c", "50", "--insecure"),
        },
        scheme="https",
    ),
    Scenario(
        "h2-closed",
        "HTTP/2 over TLS, closed model, 10 connections × 10 streams",
        {
            "loadlab": loadlab_cmd("--http2", "-c", "10", "--streams", "10", "--insecure"),
            "h2load": lambda url, secs, j, tmp: ([find("h2load"), "-t", "1", "-c", "10", "-m", "10", "-D", str(secs), url], parse_h2load),
            "oha": oha_cmd("--http2", "-c", "10", "-p", "10", "--insecure"),
        },
        scheme="https",
    ),
    Scenario(
        "h2-4x25",
        "HTTP/2 over TLS, closed model, 4 connections × 25 streams",
        {
            "loadlab": loadlab_cmd("--http2", "-c", "4", "--streams", "25", "--insecure"),
            "h2load": lambda url, secs, j, tmp: ([find("h2load"), "-t", "1", "-c", "4", "-m", "25", "-D", str(secs), url], parse_h2load),
        },
        scheme="https",
    ),
    Scenario(
        "https-handshake",
        "HTTPS, a new connection and TLS handshake per request (resumed), 50 at once",
        {
            "loadlab": loadlab_cmd("-c", "50", "--no-keepalive", "--insecure"),
            "oha": oha_cmd("-c", "50", "--disable-keepalive", "--insecure"),
            "wrk": wrk_cmd("-c50", "-H", "Connection: close"),
        },
        scheme="https",
    ),
]


# ---------------------------------------------------------------- connection scenarios
# Many keep-alive connections, closed model: req/s, RSS per connection and connect errors.
# A process here may hold at most the hard RLIMIT_NOFILE of files (20,000 on the machine
# these rows were written on, and root cannot raise it: no CAP_SYS_RESOURCE), so a row past
# what one process holds splits its connections over several processes of each tool, run
# at once and summed. loadlab's processes all go to one nginx port, each from its own local
# source addresses (--source-addr 127.0.0.x); wrk cannot bind a source address, so its
# processes go to one nginx port each, which keeps every destination under the ~28,000
# ephemeral ports one source address has.

FILE_SLACK = 100  # files a generator process holds besides its connections
SOURCES_PER_PROCESS = 2  # local addresses per loadlab process (fewer ports in use each: faster connects)
CONNECT_RATE = 10_000  # connections per second, all of a row's loadlab processes together
CONNS_TIMEOUT = "60s"  # with 100,000 connections a closed-model cycle takes seconds


@dataclass
class ConnsRow:
    name: str
    connections: int


CONNS_ROWS = [ConnsRow("conns-19000", 19_000), ConnsRow("conns-20000", 20_000), ConnsRow("conns-100000", 100_000)]


def conns_processes(connections):
    """Processes of one tool that hold `connections`: as few as the file limit allows."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per = max(hard - FILE_SLACK, 1) if hard != resource.RLIM_INFINITY else connections
    return -(-connections // per)


def start_nginx_conns(tmp, ports, cpu, connections):
    """nginx for a connection row: enough workers that each stays under the file limit, every
    port `reuseport` so the kernel spreads connections evenly over the workers. Each worker
    keeps a fifth of its worker_connections free: with fewer than 1/16 free, nginx closes
    idle keep-alive connections to make room ("worker_connections are not enough, reusing
    connections"), and the generator's reconnects feed the closing."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_worker = min(hard, 1_000_000) - 100
    workers = max(2, -(-connections * 5 // (per_worker * 4)))  # a quarter spare for unevenness
    conf = Path(tmp) / "nginx-conns.conf"
    (Path(tmp) / "logs").mkdir(exist_ok=True)
    listens = "".join(f" listen 127.0.0.1:{p} backlog=4096 reuseport;" for p in ports)
    conf.write_text(
        f"worker_processes {workers};\ndaemon off;\npid {tmp}/nginx-conns.pid;\nerror_log {tmp}/logs/error-conns.log warn;\n"
        f"worker_rlimit_nofile {min(hard, 1_000_000)};\nevents {{ worker_connections {per_worker}; }}\n"
        "http { access_log off; keepalive_requests 10000000; keepalive_timeout 300s;\n"
        f"  server {{{listens} location / {{ return 200 \"ok\"; }} }} }}\n"
    )
    cmd = (["taskset", "-c", str(cpu)] if cpu is not None else []) + [nginx, "-p", tmp, "-c", str(conf)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", ports[0]), timeout=0.2).close()
            return proc, workers
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("error: nginx did not start")


def conns_commands(tool, row, procs, ports, secs, tmp, rnd):
    """One argv and JSON path per process of `tool` for `row`."""
    shares = [row.connections // procs + (1 if i < row.connections % procs else 0) for i in range(procs)]
    out = []
    for i, c in enumerate(shares):
        j = str(Path(tmp) / f"{row.name}-{tool}-{rnd}-{i}.json")
        if tool == "loadlab-1src":
            argv = [LOADLAB, "run", f"http://127.0.0.1:{ports[i % len(ports)]}/", "-t", "1", "-q", "-c", str(c),
                    "-d", f"{secs}s", "--timeout", CONNS_TIMEOUT, "--connect-rate", str(CONNECT_RATE // procs),
                    "--json", j]
        elif tool == "loadlab":
            first = 2 + i * SOURCES_PER_PROCESS
            sources = f"127.0.0.{first}-127.0.0.{first + SOURCES_PER_PROCESS - 1}"
            argv = [LOADLAB, "run", f"http://127.0.0.1:{ports[0]}/", "-t", "1", "-q", "-c", str(c),
                    "-d", f"{secs}s", "--timeout", CONNS_TIMEOUT, "--source-addr", sources,
                    "--connect-rate", str(CONNECT_RATE // procs), "--json", j]
        else:
            argv = [find("wrk"), "-t1", f"-c{c}", f"-d{secs}s", "--timeout", CONNS_TIMEOUT,
                    f"http://127.0.0.1:{ports[i % len(ports)]}/"]
        out.append((argv, j))
    return out


def run_parallel(cmds, cpu, timeout, raw_prefix):
    """Runs every argv at once, each under GNU time and pinned to `cpu`; returns per process
    (returncode, cpu s, peak RSS MB, stdout), and the wall time until the last one ended."""
    started = time.monotonic()
    procs = []
    for k, (argv, _) in enumerate(cmds):
        raw = f"{raw_prefix}-{k}.out"
        pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
        full = ["/usr/bin/time", "-f", "%U %S %M", "-o", raw + ".time"] + pin + argv
        out = open(raw, "wb")
        procs.append((subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL), out, raw))
    deadline = time.monotonic() + timeout
    results = []
    for proc, out, raw in procs:
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        out.close()
        user, system, rss_kb = Path(raw + ".time").read_text().split()[-3:]
        results.append((code, float(user) + float(system), int(rss_kb) / 1024.0, Path(raw).read_text(errors="replace")))
    return results, time.monotonic() - started


def conns_result(tool, cmds, measured):
    """Sums one tool's processes: req/s, requests, RSS, connect errors, connect time."""
    rps = done = rss = cpu = errors = other = 0.0
    connect_s = 0.0
    for (argv, j), (code, c, r, text) in zip(cmds, measured):
        cpu += c
        rss += r
        if tool.startswith("loadlab"):
            s = json.loads(Path(j).read_text())
            rps += s["requests"]["completed"] / s["duration_s"]
            done += s["requests"]["completed"]
            e = s["errors"]
            connect = e["connect_refused"] + e["connect_timeout"]
            errors += connect + s["generator"]["connect"]["failed"]
            other += s["requests"]["errors"] - connect
            connect_s = max(connect_s, s["generator"]["connect"]["duration_s"])
        else:
            rps += float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
            done += int(re.search(r"(\d+) requests in", text).group(1))
            m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
            errors += int(m.group(1)) if m else 0
            other += sum(int(g) for g in m.groups()[1:]) if m else 0
            m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
            other += int(m.group(1)) if m else 0
    return {"rps": rps, "requests": int(done), "rss_mb": rss, "cpu_s": cpu, "connect_errors": int(errors),
            "other_errors": int(other), "connect_s": connect_s}


def run_conns(args, out_dir, tmp, server_cpu, client_cpu, rows):
    report = []
    procs_cap = 8  # processes a row may start per tool (memory and one client core)
    for row in rows:
        procs = conns_processes(row.connections)
        lines = [f"\n## {row.name}: closed model, {row.connections:,} keep-alive connections\n"]
        if procs > procs_cap:
            lines.append(f"not run: {row.connections:,} connections need {procs} processes of each tool under this "
                         f"machine's file limit, more than {procs_cap}")
            report.append("\n".join(lines))
            print(report[-1])
            continue
        wrk_ports = max(procs, -(-row.connections // 25_000))
        ports = [free_port() for _ in range(wrk_ports)]
        nginx, workers = start_nginx_conns(tmp, ports, server_cpu, row.connections)
        lines.append(f"{procs} process(es) of each tool at once, summed; nginx {workers} workers on one core. "
                     f"loadlab: `-t 1 --timeout {CONNS_TIMEOUT} --connect-rate {CONNECT_RATE // procs}`, "
                     f"{SOURCES_PER_PROCESS} source addresses per process, all to one port; loadlab-1src: the same "
                     f"without --source-addr, addressed as wrk is; wrk: `-t1 --timeout {CONNS_TIMEOUT}`, one port per "
                     f"process (it cannot bind a source address).\n")
        lines += ["| tool | round | req/s | requests | connect errors | other errors | peak RSS MB (sum) | RSS KB/conn | CPU µs/req | connect s (before load) | wall s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        try:
            for rnd in range(args.rounds):
                for tool in ["loadlab", "loadlab-1src", "wrk"]:
                    if not tool.startswith("loadlab") and (args.tools and tool not in args.tools.split(",") or not find(tool)):
                        continue
                    cmds = conns_commands(tool, row, procs, ports, args.seconds, tmp, rnd)
                    # wrk connects inside its duration, and slowly past ~14,000 connections to one
                    # destination from one address (the kernel's port search), so it gets longer.
                    timeout = args.seconds * 3 + row.connections / (CONNECT_RATE if tool == "loadlab" else 1000) + 60
                    measured, wall = run_parallel(cmds, client_cpu, timeout, str(out_dir / f"{row.name}-{tool}-{rnd}"))
                    try:
                        r = conns_result(tool, cmds, measured)
                    except Exception as e:  # output we could not read
                        lines.append(f"| {tool} | {rnd} | failed: {e} | | | | | | | | {wall:.1f} |")
                        continue
                    for _, j in cmds:
                        if Path(j).exists():
                            shutil.copy(j, out_dir / Path(j).name)
                    connect = f"{r['connect_s']:.2f}" if tool.startswith("loadlab") else "(in its duration)"
                    per_req = f"{r['cpu_s'] / r['requests'] * 1e6:.1f}" if r["requests"] else "n/a"
                    lines.append(f"| {tool} | {rnd} | {r['rps']:,.0f} | {r['requests']:,} | {r['connect_errors']:,} | {r['other_errors']:,} | "
                                 f"{r['rss_mb']:.1f} | {r['rss_mb'] * 1024 / row.connections:.2f} | "
                                 f"{per_req} | {connect} | {wall:.1f} |")
                    time.sleep(2)
        finally:
            nginx.terminate()
            nginx.wait(timeout=30)
        report.append("\n".join(lines))
        print(report[-1])
    return "\n".join(report)


# ---------------------------------------------------------------- server scenarios
# The same load (loadlab, closed model) against different servers, each pinned to one core:
# how fast is loadlab's reference service next to nginx and a minimal hyper server?

SERVER_LOAD = ["-c", "50", "-p", "10"]  # pipelined, so the one-core generator is not the limit


def start_process(cmd, port, cpu):
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    proc = subprocess.Popen(pin + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"error: {cmd[0]} did not start")


def hyper_min():
    """Builds bench/hyper-min once; returns its binary."""
    manifest = ROOT / "bench" / "hyper-min" / "Cargo.toml"
    subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(manifest)], check=True)
    return str(ROOT / "bench" / "hyper-min" / "target" / "release" / "hyper-min")


def serve(*flags):
    """`loadlab serve` on a port with flags (the runtimes' dependencies are installed by
    scripts/install-runtimes.sh, or by loadlab on first use)."""
    return lambda port: [str(ROOT / "target" / "release" / "loadlab"), "serve", "--port", str(port), *flags]


SERVERS = {
    "loadlab serve": serve(),
    "nginx": None,  # started by start_nginx with `return 200`
    "hyper-min": lambda port: [hyper_min(), str(port)],
    # The same contract on the seeds' runtimes (issue 14), pinned to the same one core.
    "node": serve("--runtime", "node"),
    "node cluster x2": serve("--runtime", "node", "--workers", "2"),
    "gunicorn sync x2": serve("--runtime", "python", "--workers", "2"),
    "gunicorn gevent": serve("--runtime", "python", "--async"),
}


def run_servers(args, out_dir, tmp, server_cpu, client_cpu):
    results = {}
    for rnd in range(args.rounds):
        for name, build in SERVERS.items():
            port = free_port()
            sub = Path(tmp) / f"srv-{rnd}-{name.replace(' ', '-')}"
            sub.mkdir()
            proc = start_nginx(str(sub), port, server_cpu) if build is None else start_process(build(port), port, server_cpu)
            try:
                j = str(sub / "summary.json")
                argv, parser = loadlab_cmd(*SERVER_LOAD)(f"http://127.0.0.1:{port}/ping", args.seconds, j, tmp)
                raw = out_dir / f"serve-ping-{name.replace(' ', '-')}-{rnd}.out"
                code, cpu, rss, text = run_measured(argv, client_cpu, args.seconds * 3 + 30, raw)
                rps, done, p50, p99 = parser(text, j, args.seconds)
                results.setdefault(name, []).append(Result(name, rps, cpu, rss, done, p50, p99))
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            time.sleep(1)
    rows = ["\n## serve-ping: loadlab run -c 50 -p 10 against each server, server pinned to one core\n",
            "| server | req/s | p50 ms | p99 ms | req/s vs loadlab serve |",
            "|---|---|---|---|---|"]
    base = median([r.rps for r in results["loadlab serve"]])
    for name in SERVERS:
        rs = results[name]
        rps = median([r.rps for r in rs])
        rows.append(f"| {name} | {rps:,.0f} | {median([r.p50_ms for r in rs]):.2f} | {median([r.p99_ms for r in rs]):.2f} | {rps / base:.2f} |")
    return "\n".join(rows)


# ---------------------------------------------------------------- seed-004-logging
# Seed 004 on the runtime it used: node's /info with and without console.log of it (log=1),
# the service's stdout going to a file and to a pipe (a reader that drops what it reads);
# loadlab run -c 100, as the seed's autocannon. The seed saw about 40 % less with logging.

LOGGING_LOAD = ["-c", "100"]


def start_logging_node(port, cpu, stdout_kind, tmp):
    """`loadlab serve --runtime node` with its stdout to a file or to a pipe drained by cat."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    cmd = pin + serve("--runtime", "node")(port)
    reader = None
    if stdout_kind == "file":
        sink = open(Path(tmp) / f"node-stdout-{port}.log", "wb")
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL)
        sink.close()
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        reader = subprocess.Popen(["cat"], stdin=proc.stdout, stdout=subprocess.DEVNULL)
        proc.stdout.close()
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, reader
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("error: loadlab serve --runtime node did not start")


def run_logging(args, out_dir, tmp, server_cpu, client_cpu):
    results = {}
    for rnd in range(args.rounds):
        for stdout_kind in ["file", "pipe"]:
            for path in ["/info", "/info?log=1"]:
                port = free_port()
                proc, reader = start_logging_node(port, server_cpu, stdout_kind, tmp)
                try:
                    name = f"{stdout_kind}-{'log' if 'log' in path else 'nolog'}-{rnd}"
                    j = str(Path(tmp) / f"logging-{name}.json")
                    argv, parser = loadlab_cmd(*LOGGING_LOAD)(f"http://127.0.0.1:{port}{path}", args.seconds, j, tmp)
                    raw = out_dir / f"seed-004-logging-{name}.out"
                    _, cpu, rss, text = run_measured(argv, client_cpu, args.seconds * 3 + 30, raw)
                    rps, done, p50, p99 = parser(text, j, args.seconds)
                    results.setdefault((stdout_kind, path), []).append(Result(path, rps, cpu, rss, done, p50, p99))
                finally:
                    proc.terminate()
                    proc.wait(timeout=10)
                    if reader:
                        reader.wait(timeout=10)
                time.sleep(1)
    rows = ["\n## seed-004-logging: node /info with and without log=1, loadlab run -c 100, node pinned to one core\n",
            "| stdout | req/s without log | req/s with log=1 | with / without |",
            "|---|---|---|---|"]
    for stdout_kind in ["file", "pipe"]:
        plain = median([r.rps for r in results[(stdout_kind, "/info")]])
        logged = median([r.rps for r in results[(stdout_kind, "/info?log=1")]])
        rows.append(f"| {stdout_kind} | {plain:,.0f} | {logged:,.0f} | {logged / plain:.2f} |")
    return "\n".join(rows)


# ---------------------------------------------------------------- profile-overhead
# What `--profile` costs the service (issue 16): the same server, the same load, with the
# server's process watched in both runs and profiled in one. The profile's window is the
# middle three fifths of a run, so the figures are read over those seconds in both runs (the
# whole-run rate dilutes the cost): the rate, and the server's CPU per response, which a
# machine shared with other work leaves steadier than the rate. Rust is sampled by perf (DWARF stacks at
# 499 Hz), node by V8's own profiler (1 sample per ms).

# Loads the server's one core saturates before the generator's does: perf and its writes run
# on the generator's core (they inherit its pinning), so a load that needs all of that core
# (/ping -c 50 -p 10) would charge perf's cost to the generator and not to the service.
OVERHEAD_CASES = [
    ("rust /calc?n=20000 -c 8", serve(), "/calc?n=20000", ["-c", "8"]),
    ("node /info -c 100", serve("--runtime", "node"), "/info", LOGGING_LOAD),
]


def window_figures(run_dir, secs):
    """Over the profile's window (the run's seconds 1/5..4/5): mean successful responses per
    second, and the server's CPU per response in µs (every process of it, from server.csv),
    which a machine shared with other work leaves far steadier than the rate."""
    first, last = secs // 5, secs * 4 // 5
    rows = list(csv.DictReader(open(Path(run_dir) / "timeline.csv")))
    inside = [r for r in rows if first <= int(r["second"]) < last]
    done = sum(int(r["s2xx"]) + int(r["s3xx"]) for r in inside)
    # server.csv's second N is the CPU used during timeline second N-1.
    cpu = [r for r in csv.DictReader(open(Path(run_dir) / "server.csv")) if first < int(r["second"]) <= last]
    cpu_s = sum(float(r["cpu_pct"]) for r in cpu) / 100.0
    return done / max(1, len(inside)), cpu_s * 1e6 / max(1, done)


def run_overhead(args, out_dir, tmp, server_cpu, client_cpu):
    results = {}
    for rnd in range(args.rounds):
        for name, build, path, load in OVERHEAD_CASES:
            modes = ["plain", "profiled"] if rnd % 2 == 0 else ["profiled", "plain"]
            for mode in modes:
                port = free_port()
                proc = start_process(build(port), port, server_cpu)
                try:
                    run_dir = Path(tmp) / f"overhead-{name.split()[0]}-{mode}-{rnd}"
                    flags = ["--watch-pid", str(proc.pid), "--out", str(run_dir), *load]
                    if mode == "profiled":
                        flags.append("--profile")
                    j = str(run_dir) + ".json"
                    argv, parser = loadlab_cmd(*flags)(f"http://127.0.0.1:{port}{path}", args.seconds, j, tmp)
                    raw = out_dir / f"profile-overhead-{name.split()[0]}-{mode}-{rnd}.out"
                    run_measured(argv, client_cpu, args.seconds * 3 + 60, raw)
                    s = json.loads(Path(j).read_text())
                    backend = (s.get("profile") or {}).get("backend") or (s.get("profile") or {}).get("error", "")
                    rps, cpu_us = window_figures(run_dir, args.seconds)
                    results.setdefault((name, mode), []).append((rps, cpu_us, backend))
                finally:
                    proc.terminate()
                    proc.wait(timeout=10)
                time.sleep(1)
    rows = [f"\n## profile-overhead: the same server and load with and without --profile (server pinned to one core), "
            f"req/s over the profile's window (seconds {args.seconds // 5}..{args.seconds * 4 // 5} of {args.seconds})\n",
            "| server, load | backend | req/s plain (median; rounds) | req/s profiled (median; rounds) | profiled / plain | server CPU µs/req plain | profiled | profiled / plain |",
            "|---|---|---|---|---|---|---|---|"]
    for name, *_ in OVERHEAD_CASES:
        each = lambda mode, i: [r[i] for r in results[(name, mode)]]
        rounds = lambda mode: ", ".join(f"{r:,.0f}" for r in each(mode, 0))
        plain, prof = median(each("plain", 0)), median(each("profiled", 0))
        cpu_plain, cpu_prof = median(each("plain", 1)), median(each("profiled", 1))
        backend = results[(name, "profiled")][0][2]
        rows.append(f"| {name} | {backend} | {plain:,.0f}; {rounds('plain')} | {prof:,.0f}; {rounds('profiled')} | {prof / plain:.2f} "
                    f"| {cpu_plain:,.1f} | {cpu_prof:,.1f} | {cpu_prof / cpu_plain:.2f} |")
    return "\n".join(rows)


# ---------------------------------------------------------------- open-ceiling
# The highest rate each tool holds on one core: offered rates stepped up until a tool completes
# fewer than 99 % of the requests the rate asks for in the run's seconds; its last rate held,
# with its p99 there (each tool's own definition) and, for loadlab, its schedule lag p99.

CEILING_RATES = [10_000, 20_000, 40_000, 60_000, 80_000, 100_000]
UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}


def parse_wrk2(text, _json, secs):
    rps, done, _, _ = parse_wrk(text, _json, secs)
    m = re.search(r"^\s*99\.000%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
    p99 = float(m.group(1)) * UNIT_MS[m.group(2)] if m else float("nan")
    return rps, done, float("nan"), p99


def wrk2_cmd(rate):
    """wrk2 (built from its repository into bench/tools/bin/wrk2, never committed): one
    thread, 50 connections, a constant rate; its latency is from the intended start."""
    return lambda url, secs, j, tmp: ([find("wrk2"), "-t1", "-c50", f"-d{secs}s", f"-R{rate}", "--latency", url], parse_wrk2)


def oha_rate_cmd(rate):
    """oha with a rate cap (`-q`), its default 50 connections."""
    return lambda url, secs, j, tmp: ([find("oha"), "-q", str(rate), "-z", f"{secs}s", "--no-tui", "--output-format", "json", "-o", j, url], parse_oha)


CEILING_TOOLS = {
    "loadlab": lambda rate: loadlab_cmd("-R", str(rate)),
    "oha": oha_rate_cmd,
    "vegeta": vegeta_cmd,
    "k6": k6_cmd,
    "wrk2": wrk2_cmd,
}


def completed_ok(tool, json_path, done):
    """Requests a tool completed: vegeta counts what it sent, so its success ratio applies."""
    if tool == "vegeta" and Path(json_path).exists():
        return int(done * json.loads(Path(json_path).read_text()).get("success", 1.0))
    return done


def run_ceiling(args, out_dir, tmp, url, client_cpu, wanted_tools):
    tools = dict(CEILING_TOOLS)
    if args.baseline:
        tools["loadlab-baseline"] = lambda rate: with_binary(loadlab_cmd("-R", str(rate)), args.baseline)
    steps, best = {}, {}
    for rnd in range(args.rounds):
        names = list(tools)
        if rnd % 2:
            names = [names[0]] + names[1:][::-1]
        for tool in names:
            if wanted_tools and tool not in wanted_tools and not tool.startswith("loadlab"):
                continue
            if not tool.startswith("loadlab") and not find(tool):
                best.setdefault(tool, [])
                continue
            held = None
            for rate in CEILING_RATES:
                j = str(Path(tmp) / f"ceiling-{tool}-{rate}-{rnd}.json")
                argv, parser = tools[tool](rate)(url, args.seconds, j, tmp)
                raw = out_dir / f"open-ceiling-{tool}-{rate}-{rnd}.out"
                code, cpu, rss, text = run_measured(argv, client_cpu, args.seconds * 3 + 30, raw)
                try:
                    rps, done, p50, p99 = parser(text, j, args.seconds)
                except Exception as e:  # a tool that fell over at this rate
                    print(f"  open-ceiling/{tool}@{rate}: could not read its output ({e}); see {raw}", file=sys.stderr)
                    steps.setdefault((tool, rate), []).append(None)
                    break
                lag = float("nan")
                if Path(j).exists():
                    shutil.copy(j, out_dir / f"open-ceiling-{tool}-{rate}-{rnd}.json")
                    if tool.startswith("loadlab"):
                        lag = json.loads(Path(j).read_text())["generator"]["schedule_lag_ms_p99"]
                done = completed_ok(tool, j, done)
                r = Result(tool, done / args.seconds, cpu, rss, done, p50, p99, lag_ms=lag)
                steps.setdefault((tool, rate), []).append(r)
                time.sleep(1)
                if done < 0.99 * rate * args.seconds:
                    break
                held = (rate, r)
            best.setdefault(tool, []).append(held)
    return ceiling_table(tools, steps, best, args)


def ceiling_table(tools, steps, best, args):
    rows = [f"\n## open-ceiling: the highest rate held on one core (≥ 99 % of the offered requests completed in {args.seconds} s)\n",
            "| tool | highest rate held (median of rounds) | each round | p99 ms there | schedule lag p99 ms | CPU µs/req there |",
            "|---|---|---|---|---|---|"]
    for tool in tools:
        rounds = best.get(tool)
        if rounds is None:
            continue
        if not rounds:
            rows.append(f"| {tool} | not installed | | | | |")
            continue
        rates = [h[0] if h else 0 for h in rounds]
        ceiling = median(rates)
        there = [h[1] for h in rounds if h and h[0] == ceiling] or [h[1] for h in rounds if h]
        p99 = median([r.p99_ms for r in there]) if there else float("nan")
        lag = median([r.lag_ms for r in there]) if there else float("nan")
        cpu = median([r.cpu_s / max(r.requests, 1) for r in there]) * 1e6 if there else float("nan")
        each = ", ".join(f"{r:,}" if r else f"< {CEILING_RATES[0]:,}" for r in rates)
        held = f"{ceiling:,.0f}" if ceiling else f"< {CEILING_RATES[0]:,}"
        rows.append(f"| {tool} | {held} | {each} | {p99:.2f} | {lag:.2f} | {cpu:.2f} |")
    rows += ["", "Each step (median of the rounds that reached it): achieved req/s / p99 ms" + " (/ schedule lag p99 ms for loadlab)", "",
             "| tool | " + " | ".join(f"{r:,}" for r in CEILING_RATES) + " |",
             "|---|" + "---|" * len(CEILING_RATES)]
    for tool in tools:
        if not best.get(tool):
            continue
        cells = []
        for rate in CEILING_RATES:
            rs = [r for r in steps.get((tool, rate), []) if r]
            if not rs:
                cells.append("")
                continue
            cell = f"{median([r.rps for r in rs]):,.0f} / {median([r.p99_ms for r in rs]):.2f}"
            if tool.startswith("loadlab"):
                cell += f" / {median([r.lag_ms for r in rs]):.2f}"
            cells.append(cell)
        rows.append(f"| {tool} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# ---------------------------------------------------------------- nginx

def start_nginx(tmp, port, cpu, tls_port=None, h2c_port=None, access_log=False):
    """nginx on `port` (plain HTTP); with `tls_port`, on a TLS port with HTTP/2 by ALPN and a
    session cache, on a self-signed certificate made here; with `h2c_port`, HTTP/2 with prior
    knowledge (h2c) on a plain port; with `access_log`, every request logged to a file through
    a 64 KB buffer (a server doing a little work per request besides answering)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        sys.exit("error: nginx is missing; run bash bench/install-peers.sh")
    conf = Path(tmp) / "nginx.conf"
    (Path(tmp) / "logs").mkdir(exist_ok=True)
    tls = ""
    if tls_port:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
        tls = (f"  ssl_session_cache shared:bench:10m;\n"
               f"  server {{ listen 127.0.0.1:{tls_port} ssl http2 backlog=4096; ssl_certificate {tmp}/cert.pem; "
               f"ssl_certificate_key {tmp}/key.pem; location / {{ return 200 \"ok\"; }} }}\n")
    if h2c_port:
        tls += f"  server {{ listen 127.0.0.1:{h2c_port} http2 backlog=4096; location / {{ return 200 \"ok\"; }} }}\n"
    log = f"access_log {tmp}/logs/access.log combined buffer=64k;" if access_log else "access_log off;"
    conf.write_text(
        f"worker_processes 1;\ndaemon off;\npid {tmp}/nginx.pid;\nerror_log {tmp}/logs/error.log warn;\n"
        "worker_rlimit_nofile 20000;\nevents { worker_connections 10000; }\n"
        f"http {{ {log} keepalive_requests 10000000; keepalive_timeout 120s;\n"
        f"  server {{ listen 127.0.0.1:{port} backlog=4096; location / {{ return 200 \"ok\"; }} }}\n{tls}}}\n"
    )
    cmd = (["taskset", "-c", str(cpu)] if cpu is not None else []) + [nginx, "-p", tmp, "-c", str(conf)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("error: nginx did not start")


def median(xs):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated scenario names (closed-50, open-5000, users-flow, conns-2000, "
                    "https-closed-50, h2-closed, h2-4x25, https-handshake, open-ceiling, serve-ping; "
                    "conns-19000, conns-20000, conns-100000, seed-004-logging, profile-overhead run only when named)")
    ap.add_argument("--tools", default="", help="comma-separated tools (default: all installed)")
    ap.add_argument("--logging-server", action="store_true",
                    help="the second setup: nginx logs every request to a file (64 KB buffer) and runs on CPU 1, "
                         "the generators on CPU 0")
    ap.add_argument("--baseline", default="", help="another loadlab binary (an older build) run as 'loadlab-baseline' in every row loadlab runs in, to compare builds in one run")
    args = ap.parse_args()

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if not (ROOT / "target" / "release" / "loadlab").exists():
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    cores = os.cpu_count() or 1
    server_cpu, client_cpu = (0, 1) if cores >= 2 else (None, None)
    if args.logging_server and cores >= 2:
        server_cpu, client_cpu = 1, 0

    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out_dir = ROOT / "bench" / "runs" / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    report = [f"# Benchmark {stamp}\n",
              f"{args.seconds} s per run, {args.rounds} rounds, nginx pinned to CPU {server_cpu}"
              f"{' logging every request to a file (64 KB buffer)' if args.logging_server else ', no access log'}, "
              f"generators to CPU {client_cpu}; the tools' order turns by one each round, so each "
              f"goes first in some round; medians over rounds, and each round's req/s; load average "
              f"{os.getloadavg()[0]:.2f} at the start; `python3 bench/bench.py "
              f"{' '.join(sys.argv[1:])}`; {core_stalls(client_cpu)}\n"]
    only = set(filter(None, args.only.split(",")))
    wanted_tools = set(filter(None, args.tools.split(",")))

    with tempfile.TemporaryDirectory(prefix="loadlab-bench-") as tmp:
        port, tls_port = free_port(), free_port()
        nginx = start_nginx(tmp, port, server_cpu, tls_port, access_log=args.logging_server)
        url = f"http://127.0.0.1:{port}/"
        urls = {"http": url, "https": f"https://127.0.0.1:{tls_port}/"}
        try:
            for sc in SCENARIOS:
                if only and sc.name not in only:
                    continue
                if args.baseline and "loadlab" in sc.tools:
                    sc.tools["loadlab-baseline"] = with_binary(sc.tools["loadlab"], args.baseline)
                results = {}
                for rnd in range(args.rounds):
                    # Each round starts one tool later: a first run's costs (the server's or
                    # the generator's) fall on every tool in turn.
                    names = list(sc.tools)
                    names = names[rnd % len(names):] + names[:rnd % len(names)]
                    for tool in names:
                        if wanted_tools and tool not in wanted_tools and not tool.startswith("loadlab"):
                            continue
                        if not tool.startswith("loadlab") and not find(tool):
                            results.setdefault(tool, []).append(None)
                            continue
                        j = str(Path(tmp) / f"{sc.name}-{tool}-{rnd}.json")
                        argv, parser = sc.tools[tool](urls[sc.scheme], args.seconds, j, tmp)
                        raw = out_dir / f"{sc.name}-{tool}-{rnd}.out"
                        code, cpu, rss, text = run_measured(argv, client_cpu, args.seconds * 3 + 30, raw)
                        try:
                            rps, done, p50, p99 = parser(text, j, args.seconds)
                            if Path(j).exists():
                                shutil.copy(j, out_dir / f"{sc.name}-{tool}-{rnd}.json")
                            results.setdefault(tool, []).append(Result(tool, rps, cpu, rss, done, p50, p99))
                        except Exception as e:  # a peer's output we could not read
                            print(f"  {sc.name}/{tool}: could not read its output ({e}); see {raw}", file=sys.stderr)
                            results.setdefault(tool, []).append(None)
                        time.sleep(1)
                report.append(table(sc, results))
                print(report[-1])
            conns = [r for r in CONNS_ROWS if r.name in only]
            if conns:
                report.append(run_conns(args, out_dir, tmp, server_cpu, client_cpu, conns))
            if not only or "open-ceiling" in only:
                report.append(run_ceiling(args, out_dir, tmp, url, client_cpu, wanted_tools))
                print(report[-1])
            if not only or "serve-ping" in only:
                report.append(run_servers(args, out_dir, tmp, server_cpu, client_cpu))
                print(report[-1])
            if "seed-004-logging" in only:
                report.append(run_logging(args, out_dir, tmp, server_cpu, client_cpu))
                print(report[-1])
            if "profile-overhead" in only:
                report.append(run_overhead(args, out_dir, tmp, server_cpu, client_cpu))
                print(report[-1])
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    (out_dir / "README.md").write_text("\n".join(report))
    print(f"results in {out_dir.relative_to(ROOT)}")


def table(sc, results):
    rows = [f"\n## {sc.name}: {sc.what}\n",
            "| tool | req/s | CPU µs/req | peak RSS MB | p50 ms | p99 ms | req/s vs loadlab | CPU/req vs loadlab | req/s each round |",
            "|---|---|---|---|---|---|---|---|---|"]
    def agg(tool):
        rs = [r for r in results.get(tool, []) if r]
        if not rs:
            return None
        return Result(tool, median([r.rps for r in rs]),
                      median([r.cpu_s / max(r.requests, 1) for r in rs]) * 1e6,
                      max(r.max_rss_mb for r in rs), int(median([r.requests for r in rs])),
                      median([r.p50_ms for r in rs]), median([r.p99_ms for r in rs]))
    base = agg("loadlab")
    for tool in sc.tools:
        a = agg(tool)
        if a is None:
            rows.append(f"| {tool} | not installed or failed | | | | | | |")
            continue
        ratio_rps = a.rps / base.rps if base else float("nan")
        ratio_cpu = a.cpu_s / base.cpu_s if base else float("nan")
        each = ", ".join("-" if r is None else f"{r.rps / 1000:.1f}k" for r in results.get(tool, []))
        rows.append(f"| {tool} | {a.rps:,.0f} | {a.cpu_s:.2f} | {a.max_rss_mb:.1f} | {a.p50_ms:.2f} | {a.p99_ms:.2f} | {ratio_rps:.2f} | {ratio_cpu:.2f} | {each} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
