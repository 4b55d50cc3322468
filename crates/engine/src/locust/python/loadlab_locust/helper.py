"""Entry point of a loadlab Locust helper: `python -u -m loadlab_locust.helper`.

Reads `init` from the socket on file descriptor 3, imports the locustfile with loadlab's
`locust` package, answers `ready` (or `failed`), then runs users as loadlab asks until
`stop` or end of file. The contract is PROTOCOL.md, beside the `python` directory that
holds this package.
"""

import json
import os
import signal
import socket
import sys
import traceback

SHIM_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "locust")
KILL_WAIT = 10.0


def _socket_fd():
    """The socket's file descriptor: 3, or LOADLAB_LOCUST_FD when set."""
    try:
        return int(os.environ.get("LOADLAB_LOCUST_FD") or 3)
    except ValueError:
        return 3


def _fail_without_gevent(error):
    """Report `failed` on a plain socket: gevent itself is missing."""
    sock = socket.socket(fileno=_socket_fd())
    message = f"loadlab's Locust helper needs gevent in this Python ({sys.executable}): {error}"
    sock.sendall((json.dumps({"op": "failed", "error": message}) + "\n").encode())
    sock.close()
    sys.exit(1)


def _patch():
    """Make the standard library cooperative, as Locust does before importing a locustfile."""
    try:
        from gevent import monkey
    except ImportError as missing:
        _fail_without_gevent(missing)
    monkey.patch_all()


def check_shim():
    """None when `import locust` gives loadlab's shim, else the reason it does not."""
    try:
        import locust
    except Exception:
        return "loadlab's locust package cannot be imported:\n" + traceback.format_exc()
    where = os.path.dirname(os.path.abspath(getattr(locust, "__file__", "") or ""))
    if os.path.realpath(where) != os.path.realpath(SHIM_DIR):
        return (
            f"`import locust` found {where}, not loadlab's locust package in {SHIM_DIR}; "
            "that directory must come first on PYTHONPATH"
        )
    return None


class Helper:
    """One helper process: the run's environment, its users and its answers to loadlab."""

    def __init__(self, engine, init):
        self.engine = engine
        self.init = init
        self.helper = int(init.get("helper") or 0)
        self.helpers = int(init.get("helpers") or 1)
        self.environment = None
        self.runner = None
        self.swarm = None
        self.shape = None
        self.stopping = False

    def setup(self):
        """Import the file, build the environment, fire init (and test_start in helper 0);
        returns the `ready` message. Raises loader.LoadError when the file cannot run."""
        import random

        import locust
        from locust.argument_parser import LocustArgumentParser
        from locust.env import Environment, ParsedOptions
        from locust.runners import LocalRunner

        from . import loader
        from .swarm import Swarm

        init = self.init
        seed = init.get("seed")
        if seed is not None:
            random.seed(f"{seed}:{self.helper}")
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        paths = loader.locustfile_paths(init.get("file") or "")
        modules = [loader.import_locustfile(p) for p in paths]
        available, shapes = loader.collect(modules)
        host = init.get("host") or None
        describing = bool(init.get("describe"))
        parser = LocustArgumentParser()
        locust.events.init_command_line_parser.fire(parser=parser)
        try:
            # The file's own options given on the command line; the other words there are
            # user class names, as Locust's parser leaves them.
            given, words = parser.parse_given(init.get("file_args") or [])
        except ValueError as error:
            raise loader.LoadError(str(error)) from None
        classes = loader.select_classes(
            available,
            list(init.get("classes") or []) + words,
            # A run gives the classes the environment's host once `test_start` has fired, as
            # Locust's runner does: an `init` or `test_start` listener may still change it.
            host if describing else None,
            # Tasks are filtered by tags once `test_start` has fired, from what
            # `parsed_options` holds then, as Locust's runner does.
            init.get("tags") if describing else None,
            init.get("exclude_tags") if describing else None,
            require_host=False,
        )
        options = dict(init.get("options") or {})
        options.update(given)
        if words:
            options["user_classes"] = list(options.get("user_classes") or []) + words
        options.update(parser.values(options))
        aliases = {
            "num_users": options.get("users"),
            "host": host,
            "locustfile": init.get("file"),
            "tags": init.get("tags"),
            "exclude_tags": init.get("exclude_tags"),
            "run_time": init.get("run_time"),
            "iterations": init.get("iterations"),
            "headless": True,
        }
        for key, value in aliases.items():
            options.setdefault(key, value)
        parsed = ParsedOptions(options)
        self.shape = shapes[0]() if shapes else None
        if self.shape is not None:
            # A shape's users run in one helper, whatever the command line asked.
            self.helpers = 1
        env = Environment(
            user_classes=classes,
            shape_class=self.shape,
            # As Locust's: the environment's own tags are unset, the command line's are in
            # `parsed_options`.
            tags=init.get("tags") if describing else None,
            exclude_tags=init.get("exclude_tags") if describing else None,
            locustfile=os.path.basename(paths[0]),
            events=locust.events,
            host=host,
            parsed_options=parsed,
            parsed_locustfiles=paths,
            available_user_classes=available,
            available_shape_classes={type(self.shape).__name__: self.shape} if self.shape else {},
            available_user_tasks={name: cls.tasks for name, cls in available.items()},
        )
        runner = LocalRunner(env, worker_index=self.helper, worker_count=self.helpers)
        env.runner = runner
        try:
            runner.target_user_count = int(options.get("users") or 0)
        except (TypeError, ValueError):
            pass
        if self.shape is not None:
            self.shape.runner = runner
        if init.get("iterations") is not None:
            runner._limit_iterations(int(init["iterations"]))
        self.environment = env
        self.runner = runner
        self.swarm = Swarm(env, runner, classes, self.helper, self.helpers, self.engine)
        ready = {"op": "ready", "shape": self.shape is not None}
        if not describing:
            ready.update(self._start(env, runner, classes, loader))
        ready["classes"] = [loader.describe_class(c) for c in classes]
        ready["shape_name"] = type(self.shape).__name__ if self.shape is not None else None
        return ready

    def _start(self, env, runner, classes, loader):
        """Fire `init` (and `test_start` in helper 0), reading the options as Locust does in
        between; give the classes the environment's host. Returns what `ready` adds: the
        run's settings and the options the other helpers' users see (helper 0's), as Locust's
        master decides them for its workers."""
        from locust import event

        from . import options

        raised = event.listener_errors
        env.events.init.fire(environment=env, runner=runner, web_ui=None)
        if event.listener_errors > raised:
            # Locust treats an error in an init listener as fatal: it exits 1 before the run.
            raise loader.LoadError("an `init` event listener raised an error (its traceback is above)")
        # Locust's headless start reads the users, spawn rate and run time here, after `init`
        # and before `test_start` fires.
        try:
            settings = options.run_settings(env.parsed_options)
        except options.OptionError as error:
            raise loader.LoadError(str(error)) from None
        shared = self.init.get("shared")
        if self.helpers == 1:
            # Locust's local runner filters the tasks by tags just before `test_start` fires;
            # with several processes, each worker filters them by its master's options, sent
            # after the master's `test_start` (below).
            loader.filter_by_tags(classes, *options.tags_of(env))
        if self.helper == 0:
            env.events.test_start.fire(environment=env)
        elif isinstance(shared, dict):
            # As a Locust worker takes its master's spawn message: the master's host and the
            # file's own options, over what this helper's `init` set.
            env.host = shared.get("host")
            env.stop_timeout = float(shared.get("stop_timeout") or 0.0)
            vars(env.parsed_options).update(shared.get("options") or {})
        if env.host:
            for cls in classes:
                cls.host = env.host
        if self.helpers > 1:
            loader.filter_by_tags(classes, *options.tags_of(env))
        for cls in classes:
            loader.check_host(cls)
        settings["host"] = env.host or None
        # Read when the users are stopped, from the environment (not parsed_options), as
        # Locust's runner does; what init and test_start left is the run's.
        settings["stop_timeout"] = options.stop_timeout_of(env)
        runner.target_user_count = settings["num_users"]
        return {
            "settings": settings,
            "shared": {
                "host": env.host or None,
                "stop_timeout": settings["stop_timeout"],
                "options": options.file_options(env.parsed_options),
            },
        }

    def on_users(self, msg):
        if self.stopping or self.swarm is None:
            return
        self.swarm.set_target(msg.get("count") or 0, msg.get("rate") or 0, msg.get("classes"))

    def on_tick(self, msg):
        shape = self.shape
        if shape is None or self.stopping:
            return
        shape._loadlab_run_time = float(msg.get("run_time") or 0.0)
        shape._loadlab_user_count = int(msg.get("user_count") or 0)
        try:
            result = shape.tick()
        except Exception as error:
            self.engine.send_task_error(type(shape).__name__, "tick", error)
            result = None
        if result is None:
            self.engine.send({"op": "shape", "stop": True})
            return
        answer = {"op": "shape", "users": int(result[0]), "rate": float(result[1])}
        if len(result) > 2 and result[2] is not None:
            answer["classes"] = [c if isinstance(c, str) else c.__name__ for c in result[2]]
        self.engine.send(answer)

    def on_stop(self, _msg):
        import gevent

        if self.environment is None:
            self.engine.send({"op": "stopped"})
            self.engine.flush()
            _leave(0)
        if not self.stopping:
            self.stopping = True
            gevent.spawn(self._stop)

    def _stop(self):
        from locust.runners import STATE_STOPPED, STATE_STOPPING

        from . import options

        env = self.environment
        runner = self.runner
        runner.update_state(STATE_STOPPING)
        if self.helper == 0:
            env.events.test_stopping.fire(environment=env)
        grace = options.stop_timeout_of(env)
        self.swarm.stop_all(grace, KILL_WAIT)
        runner.update_state(STATE_STOPPED)
        if self.helper == 0:
            env.events.test_stop.fire(environment=env)
            # Once for the run, as Locust's single process fires it; its
            # `environment.stats` are this helper's share of the run's.
            env.events.quitting.fire(environment=env, reverse=True)
        code = env.process_exit_code
        env.events.quit.fire(exit_code=code or 0)
        stopped = {"op": "stopped"}
        if isinstance(code, int) and not isinstance(code, bool):
            stopped["exit_code"] = code
        self.engine.send(stopped)
        self.engine.flush()
        _leave(0)


def _leave(code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def main():
    """Run one helper until `stop` or end of file on fd 3."""
    # Ctrl-C reaches the terminal's whole process group: loadlab stops the users through
    # `stop` (their on_stop, test_stop and quitting run), so the helper itself ignores it
    # rather than die with a KeyboardInterrupt traceback, as Locust's process ends cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _patch()
    import gevent

    from . import runtime

    sock = socket.socket(fileno=_socket_fd())
    engine = runtime.Engine(sock)
    try:
        init = engine.read_message()
    except ValueError as e:
        init = {"op": f"<unreadable: {e}>"}
    if init is None:
        _leave(0)
    engine.reset_clock()
    engine.start()
    if not isinstance(init, dict) or init.get("op") != "init":
        op = init.get("op") if isinstance(init, dict) else init
        engine.send({"op": "failed", "error": f"expected `init` as the first message, got {op!r}"})
        engine.flush()
        _leave(1)
    problem = check_shim()
    if problem:
        engine.send({"op": "failed", "error": problem})
        engine.flush()
        _leave(1)

    from .loader import LoadError

    helper = Helper(engine, init)
    engine.handlers = {"users": helper.on_users, "tick": helper.on_tick, "stop": helper.on_stop}
    reader = gevent.spawn(engine.run_reader)
    try:
        ready = helper.setup()
    except LoadError as e:
        engine.send({"op": "failed", "error": str(e)})
        engine.flush()
        _leave(1)
    except BaseException:
        engine.send({"op": "failed", "error": traceback.format_exc()})
        engine.flush()
        _leave(1)
    engine.send(ready)
    reader.join()
    _leave(0)


if __name__ == "__main__":
    main()
