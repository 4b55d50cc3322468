"""LoadTestShape: a class whose `tick()` loadlab asks once a second for (users, spawn rate)."""

from abc import ABCMeta, abstractmethod

from ._cover import guard


class LoadTestShapeMeta(ABCMeta):
    """Marks each shape class concrete unless it says `abstract = True`."""

    def __new__(mcs, classname, bases, class_dict):
        class_dict["abstract"] = class_dict.get("abstract", False)
        return super().__new__(mcs, classname, bases, class_dict)


class LoadTestShape(metaclass=LoadTestShapeMeta):
    """Subclass it and define `tick()`, returning (user_count, spawn_rate),
    (user_count, spawn_rate, user_classes) or None to stop the run. `get_run_time()` is
    the run time loadlab gave with the current tick."""

    runner = None
    abstract = True
    use_common_options = False
    _loadlab_run_time = 0.0
    _loadlab_offset = 0.0
    _loadlab_user_count = 0

    def __init__(self):
        self._loadlab_offset = self._loadlab_run_time

    def reset_time(self):
        """Count the run time from now."""
        self._loadlab_offset = self._loadlab_run_time

    def get_run_time(self):
        """Seconds since the run started (or since `reset_time()`)."""
        return self._loadlab_run_time - self._loadlab_offset

    def get_current_user_count(self):
        """Users running in the whole run, as of the current tick."""
        return self._loadlab_user_count

    @abstractmethod
    def tick(self):
        """(user_count, spawn_rate[, user_classes]) for now, or None to stop."""


__getattr__ = guard(__name__)
