"""Utilities a locustfile may import; loadlab's locust has `timespan.parse_timespan`."""

from .._cover import guard

__getattr__ = guard(__name__, package=True)
