"""User classes, tasks and task sets."""

from .._cover import guard
from .task import TaskSet, tag, task
from .users import HttpUser, User

__all__ = ("HttpUser", "tag", "task", "TaskSet", "User")

__getattr__ = guard(__name__, package=True)
