"""Micro benchmark (not a test): the helper's CPU time per request against a fake engine
that answers at once. Prints µs of helper CPU (user + system) per request.

    python tests/bench.py [seconds] [users] [file]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_engine import FakeEngine, reply

CANNED = reply(body=b'{"ok": true}', headers=[("Content-Type", "application/json"), ("Server", "fake")])


def cpu_seconds(pid):
    """User + system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    users = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    name = sys.argv[3] if len(sys.argv) > 3 else "bench_user.py"
    engine = FakeEngine(responder=lambda request: CANNED)
    ready = engine.init(name, host="http://bench.test")
    assert ready["op"] == "ready", ready
    engine.send({"op": "users", "count": users, "rate": 0})
    engine.wait_for("spawned")
    time.sleep(0.5)
    before_n = engine.count(lambda m: m["op"] == "request")
    before_cpu = cpu_seconds(engine.proc.pid)
    time.sleep(seconds)
    after_cpu = cpu_seconds(engine.proc.pid)
    after_n = engine.count(lambda m: m["op"] == "request")
    engine.stop()
    engine.close()
    n = after_n - before_n
    cpu = after_cpu - before_cpu
    print(f"{n} requests in {seconds:.1f} s ({n / seconds:.0f}/s), helper CPU {cpu:.2f} s: "
          f"{cpu / max(n, 1) * 1e6:.1f} µs/request")


if __name__ == "__main__":
    main()
