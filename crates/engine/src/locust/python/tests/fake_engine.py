"""A stand-in for loadlab's engine: starts a helper on one end of a socketpair (its fd 3),
records every message it sends and answers its `request` messages with canned responses."""

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")


def file_path(name):
    """Absolute path of a locustfile under tests/files."""
    return os.path.join(FILES, name)


def reply(status=200, body=b"", headers=(), reason="OK", url=None, error=None, elapsed_ms=1.0):
    """A `response` message body (without op and id)."""
    if isinstance(body, str):
        body = body.encode()
    return {
        "status": status,
        "reason": reason,
        "headers": [list(h) for h in headers],
        "body": base64.b64encode(body).decode() if body else "",
        "url": url,
        "elapsed_ms": elapsed_ms,
        "error": error,
    }


def ok_reply(request):
    """The default answer: 200 with body 'ok'."""
    return reply(body=b"ok", headers=[("Content-Type", "text/plain")], url=request["url"])


class FakeEngine:
    """Runs `python -m loadlab_locust.helper` and talks to it as loadlab would, over a
    socketpair whose other end is the helper's fd 3 (or its stdin, with LOADLAB_LOCUST_FD=0)."""

    def __init__(self, responder=ok_reply, python=None, extra_env=None, on_stdin=False):
        self.responder = responder
        self.messages = []
        self.cond = threading.Condition()
        parent, child = socket.socketpair()
        self.sock = parent
        child_fd = child.fileno()
        env = dict(os.environ)
        env["PYTHONPATH"] = PYTHON_DIR
        env.update(extra_env or {})

        def give_fd3():
            os.dup2(child_fd, 3)

        if on_stdin:
            env["LOADLAB_LOCUST_FD"] = "0"
            placement = {"stdin": child_fd}
        else:
            placement = {"stdin": subprocess.DEVNULL, "pass_fds": (3, child_fd), "preexec_fn": give_fd3}
        self.proc = subprocess.Popen(
            [python or sys.executable, "-u", "-m", "loadlab_locust.helper"],
            env=env,
            **placement,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=FILES,
        )
        child.close()
        self.out_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.output = []
        self.drainers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True),
        ]
        for t in self.drainers:
            t.start()

    def _drain(self, stream):
        for line in stream:
            self.output.append(line.decode(errors="replace"))

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self.cond:
                    self.messages.append({"op": "<eof>"})
                    self.cond.notify_all()
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            answers = []
            for line in lines:
                if not line.strip():
                    continue
                msg = json.loads(line)
                if msg.get("op") == "request" and self.responder is not None:
                    answer = self.responder(msg)
                    if answer is not None:
                        answers.append({"op": "response", "id": msg["id"], **answer})
                with self.cond:
                    self.messages.append(msg)
                    self.cond.notify_all()
            if answers:
                self.send_many(answers)

    def send(self, msg):
        """Send one message to the helper."""
        self.send_many([msg])

    def send_many(self, msgs):
        data = "".join(json.dumps(m) + "\n" for m in msgs).encode()
        with self.out_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def init(self, file, **fields):
        """Send `init` for `file` (a name under tests/files or a path) and return the answer."""
        msg = {
            "op": "init",
            "file": file if os.path.isabs(file) or "," in file else file_path(file),
            "host": None,
            "classes": [],
            "tags": None,
            "exclude_tags": None,
            "helper": 0,
            "helpers": 1,
            "seed": 1,
            "run_time": None,
            "iterations": None,
            "options": {"users": 1, "spawn_rate": 1},
        }
        msg.update(fields)
        self.send(msg)
        return self.wait_for(lambda m: m["op"] in ("ready", "failed", "<eof>"))

    def wait_for(self, match, timeout=10.0, start=0):
        """The first message (from index `start`) for which `match(msg)` is true."""
        if isinstance(match, str):
            op = match

            def match(msg):
                return msg["op"] == op

        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for msg in self.messages[start:]:
                    if match(msg):
                        return msg
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no matching message in {timeout}s; got {[m['op'] for m in self.messages][-30:]}\n"
                        + "".join(self.output[-40:])
                    )
                self.cond.wait(left)

    def count(self, match):
        """How many recorded messages match."""
        with self.cond:
            return sum(1 for m in self.messages if match(m))

    def of(self, op):
        """Every recorded message with this op."""
        with self.cond:
            return [m for m in self.messages if m["op"] == op]

    def wait_count(self, match, n, timeout=10.0):
        """Wait until at least `n` recorded messages match."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while sum(1 for m in self.messages if match(m)) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"fewer than {n} matching messages in {timeout}s; ops {[m['op'] for m in self.messages][-30:]}\n"
                        + "".join(self.output[-40:])
                    )
                self.cond.wait(left)

    def stop(self, timeout=10.0):
        """Send `stop`, wait for `stopped` and for the process to exit; returns its exit code."""
        self.send({"op": "stop"})
        self.wait_for("stopped", timeout)
        return self.proc.wait(timeout)

    def close(self):
        """Close our end and make sure the helper is gone."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self.drainers:
            t.join(2)
        self.proc.stdout.close()
        self.proc.stderr.close()


def wait_output(engine, text, timeout=10.0):
    """Wait until the helper printed a line containing `text`; returns that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(engine.output):
            if text in line:
                return line
        time.sleep(0.02)
    raise AssertionError(f"{text!r} not printed; output:\n{''.join(engine.output[-40:])}")
