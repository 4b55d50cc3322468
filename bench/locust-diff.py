#!/usr/bin/env python3
"""Runs locustfiles with Locust itself and with `loadlab locust` against one recording server
on 127.0.0.1, and compares what the server saw and what each tool counted.

Each file runs once under each tool with the same flags: `--headless -H URL -u 5 -r 5 -t 2s
--only-summary --csv PREFIX`, plus what the file's first lines give on a `# run: <flags>` line
(flags both tools take: `-u`, `-r`, `-t`, `-s`, `-T`, `-E`, user classes; a flag given there
replaces the default). Every absolute http(s) URL in the file (a class's `host`, a full URL
in a request) is pointed at the recording server in a copy beside the file (`_diff_NAME.py`,
removed afterwards), so the file's imports of its neighbours still resolve. When run as root
where `unshare` exists, the whole check runs in a network namespace of its own with only
loopback up, so no request can leave the machine whatever a file does (`--no-isolate` turns
this off).

The server answers 200 with a small JSON body (`{"id": 1, "token": "t", ...}`), or as the
path asks: `/redirect-to?url=/x` redirects (302), `/set-cookie?k=v` sets cookies,
`/status/404` answers that status, `/delay?ms=50` answers after that long, `/echo` answers
with the request's query, headers and body as JSON. It records each request's method, path,
query, cookies, body, the headers a file sets (not the defaults each client adds) and the
connection it came on. Its first answer to each user sets a cookie (`_diff_user`) that tells
that user's later requests apart, on any connection; it is left out of the cookies compared.

What is compared, per file:
- the exit codes;
- requests per (method, route), the route being the path with digits and long hex runs
  blurred (`/items/<n>`): a route's count on each side is tested against the two totals
  with an exact binomial test (conditional on the route's total), so task weights agree
  within sampling error and a rare random task is not a difference;
- per route, the queries, cookies, bodies and set headers: when each side sent one kind
  only, five times or more, they must be the same; otherwise each kind's count is tested as
  above (when each side sent five kinds or more and under a fifth of them are the other's —
  values drawn at random — their shapes are, with string values blurred);
- per user (a user that keeps cookies; see above): the first request (on_start, compared
  as one kind from five users on), which requests come once from every user that made five
  or more, and the transitions from one route to the next (a SequentialTaskSet's order),
  tested as above; and the number of users that sent requests;
- the statistics each tool wrote (`--csv`): requests and failures per (type, name), so
  `name=`, `catch_response` verdicts and `events.request.fire(...)` count; the failure
  messages, in a form both write alike (`HTTP 404`, the message without its exception's
  repr); the task errors' messages (without loadlab's `Class.task: Type:` prefix), by
  presence, as how often a task raises depends on how fast each tool loops. Locust writes
  no rows after user code calls `runner.quit()`; then they are not compared;
- for a file whose pace its waits set (a `# diff: rate` line), each user's requests a
  second from its first request to its last (the median user), within 20 %;
- the lines the file wrote to `$LOCUST_DIFF_LOG` (event listeners that leave a trace: init,
  test_start, test_stop, quitting), as a multiset.

Usage: python3 bench/locust-diff.py FILE [FILE ...] [--users 5] [--seconds 2]
       [--loadlab target/debug/loadlab] [--locust bench/tools/locust-venv/bin/locust]
       [--loadlab-python PYTHON] [--no-isolate] [--verbose] [--dump DIR]
Locust 2.47.0 comes from bench/install-peers.sh. Prints one row per file and the
differences; exits 1 when any file differs. Each run is bounded in time: a tool still running
30 s after its run time is stopped (its process group, by the PID this script started).
"""

import argparse
import collections
import csv
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parent.parent
LOCUST = ROOT / "bench" / "tools" / "locust-venv" / "bin" / "locust"
LOADLAB = ROOT / "target" / "debug" / "loadlab"
BODY = json.dumps({"id": 1, "token": "t", "name": "n", "items": [{"id": 1}, {"id": 2}], "data": {"id": 1}})
# A difference whose chance under "both tools behave alike" is below this is reported. Small,
# as tasks are not drawn independently: a user inside a nested TaskSet runs its tasks for a
# while, so counts cluster by user and a plain binomial is too sure of itself.
ALPHA = 1e-5
# Headers every client adds on its own; the others are what a file set.
CLIENT_HEADERS = {"host", "content-length", "connection", "user-agent", "accept-encoding", "cookie",
                  "content-type"}
GRACE = 30.0
# The cookie the server sets on each user's first response (its connection's port), so that
# a user's requests on a new connection (after a timeout, in on_stop) are still its own. It is
# left out of the cookies compared.
USER_COOKIE = "_diff_user"


# ---------------------------------------------------------------------------------------------
# The recording server


class Recording:
    """The requests the server saw since the last `take()`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []

    def take(self):
        with self.lock:
            taken, self.requests = self.requests, []
        return taken


def user_of(cookie, port):
    """The user a request came from: its mark cookie, or its connection before it has one."""
    for part in (cookie or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == USER_COOKIE:
            return value
    return str(port)


def server(recording):
    """A threading HTTP/1.1 server on an ephemeral port of 127.0.0.1 that records every
    request into `recording`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, the client's delayed ACK
        # holds every keep-alive response 40 ms.
        disable_nagle_algorithm = True

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self.read_chunked()
            url = urlsplit(self.path)
            headers = [(k.lower(), v) for k, v in self.headers.items()]
            with recording.lock:
                recording.requests.append({
                    "method": self.command,
                    "path": url.path,
                    "query": url.query,
                    "cookie": self.headers.get("Cookie"),
                    "content_type": self.headers.get("Content-Type"),
                    "headers": headers,
                    "body": body,
                    "conn": self.client_address[1],
                    "user": user_of(self.headers.get("Cookie"), self.client_address[1]),
                    "marked": f"{USER_COOKIE}=" in (self.headers.get("Cookie") or ""),
                    "t": time.monotonic(),
                })
            query = dict(parse_qsl(url.query, keep_blank_values=True))
            status, extra, data = 200, [], BODY.encode()
            if not any(c.strip().startswith(f"{USER_COOKIE}=") for c in (self.headers.get("Cookie") or "").split(";")):
                # The user's mark: its requests on later connections still tell who sent them.
                extra.append(("Set-Cookie", f"{USER_COOKIE}={self.client_address[1]}; Path=/"))
            if url.path == "/redirect-to" and "url" in query:
                status, extra = 302, [("Location", query["url"])]
            elif url.path == "/set-cookie":
                extra += [("Set-Cookie", f"{k}={v}; Path=/") for k, v in query.items()]
            elif re.fullmatch(r"/status/\d{3}", url.path):
                status = int(url.path[-3:])
            elif url.path == "/delay":
                time.sleep(min(float(query.get("ms") or 0), 5000) / 1000)
            elif url.path == "/echo":
                data = json.dumps({
                    "method": self.command,
                    "query": query,
                    "headers": {k: v for k, v in headers if k not in ("host", "connection")},
                    "body": body.decode("utf-8", "replace"),
                }).encode()
            self.send_response(status)
            for k, v in extra:
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD" and status not in (204, 304):
                self.wfile.write(data)

        def read_chunked(self):
            out = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(out)
                out.append(self.rfile.read(size))
                self.rfile.readline()

        def __getattr__(self, name):
            # Any method a file sends (`PURGE`, `REPORT`) is answered like GET.
            if name.startswith("do_"):
                return self.handle_any
            raise AttributeError(name)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

        def handle_error(self, request, client_address):
            # A client that closes its connection at the end of a run is not news.
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    s = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


# ---------------------------------------------------------------------------------------------
# What the server saw, in comparable form


def blur(text):
    """A value with its random or per-user parts blurred: long hex or alphanumeric-with-digit
    runs (ids, uuids, tokens) and then every number."""
    text = re.sub(r"[0-9a-fA-F]{8}-[0-9a-fA-F-]{27,}", "<id>", text)
    text = re.sub(r"(?=[0-9a-zA-Z]*\d)[0-9a-zA-Z]{16,}", "<id>", text)
    return re.sub(r"\d+(\.\d+)?", "<n>", text)


def route(request):
    return f"{request['method']} {blur(request['path'])}"


def body_kind(request):
    """The body as a comparable text: JSON re-dumped (key order kept), a multipart body with
    its boundary blurred, a form as blurred pairs, anything else blurred."""
    body = request["body"]
    if not body:
        return "-"
    ctype = (request["content_type"] or "").lower()
    text = body.decode("utf-8", "replace")
    if "multipart/" in ctype:
        m = re.search(r"boundary=\"?([^\";]+)", request["content_type"])
        if m:
            text = text.replace(m.group(1), "<boundary>")
        return "multipart " + blur(text)
    try:
        return "json " + blur(json.dumps(json.loads(text)))
    except ValueError:
        return blur(text)


def query_kind(request):
    return blur(request["query"]) if request["query"] else "-"


def cookie_kind(request):
    """The cookies sent, sorted by name (clients order a jar differently), values blurred."""
    if not request["cookie"]:
        return "-"
    pairs = sorted(p.strip() for p in request["cookie"].split(";")
                   if p.strip() and not p.strip().startswith(f"{USER_COOKIE}="))
    return blur("; ".join(pairs)) if pairs else "-"


def header_kind(request):
    """The headers a file set: all but the ones each client adds by itself (and
    `Accept: */*`), names lower-cased, values blurred; the Content-Type of a body the file
    did not shape itself (forms, JSON, multipart) is compared with the body."""
    own = []
    for k, v in request["headers"]:
        if k in CLIENT_HEADERS or (k == "accept" and v == "*/*"):
            continue
        own.append(f"{k}: {blur(v)}")
    ctype = request["content_type"]
    if ctype and not ctype.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        own.append(f"content-type: {blur(ctype)}")
    return "; ".join(sorted(own)) or "-"


def summary(requests, users=None):
    """What one tool's run looks like from the server; `users` is the run's `-u`."""
    routes = collections.Counter(route(r) for r in requests)
    kinds = {name: collections.defaultdict(collections.Counter)
             for name in ("query", "cookie", "body", "headers")}
    by_user = collections.defaultdict(list)
    times = collections.defaultdict(list)
    marked = set()
    for r in requests:
        rt = route(r)
        kinds["query"][rt][query_kind(r)] += 1
        kinds["cookie"][rt][cookie_kind(r)] += 1
        kinds["body"][rt][body_kind(r)] += 1
        kinds["headers"][rt][header_kind(r)] += 1
        by_user[r["user"]].append(rt)
        if r["marked"]:
            marked.add(r["user"])
        times[r["user"]].append(r["t"])
    # Users are the identities whose requests came back with the mark: a client that keeps
    # no cookies (a custom client's plain HTTP) sends every request as a stranger.
    # A user that sent one request was never seen with its mark; where the tool's users keep
    # cookies (some came back marked), such a one-request stranger is a user too. Locust 2.47
    # ends a `-t 2s` run about 0.5 s early (gevent's timer counts from its loop's cached
    # clock), so whether a slow-waiting user's second request lands in the run is chance.
    # More one-request strangers than the run has users: a client that keeps no cookies,
    # whose connections they are, so they are not counted.
    single = sum(1 for u, seq in by_user.items() if u not in marked and len(seq) == 1)
    if users is not None and len(marked) + single > users:
        single = 0
    by_user = {u: seq for u, seq in by_user.items() if u in marked}
    times = {u: t for u, t in times.items() if u in marked}
    first = collections.Counter(seq[0] for seq in by_user.values())
    nexts = collections.defaultdict(collections.Counter)
    for seq in by_user.values():
        for a, b in zip(seq, seq[1:]):
            nexts[a][b] += 1
    once = set()
    for rt in routes:
        per_user = [seq.count(rt) for seq in by_user.values()]
        if len(per_user) >= 2 and all(c == 1 for c in per_user):
            once.add(rt)
    return {
        "requests": len(requests),
        "routes": routes,
        "kinds": kinds,
        "first": first,
        "next": nexts,
        "once": once,
        "users": len(by_user) + single,
        "marked_requests": sum(len(seq) for seq in by_user.values()),
        "pace": median([(len(t) - 1) / (t[-1] - t[0]) for t in times.values() if len(t) >= 3 and t[-1] > t[0]]),
    }


# ---------------------------------------------------------------------------------------------
# Sampling error


def binomial_p(k, n, p):
    """Two-sided exact binomial test: the chance of an outcome no likelier than k successes
    in n trials of chance p."""
    if n == 0 or p <= 0 or p >= 1:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)

    def logpmf(i):
        return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq

    observed = logpmf(k) + 1e-9
    total = 0.0
    for i in range(n + 1):
        lv = logpmf(i)
        if lv <= observed:
            total += math.exp(lv)
    return min(1.0, total)


def compare_counts(a, b, what, exact_from=1, empty_ok=False):
    """Differences between two Counters of the same things seen by each tool.

    When each side has one kind only, seen at least `exact_from` times on each side (0: never
    compared so), the kinds must be equal. Otherwise each kind's count on Locust's side is
    tested (exact binomial, conditional on its count on both sides) against the share Locust's
    side has of the totals; a kind is a difference when that chance is below ALPHA. With
    `empty_ok`, a side that saw nothing at all is no evidence (what is compared happened on
    one side only, and that is compared elsewhere)."""
    notes = []
    na, nb = sum(a.values()), sum(b.values())
    if empty_ok and (na == 0 or nb == 0):
        return notes
    if exact_from and len(a) == 1 and len(b) == 1 and min(na, nb) >= exact_from:
        (ka,), (kb,) = a.keys(), b.keys()
        if ka != kb:
            notes.append(f"{what}: locust {short(ka)}, loadlab {short(kb)}")
        return notes
    if na == 0 or nb == 0:
        if na != nb:
            notes.append(f"{what}: locust {dict(a) or na}, loadlab {dict(b) or nb}")
        return notes
    share = na / (na + nb)
    for kind in sorted(set(a) | set(b)):
        ca, cb = a.get(kind, 0), b.get(kind, 0)
        p = binomial_p(ca, ca + cb, share)
        if p < ALPHA:
            notes.append(f"{what} {short(kind)}: locust {ca} of {na}, loadlab {cb} of {nb} (p={p:.1g})")
    return notes


def random_values(a, b):
    """True when each side sent many kinds and few of them are the other's: values a file
    draws at random (`random.choice(ascii_lowercase)` keys), which no blur can tell from data."""
    if len(a) < 5 or len(b) < 5:
        return False
    return len(set(a) & set(b)) < 0.2 * min(len(a), len(b))


def shapes_of(kinds):
    """The kinds with their string values blurred to `"<s>"` (keys kept): their shape."""
    shaped = collections.Counter()
    for kind, n in kinds.items():
        shaped[re.sub(r'(:\s*|\[\s*|,\s*)"(?:[^"\\]|\\.)*"(?=\s*[,}\]])', r'\1"<s>"', kind)] += n
    return shaped


def short(text, n=90):
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def compare_server(a, b):
    notes = compare_counts(a["routes"], b["routes"], "requests", exact_from=0)
    common = set(a["routes"]) & set(b["routes"])
    # What a route carried is usually the same every time (a body, a header): one kind on
    # each side is compared as it is from five requests on (fewer agree by chance too often
    # when a file picks at random).
    for kind in ("query", "cookie", "body", "headers"):
        for rt in sorted(common):
            ka, kb, what = a["kinds"][kind][rt], b["kinds"][kind][rt], kind
            if random_values(ka, kb):
                ka, kb, what = shapes_of(ka), shapes_of(kb), f"{kind} shape"
            notes += compare_counts(ka, kb, f"{rt} {what}", exact_from=5)
    # What follows a route is random unless a sequence fixes it: five on each side before a
    # single next is taken for a fixed order.
    notes += compare_counts(a["first"], b["first"], "first request of a user", exact_from=5, empty_ok=True)
    for rt in sorted(common):
        notes += compare_counts(a["next"].get(rt, collections.Counter()),
                                b["next"].get(rt, collections.Counter()), f"after {rt}, next",
                                exact_from=5, empty_ok=True)
    for rt in sorted((a["once"] ^ b["once"]) & common & set(a["first"]) & set(b["first"])):
        # Once per user means on_start only when the users did more than that.
        side, seen = ("locust", a) if rt in a["once"] else ("loadlab", b)
        if seen["users"] and seen["marked_requests"] >= 5 * seen["users"]:
            notes.append(f"{rt}: once per user only under {side}")
    if a["users"] != b["users"]:
        notes.append(f"users who sent requests: locust {a['users']}, loadlab {b['users']}")
    return notes


# ---------------------------------------------------------------------------------------------
# What each tool counted


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return None


def failure_core(text):
    """A failure message without the form each tool gives it: Locust writes the exception's
    repr (`HTTPError('404 Client Error: Not Found for url: /x')`, `CatchResponseError('no
    token')`), loadlab the message (`HTTPError 404`, `no token`); an HTTP error status is
    `HTTP 404` for both. A `rest()` block's failure lists the traceback's places: those inside
    each tool's own `locust` package (Locust's `user/users.py`, loadlab's
    `contrib/fasthttp.py`, where each installs it) are left out, the file's own kept."""
    text = text.strip()
    text = re.sub(r"[^\s,']*/locust/[\w/]+\.py:\d+ in \w+(, )?", "", text)
    m = re.fullmatch(r"\w+\((['\"])(.*)\1\)", text, re.S)
    if m:
        text = m.group(2)
    m = re.fullmatch(r"[A-Z]\w*(?:Error|Exception): (.*)", text, re.S)
    if m and not re.fullmatch(r"HTTPError:? \d{3}", text):
        text = m.group(1)
    text = text.strip("'\"")
    m = re.match(r"(\d{3}) (Client|Server) Error\b", text) or re.fullmatch(r"HTTPError:? (\d{3})", text)
    if m:
        return f"HTTP {m.group(1)}"
    return text


def exception_core(text, tool):
    """A task error's message: Locust writes `str(error)`, loadlab `Class.task: Type: message`."""
    if tool == "loadlab":
        text = re.sub(r"^[\w.]+\.\w+: \w+(: |$)", "", text)
    return text


def stats_of(prefix, tool):
    """Requests and failures per (type, name), failure messages per (type, name), and
    exception messages, from a tool's CSV files."""
    rows = read_csv(f"{prefix}_stats.csv")
    if rows is None:
        return None
    requests, failures = collections.Counter(), collections.Counter()
    for row in rows:
        if row.get("Name") == "Aggregated":
            continue
        key = f"{row.get('Type')} {blur(row.get('Name') or '')}"
        requests[key] += int(row.get("Request Count") or 0)
        failures[key] += int(row.get("Failure Count") or 0)
    messages = collections.defaultdict(collections.Counter)
    for row in read_csv(f"{prefix}_failures.csv") or []:
        key = f"{row.get('Method')} {blur(row.get('Name') or '')}"
        messages[key][blur(failure_core(row.get("Error") or ""))] += int(row.get("Occurrences") or 0)
    exceptions = collections.Counter()
    for row in read_csv(f"{prefix}_exceptions.csv") or []:
        exceptions[blur(exception_core(row.get("Message") or "", tool))] += int(row.get("Count") or 0)
    return {"requests": requests, "failures": failures, "messages": messages, "exceptions": exceptions}


def compare_stats(a, b):
    if (a is None or not a["requests"]) and (b is None or not b["requests"]):
        # neither counted a request (a file that did not start, on one side without a file)
        return []
    if a is None or b is None:
        return [f"statistics: locust {'none' if a is None else 'written'}, "
                f"loadlab {'none' if b is None else 'written'}"]
    notes = compare_counts(a["requests"], b["requests"], "stats entry", exact_from=0)
    for key in sorted(set(a["requests"]) & set(b["requests"])):
        fa, fb = a["failures"][key], b["failures"][key]
        ra, rb = a["requests"][key], b["requests"][key]
        # An entry that always or never fails on both sides, three times or more on each,
        # must do the same on the other; otherwise failures are tested as a share.
        fixed = fa in (0, ra) and fb in (0, rb) and min(ra, rb) >= 3
        if fixed and (fa == 0) != (fb == 0):
            notes.append(f"stats {key} failures: locust {fa} of {ra}, loadlab {fb} of {rb}")
        elif not fixed:
            p = binomial_p(fa, fa + fb, ra / (ra + rb))
            if p < ALPHA:
                notes.append(f"stats {key} failures: locust {fa} of {ra}, loadlab {fb} of {rb} (p={p:.1g})")
        if fa and fb:
            notes += compare_counts(a["messages"].get(key, collections.Counter()),
                                    b["messages"].get(key, collections.Counter()),
                                    f"failure message {key}", exact_from=3)
    # How often a task raised depends on how fast each tool loops, not on what the file does:
    # a message is a difference when one side raised it three times or more and the other never.
    for message in sorted(set(a["exceptions"]) ^ set(b["exceptions"])):
        ka, kb = a["exceptions"][message], b["exceptions"][message]
        if max(ka, kb) >= 3:
            notes.append(f"task error {short(message, 100)!r}: locust {ka}, loadlab {kb}")
    return notes


def log_of(path):
    try:
        return collections.Counter(blur(line.rstrip("\n")) for line in open(path) if line.strip())
    except OSError:
        return collections.Counter()


def compare_logs(a, b):
    if a == b:
        return []
    only_a, only_b = a - b, b - a
    return [f"$LOCUST_DIFF_LOG: locust only {short(dict(only_a), 120)}, loadlab only {short(dict(only_b), 120)}"]


# ---------------------------------------------------------------------------------------------
# Running the tools


def directive(path, name):
    """The text after `# NAME:` among a file's first five lines, or None."""
    with open(path, errors="replace") as f:
        for _, line in zip(range(5), f):
            if line.startswith(f"# {name}:"):
                return line[len(name) + 3:].strip()
    return None


def flag_value(flags, *names):
    """The integer a flag was given in `flags` (the last time), or None."""
    value = None
    for i, f in enumerate(flags[:-1]):
        if f in names:
            try:
                value = int(flags[i + 1])
            except ValueError:
                pass
    return value


def run_flags(path):
    """The flags a file's `# run:` line gives both tools."""
    return shlex.split(directive(path, "run") or "")


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None


def compare_rate(a, b):
    """For a file whose pace its waits set (`# diff: rate`): each user's requests a second,
    from its first request to its last (so the tools' start-up and ramp do not count), the
    median user of each side within 20 %."""
    if a is None or b is None:
        return [] if a == b else [f"requests a second per user: locust {a}, loadlab {b}"]
    if abs(a - b) / max(a, b) > 0.2:
        return [f"requests a second per user: locust {a:.1f}, loadlab {b:.1f} (a file paced by its waits: "
                "more than 20 % apart)"]
    return []


def given(flags, *names):
    return any(f in names or any(f.startswith(n + "=") for n in names if n.startswith("--")) for f in flags)


def command_flags(path, url, users, seconds):
    """Both tools' flags for `path`: the defaults, with the file's own in place of any
    default it gives."""
    flags = run_flags(path)
    out = ["--headless", "--only-summary"]
    if not given(flags, "-H", "--host"):
        out += ["-H", url]
    if not given(flags, "-u", "--users"):
        out += ["-u", str(users)]
    if not given(flags, "-r", "--spawn-rate"):
        out += ["-r", str(users)]
    if not given(flags, "-t", "--run-time"):
        out += ["-t", f"{seconds}s"]
    return out + [f.replace("http://127.0.0.1:9", url) for f in flags]


URL_HOST = re.compile(r"\bhttps?://(?:localhost|[A-Za-z0-9.-]+\.[A-Za-z]{2,}|\d+\.\d+\.\d+\.\d+)(?::\d+)?", re.I)


def prepared(path, url):
    """A copy of the file beside it with every absolute URL's scheme and host made the
    recording server's; None when the file has no such URL (it runs as it is)."""
    text = Path(path).read_text(errors="replace")
    new = URL_HOST.sub(url, text)
    if new == text:
        return None
    copy = Path(path).with_name(f"_diff_{Path(path).name}")
    copy.write_text(new)
    return copy


def run(cmd, cwd, env, limit):
    """Run `cmd` in its own session; past `limit` seconds stop its process group (TERM, then
    KILL) by the PID started here. Returns (exit code, last lines of its output)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            rc = 124
        out.seek(0)
        lines = out.read().decode("utf-8", "replace").splitlines()
    if rc == 124:
        lines.append(f"still running after {limit:.0f} s: stopped")
    return rc, lines


def error_line(lines):
    """The line of a tool's output that best says why it failed."""
    for line in reversed(lines):
        if re.search(r"Error|error:|does not cover|still running|Exception", line):
            return line.strip()
    return (lines[-1].strip() if lines else "")


def run_tool(name, exe, path, flags, url, tmp, python=None):
    prefix = str(Path(tmp) / name)
    log = Path(tmp) / f"{name}.log"
    env = {**os.environ, "LOCUST_DIFF_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1",
           "CORPUS_TARGET": url, "NO_PROXY": "127.0.0.1,localhost"}
    if python:
        env["LOADLAB_PYTHON"] = python
    if name == "locust":
        cmd = [exe, "-f", Path(path).name, *flags, "--csv", prefix]
    else:
        cmd = [exe, "locust", "-f", Path(path).name, *flags, "--csv", prefix]
    seconds = 2.0
    for i, f in enumerate(flags):
        if f in ("-t", "--run-time") and i + 1 < len(flags):
            seconds = timespan(flags[i + 1])
    rc, lines = run(cmd, Path(path).parent, env, seconds + GRACE)
    return rc, lines, stats_of(prefix, name), log_of(log)


def timespan(text):
    total = 0.0
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)([hms]?)", text):
        total += float(value) * {"h": 3600, "m": 60, "s": 1, "": 1}[unit]
    return total or 2.0


def dump(folder, path, runs):
    """Write each tool's requests (one JSON object a line, in arrival order) and output."""
    os.makedirs(folder, exist_ok=True)
    stem = f"{Path(path).parent.name}__{Path(path).stem}"
    for name, (seen, out) in runs.items():
        t0 = seen[0]["t"] if seen else 0
        with open(Path(folder) / f"{stem}.{name}.jsonl", "w") as f:
            for r in seen:
                f.write(json.dumps({**r, "t": round(r["t"] - t0, 4), "route": route(r),
                                    "body": r["body"].decode("utf-8", "replace")}) + "\n")
        Path(folder, f"{stem}.{name}.out").write_text("\n".join(out) + "\n")


def isolate():
    """Re-run this script in a network namespace with only loopback up (root and `unshare`
    needed); returns only when that is not possible."""
    if os.environ.get("LOCUST_DIFF_ISOLATED") or os.geteuid() != 0 or not shutil.which("unshare"):
        return
    if not shutil.which("ip"):
        return
    env = {**os.environ, "LOCUST_DIFF_ISOLATED": "1"}
    cmd = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
           sys.executable, *sys.argv]
    sys.exit(subprocess.call(cmd, env=env))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--loadlab", default=str(LOADLAB))
    ap.add_argument("--locust", default=str(LOCUST))
    ap.add_argument("--loadlab-python", metavar="PYTHON",
                    help="the Python loadlab's helpers run in ($LOADLAB_PYTHON), e.g. Locust's "
                         "virtualenv's, so a file's other imports (flask, requests) resolve alike")
    ap.add_argument("--no-isolate", action="store_true", help="do not run in a network namespace")
    ap.add_argument("--verbose", action="store_true", help="show each tool's last output lines")
    ap.add_argument("--dump", metavar="DIR", help="write what the server saw, per tool and file, as JSON lines here")
    args = ap.parse_args()
    for exe, hint in ((args.locust, "run bash bench/install-peers.sh"), (args.loadlab, "run cargo build -p loadlab")):
        if not Path(exe).exists() and not shutil.which(exe):
            sys.exit(f"no {exe}; {hint}")
    args.locust = str(Path(args.locust).resolve()) if Path(args.locust).exists() else args.locust
    args.loadlab = str(Path(args.loadlab).resolve()) if Path(args.loadlab).exists() else args.loadlab
    if args.loadlab_python:
        args.loadlab_python = str(Path(args.loadlab_python).absolute())
    if not args.no_isolate:
        isolate()
    recording = Recording()
    srv = server(recording)
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    differ = 0
    seconds = int(args.seconds) if float(args.seconds).is_integer() else args.seconds
    where = "a network namespace of loopback only" if os.environ.get("LOCUST_DIFF_ISOLATED") else "this machine's network"
    print(f"recording server {url}, in {where}; {args.users} users for {seconds} s unless a file says otherwise")
    print(f"{'file':52} {'locust':>7} {'loadlab':>7}  verdict")
    for path in args.files:
        path = str(Path(path).resolve())
        flags = command_flags(path, url, args.users, seconds)
        copy = prepared(path, url)
        target = str(copy) if copy else path
        try:
            with tempfile.TemporaryDirectory() as tmp:
                recording.take()
                a_rc, a_out, a_stats, a_log = run_tool("locust", args.locust, target, flags, url, tmp)
                time.sleep(0.2)
                a_seen = recording.take()
                a = summary(a_seen, flag_value(flags, "-u", "--users"))
                b_rc, b_out, b_stats, b_log = run_tool("loadlab", args.loadlab, target, flags, url, tmp,
                                                         args.loadlab_python)
                time.sleep(0.2)
                b_seen = recording.take()
                b = summary(b_seen, flag_value(flags, "-u", "--users"))
        finally:
            if copy:
                copy.unlink(missing_ok=True)
        if args.dump:
            dump(args.dump, path, {"locust": (a_seen, a_out), "loadlab": (b_seen, b_out)})
        notes, info = [], []
        if a_rc != b_rc:
            notes.append(f"locust exit {a_rc}: {short(error_line(a_out), 110)}")
            notes.append(f"loadlab exit {b_rc}: {short(error_line(b_out), 110)}")
        notes += compare_server(a, b)
        if a_stats is not None and not a_stats["requests"] and a["requests"]:
            # Locust leaves its stats file without rows when user code calls runner.quit().
            info.append("locust wrote no statistics rows: not compared")
        else:
            notes += compare_stats(a_stats, b_stats)
        notes += compare_logs(a_log, b_log)
        if "rate" in (directive(path, "diff") or "").split():
            notes += compare_rate(a["pace"], b["pace"])
        same = not notes
        differ += 0 if same else 1
        shown = os.path.relpath(path)
        shown = shown if len(shown) <= 52 else "…" + shown[-51:]
        verdict = "same" if same else "differs"
        if same and a_rc != 0:
            verdict += f" (both exit {a_rc})"
        print(f"{shown:52} {a['requests']:>7} {b['requests']:>7}  {verdict}", flush=True)
        for n in notes:
            print(f"    {n}")
        for n in info:
            print(f"    ({n})")
        if args.verbose:
            for name, out in (("locust", a_out), ("loadlab", b_out)):
                for line in out[-12:]:
                    print(f"    | {name}: {line}")
    srv.shutdown()
    print(f"\n{len(args.files) - differ} of {len(args.files)} files: the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
