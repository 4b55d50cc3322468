"""Importing locustfiles and choosing the User classes and the shape to run."""

import importlib.util
import inspect
import os
import sys
import traceback

from locust._cover import NotCoveredError
from locust.contrib.fasthttp import FastHttpUser
from locust.shape import LoadTestShape
from locust.user.task import filter_tasks_by_tags
from locust.user.users import _NO_HOST, HttpUser, User
from locust.user.wait_time import describe


class LoadError(Exception):
    """The locustfile cannot run; the message is what `failed` reports."""


def locustfile_paths(spec):
    """The .py files named by `spec`: a file, a directory (every .py in its tree whose name
    does not start with '_'), or a comma-separated list of those."""
    paths = []
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        if os.path.isdir(part):
            found = sorted(
                os.path.abspath(os.path.join(root, name))
                for root, _dirs, names in os.walk(part)
                for name in names
                if name.endswith(".py") and not name.startswith("_")
            )
            if not found:
                raise LoadError(f"Could not find any locustfiles in directory '{part}'")
            paths.extend(found)
        elif os.path.isfile(part) and part.endswith(".py"):
            paths.append(os.path.abspath(part))
        else:
            raise LoadError(
                f"Could not find '{part}'. Ensure your locustfile ends with '.py' or is a directory with locustfiles."
            )
    if not paths:
        raise LoadError("No locustfile given")
    return paths


def import_locustfile(path):
    """Import one locustfile as a module named after the file (with its directory first on
    sys.path, where it stays for the file's own later imports)."""
    directory, filename = os.path.split(path)
    if directory in sys.path:
        sys.path.remove(directory)
    sys.path.insert(0, directory)
    module_name = os.path.splitext(filename)[0]
    if module_name == "locust":
        module_name = "locustfile"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"Unable to get module spec for {module_name} in {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        raise LoadError(import_failure(e)) from e
    return module


def import_failure(error):
    """The `failed` text for an exception raised while importing a locustfile: the missing
    part of Locust first when that is the cause, then the traceback."""
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    name = getattr(error, "name", None) or ""
    if isinstance(error, NotCoveredError):
        return f"{error}\n{tb}"
    if isinstance(error, ModuleNotFoundError) and name.split(".")[0] == "locust":
        return f"loadlab's locust does not cover the module {name}\n{tb}"
    if isinstance(error, ImportError) and name.split(".")[0] == "locust":
        text = str(error)
        missing = text.split("'")[1] if text.startswith("cannot import name '") else text
        return f"loadlab's locust does not cover `{missing}` (from {name})\n{tb}"
    return tb


def is_user_class(item):
    """A concrete (not abstract) User subclass."""
    return inspect.isclass(item) and issubclass(item, User) and item.abstract is False


def is_shape_class(item):
    """A concrete LoadTestShape subclass."""
    return inspect.isclass(item) and issubclass(item, LoadTestShape) and not getattr(item, "abstract", True)


def collect(modules):
    """({name: User class}, [shape class]) defined or imported in the modules."""
    users = {}
    shapes = []
    for module in modules:
        for name, value in vars(module).items():
            if is_user_class(value):
                previous = users.get(name)
                if previous is not None and previous is not value:
                    raise LoadError(
                        f"Duplicate user class names: {name} is defined in both "
                        f"{inspect.getfile(previous)} and {inspect.getfile(value)}"
                    )
                users[name] = value
            elif is_shape_class(value) and value not in shapes:
                shapes.append(value)
    if not users:
        # As Locust: a file without User classes is read as pytest test functions.
        for module in modules:
            users.update(pytest_users(module))
    return users, shapes


# The fixtures Locust's pytest plugin gives a test function, and the client class of each.
PYTEST_FIXTURES = {"session": HttpUser, "fastsession": FastHttpUser}


def pytest_users(module):
    """{name: User class} for the module's test functions (`test*`, as pytest collects them),
    each a user that calls its function over and over with the session fixture it names,
    as Locust's PytestUser does: a failed request or failure() ends that call quietly."""
    from locust.exception import CatchResponseError
    from locust.user.wait_time import constant

    users = {}
    for name, value in vars(module).items():
        if not (name.startswith("test") and inspect.isfunction(value)):
            continue
        params = list(inspect.signature(value).parameters)
        unknown = [p for p in params if p not in PYTEST_FIXTURES]
        if unknown or len(params) > 1:
            raise LoadError(
                f"{name}: loadlab's locust gives a pytest test function one fixture, `session` or "
                f"`fastsession` (as Locust's plugin); not {', '.join(unknown or params)}"
            )
        base = PYTEST_FIXTURES[params[0]] if params else HttpUser

        def call(user, function=value, with_session=bool(params)):
            try:
                function(*([user.client] if with_session else []))
            except (OSError, CatchResponseError):
                pass

        call.__name__ = name
        users[name] = type(
            name,
            (base,),
            {"tasks": [call], "wait_time": constant(0), "__module__": module.__name__},
        )
    return users


def select_classes(available, names, host, tags, exclude_tags, require_host=True):
    """The User classes to run: those named (all when `names` is empty), weight 0 ones
    dropped unless they have a fixed_count, tasks filtered by tags, `host` (the command
    line's) given to every class as Locust does."""
    if not available:
        raise LoadError("No User class found!")
    if names:
        missing = [n for n in names if n not in available]
        if missing:
            raise LoadError(f"Unknown User(s): {', '.join(missing)}")
        chosen = [available[n] for n in dict.fromkeys(names)]
    else:
        chosen = list(available.values())
    if len({c.__name__ for c in chosen}) != len(chosen):
        raise LoadError(
            "The following user classes have the same class name: " + ", ".join(c.fullname() for c in chosen)
        )
    chosen = [c for c in chosen if c.weight > 0 or c.fixed_count > 0]
    if not chosen:
        raise LoadError("There are no users with weight > 0.")
    filter_by_tags(
        chosen,
        set(tags) if tags is not None else None,
        set(exclude_tags) if exclude_tags is not None else None,
    )
    for cls in chosen:
        if host:
            cls.host = host
        if require_host:
            check_host(cls)
    return chosen


def filter_by_tags(classes, tags, exclude_tags):
    """Keep the classes' tasks with one of `tags` and none of `exclude_tags` (None: no filter)."""
    if tags is not None or exclude_tags is not None:
        for cls in classes:
            filter_tasks_by_tags(cls, tags, exclude_tags)


def check_host(cls):
    """Raise LoadError when `cls` is an HTTP user without a host, as Locust's refuses to start."""
    if cls.host is None and issubclass(cls, (HttpUser, FastHttpUser)):
        raise LoadError(f"{cls.__name__}: {_NO_HOST}")


def kind(cls):
    """'fasthttp', 'http' or 'user'."""
    if issubclass(cls, FastHttpUser):
        return "fasthttp"
    if issubclass(cls, HttpUser):
        return "http"
    return "user"


def describe_class(cls):
    """A User class as `ready` reports it."""
    weights = {}
    for item in cls.tasks:
        weights[item] = weights.get(item, 0) + 1
    tasks = []
    for item, weight in weights.items():
        tags = getattr(item, "locust_tag_set", None) if not inspect.isclass(item) else None
        tasks.append(
            {
                "name": getattr(item, "__name__", None) or type(item).__name__,
                "weight": weight,
                "tags": sorted(tags) if tags else [],
            }
        )
    return {
        "name": cls.__name__,
        "weight": cls.weight,
        "fixed_count": cls.fixed_count,
        "host": cls.host,
        "wait_time": describe(_declared_wait(cls)),
        "tasks": tasks,
        "kind": kind(cls),
    }


def _declared_wait(cls):
    for klass in cls.__mro__:
        if "wait_time" in klass.__dict__:
            return klass.__dict__["wait_time"]
    return None
