"""slow.py's user, with a stop_timeout an init listener sets on the environment."""

from locust import events
from slow import Slow  # noqa: F401


@events.init.add_listener
def on_init(environment, **kwargs):
    environment.stop_timeout = 2
