"""loadlab's `locust` package: the Locust API a locustfile imports, run by loadlab.

Users run as gevent greenlets in loadlab's helper processes and every HTTP request they
make is sent by loadlab's engine. Importing a name this package does not provide fails
with an ImportError that names it.
"""

from ._cover import guard
from .contrib.fasthttp import FastHttpUser
from .debug import run_single_user
from .event import Events
from .shape import LoadTestShape
from .user import wait_time
from .user.markov_taskset import MarkovTaskSet, transition, transitions
from .user.sequential_taskset import SequentialTaskSet
from .user.task import TaskSet, tag, task
from .user.users import HttpUser, User
from .user.wait_time import between, constant, constant_pacing, constant_throughput

__version__ = "2.46.3+loadlab"

events = Events()

__all__ = (
    "SequentialTaskSet",
    "MarkovTaskSet",
    "transition",
    "transitions",
    "wait_time",
    "task",
    "tag",
    "TaskSet",
    "HttpUser",
    "FastHttpUser",
    "User",
    "between",
    "constant",
    "constant_pacing",
    "constant_throughput",
    "events",
    "LoadTestShape",
    "run_single_user",
    "__version__",
)

__getattr__ = guard(__name__, package=True)
