"""The environment of this helper's run, in a module of its own: `env` sets it, and `event`
(which `env` imports) reads it, so neither imports the other."""

_current = None


def current_environment():
    """The environment of this helper's run, or None before it exists."""
    return _current


def set_current(environment):
    """Makes `environment` the run's environment."""
    global _current
    _current = environment
