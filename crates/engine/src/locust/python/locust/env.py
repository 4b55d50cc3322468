"""Environment: what users, events and listeners reach as `environment`."""

from ._cover import guard
from ._current import current_environment, set_current
from .event import Events
from .exception import LocustError
from .stats import RequestStats


class ParsedOptions:
    """The run's options with attribute access; an option nobody set reads as None."""

    def __init__(self, options=None):
        self.__dict__.update(options or {})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def __contains__(self, name):
        return name in self.__dict__

    def __repr__(self):
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class Environment:
    """One run as a locustfile sees it: `events`, `host`, `parsed_options`, `runner`,
    `stats`, `user_classes`, `shape_class`, `tags`, `exclude_tags`."""

    def __init__(
        self,
        *,
        user_classes=None,
        shape_class=None,
        tags=None,
        locustfile=None,
        exclude_tags=None,
        events=None,
        host=None,
        reset_stats=False,
        stop_timeout=None,
        catch_exceptions=True,
        parsed_options=None,
        parsed_locustfiles=None,
        available_user_classes=None,
        available_shape_classes=None,
        available_user_tasks=None,
        dispatcher_class=None,
        profile=None,
    ):
        self.runner = None
        self.web_ui = None
        self.process_exit_code = None
        self.events = events if events is not None else Events()
        self.locustfile = locustfile
        self.user_classes = list(user_classes or [])
        self.shape_class = shape_class
        self.tags = tags
        self.exclude_tags = exclude_tags
        self.stats = RequestStats()
        self.host = host
        self.reset_stats = reset_stats
        self.profile = profile
        self.stop_timeout = float(stop_timeout or getattr(parsed_options, "stop_timeout", None) or 0.0)
        self.catch_exceptions = catch_exceptions
        self.parsed_options = parsed_options
        self.parsed_locustfiles = parsed_locustfiles
        self.available_user_classes = available_user_classes
        self.available_shape_classes = available_shape_classes
        self.available_user_tasks = available_user_tasks
        self.dispatcher_class = dispatcher_class
        self.worker_logs = {}
        set_current(self)

    @property
    def user_classes_by_name(self):
        return {cls.__name__: cls for cls in self.user_classes}

    def _no_runner(self, *args, **kwargs):
        raise LocustError("loadlab creates the runner itself; a locustfile cannot create another")

    create_local_runner = _no_runner
    create_master_runner = _no_runner
    create_worker_runner = _no_runner
    create_web_ui = _no_runner


__getattr__ = guard(__name__)
