"""loadlab's reference service (DESIGN §4.3) as a WSGI app, served by gunicorn (see serve.py).

It answers every endpoint as the Rust service in crates/service does (same statuses, one-line
400s, JSON shapes), with the costs a gunicorn worker really pays: under sync workers every
request holds its worker (so /delay does too: that is what a sync worker is); under gevent
workers /delay and the black boxes yield while /block, /calc and /heavy hold the worker.
"""

import json
import math
import os
import platform
import re
import secrets
import sys
import threading
import time
from urllib.parse import parse_qs, unquote

#: Longest wait an endpoint accepts, so a typo cannot hold a connection for days.
MAX_WAIT_MS = 600_000
#: Most iterations /calc accepts (about a minute of CPU).
MAX_CALC_N = 2_000_000_000
#: Most tokens kept at once; see login().
MAX_TOKENS = 1_000_000

BBOX_DELAY_S = int(os.environ.get("LOADLAB_BBOX_DELAY_MS", "1000")) / 1000.0
BBOX_WORKERS = max(1, int(os.environ.get("LOADLAB_BBOX_WORKERS", "3")))

STARTED = time.monotonic()
# Under gevent workers, threading is patched before this module is imported, so these are
# gevent's: a queue of greenlets at /bbox/sync, a lock that never blocks the loop.
BBOX_SYNC = threading.BoundedSemaphore(BBOX_WORKERS)
TICKETS_LOCK = threading.Lock()
TICKETS = {}
TOKENS_LOCK = threading.Lock()
TOKENS = {}

NOT_FOUND_HINT = (
    "try /ping, /delay?ms=N, /block?ms=N, /calc?n=N, /heavy?ms=N, /leak?kb=N, /info, /bbox/async, "
    "/bbox/sync, /turno/NAME, /site/PAGE, /static/FILE, POST /login, /account, /health"
)

SITE_CSS = b"""/* loadlab reference site: a fixed stylesheet, the same for every page. */
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; color: #222; }
h1 { font-size: 1.6rem; border-bottom: 1px solid #ccc; padding-bottom: .3rem; }
nav a { margin-right: 1rem; color: #0645ad; text-decoration: none; }
nav a:hover { text-decoration: underline; }
img { display: inline-block; width: 40px; height: 40px; image-rendering: pixelated; }
p { line-height: 1.5; }
"""

APP_JS = b"""// loadlab reference site: a fixed script, the same for every page. It requests nothing, so a
// page costs exactly its HTML and its four static resources.
document.addEventListener("DOMContentLoaded", function () {
  var links = document.querySelectorAll("nav a");
  for (var i = 0; i < links.length; i++) {
    if (links[i].getAttribute("href") === location.pathname) links[i].className = "here";
  }
  document.body.setAttribute("data-loaded", String(Date.now()));
});
"""

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "..", "..", "crates", "service", "src", "assets", "image.png"), "rb") as f:
    #: The Rust service's 10 × 10 PNG.
    IMAGE_PNG = f.read()

PAGE_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{page} · loadlab</title>
<link rel="stylesheet" href="/static/site.css">
<script src="/static/app.js"></script>
</head>
<body>
<h1>{page}</h1>
<img src="/static/logo.png" alt="logo">
<img src="/static/{page}.png" alt="{page} picture">
<nav><a href="/site/home">home</a> <a href="/site/news">news</a> <a href="/site/about">about</a></nav>
<p>This is the page {page} of loadlab's reference site. Every page has the same stylesheet,
script and logo, and a picture of its own.</p>
</body>
</html>
"""

LOGIN_BODY = '{"user": "NAME", "password": "..."}'
NAME = re.compile(r"[a-z0-9-]{1,32}")
WHOLE = re.compile(r"\+?[0-9]+")


def blocking_sleep(seconds):
    """A sleep that holds the worker even under gevent (the unpatched time.sleep)."""
    if "gevent.monkey" in sys.modules:
        from gevent import monkey

        if monkey.is_module_patched("time"):
            return monkey.get_original("time", "sleep")(seconds)
    return time.sleep(seconds)


def busy_wait(ms):
    """Spins until this thread has used ms milliseconds of CPU, holding the worker: the same
    CPU per request however many processes share the core (ms of wall time on a core of its
    own)."""
    end = time.thread_time() + ms / 1000.0
    spins = 0
    while time.thread_time() < end:
        spins += 1
    return spins


class BadRequest(Exception):
    """A query parameter that cannot be used; answered as a 400 with its reason."""


class QueryRejection(Exception):
    """A query the Rust service's framework refuses before its handler runs (no newline)."""


#: The query parameters whose repetition is refused (the Rust handlers' `Params`).
PARAMS = ("ms", "n", "from", "log", "every_ms", "for_ms", "kb")


def quoted(value):
    """Rust's {:?} of a string, close enough for the values a query carries."""
    return json.dumps(value, ensure_ascii=False)


def number(name, value, default, maximum):
    """A whole number up to maximum, or default when absent (None: required)."""
    if value is None:
        if default is None:
            raise BadRequest(f"missing query parameter {name}")
        return default
    if WHOLE.fullmatch(value):
        n = int(value)
        if n <= maximum:
            return n
    raise BadRequest(f"{name} must be a whole number from 0 to {maximum}, got {quoted(value)}")


def millis(name, value, default=None):
    """Milliseconds up to MAX_WAIT_MS, or default when absent."""
    return number(name, value, default, MAX_WAIT_MS)


PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def rss_kb():
    """This process's resident memory in KB (the second field of /proc/self/statm, in pages)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return None


def cpus():
    """The CPUs this process may run on, as Rust's available_parallelism counts them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Request:
    """What a handler reads: the raw path's segments, the query, the headers and the body."""

    def __init__(self, environ):
        self.environ = environ
        raw = environ.get("RAW_URI") or environ.get("PATH_INFO", "/")
        self.raw_path = raw.split("?", 1)[0]
        self.method = environ.get("REQUEST_METHOD", "GET")
        self._query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)

    def param(self, name):
        values = self._query.get(name)
        return values[0] if values else None

    def check(self, names):
        """Refuses a repeated parameter among names, in the Rust service's framework's words."""
        for name in names:
            if len(self._query.get(name, ())) > 1:
                raise QueryRejection(f"Failed to deserialize query string: duplicate field `{name}`")

    def body(self):
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        return self.environ["wsgi.input"].read(length) if length > 0 else b""


def text(status, body, headers=()):
    """A plain-text response."""
    return status, [("Content-Type", "text/plain; charset=utf-8"), *headers], body.encode()


def to_json(value, status="200 OK"):
    """Compact JSON with sorted keys, as serde_json writes it."""
    body = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return status, [("Content-Type", "application/json")], body.encode()


def bad_request(reason):
    """A 400 with a one-line reason."""
    return text("400 Bad Request", reason + "\n")


def ping(req):
    """200 pong, no work."""
    return text("200 OK", "pong")


def health(req):
    """Readiness."""
    return text("200 OK", "ok")


def delay(req):
    """Waits ms milliseconds (yields under gevent; a sync worker is held, as it really is)."""
    time.sleep(millis("ms", req.param("ms")) / 1000.0)
    return text("200 OK", "done")


def block(req):
    """Holds the worker ms milliseconds with a blocking sleep."""
    blocking_sleep(millis("ms", req.param("ms")) / 1000.0)
    return text("200 OK", "done")


def calc(req):
    """CPU work: the sum of sin(i) for n values of i from `from` (default 0), printed as Rust
    prints a float (seed 001 summed over 5 to 6 million, where runtimes' sin differ in cost)."""
    n = number("n", req.param("n"), None, MAX_CALC_N)
    start = number("from", req.param("from"), 0, MAX_CALC_N)
    total = 0.0
    sin = math.sin
    for i in range(start, start + n):
        total += sin(i)
    out = repr(total)
    return text("200 OK", out[:-2] if out.endswith(".0") else out)


def heavy(req):
    """Busy-waits ms milliseconds on the CPU."""
    busy_wait(millis("ms", req.param("ms")))
    return text("200 OK", "done")


#: Most KB one /leak request keeps (1 GB).
MAX_LEAK_KB = 1 << 20

#: What /leak kept, for the process's life.
LEAKED = []


def leak(req):
    """Keeps kb KB for the process's life, every byte written so it is resident."""
    kb = number("kb", req.param("kb"), None, MAX_LEAK_KB)
    LEAKED.append(b"\x5a" * (kb * 1024))
    held = sum(len(b) for b in LEAKED) // 1024
    return text("200 OK", f"kept {kb} KB; {held} KB held\n")


def info(req):
    """Process and OS information as JSON; with log=1 also printed to stdout (seed 004)."""
    log = req.param("log")
    if log in (None, "0", "false"):
        printed = False
    elif log in ("1", "true"):
        printed = True
    else:
        return bad_request(f"log must be 0 or 1, got {quoted(log)}")
    body = {
        "pid": os.getpid(),
        "hostname": platform.node(),
        "os": sys.platform,
        "arch": platform.machine(),
        "cpus": cpus(),
        "uptime_s": time.monotonic() - STARTED,
        "rss_kb": rss_kb(),
        "loadavg": list(os.getloadavg()),
        "runtime": "python",
        "version": platform.python_version(),
        "argv": sys.argv,
        "exec_path": sys.executable,
        "cwd": os.getcwd(),
    }
    if printed:
        # print() of the dict on the hot path, as a Python service would log it (seed 004).
        print(body, flush=True)
    return to_json(body)


def stall(req):
    """Answers at once except during the last for_ms of every every_ms period."""
    every = number("every_ms", req.param("every_ms"), 2000, MAX_WAIT_MS)
    if every == 0:
        return bad_request("every_ms must be at least 1")
    freeze = number("for_ms", req.param("for_ms"), 1000, MAX_WAIT_MS)
    if freeze > every:
        return bad_request("for_ms must not exceed every_ms")
    phase = int((time.monotonic() - STARTED) * 1000) % every
    if phase >= every - freeze:
        time.sleep((every - phase) / 1000.0)
    return text("200 OK", "ok")


def bbox_async(req):
    """Black box, asynchronous: a fixed delay, any number at once."""
    time.sleep(BBOX_DELAY_S)
    return text("200 OK", "ok")


def bbox_sync(req):
    """Black box, synchronous: a fixed delay, BBOX_WORKERS at once per process; the rest queue."""
    with BBOX_SYNC:
        time.sleep(BBOX_DELAY_S)
    return text("200 OK", "ok")


def turno(req, name):
    """The next ticket of queue name, from 1, atomically in this process."""
    if not name or len(name.encode()) > 128:
        return bad_request("the queue name must have 1 to 128 characters")
    with TICKETS_LOCK:
        n = TICKETS.get(name, 0) + 1
        TICKETS[name] = n
    return to_json({"turno": n})


def site(req, page):
    """An HTML page linking 4 static resources, after busy-waiting work_ms, then sleeping
    wait_ms on the worker (a blocking wait, as on a database)."""
    if not NAME.fullmatch(page):
        return text(
            "404 Not Found",
            f"no page {quoted(page)}; a page name is 1 to 32 of a-z, 0-9 and -\n",
        )
    busy_wait(millis("work_ms", req.param("work_ms"), 0))
    blocking_sleep(millis("wait_ms", req.param("wait_ms"), 0) / 1000.0)
    return "200 OK", [("Content-Type", "text/html; charset=utf-8")], PAGE_HTML.format(page=page).encode()


def static_file(req, file):
    """A fixed .css, .js or .png body, cacheable for an hour."""
    reason = "a static file is 1 to 32 of a-z, 0-9 and - followed by .css, .js or .png"
    name, dot, ext = file.rpartition(".")
    bodies = {"css": ("text/css", SITE_CSS), "js": ("text/javascript", APP_JS), "png": ("image/png", IMAGE_PNG)}
    if not dot or not NAME.fullmatch(name) or ext not in bodies:
        return text("404 Not Found", f"no static file {quoted(file)}; {reason}\n")
    content_type, body = bodies[ext]
    return "200 OK", [("Content-Type", content_type), ("Cache-Control", "max-age=3600")], body


def login(req):
    """Issues a random token for {"user": NAME} and remembers it."""
    try:
        value = json.loads(req.body().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return bad_request(f"the body must be JSON like {LOGIN_BODY}: {e}")
    if not isinstance(value, dict):
        return bad_request(f"the body must be a JSON object like {LOGIN_BODY}")
    if "user" not in value:
        return bad_request(f'missing "user"; send {LOGIN_BODY}')
    user = value["user"]
    if not isinstance(user, str):
        return bad_request('"user" must be a string')
    if not user or len(user.encode()) > 128:
        return bad_request("the user must have 1 to 128 characters")
    with TOKENS_LOCK:
        # Rather than grow without bound, forget every token once a million are held.
        if len(TOKENS) >= MAX_TOKENS:
            TOKENS.clear()
        token = secrets.token_hex(16)
        while token in TOKENS:
            token = secrets.token_hex(16)
        TOKENS[token] = user
    return to_json({"user": user, "token": token})


def account(req):
    """{"user": NAME} for a Bearer token issued by login, else 401."""
    def unauthorized(reason):
        return text("401 Unauthorized", reason + "\n", [("WWW-Authenticate", "Bearer")])

    header = req.environ.get("HTTP_AUTHORIZATION")
    if header is None:
        return unauthorized("missing Authorization header; log in with POST /login")
    scheme, space, token = header.partition(" ")
    if not space or scheme.lower() != "bearer":
        return unauthorized("the Authorization header must be Bearer TOKEN")
    with TOKENS_LOCK:
        user = TOKENS.get(token.strip())
    if user is None:
        return unauthorized("unknown token; log in with POST /login")
    return to_json({"user": user})


#: Exact paths: (method, handler).
ROUTES = {
    "/ping": ("GET", ping),
    "/health": ("GET", health),
    "/delay": ("GET", delay),
    "/block": ("GET", block),
    "/calc": ("GET", calc),
    "/heavy": ("GET", heavy),
    "/leak": ("GET", leak),
    "/info": ("GET", info),
    "/stall": ("GET", stall),
    "/bbox/async": ("GET", bbox_async),
    "/bbox/sync": ("GET", bbox_sync),
    "/login": ("POST", login),
    "/account": ("GET", account),
}

#: Handlers that read a query, and its parameters.
QUERIES = {delay: PARAMS, block: PARAMS, calc: PARAMS, heavy: PARAMS, leak: PARAMS, info: PARAMS, stall: PARAMS, site: ("work_ms", "wait_ms")}

#: One-segment paths: prefix → handler of the segment.
PREFIXES = {"/turno/": turno, "/site/": site, "/static/": static_file}


def route(req):
    """The response to req as (status, headers, body)."""
    path = req.raw_path
    method = "GET" if req.method == "HEAD" else req.method
    found = ROUTES.get(path)
    if found:
        allowed, handler = found
        args = ()
    else:
        allowed, handler, args = None, None, ()
        for prefix, fn in PREFIXES.items():
            rest = path[len(prefix) :]
            if path.startswith(prefix) and rest and "/" not in rest:
                allowed, handler, args = "GET", fn, (unquote(rest),)
                break
    if handler is None:
        return text("404 Not Found", f"no endpoint {path}; {NOT_FOUND_HINT}\n")
    if method != allowed:
        allow = "POST" if allowed == "POST" else "GET,HEAD"
        return "405 Method Not Allowed", [("Allow", allow)], b""
    try:
        req.check(QUERIES.get(handler, ()))
        return handler(req, *args)
    except BadRequest as e:
        return bad_request(str(e))
    except QueryRejection as e:
        return text("400 Bad Request", str(e))


def application(environ, start_response):
    """The WSGI entry point."""
    req = Request(environ)
    parent = traced_parent(environ) if OTLP_TRACES else None
    start_ns, t0 = time.time_ns(), time.perf_counter_ns()
    status, headers, body = route(req)
    if parent:
        record_server_span(parent, req, status, start_ns, time.perf_counter_ns() - t0)
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [body]


# ---- traces ---------------------------------------------------------------------------------
# A request with a sampled W3C traceparent gets a server span under the caller's span, sent as
# OTLP/HTTP JSON to LOADLAB_OTLP_TRACES (a whole .../v1/traces URL, which `loadlab serve
# --otlp` sets) in batches every 200 ms from a thread of each worker's own. Written by hand, not
# with the OpenTelemetry SDK, so the service's pinned dependencies stay gunicorn (and gevent).

OTLP_TRACES = os.environ.get("LOADLAB_OTLP_TRACES")
TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_spans = []
_spans_lock = threading.Lock()
_exporter_pid = None


def traced_parent(environ):
    """(trace ID, parent span ID) of a sampled, well-formed traceparent; None otherwise."""
    m = TRACEPARENT.match(environ.get("HTTP_TRACEPARENT", ""))
    if not m or m[1] == "ff" or not int(m[4], 16) & 1 or not int(m[2], 16) or not int(m[3], 16):
        return None
    return m[2], m[3]


def route_of(path):
    """The route a path matched, as the span names it (`/turno/{name}`)."""
    if path in ROUTES:
        return path
    for prefix in PREFIXES:
        if path.startswith(prefix):
            return prefix + "{name}"
    return path


def record_server_span(parent, req, status, start_ns, took_ns):
    """Queues the server span of a traced request; starts this worker's exporter if need be."""
    global _exporter_pid
    code = int(status.split(" ", 1)[0])
    route = route_of(req.raw_path)
    span = {
        "traceId": parent[0],
        "spanId": secrets.token_hex(8),
        "parentSpanId": parent[1],
        "name": f"{req.method} {route}",
        "kind": 2,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + took_ns),
        "attributes": [
            {"key": "http.request.method", "value": {"stringValue": req.method}},
            {"key": "http.route", "value": {"stringValue": route}},
            {"key": "http.response.status_code", "value": {"intValue": str(code)}},
        ],
        "status": {"code": 2} if code >= 500 else {},
    }
    with _spans_lock:
        _spans.append(span)
        # gunicorn forks its workers after importing this module: each starts its own thread.
        if _exporter_pid != os.getpid():
            _exporter_pid = os.getpid()
            threading.Thread(target=export_spans, name="loadlab-traces", daemon=True).start()


def export_spans():
    """Posts the queued spans every 200 ms; the first failure is said on stderr."""
    import urllib.request

    service = os.environ.get("OTEL_SERVICE_NAME", "loadlab-serve-python")
    failed = 0
    while True:
        time.sleep(0.2)
        with _spans_lock:
            batch = _spans[:]
            del _spans[:]
        if not batch:
            continue
        body = json.dumps({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeSpans": [{"scope": {"name": "loadlab-serve-python"}, "spans": batch}],
        }]}).encode()
        request = urllib.request.Request(OTLP_TRACES, data=body, headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=2).read()
        except Exception as e:  # a collector that is down costs a warning, never a request
            if failed == 0:
                print(f"warning: cannot export spans ({OTLP_TRACES}: {e}); the service goes on", file=sys.stderr)
            failed += 1
