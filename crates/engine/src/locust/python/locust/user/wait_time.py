"""Wait-time functions for `wait_time = ...` on a User or a TaskSet."""

import random
import time

from loadlab_locust import runtime

from .._cover import guard


def _described(func, text):
    func.loadlab_desc = text
    return func


def between(min_wait, max_wait):
    """Wait a uniformly random time from `min_wait` to `max_wait` seconds."""

    def wait_time(_owner):
        return min_wait + random.random() * (max_wait - min_wait)

    return _described(wait_time, f"between({min_wait!r}, {max_wait!r})")


def constant(wait_time):
    """Wait `wait_time` seconds."""

    def constant_wait(_owner):
        return wait_time

    return _described(constant_wait, f"constant({wait_time!r})")


def _pacing(period, text):
    def paced_wait(owner):
        now = time.monotonic()
        started = owner._cp_last_run + owner._cp_last_wait_time
        wait = max(0.0, period - (now - started))
        owner._cp_last_wait_time = wait
        owner._cp_last_run = now
        engine = runtime.current()
        if engine is not None:
            user = getattr(owner, "_user", owner)
            user._loadlab_intended = (engine.since_init(started + period), period)
        return wait

    paced_wait.loadlab_period = period
    return _described(paced_wait, text)


def constant_pacing(wait_time):
    """Start a task every `wait_time` seconds (at once when a task took longer). The next
    task's first request is due `wait_time` after this task started."""
    return _pacing(wait_time, f"constant_pacing({wait_time!r})")


def constant_throughput(task_runs_per_second):
    """Run `task_runs_per_second` tasks a second: constant_pacing(1 / task_runs_per_second)."""
    return _pacing(1 / task_runs_per_second, f"constant_throughput({task_runs_per_second!r})")


def describe(wait_time):
    """A short text for a wait-time function, as `ready` reports it."""
    if wait_time is None:
        return None
    func = getattr(wait_time, "__func__", wait_time)
    text = getattr(func, "loadlab_desc", None)
    if text:
        return text
    return f"custom {getattr(func, '__name__', type(func).__name__)}"


__getattr__ = guard(__name__)
