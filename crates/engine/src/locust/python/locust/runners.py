"""Runner classes. A locustfile run by loadlab sees a LocalRunner in each helper: never a
MasterRunner or a WorkerRunner, whose classes exist for `isinstance` checks."""

import socket
from uuid import uuid4

from gevent.pool import Group

from ._cover import guard
from .exception import LocustError

STATE_INIT, STATE_SPAWNING, STATE_RUNNING, STATE_CLEANUP, STATE_STOPPING, STATE_STOPPED, STATE_MISSING = [
    "ready",
    "spawning",
    "running",
    "cleanup",
    "stopping",
    "stopped",
    "missing",
]


class Runner:
    """What a locustfile reads from `environment.runner`: `state`, `user_count`,
    `target_user_count`, `user_classes_count`, `stats`, and `quit()` to end the run."""

    def __init__(self, environment):
        self.environment = environment
        self.state = STATE_INIT
        self.user_greenlets = Group()
        self.greenlet = Group()
        self.spawning_greenlet = None
        self.shape_greenlet = None
        self.target_user_count = 0
        self.target_user_classes_count = {}
        self.exceptions = {}
        self.custom_messages = {}
        self.quit_requested = False
        self._users = []
        self._iterations_left = None
        self._iterations_share = 0

    @property
    def user_classes(self):
        return self.environment.user_classes

    @property
    def user_classes_by_name(self):
        return self.environment.user_classes_by_name

    @property
    def stats(self):
        return self.environment.stats

    @property
    def errors(self):
        return self.stats.errors

    @property
    def user_count(self):
        """Users running now in this helper."""
        return len(self._users)

    @property
    def user_classes_count(self):
        """{class name: users running now in this helper}."""
        counts = {cls.__name__: 0 for cls in self.user_classes}
        for user in self._users:
            name = type(user).__name__
            counts[name] = counts.get(name, 0) + 1
        return counts

    def _limit_iterations(self, share):
        """Let this helper's users run `share` task iterations in all, then end the run."""
        self._iterations_share = share
        self._iterations_left = share

    def _take_iteration(self):
        """False once this helper's share of iterations is used up."""
        left = self._iterations_left
        if left is None:
            return True
        if left <= 0:
            return False
        self._iterations_left = left - 1
        return True

    def _user_ended(self):
        if (
            self._iterations_left == 0
            and self._iterations_share
            and not self._users
            and self.state in (STATE_SPAWNING, STATE_RUNNING)
        ):
            self.quit()

    def update_state(self, new_state):
        self.state = new_state

    def quit(self):
        """End the run: loadlab stops every helper's users."""
        from loadlab_locust import runtime

        if not self.quit_requested:
            self.quit_requested = True
            engine = runtime.current()
            if engine is not None:
                engine.send({"op": "quit"})

    def stop(self):
        """Same as quit(): a loadlab run has no idle state to return to."""
        self.quit()

    def start(self, user_count, spawn_rate, wait=False, user_classes=None):
        raise LocustError("loadlab starts and stops users itself; runner.start() is not available")

    def register_message(self, msg_type, listener, concurrent=False):
        """Register a handler for `send_message(msg_type, ...)` within this helper."""
        if msg_type in self.custom_messages:
            raise Exception(f"Tried to register listener method for {msg_type}, but it already had a listener!")
        self.custom_messages[msg_type] = (listener, concurrent)

    def send_message(self, msg_type, data=None, client_id=None):
        """Deliver a message to this helper's own handler (no other node exists)."""
        entry = self.custom_messages.get(msg_type)
        if entry is not None:
            entry[0](environment=self.environment, msg=Message(msg_type, data, "local"))


class Message:
    """A custom message as handlers receive it."""

    def __init__(self, message_type, data, node_id):
        self.type = message_type
        self.data = data
        self.node_id = node_id


class LocalRunner(Runner):
    """The runner in every loadlab helper. `worker_index` is the helper's number and
    `worker_count` the number of helpers."""

    def __init__(self, environment, worker_index=0, worker_count=1):
        super().__init__(environment)
        self.worker_index = worker_index
        self.worker_count = worker_count
        self.client_id = f"{socket.gethostname()}_{uuid4().hex}"


class DistributedRunner(Runner):
    """Never created by loadlab."""


class MasterRunner(DistributedRunner):
    """Never created by loadlab: `isinstance(environment.runner, MasterRunner)` is False."""


class WorkerRunner(DistributedRunner):
    """Never created by loadlab: `isinstance(environment.runner, WorkerRunner)` is False."""


__getattr__ = guard(__name__)
