"""MarkovTaskSet: the next task is drawn from the current task's weighted transitions."""

import logging
import random

from .._cover import guard
from ..exception import LocustError
from .task import TaskSet, TaskSetMeta


class NoMarkovTasksError(LocustError):
    """A MarkovTaskSet without any @transition(s) method."""


class InvalidTransitionError(LocustError):
    """A transition names no method of the class."""


class NonMarkovTaskTransitionError(LocustError):
    """A transition names a method that has no transitions itself."""


class MarkovTaskTagError(LocustError):
    """A Markov task carries tags, which could break the chain."""


def is_markov_task(func):
    """True for a method decorated with @transition or @transitions."""
    return "transitions" in dir(func)


def transition(func_name, weight=1):
    """Add a transition (with `weight`) from the decorated task to task `func_name`."""

    def add(func):
        if not hasattr(func, "transitions"):
            func.transitions = {}
        func.transitions[func_name] = weight
        return func

    return add


def transitions(weights):
    """Add several transitions: a {name: weight} dict, or a list of names and (name, weight)."""

    def add(func):
        if not hasattr(func, "transitions"):
            func.transitions = {}
        if isinstance(weights, dict):
            func.transitions.update(weights)
        else:
            for item in weights:
                name, weight = item if isinstance(item, tuple) else (item, 1)
                func.transitions[name] = weight
        return func

    return add


def _check_chain(tasks, class_dict, classname):
    if not tasks:
        raise NoMarkovTasksError(
            f"No Markov tasks defined in class {classname}. Use the @transition(s) decorators to define some."
        )
    for func in tasks:
        if func.__name__ == "run":
            raise Exception(
                "TaskSet.run() is a method used internally by Locust, and you must not override it or "
                "annotate it with transitions"
            )
        if func.__name__ in ("on_start", "on_stop"):
            logging.warning(
                "You have tagged your on_stop/start function with @transition. This will make the method "
                "get called both as a step AND on stop/start."
            )
        if "locust_tag_set" in dir(func):
            raise MarkovTaskTagError(
                "Tags are unsupported for MarkovTaskSet since they can make the markov chain invalid. "
                f"Tags detected on {classname}.{func.__name__}: {func.locust_tag_set}"
            )
        for dest in func.transitions:
            target = class_dict.get(dest)
            if not target:
                raise InvalidTransitionError(
                    f"Transition to {dest} from {func.__name__} is invalid since no such element exists on "
                    f"class {classname}"
                )
            if not is_markov_task(target):
                raise NonMarkovTaskTransitionError(
                    f"{classname}.{dest} cannot be used as a target for a transition since it does not "
                    f"define any transitions of its own. Used as a transition from {func.__name__}."
                )
    reached = set()
    stack = [tasks[0].__name__]
    while stack:
        name = stack.pop()
        if name in reached:
            continue
        reached.add(name)
        stack.extend(d for d, w in class_dict[name].transitions.items() if w > 0)
    unreachable = {f.__name__ for f in tasks} - reached
    if unreachable:
        logging.warning(f"The following markov tasks are unreachable in class {classname}: {unreachable}")


class MarkovTaskSetMeta(TaskSetMeta):
    """Checks the chain of a concrete MarkovTaskSet and starts it at its first Markov task."""

    def __new__(mcs, classname, bases, class_dict):
        if not class_dict.get("abstract"):
            class_dict["abstract"] = False
            tasks = [v for v in class_dict.values() if is_markov_task(v)]
            _check_chain(tasks, class_dict, classname)
            class_dict["current"] = tasks[0]
            for func in tasks:
                if isinstance(func.transitions, dict):
                    func.transitions = [name for name, w in func.transitions.items() for _ in range(w)]
        return type.__new__(mcs, classname, bases, class_dict)


class MarkovTaskSet(TaskSet, metaclass=MarkovTaskSetMeta):
    """A TaskSet walking a Markov chain: each task's transitions weigh which task comes next."""

    abstract = True

    def get_next_task(self):
        func = self.current
        self.current = getattr(self, random.choice(func.transitions))
        return func


__getattr__ = guard(__name__)
