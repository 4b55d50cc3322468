"""The helper's side of the socket to loadlab's engine.

One reader greenlet reads lines and wakes the user greenlets whose responses arrived; one
writer greenlet sends whatever messages the other greenlets queued since it last ran, in a
single write. `current()` is the connection of this process (None outside a helper run).
"""

import json
import os
import sys
import time
import traceback

import gevent
from gevent.event import Event
from gevent.hub import Waiter, get_hub

_encode = json.JSONEncoder(separators=(",", ":")).encode
_decode = json.loads

_current = None


def current():
    """Return the engine connection of this helper, or None when there is none."""
    return _current


class Engine:
    """A line-delimited JSON connection to loadlab over a connected stream socket."""

    def __init__(self, sock):
        global _current
        self.sock = sock
        self.t0 = time.monotonic()
        self.handlers = {}
        self.on_eof = _exit_now
        self._out = []
        self._wake = Event()
        self._writing = False
        self._pending = {}
        self._next_id = 1
        self._next_user = 1
        self._partial = []
        self._lines = []
        self._hub = get_hub()
        self._writer = None
        _current = self

    def start(self):
        """Start the writer greenlet (messages are only queued before this)."""
        if self._writer is None:
            self._writer = gevent.spawn(self._write_loop)

    def new_user_id(self):
        """A number that tells this helper's users (and user-less sessions) apart."""
        uid = self._next_user
        self._next_user = uid + 1
        return uid

    def reset_clock(self):
        """Count `intended` times from now (the moment `init` arrived)."""
        self.t0 = time.monotonic()

    def since_init(self, monotonic_time):
        """Seconds from the `init` message to `monotonic_time`."""
        return monotonic_time - self.t0

    def send(self, msg):
        """Queue one message; the writer sends every queued message in one write."""
        self._out.append(_encode(msg))
        if not self._wake.is_set():
            self._wake.set()

    def send_task_error(self, class_name, task, error, unhandled=False):
        """Report an exception that user code raised (the user goes on, or ends); `unhandled`
        where Locust has no handler for it and exits 2."""
        text = str(error)
        self.send(
            {
                "op": "task_error",
                "user_class": class_name,
                "task": task,
                "error": f"{type(error).__name__}: {text}" if text else type(error).__name__,
                "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
                "unhandled": unhandled,
            }
        )

    def request(self, msg):
        """Send a `request` message and block this greenlet until its `response` comes."""
        rid = self._next_id
        self._next_id = rid + 1
        msg["id"] = rid
        waiter = Waiter(self._hub)
        self._pending[rid] = waiter
        self._out.append(_encode(msg))
        if not self._wake.is_set():
            self._wake.set()
        try:
            return waiter.get()
        finally:
            self._pending.pop(rid, None)

    def flush(self, timeout=5.0):
        """Wait until every queued message has been written (or the timeout passes)."""
        deadline = time.monotonic() + timeout
        while (self._out or self._writing) and time.monotonic() < deadline:
            if self._writer is None:
                self._write_now()
            else:
                self._wake.set()
                gevent.sleep(0.001)

    def _write_now(self):
        out, self._out = self._out, []
        if out:
            out.append("")
            self.sock.sendall("\n".join(out).encode())

    def _write_loop(self):
        wake = self._wake
        while True:
            wake.wait()
            wake.clear()
            if not self._out:
                continue
            self._writing = True
            try:
                self._write_now()
            except OSError:
                self.on_eof()
                return
            finally:
                self._writing = False

    def _fill(self):
        """Read from the socket until at least one whole line is buffered; False at EOF."""
        while not self._lines:
            try:
                chunk = self.sock.recv(262144)
            except OSError:
                return False
            if not chunk:
                return False
            parts = chunk.split(b"\n")
            if len(parts) == 1:
                self._partial.append(chunk)
                continue
            if self._partial:
                self._partial.append(parts[0])
                parts[0] = b"".join(self._partial)
                self._partial = []
            tail = parts.pop()
            if tail:
                self._partial.append(tail)
            self._lines = [p for p in parts if p.strip()]
            self._lines.reverse()
        return True

    def read_message(self):
        """Block until the next message; None at end of file."""
        if not self._fill():
            return None
        return _decode(self._lines.pop())

    def run_reader(self):
        """Dispatch every message until end of file: responses wake their greenlets,
        other ops go to `handlers[op](msg)`."""
        pending = self._pending
        callback = self._hub.loop.run_callback
        handlers = self.handlers
        while True:
            if not self._fill():
                self.on_eof()
                return
            lines = self._lines
            self._lines = []
            while lines:
                msg = _decode(lines.pop())
                if msg.get("op") == "response":
                    waiter = pending.pop(msg.get("id"), None)
                    if waiter is not None:
                        callback(waiter.switch, msg)
                else:
                    handler = handlers.get(msg.get("op"))
                    if handler is not None:
                        try:
                            handler(msg)
                        except Exception:
                            traceback.print_exc()


def _exit_now():
    """Leave at once: loadlab closed its end, nobody is left to answer."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(0)
