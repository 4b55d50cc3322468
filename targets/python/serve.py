"""Serves app.py under gunicorn, as `loadlab serve --runtime python` starts it.

    serve.py --port P --host H --workers N --bbox-delay-ms MS --bbox-workers K [--async]

--workers N is gunicorn's sync workers (seed 001); --async switches to gevent workers, where
/delay and the black boxes no longer hold a worker. The first line on stdout says where it
listens, in the words `loadlab serve` uses.
"""

import argparse
import os
import sys

from gunicorn.app.base import BaseApplication

#: Longer than the longest wait an endpoint accepts (600 s), so gunicorn never kills a worker
#: that is doing what it was asked.
WORKER_TIMEOUT_S = 660


def parse_args(argv):
    p = argparse.ArgumentParser(prog="serve.py", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--bbox-delay-ms", type=int, default=1000)
    p.add_argument("--bbox-workers", type=int, default=3)
    p.add_argument("--async", dest="use_async", action="store_true", help="gevent workers")
    a = p.parse_args(argv)
    if a.workers < 1 or a.bbox_workers < 1 or a.bbox_delay_ms < 0 or not 0 <= a.port <= 65535:
        p.error("--workers and --bbox-workers must be at least 1, --bbox-delay-ms at least 0")
    return a


class Service(BaseApplication):
    """gunicorn running app.application with loadlab's settings."""

    def __init__(self, args):
        self.args = args
        super().__init__()

    def load_config(self):
        a = self.args
        host = f"[{a.host}]" if ":" in a.host else a.host
        kind = "gevent" if a.use_async else "sync"

        def when_ready(server):
            port = server.LISTENERS[0].sock.getsockname()[1]
            print(
                f"loadlab serve: listening on http://{host}:{port} (pid {os.getpid()}, runtime python "
                f"{sys.version.split()[0]}, gunicorn {a.workers} {kind} worker(s)); Ctrl-C stops",
                flush=True,
            )

        settings = {
            "bind": f"{host}:{a.port}",
            "workers": a.workers,
            "worker_class": kind,
            "timeout": WORKER_TIMEOUT_S,
            "graceful_timeout": 2,
            # gevent workers keep idle connections longer than nginx's upstream pool (60 s),
            # so nginx never reuses one being closed (sync workers close after each response).
            "keepalive": 65,
            "backlog": 4096,
            "when_ready": when_ready,
            "loglevel": "warning",
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self):
        from app import application

        return application


def main():
    args = parse_args(sys.argv[1:])
    os.environ["LOADLAB_BBOX_DELAY_MS"] = str(args.bbox_delay_ms)
    os.environ["LOADLAB_BBOX_WORKERS"] = str(args.bbox_workers)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    Service(args).run()


if __name__ == "__main__":
    main()
