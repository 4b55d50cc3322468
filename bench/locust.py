#!/usr/bin/env python3
"""The same locustfile under Locust and under `loadlab locust`, side by side, against nginx.

Rows: Locust's HttpUser and FastHttpUser (one process), Locust with --processes, and
`loadlab locust` (one helper, and one per core), each on the generator's CPU with nginx pinned
to the other. For each: requests per second, CPU per request (the generator's whole process
tree, from GNU time) and requests per CPU-second, peak memory per 1,000 users (a second run
with many idle users), and the median and p99 each reports for a server that freezes 1 s in
every 2 s (the coordinated-omission case: paced users, `/stall` behind nginx's proxy).

    bash bench/install-peers.sh          # nginx, Locust 2.47.0 in bench/tools/locust-venv
    python3 bench/locust.py [--seconds 10] [--users 50] [--rounds 2]

Run it alone on the machine; ratios within one run are what hold. Each run is bounded in time.
"""

import argparse
import csv
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "bench" / "tools"
LOCUST = TOOLS / "locust-venv" / "bin" / "locust"

HAMMER = """
from locust import HttpUser, task, constant
from locust.contrib.fasthttp import FastHttpUser


class Http(HttpUser):
    wait_time = constant(0)

    @task
    def ping(self):
        self.client.get("/")


class Fast(FastHttpUser):
    wait_time = constant(0)

    @task
    def ping(self):
        self.client.get("/")
"""

IDLE = """
from locust import HttpUser, task, constant


class Idle(HttpUser):
    wait_time = constant(5)

    @task
    def ping(self):
        self.client.get("/")
"""

PACED = """
from locust import HttpUser, task, constant_pacing


class Paced(HttpUser):
    wait_time = constant_pacing(0.1)

    @task
    def stall(self):
        self.client.get("/stall?every_ms=2000&for_ms=1000", name="stall")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"error: nothing listens on {port}")


def start_nginx(tmp, port, cpu, upstream=None):
    """nginx on `port`, one worker on `cpu`, answering `ok`; `/stall` proxied to `upstream`."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    (Path(tmp) / "logs").mkdir(exist_ok=True)
    stall = f"location /stall {{ proxy_pass http://127.0.0.1:{upstream}; }}" if upstream else ""
    conf = Path(tmp) / f"nginx-{port}.conf"
    conf.write_text(
        f"worker_processes 1;\ndaemon off;\npid {tmp}/nginx-{port}.pid;\nerror_log {tmp}/logs/e.log warn;\n"
        "events { worker_connections 20000; }\n"
        "http { access_log off; keepalive_requests 10000000; keepalive_timeout 300s;\n"
        f"  server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"ok\"; }} {stall} }} }}\n"
    )
    proc = subprocess.Popen(["taskset", "-c", str(cpu), nginx, "-p", tmp, "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc


def measured(cmd, cpu, timeout, out_path, env=None):
    """Runs `cmd` pinned to `cpu` under GNU time: (exit code, CPU seconds of the process and
    its children, peak RSS MB of the largest process)."""
    time_file = str(out_path) + ".time"
    full = ["/usr/bin/time", "-f", "%U %S %M", "-o", time_file, "taskset", "-c", str(cpu)] + cmd
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})})
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    user, system, rss = Path(time_file).read_text().split()[-3:]
    return code, float(user) + float(system), int(rss) / 1024


def aggregated(stats_csv):
    """The Aggregated row of a Locust-format stats CSV: requests, failures, median, p99."""
    with open(stats_csv) as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                num = lambda k: float(row[k]) if row[k] not in ("", "N/A") else float("nan")
                return int(row["Request Count"]), int(row["Failure Count"]), num("50%"), num("99%")
    return 0, 0, float("nan"), float("nan")


def run_tool(tool, klass, host, users, secs, cpus, tmp, tag, locustfile, processes=None):
    """One run of `tool` (locust or loadlab) on `locustfile`'s `klass`; its figures."""
    prefix = str(Path(tmp) / tag)
    common = ["-f", locustfile, "-H", host, "-u", str(users), "-r", str(max(users, 1)),
              "-t", f"{secs}s", "--headless", "--csv", prefix]
    if tool == "locust":
        cmd = [str(LOCUST), *common, "--only-summary", klass]
        if processes:
            cmd[1:1] = ["--processes", str(processes)]
    else:
        cmd = [str(ROOT / "target" / "release" / "loadlab"), "locust", *common, klass]
        if processes:
            cmd += ["--processes", str(processes)]
    code, cpu_s, rss = measured(cmd, cpus, secs + 60, Path(tmp) / f"{tag}.out")
    requests, failures, p50, p99 = aggregated(prefix + "_stats.csv")
    return {"code": code, "cpu_s": cpu_s, "rss_mb": rss, "requests": requests,
            "failures": failures, "p50": p50, "p99": p99, "rps": requests / secs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--idle-users", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if not LOCUST.exists():
        sys.exit("error: no Locust at bench/tools/locust-venv; run bash bench/install-peers.sh")
    if not (ROOT / "target" / "release" / "loadlab").exists():
        sys.exit("error: build loadlab first: cargo build --release")
    cores = os.cpu_count() or 1
    server_cpu, client_cpus = cores - 1, ",".join(str(c) for c in range(max(cores - 1, 1)))
    print(f"load average {os.getloadavg()[0]:.2f}; nginx on CPU {server_cpu}, generators on {client_cpus}")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in [("hammer", HAMMER), ("idle", IDLE), ("paced", PACED)]:
            files[name] = str(Path(tmp) / f"{name}.py")
            Path(files[name]).write_text(text)
        serve_port, port = free_port(), free_port()
        serve = subprocess.Popen(
            ["taskset", "-c", str(server_cpu), str(ROOT / "target" / "release" / "loadlab"),
             "serve", "--port", str(serve_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(serve_port)
        nginx = start_nginx(tmp, port, server_cpu, upstream=serve_port)
        host = f"http://127.0.0.1:{port}"
        rows = [
            ("locust HttpUser", "locust", "Http", None),
            ("locust FastHttpUser", "locust", "Fast", None),
            (f"locust FastHttpUser --processes {cores - 1 or 1}", "locust", "Fast", max(cores - 1, 1)),
            ("loadlab locust HttpUser", "loadlab", "Http", 1),
            ("loadlab locust FastHttpUser", "loadlab", "Fast", 1),
        ]
        try:
            for rnd in range(args.rounds):
                print(f"\nround {rnd + 1}: {args.users} users, no wait, {args.seconds} s")
                print(f"  {'row':44} {'req/s':>9} {'µs CPU/req':>11} {'req/CPU-s':>10} {'fails':>6}")
                base = None
                for label, tool, klass, procs in rows:
                    r = run_tool(tool, klass, host, args.users, args.seconds, client_cpus, tmp,
                                 f"{tool}-{klass}-{procs}-{rnd}", files["hammer"], procs)
                    per = r["cpu_s"] / max(r["requests"], 1) * 1e6
                    if label == "locust FastHttpUser":
                        base = per
                    ratio = f"  ({per / base:.2f}× FastHttpUser's CPU)" if base and tool == "loadlab" else ""
                    print(f"  {label:44} {r['rps']:>9.0f} {per:>11.1f} {1e6 / per:>10.0f} {r['failures']:>6}{ratio}")
                print(f"\n  memory: {args.idle_users} users waiting 5 s between requests, 10 s")
                for label, tool in [("locust HttpUser", "locust"), ("loadlab locust HttpUser", "loadlab")]:
                    r = run_tool(tool, "Idle", host, args.idle_users, 10, client_cpus, tmp,
                                 f"idle-{tool}-{rnd}", files["idle"], 1 if tool == "loadlab" else None)
                    print(f"  {label:44} peak RSS {r['rss_mb']:.0f} MB: {r['rss_mb'] * 1000 / args.idle_users:.1f} MB per 1,000 users (largest process)")
                print("\n  a server frozen 1 s in every 2 s, 10 users paced every 0.1 s, 10 s")
                for label, tool in [("locust HttpUser", "locust"), ("loadlab locust HttpUser", "loadlab")]:
                    r = run_tool(tool, "Paced", host, 10, 10, client_cpus, tmp,
                                 f"paced-{tool}-{rnd}", files["paced"], 1 if tool == "loadlab" else None)
                    print(f"  {label:44} requests {r['requests']:>5}  p50 {r['p50']:>6.0f} ms  p99 {r['p99']:>6.0f} ms")
        finally:
            nginx.terminate()
            serve.terminate()
            nginx.wait()
            serve.wait()


if __name__ == "__main__":
    main()
