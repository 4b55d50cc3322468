"""Tasks and task sets: `@task`, `@tag`, TaskSet and the loop that runs a user's tasks."""

import logging
import random
import time
import traceback
from collections import deque

import gevent
from gevent import GreenletExit

from loadlab_locust import runtime

from .._cover import guard
from ..exception import (
    InterruptTaskSet,
    MissingWaitTimeError,
    RescheduleTask,
    RescheduleTaskImmediately,
    StopTest,
    StopUser,
)

LOCUST_STATE_RUNNING, LOCUST_STATE_WAITING, LOCUST_STATE_STOPPING = ["running", "waiting", "stopping"]

_STOPPING = (StopUser, StopTest, GreenletExit)


def task(weight=1):
    """Mark a method (or a nested TaskSet class) as a task; `@task(3)` gives it weight 3.
    Works with and without parentheses."""

    def mark(func):
        if func.__name__ in ("on_start", "on_stop"):
            logging.warning(
                "You have tagged your on_stop/start function with @task. This will make the method "
                "get called both as a task AND on stop/start."
            )
        if func.__name__ == "run":
            raise Exception(
                "User.run() is a method used internally by Locust, and you must not override it or "
                "register it as a task"
            )
        func.locust_task_weight = weight
        return func

    if callable(weight):
        func, weight = weight, 1
        return mark(func)
    return mark


def tag(*tags):
    """Tag a task or a TaskSet (all its tasks) so `--tags`/`--exclude-tags` can select it."""
    if not tags or callable(tags[0]):
        raise ValueError("No tag name was supplied")

    def mark(decorated):
        if hasattr(decorated, "tasks"):
            decorated.tasks = [tag(*tags)(t) for t in decorated.tasks]
        else:
            if "locust_tag_set" not in decorated.__dict__:
                decorated.locust_tag_set = set()
            decorated.locust_tag_set |= set(tags)
        return decorated

    return mark


def get_tasks_from_base_classes(bases, class_dict):
    """The class's task list: its bases' tasks, then `tasks` (a list, (task, weight)
    pairs, or a {task: weight} dict), then `@task` methods, each repeated by weight."""
    tasks = []
    for base in bases:
        if getattr(base, "tasks", None):
            tasks += base.tasks
    declared = class_dict.get("tasks")
    if declared is not None:
        if isinstance(declared, dict):
            declared = declared.items()
        for item in declared:
            if isinstance(item, tuple):
                func, count = item
                tasks.extend([func] * count)
            else:
                tasks.append(item)
    for item in class_dict.values():
        if "locust_task_weight" in dir(item):
            tasks.extend([item] * item.locust_task_weight)
    return tasks


def is_markov_taskset(obj):
    """True for a MarkovTaskSet class."""
    return type(obj).__name__ == "MarkovTaskSetMeta"


def filter_tasks_by_tags(task_holder, tags=None, exclude_tags=None, checked=None):
    """Drop, recursively, the tasks of a User or TaskSet class that `tags` (keep only
    tagged ones) and `exclude_tags` (drop tagged ones) rule out; a nested TaskSet left
    without tasks is dropped too."""
    if checked is None:
        checked = {}
    kept = []
    for item in task_holder.tasks:
        if item in checked:
            if checked[item]:
                kept.append(item)
            continue
        passing = True
        if hasattr(item, "tasks"):
            filter_tasks_by_tags(item, tags, exclude_tags, checked)
            passing = len(item.tasks) > 0 or is_markov_taskset(item)
        else:
            item_tags = getattr(item, "locust_tag_set", None)
            if tags is not None:
                passing = passing and bool(item_tags and item_tags & tags)
            if exclude_tags is not None:
                passing = passing and not (item_tags and item_tags & exclude_tags)
        if passing:
            kept.append(item)
        checked[item] = passing
    task_holder.tasks = kept
    if not kept and not is_markov_taskset(task_holder):
        logging.warning(f"{task_holder.__name__} had no tasks left after filtering, instantiating it will fail!")


def report_error(user, task_name, error):
    """Tell loadlab a task (or on_start/on_stop) raised `error`; the user carries on."""
    try:
        user.environment.events.user_error.fire(user_instance=user, exception=error, tb=error.__traceback__)
    except Exception:
        pass
    engine = runtime.current()
    if engine is None:
        logging.error("%s\n%s", error, "".join(traceback.format_exception(error)))
    else:
        engine.send_task_error(type(user).__name__, task_name, error)


def _task_name(item):
    return getattr(item, "__name__", None) or type(item).__name__


class TaskSetMeta(type):
    """Collects a TaskSet class's tasks (see get_tasks_from_base_classes)."""

    def __new__(mcs, classname, bases, class_dict):
        class_dict["tasks"] = get_tasks_from_base_classes(bases, class_dict)
        return type.__new__(mcs, classname, bases, class_dict)


class TaskSet(metaclass=TaskSetMeta):
    """A set of tasks a user runs, picked at random by weight, with a wait between them.
    A task may be another TaskSet, which runs until it calls `interrupt()`."""

    tasks = []
    min_wait = None
    max_wait = None
    wait_function = None

    def __init__(self, parent):
        self._task_queue = deque()
        self._user = parent.user if isinstance(parent, TaskSet) else parent
        self._parent = parent
        if not self.min_wait:
            self.min_wait = self._user.min_wait
        if not self.max_wait:
            self.max_wait = self._user.max_wait
        if not self.wait_function:
            self.wait_function = self._user.wait_function
        self._cp_last_run = time.monotonic()
        self._cp_last_wait_time = 0.0

    @property
    def user(self):
        """The User running this task set."""
        return self._user

    @property
    def parent(self):
        """The parent TaskSet, or the User for a top-level one."""
        return self._parent

    @property
    def client(self):
        """The user's client."""
        return self._user.client

    def on_start(self):
        """Called when the user starts running this task set."""

    def on_stop(self):
        """Called when the user stops running this task set (interrupted or stopped)."""

    def run(self):
        """Run tasks until interrupted (InterruptTaskSet) or the user stops."""
        try:
            self.on_start()
        except InterruptTaskSet as e:
            if e.reschedule:
                raise RescheduleTaskImmediately(e.reschedule).with_traceback(e.__traceback__)
            raise RescheduleTask(e.reschedule).with_traceback(e.__traceback__)

        user = self._user
        while True:
            try:
                if not self._task_queue:
                    self.schedule_task(self.get_next_task())
                try:
                    if user._state == LOCUST_STATE_STOPPING:
                        raise StopUser()
                    self.execute_next_task()
                except RescheduleTaskImmediately:
                    pass
                except RescheduleTask:
                    self.wait()
                else:
                    self.wait()
            except InterruptTaskSet as e:
                try:
                    self.on_stop()
                except _STOPPING:
                    raise
                except Exception as error:
                    report_error(user, "on_stop", error)
                if e.reschedule:
                    raise RescheduleTaskImmediately(e.reschedule) from e
                raise RescheduleTask(e.reschedule) from e
            except _STOPPING:
                try:
                    self.on_stop()
                except Exception as error:
                    report_error(user, "on_stop", error)
                raise
            except Exception as error:
                report_error(user, user._loadlab_task or _task_name(self), error)
                self.wait()

    def execute_next_task(self):
        self.execute_task(self._task_queue.popleft())

    def execute_task(self, item):
        """Run one task: a bound method, a nested TaskSet class, or a function of the set."""
        self._user._loadlab_task = _task_name(item)
        if getattr(item, "__self__", None) is self:
            item()
        elif isinstance(item, type) and issubclass(item, TaskSet):
            item(self).run()
        else:
            item(self)

    def schedule_task(self, task_callable, first=False):
        """Queue a task to run next (`first`) or after the queued ones."""
        if first:
            self._task_queue.appendleft(task_callable)
        else:
            self._task_queue.append(task_callable)

    def get_next_task(self):
        """A task picked at random (by weight) from `tasks`."""
        if not self.tasks:
            hint = (
                ", but you have set a 'task' attribute - maybe you meant to set 'tasks'?"
                if getattr(self, "task", None)
                else "."
            )
            raise Exception(
                f"No tasks defined on {type(self).__name__}{hint} use the @task decorator or set the "
                "'tasks' attribute of the TaskSet"
            )
        return random.choice(self.tasks)

    def wait_time(self):
        """Seconds to wait between tasks: the user's wait_time unless this set has its own."""
        if self._user.wait_time:
            return self._user.wait_time()
        if self.min_wait is not None and self.max_wait is not None:
            return random.randint(self.min_wait, self.max_wait) / 1000.0
        raise MissingWaitTimeError(
            f"You must define a wait_time method on either the {type(self._user).__name__} or "
            f"{type(self).__name__} class"
        )

    def wait(self):
        """Sleep for wait_time(); a user told to stop stops here."""
        user = self._user
        if user._state == LOCUST_STATE_STOPPING:
            raise StopUser()
        user._state = LOCUST_STATE_WAITING
        self._sleep(self.wait_time())
        if user._state == LOCUST_STATE_STOPPING:
            raise StopUser()
        user._state = LOCUST_STATE_RUNNING

    def _sleep(self, seconds):
        gevent.sleep(seconds)

    def interrupt(self, reschedule=True):
        """Leave this task set for its parent; `reschedule` picks the parent's next task at once."""
        raise InterruptTaskSet(reschedule)


class DefaultTaskSet(TaskSet):
    """The root task set: runs the User's own tasks with the user as their argument."""

    def get_next_task(self):
        user = self._user
        if not user.tasks:
            hint = (
                ", but you have set a 'task' attribute on your class - maybe you meant to set 'tasks'?"
                if getattr(user, "task", None)
                else "."
            )
            raise Exception(
                f"No tasks defined on {type(user).__name__}{hint} Use the @task decorator or set the "
                "'tasks' attribute of the User (or mark it as abstract = True if you only intend to subclass it)"
            )
        return random.choice(user.tasks)

    def execute_task(self, item):
        user = self._user
        runner = user.environment.runner
        if runner is not None and not runner._take_iteration():
            raise StopUser()
        user._loadlab_task = _task_name(item)
        if isinstance(item, type) and issubclass(item, TaskSet):
            item(user).run()
        else:
            item(user)


__getattr__ = guard(__name__)
