"""Starting and stopping this helper's users at loadlab's count and rate.

Classes are dealt as Locust's dispatcher deals them over its workers: one sequence for the
whole run (the `fixed_count` users first, then the weighted ones, both interleaved by
Locust's Kullback-Leibler rule over classes sorted by name), whose user number g goes to
helper g % helpers. This helper's k-th user is therefore number k * helpers + helper;
users are stopped last-started first, so a class keeps its share as counts go up and down.
"""

import math
import time

import gevent

from locust.exception import StopTest
from locust.runners import STATE_RUNNING, STATE_SPAWNING


def _interleave(weighted):
    """Yield names from (name, weight) pairs in proportion to the weights, spreading each
    name's turns out (Locust's rule: the pick that lowers the divergence most)."""
    state = [[w * math.log2(w / (w + 1.0)), w + 1.0, w, name] for name, w in weighted if w > 0]
    if not state:
        while True:
            yield None
    while True:
        best = min(state, key=lambda s: (s[0], s[1], s[2], s[3]))
        yield best[3]
        x = best[1]
        best[0] = best[2] * math.log2(x / (x + 1.0))
        best[1] = x + 1.0


class ClassSequence:
    """The run-wide order in which users of each class are started."""

    def __init__(self, classes):
        by_name = {c.__name__: c for c in classes}
        ordered = sorted(by_name)
        fixed = [(n, by_name[n].fixed_count) for n in ordered if by_name[n].fixed_count]
        self._fixed_total = sum(count for _, count in fixed)
        self._fixed = _interleave(fixed)
        self._weighted = _interleave([(n, by_name[n].weight) for n in ordered if not by_name[n].fixed_count])
        self._by_name = by_name
        self._names = []

    def at(self, index):
        """The class of user number `index`, or None when no more users can be started
        (every class has a fixed_count and all of them are taken)."""
        names = self._names
        while len(names) <= index:
            source = self._fixed if len(names) < self._fixed_total else self._weighted
            name = next(source)
            if name is None:
                return None
            names.append(name)
        return self._by_name[names[index]]


class Swarm:
    """This helper's users: `set_target()` ramps them to a count, `stop_all()` ends them."""

    def __init__(self, environment, runner, classes, helper, helpers, engine):
        self.environment = environment
        self.runner = runner
        self.classes = list(classes)
        self.helper = helper
        self.helpers = max(1, helpers)
        self.engine = engine
        self.sequence = ClassSequence(self.classes)
        self._class_names = None
        self._ramp = None
        self.users = runner._users

    def set_target(self, count, rate, class_names=None):
        """Start or stop users until `count` run, `rate` a second (all at once when rate <= 0)."""
        if self._ramp is not None and not self._ramp.dead:
            self._ramp.kill(block=False)
        if class_names is not None:
            names = sorted(class_names)
            if names != self._class_names:
                self._class_names = names
                known = {c.__name__: c for c in self.classes}
                chosen = [known[n] for n in names if n in known]
                self.sequence = ClassSequence(chosen or self.classes)
        self._ramp = gevent.spawn(self._run_ramp, max(0, int(count)), float(rate or 0))

    def _run_ramp(self, count, rate):
        runner = self.runner
        runner.target_user_count = count
        runner.update_state(STATE_SPAWNING)
        users = self.users
        step = max(1, math.floor(rate)) if rate > 0 else None
        interval = step / rate if rate > 0 else 0.0
        while len(users) != count:
            began = time.monotonic()
            todo = abs(count - len(users)) if step is None else min(step, abs(count - len(users)))
            for _ in range(todo):
                if len(users) < count:
                    if not self._start_one():
                        count = len(users)
                        break
                else:
                    self._stop_one()
            if len(users) == count:
                break
            gevent.sleep(max(0.0, interval - (time.monotonic() - began)))
        runner.target_user_classes_count = runner.user_classes_count
        runner.update_state(STATE_RUNNING)
        self.environment.events.spawning_complete.fire(user_count=len(users))
        self.engine.send({"op": "spawned", "count": len(users)})

    def _start_one(self):
        slot = len(self.users)
        cls = self.sequence.at(slot * self.helpers + self.helper)
        if cls is None:
            return False
        try:
            user = cls(self.environment)
        except Exception as error:
            self.engine.send_task_error(cls.__name__, "__init__", error)
            if isinstance(error, StopTest):
                self.runner.quit()
            return False
        user._loadlab_active = True
        self.users.append(user)
        greenlet = user.start(self.runner.user_greenlets)
        greenlet.link(lambda _g, user=user: self._ended(user))
        return True

    def _stop_one(self):
        user = self.users.pop()
        user._loadlab_active = False
        user.stop(force=False)

    def _ended(self, user):
        if user._loadlab_active:
            user._loadlab_active = False
            self.users.remove(user)
        self.runner._user_ended()

    def stop_all(self, grace, kill_wait):
        """Stop every user as Locust does at the end of a run: with a `grace` (its
        stop_timeout) each finishes its task first (at once while waiting) and those still
        running after it are killed; without one, all are killed at once. A killed user's
        on_stop still runs; waiting for that is bounded by `kill_wait` seconds."""
        if self._ramp is not None and not self._ramp.dead:
            self._ramp.kill(block=True)
        group = self.runner.user_greenlets
        if grace > 0:
            while self.users:
                self._stop_one()
            group.join(timeout=grace)
        else:
            for user in self.users:
                user._loadlab_active = False
            self.users.clear()
        if len(group):
            group.kill(block=True, timeout=kill_wait)
