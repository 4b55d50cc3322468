"""Contributed user classes; loadlab's locust has FastHttpUser (locust.contrib.fasthttp)."""

from .._cover import guard

__getattr__ = guard(__name__, package=True)
