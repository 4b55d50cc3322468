"""run_single_user exists so files that call it under `if __name__ == "__main__":` import."""

from ._cover import guard
from .exception import LocustError


def run_single_user(user_class, *args, **kwargs):
    """Not available: loadlab runs the locustfile's users itself (`loadlab locust -f FILE`)."""
    raise LocustError("run_single_user needs Locust itself; run the file with `loadlab locust -f FILE`")


__getattr__ = guard(__name__)
