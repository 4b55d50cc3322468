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
        # Users started and not taken back by a ramp: also those that ended by themselves.
        self._dispatched = 0

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
        """Start or stop users on Locust's schedule for the whole run: `floor(R)` users at once
        (at least one) every `floor(R) / R` seconds, R being the run's rate (this helper's
        `rate` times the helpers), each user at the turn of its run-wide number. A user that
        ended by itself (StopUser) still counts as started, as in Locust: it is not replaced."""
        runner = self.runner
        runner.target_user_count = count
        runner.update_state(STATE_SPAWNING)
        helpers = self.helpers
        total = rate * helpers if rate > 0 else 0.0
        step = max(1, math.floor(total)) if total > 0 else None
        interval = step / total if total > 0 else 0.0
        began = time.monotonic()
        first = self._dispatched * helpers
        while self._dispatched != count:
            if self._dispatched < count:
                number = self._dispatched * helpers + self.helper
                turn = number - first
            else:
                number = (self._dispatched - 1) * helpers + self.helper
                turn = first - 1 - number
            if step is not None:
                wait = began + (turn // step) * interval - time.monotonic()
                if wait > 0:
                    gevent.sleep(wait)
            if self._dispatched < count:
                if not self._start_one():
                    count = self._dispatched
                    break
            else:
                self._stop_one()
        runner.target_user_classes_count = runner.user_classes_count
        runner.update_state(STATE_RUNNING)
        self.environment.events.spawning_complete.fire(user_count=len(self.users))
        self.engine.send({"op": "spawned", "count": len(self.users)})

    def _start_one(self):
        cls = self.sequence.at(self._dispatched * self.helpers + self.helper)
        if cls is None:
            return False
        try:
            user = cls(self.environment)
        except Exception as error:
            # Locust's spawning greenlet dies of it: no user is started after, and the run
            # exits 2 (an unhandled greenlet exception) unless something else set its code.
            self.engine.send_task_error(cls.__name__, "__init__", error, unhandled=not isinstance(error, StopTest))
            if isinstance(error, StopTest):
                self.runner.quit()
            return False
        self._dispatched += 1
        user._loadlab_active = True
        self.users.append(user)
        greenlet = user.start(self.runner.user_greenlets)
        greenlet.link(lambda _g, user=user: self._ended(user))
        return True

    def _stop_one(self):
        """Take back the last user started; stop it when it still runs."""
        self._dispatched -= 1
        if len(self.users) > self._dispatched:
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
        self._dispatched = 0
        if grace > 0:
            while self.users:
                user = self.users.pop()
                user._loadlab_active = False
                user.stop(force=False)
            group.join(timeout=grace)
        else:
            for user in self.users:
                user._loadlab_active = False
            self.users.clear()
        if len(group):
            group.kill(block=True, timeout=kill_wait)
