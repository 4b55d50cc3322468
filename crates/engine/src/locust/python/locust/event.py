"""Event hooks: `events.request`, `events.test_start`, ... with Locust's calling conventions."""

import logging
import time
import traceback
from contextlib import contextmanager

from loadlab_locust import runtime

from ._cover import guard
from ._current import current_environment
from .exception import (
    InterruptTaskSet,
    RescheduleTask,
    RescheduleTaskImmediately,
    StopTest,
    StopUser,
)

_PASS_THROUGH = (StopUser, StopTest, RescheduleTask, RescheduleTaskImmediately, InterruptTaskSet)

# How many listeners have raised in this process: an `init` listener that raises ends the run
# before it starts, as in Locust.
listener_errors = 0


class EventHook:
    """Listeners called with keyword arguments by `fire()`; an exception in a listener is
    printed and the others still run (the control-flow exceptions of tasks pass through)."""

    def __init__(self):
        self._handlers = []

    def add_listener(self, handler):
        """Register `handler`; returns it, so this works as a decorator."""
        self._handlers.append(handler)
        return handler

    def remove_listener(self, handler):
        """Unregister `handler`."""
        self._handlers.remove(handler)

    def fire(self, *, reverse=False, **kwargs):
        """Call every listener with `kwargs`."""
        self._call(reverse, kwargs)

    def _call(self, reverse, kwargs):
        global listener_errors
        handlers = reversed(self._handlers) if reverse else list(self._handlers)
        for handler in handlers:
            try:
                handler(**kwargs)
            except _PASS_THROUGH:
                raise
            except Exception:
                listener_errors += 1
                logging.error("Uncaught exception in event handler: \n%s", traceback.format_exc())

    @contextmanager
    def measure(self, request_type, name, response_length=0, context=None):
        """Time the `with` block and fire this hook as one request; an exception in the
        block marks it failed (and is not re-raised, as in Locust)."""
        start_time = time.time()
        start = time.perf_counter()
        meta = {
            "request_type": request_type,
            "name": name,
            "response_length": response_length,
            "context": context or {},
            "exception": None,
            "start_time": start_time,
        }
        try:
            yield meta
        except Exception as e:
            meta["exception"] = e
        finally:
            meta["response_time"] = (time.perf_counter() - start) * 1000
            self.fire(**meta)


class DeprecatedEventHook(EventHook):
    """A hook that warns when a listener is added."""

    def __init__(self, message):
        super().__init__()
        self.message = message

    def add_listener(self, handler):
        logging.warning(self.message)
        return super().add_listener(handler)


def error_text(exception):
    """The failure message loadlab records for an exception or a string, as Locust's
    statistics key it: a string as given, an exception's repr (`CatchResponseError('no
    token')`, `HTTPError('404 Client Error: Not Found for url: /x')`) with any object address
    blanked; loadlab's own transport errors (already worded so) as they are."""
    if exception is None:
        return None
    if isinstance(exception, str):
        return exception
    if getattr(exception, "plain_message", False):
        return str(exception)
    try:
        text = repr(exception)
    except Exception:
        text = type(exception).__name__
    at = text.find("object at 0x")
    if at >= 0:
        start = at + len("object at 0x") - 2
        end = text.find(">", start)
        if end >= 0:
            text = text.replace(text[start:end], "0x....")
    return text


class RequestEventHook(EventHook):
    """`events.request`: requests loadlab answered are fired internally (already recorded);
    a `fire()` from user code reports a request loadlab did not make, as an `event` message."""

    def fire(self, *, reverse=False, **kwargs):
        engine = runtime.current()
        response_time = kwargs.get("response_time")
        exception = kwargs.get("exception")
        if engine is not None:
            length = kwargs.get("response_length")
            engine.send(
                {
                    "op": "event",
                    "request_type": str(kwargs.get("request_type", "")),
                    "name": str(kwargs.get("name", "")),
                    "response_time_ms": float(response_time or 0.0),
                    "response_length": int(length) if length else 0,
                    "error": error_text(exception),
                }
            )
        environment = current_environment()
        if environment is not None:
            environment.stats.record(
                kwargs.get("request_type", ""),
                kwargs.get("name", ""),
                response_time,
                kwargs.get("response_length") or 0,
                exception,
            )
        self._call(reverse, kwargs)

    def fire_answered(self, kwargs):
        """Fire for a request loadlab made and answered (no `event` message)."""
        if self._handlers:
            self._call(False, kwargs)


class Events:
    """Every hook Locust has. loadlab fires `init`, `init_command_line_parser`, `test_start`,
    `test_stopping`, `test_stop`, `request`, `spawning_complete`, `quitting`, `quit` and
    `user_error`; the others (master/worker, web UI, monitoring) exist and are never fired."""

    _NAMES = (
        "user_error",
        "report_to_master",
        "worker_report",
        "worker_connect",
        "spawning_complete",
        "quitting",
        "quit",
        "init",
        "init_command_line_parser",
        "test_start",
        "test_stopping",
        "test_stop",
        "reset_stats",
        "cpu_warning",
        "heartbeat_sent",
        "heartbeat_received",
        "usage_monitor",
    )

    def __init__(self):
        self.request = RequestEventHook()
        for name in self._NAMES:
            setattr(self, name, EventHook())


__getattr__ = guard(__name__)

