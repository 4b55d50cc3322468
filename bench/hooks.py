#!/usr/bin/env python3
"""How fast loadlab calls an Artillery processor's functions, beside Artillery itself.

The same script runs under both: USERS users, each calling a no-op processor function
CALLS times in a loop (a callback function, and an async one), then one GET /ping on
`loadlab serve` on 127.0.0.1. loadlab runs with one generator thread (so one Node.js
helper): its figure is hook calls per second per generator thread, the session's length
from its summary. Artillery runs its functions in its own process; its figure is the calls
over the wall time of the run less the wall time of the same script with one call per user
(Node's start and Artillery's own setup). Prints both and their ratio, and the helper's CPU.

Usage: python3 bench/hooks.py [--users 20] [--calls 5000] [--rounds 3]
       [--binary target/release/loadlab]
Artillery 2.0.34 comes from bench/install-peers.sh (bench/tools/node); without it only
loadlab's figures are printed. Run it on a quiet machine and write the load average beside
the figures.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTILLERY = ROOT / "bench" / "tools" / "node" / "node_modules" / ".bin" / "artillery"

PROCESSOR = """
module.exports = {
  noop(context, events, next) { next(); },
  async noopAsync(context, events) {},
};
"""


def script(port, users, calls, function):
    return f"""config:
  target: http://127.0.0.1:{port}
  processor: ./functions.js
  phases: [{{ duration: 1, arrivalCount: {users} }}]
scenarios:
  - flow:
      - loop:
          - function: {function}
        count: {calls}
      - get: {{ url: /ping }}
"""


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


def loadlab(binary, dir, port, users, calls, function):
    path = Path(dir) / f"loadlab-{function}.yml"
    path.write_text(script(port, users, calls, function))
    out = Path(dir) / "summary.json"
    subprocess.run([binary, "run", str(path), "-t", "1", "--json", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    s = json.loads(out.read_text())
    completed = s["users"]["completed"]
    if completed != users:
        raise RuntimeError(f"loadlab: {completed} of {users} users completed: {s['users']}")
    return users * calls / s["duration_s"], s["generator"].get("processor_cpu_s")


def artillery_wall(dir, port, users, calls, function):
    """The wall time of Artillery's run, or None when not every user completed (its report's
    counters say why)."""
    path = Path(dir) / f"artillery-{function}-{calls}.yml"
    path.write_text(script(port, users, calls, function))
    report = Path(dir) / "artillery.json"
    started = time.time()
    subprocess.run([str(ARTILLERY), "run", "--quiet", "--output", str(report), str(path)],
                   check=True, cwd=dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=900, env={**os.environ, "ARTILLERY_DISABLE_TELEMETRY": "true"})
    took = time.time() - started
    counters = json.loads(report.read_text())["aggregate"]["counters"]
    if counters.get("vusers.completed", 0) != users:
        errors = {k: v for k, v in counters.items() if k.startswith("errors.")}
        print(f"    artillery: {counters.get('vusers.completed', 0)} of {users} users completed {errors}")
        return None
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "loadlab"))
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    port = free_port()
    server = subprocess.Popen([args.binary, "serve", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        with tempfile.TemporaryDirectory() as dir:
            (Path(dir) / "functions.js").write_text(PROCESSOR)
            have_artillery = ARTILLERY.exists()
            if not have_artillery:
                print("artillery: not installed (bash bench/install-peers.sh); loadlab only")
            total = args.users * args.calls
            for function in ["noop", "noopAsync"]:
                for r in range(args.rounds):
                    rate, cpu = loadlab(args.binary, dir, port, args.users, args.calls, function)
                    line = (f"{function:10} round {r + 1}: loadlab {rate:>9,.0f} calls/s "
                            f"(1 thread; helper cpu {cpu or 0:.2f} s for {total:,} calls)")
                    if have_artillery:
                        many = args.calls * 40
                        full = artillery_wall(dir, port, args.users, many, function)
                        base = artillery_wall(dir, port, args.users, 1, function)
                        if full is None or base is None:
                            line += "  artillery: users failed (see above)"
                        else:
                            peer = args.users * many / max(full - base, 1e-3)
                            line += f"  artillery {peer:>9,.0f} calls/s  ratio {rate / peer:.2f}"
                    print(line, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
