"""SequentialTaskSet: tasks run in the order they are declared, weights ignored."""

from itertools import cycle

from .._cover import guard
from ..exception import LocustError
from .task import TaskSet, TaskSetMeta


class SequentialTaskSetMeta(TaskSetMeta):
    """Collects tasks in declaration order: base classes' first, then `tasks` entries and
    `@task` methods where they appear in the class body."""

    def __new__(mcs, classname, bases, class_dict):
        ordered = []
        for base in bases:
            if getattr(base, "tasks", None):
                ordered += base.tasks
        for key, value in class_dict.items():
            if key == "tasks":
                if isinstance(value, list):
                    ordered.extend(value)
                elif isinstance(value, dict):
                    for func, weight in value.items():
                        ordered.extend([func] * weight)
                else:
                    raise ValueError("The 'tasks' attribute can only be set to list or dict")
            if "locust_task_weight" in dir(value):
                ordered.extend([value] * value.locust_task_weight)
        class_dict["tasks"] = ordered
        return type.__new__(mcs, classname, bases, class_dict)


class SequentialTaskSet(TaskSet, metaclass=SequentialTaskSetMeta):
    """A TaskSet that runs its tasks one after the other, in order, over and over."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._task_cycle = cycle(self.tasks)

    def get_next_task(self):
        if not self.tasks:
            raise LocustError(
                "No tasks defined. Use the @task decorator or set the 'tasks' attribute of the SequentialTaskSet"
            )
        return next(self._task_cycle)


__getattr__ = guard(__name__)
