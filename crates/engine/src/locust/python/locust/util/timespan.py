"""parse_timespan: "1h30m", "20s", "90" → seconds."""

import re

from .._cover import guard

_PARTS = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_FORMATS = "Valid formats: 20, 20s, 3m, 2h, 1h20m, 3h30m10s, etc."


def parse_timespan(time_str):
    """Seconds in a time span written as hours/minutes/seconds (a bare number is seconds)."""
    if not time_str:
        raise ValueError("Invalid time span format")
    text = str(time_str)
    if text.isdigit():
        return int(text)
    match = _PARTS.fullmatch(text)
    if not match or not any(match.groups()):
        raise ValueError(f"Invalid time span format. {_FORMATS}")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


__getattr__ = guard(__name__)
