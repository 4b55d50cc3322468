"""User and HttpUser: the classes a locustfile subclasses."""

import time

from gevent import GreenletExit

from loadlab_locust import runtime

from .._cover import guard
from ..clients import HttpSession
from ..exception import StopTest, StopUser
from .task import (
    LOCUST_STATE_RUNNING,
    LOCUST_STATE_STOPPING,
    LOCUST_STATE_WAITING,
    DefaultTaskSet,
    get_tasks_from_base_classes,
    report_error,
)
from .wait_time import constant

_next_local_id = [0]


class UserMeta(type):
    """Collects a User class's tasks and marks it concrete unless it says `abstract = True`."""

    def __new__(mcs, classname, bases, class_dict):
        class_dict["tasks"] = get_tasks_from_base_classes(bases, class_dict)
        if not class_dict.get("abstract"):
            class_dict["abstract"] = False
        return type.__new__(mcs, classname, bases, class_dict)


class User(metaclass=UserMeta):
    """A simulated user: runs `on_start`, then its tasks (weighted at random, `wait_time`
    between them) until stopped, then `on_stop`. Class attributes: `tasks`, `wait_time`,
    `weight`, `fixed_count`, `host`, `abstract`."""

    host = None
    min_wait = None
    max_wait = None
    wait_time = constant(0)
    wait_function = None
    tasks = []
    weight = 1
    fixed_count = 0
    abstract = True
    _loadlab_intended = None
    _loadlab_task = None

    def __init__(self, environment):
        super().__init__()
        self.environment = environment
        self._state = None
        self._greenlet = None
        self._group = None
        self._taskset_instance = None
        self._cp_last_run = time.monotonic()
        self._cp_last_wait_time = 0.0
        engine = runtime.current()
        if engine is not None:
            self._loadlab_uid = engine.new_user_id()
        else:
            _next_local_id[0] += 1
            self._loadlab_uid = _next_local_id[0]

    def on_start(self):
        """Called when the user starts running."""

    def on_stop(self):
        """Called when the user stops running."""

    def run(self):
        """on_start, the task loop, and on_stop once the user is stopped."""
        self._state = LOCUST_STATE_RUNNING
        self._taskset_instance = DefaultTaskSet(self)
        stop_test = False
        try:
            try:
                self.on_start()
            except (GreenletExit, StopUser, StopTest):
                raise
            except Exception as error:
                report_error(self, "on_start", error)
                return
            self._taskset_instance.run()
        except (GreenletExit, StopUser, StopTest) as e:
            stop_test = isinstance(e, StopTest)
            try:
                self.on_stop()
            except Exception as error:
                report_error(self, "on_stop", error)
        if stop_test and self.environment.runner is not None:
            self.environment.runner.quit()

    def wait(self):
        """Sleep for this user's wait time (a stopped user stops here)."""
        self._taskset_instance.wait()

    def start(self, group):
        """Run this user in a new greenlet of `group`; returns the greenlet."""
        self._greenlet = group.spawn(_run_user, self)
        self._group = group
        return self._greenlet

    def stop(self, force=False):
        """Stop the user: at once when `force` or while it waits, else when its task ends.
        Returns True when it was stopped at once."""
        if force or self._state == LOCUST_STATE_WAITING or self._state is None:
            if self._greenlet is not None:
                self._greenlet.kill(block=False)
            return True
        self._state = LOCUST_STATE_STOPPING
        return False

    @property
    def group(self):
        return self._group

    @property
    def greenlet(self):
        return self._greenlet

    def context(self):
        """Extra `context` for this user's request events; override to add some."""
        return {}

    @classmethod
    def json(cls):
        return {
            "host": cls.host,
            "weight": cls.weight,
            "fixed_count": cls.fixed_count,
            "tasks": [t.__name__ for t in cls.tasks],
        }

    @classmethod
    def fullname(cls):
        """The class's module and qualified name, e.g. my_module.MyUser."""
        return ".".join(p for p in f"{cls.__module__}.{cls.__qualname__}".split(".") if p != "<locals>")


def _run_user(user):
    user.run()


_NO_HOST = (
    "You must specify the base host. Either in the host attribute in the User class, or on the "
    "command line using the --host option."
)


class HttpUser(User):
    """A user with `self.client`, an HttpSession (cookies kept per user) whose requests
    loadlab sends; relative URLs are appended to `host`."""

    abstract = True
    pool_manager = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.host is None:
            raise StopTest(_NO_HOST)
        self.client = HttpSession(base_url=self.host, request_event=self.environment.events.request, user=self)


__getattr__ = guard(__name__)
