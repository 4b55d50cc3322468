#!/usr/bin/env python3
"""Runs Artillery scripts with Artillery itself and with loadlab against one recording server on
127.0.0.1, and compares what the server saw: requests by method and path, the cookies and
bodies they carried, and the connections they came on.

Each script is copied beside itself (so its processor, payload and files resolve as they
would) with `config.target` (and its environments' targets) set to the recording server and
its phases replaced by `--users` arrivals in one second; the copy is removed afterwards. A
script in JSON (`.json`) is copied as JSON, so both tools read it as the JSON it is. A
corpus script's `# run:` flags (`-e`, `-v`, `--overrides`, `--payload`, `--dotenv`,
`--scenario-name`, `--solo`, `--target`, `--config`: the same long names in both tools) go to
both, with `CORPUS_TARGET` and `CORPUS_PAGE` in their environment. The server answers every
request 200 with a small JSON body (`{"id": 1, "token": "t", ...}`), or as the path asks:
`/redirect-to?url=/x` redirects, `/set-cookie?k=v` sets a cookie. Scripts whose first
request needs a particular answer (a real service's data) differ on both sides alike.

Usage: python3 bench/artillery-diff.py SCRIPT [SCRIPT ...] [--users 3]
       [--loadlab target/release/loadlab] [--artillery bench/tools/node/node_modules/.bin/artillery]
Artillery 2.0.34 comes from bench/install-peers.sh; PyYAML from python3-yaml. Prints one row
per script and the differences; exits 1 when any script differs.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

ROOT = Path(__file__).resolve().parent.parent
ARTILLERY = ROOT / "bench" / "tools" / "node" / "node_modules" / ".bin" / "artillery"
BODY = json.dumps({"id": 1, "token": "t", "name": "n", "items": [{"id": 1}], "data": {"id": 1}})


class Recording:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []

    def take(self):
        with self.lock:
            taken, self.requests = self.requests, []
        return taken


def server(recording):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with recording.lock:
                recording.requests.append({
                    "method": self.command,
                    "path": self.path,
                    "cookie": self.headers.get("Cookie"),
                    "body": body.decode("utf-8", "replace"),
                    "conn": self.client_address[1],
                })
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            status, extra = 200, []
            if url.path == "/redirect-to" and "url" in query:
                status, extra = 302, [("Location", query["url"][0])]
            elif url.path == "/set-cookie":
                extra = [("Set-Cookie", f"{k}={v[0]}; Path=/") for k, v in query.items()]
            data = BODY.encode()
            self.send_response(status)
            for k, v in extra:
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    s = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def route(path):
    """A request's path with the values of random or per-user parts blurred: digits and long
    hex or alphanumeric runs, so both tools' `{{ $randomNumber }}` and ids compare."""
    p = urlsplit(path).path
    p = re.sub(r"[0-9a-fA-F-]{16,}", "<id>", p)
    return re.sub(r"\d+", "<n>", p)


def summary(requests):
    return {
        "requests": len(requests),
        "routes": collections.Counter((r["method"], route(r["path"])) for r in requests),
        "with_cookie": sum(1 for r in requests if r["cookie"]),
        "with_body": sum(1 for r in requests if r["body"]),
        "connections": len({r["conn"] for r in requests}),
    }


# What a corpus script's `# run:` flags and templates read from the environment.
CORPUS_ENV = {"CORPUS_PAGE": "ci"}


def flags_of(script, port):
    """The flags a script's `# run:` line gives both tools (loadlab's long flags are
    Artillery's names), with the corpus's placeholder target made the recording server."""
    for line in Path(script).read_text().splitlines():
        if line.startswith("# run: "):
            return line[len("# run: "):].replace("http://127.0.0.1:9", f"http://127.0.0.1:{port}").split()
    return []


def prepared(script, port, users):
    text = Path(script).read_text().replace("http://127.0.0.1:9", f"http://127.0.0.1:{port}")
    is_json = Path(script).suffix.lower() == ".json"
    try:
        doc = json.loads(text) if is_json else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError):
        # PyYAML reads YAML 1.1 (`{ url: /a?b=1 }` fails there); such a script is skipped.
        return None
    if not isinstance(doc, dict) or "scenarios" not in doc:
        return None
    flags = flags_of(script, port)
    config = doc.get("config")
    if config is not None:
        # The script's own phases and target give way to the check's, unless its flags are
        # what it is about (--overrides, --solo, --target, -e, --config).
        config["target"] = f"http://127.0.0.1:{port}"
        config["phases"] = [{"duration": 1, "arrivalCount": users}]
        if "-e" not in flags:
            config.pop("environments", None)
        for env in (config.get("environments") or {}).values():
            if isinstance(env, dict):
                env.pop("phases", None)
                env["target"] = f"http://127.0.0.1:{port}"
    elif "--config" not in flags:
        return None
    # Its folder absolute (each tool runs there, from wherever this runs); each tool is given
    # the copy's bare name, as users name a script in its folder: Artillery's `{{ $dirname }}`
    # is that folder as given, and a payload path built on it breaks on an absolute one.
    copy = Path(script).resolve().with_name(f".diff-{Path(script).name}")
    copy.write_text(json.dumps(doc, indent=2) + "\n" if is_json else yaml.safe_dump(doc, sort_keys=False))
    return copy


def run(cmd, cwd, port):
    env = {**os.environ, **CORPUS_ENV, "ARTILLERY_DISABLE_TELEMETRY": "true",
           "CORPUS_TARGET": f"http://127.0.0.1:{port}"}
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=180, env=env)
    except subprocess.TimeoutExpired:
        # A script whose users loop for ever (a `loop` without `count`) is stopped here.
        return 124, ["still running after 180 s: stopped"]
    return out.returncode, (out.stderr or out.stdout).strip().splitlines()[-1:] or [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scripts", nargs="+")
    ap.add_argument("--users", type=int, default=3)
    ap.add_argument("--loadlab", default=str(ROOT / "target" / "release" / "loadlab"))
    ap.add_argument("--artillery", default=str(ARTILLERY))
    args = ap.parse_args()
    # The tools run in each script's folder: a path to them holds from there too.
    for tool in ("loadlab", "artillery"):
        given = getattr(args, tool)
        if os.sep in given:
            setattr(args, tool, str(Path(given).resolve()))
    if not Path(args.artillery).exists() and not shutil.which(args.artillery):
        sys.exit(f"no artillery at {args.artillery}; run bash bench/install-peers.sh")
    recording = Recording()
    srv = server(recording)
    port = srv.server_address[1]
    differ = 0
    print(f"{'script':48} {'artillery':>9} {'loadlab':>8}  verdict")
    for script in args.scripts:
        copy = prepared(script, port, args.users)
        if copy is None:
            print(f"{script:48} {'-':>9} {'-':>8}  skipped: not a complete script PyYAML (or JSON) reads")
            continue
        try:
            recording.take()
            flags = flags_of(script, port)
            a_rc, a_err = run([args.artillery, "run", "--quiet", *flags, copy.name], copy.parent, port)
            a = summary(recording.take())
            with tempfile.TemporaryDirectory() as tmp:
                l_rc, l_err = run([args.loadlab, "run", *flags, copy.name, "--json",
                                   str(Path(tmp) / "s.json")], copy.parent, port)
            b = summary(recording.take())
        finally:
            copy.unlink(missing_ok=True)
        notes = []
        # The same exit code is agreement (the expect plugin's 21 on failed checks).
        if a_rc != l_rc:
            notes.append(f"artillery exit {a_rc}: {a_err[0][:80]}")
            notes.append(f"loadlab exit {l_rc}: {l_err[0][:80]}")
        for key in ["routes", "with_cookie", "with_body", "connections"]:
            if a[key] != b[key]:
                if key == "routes":
                    only_a = a[key] - b[key]
                    only_b = b[key] - a[key]
                    notes.append(f"routes: artillery only {dict(only_a)}, loadlab only {dict(only_b)}")
                else:
                    notes.append(f"{key}: artillery {a[key]}, loadlab {b[key]}")
        same = not notes
        differ += 0 if same else 1
        name = script if len(script) <= 48 else "…" + script[-47:]
        verdict = "same" if same else "differs"
        if same and a_rc != 0:
            verdict += f" (both exit {a_rc})"
        print(f"{name:48} {a['requests']:>9} {b['requests']:>8}  {verdict}")
        for n in notes:
            print(f"    {n}")
    srv.shutdown()
    print(f"\n{len(args.scripts) - differ} of {len(args.scripts)} scripts: the same requests")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
