"""The parser `events.init_command_line_parser` listeners get: it records the options a
locustfile adds, whose values loadlab's options (or their environment variables, or the
defaults) then give to `environment.parsed_options`."""

import os

from ._cover import guard


class LocustArgumentParser:
    """Accepts `add_argument(...)` as argparse does, plus Locust's web-UI keywords
    (`env_var`, `include_in_web_ui`, `is_secret`, `is_required`, `is_multiple`)."""

    def __init__(self, *args, **kwargs):
        self.arguments = []

    def add_argument(self, *names, **kwargs):
        """Record an option; its `dest` is the first long name with dashes as underscores."""
        dest = kwargs.get("dest")
        if dest is None:
            longs = [n for n in names if n.startswith("--")]
            chosen = longs[0] if longs else names[0]
            dest = chosen.lstrip("-").replace("-", "_")
        self.arguments.append((dest, names, kwargs))
        return dest

    def add_argument_group(self, *args, **kwargs):
        return self

    def add_mutually_exclusive_group(self, *args, **kwargs):
        return self

    def set_defaults(self, **kwargs):
        for dest, value in kwargs.items():
            self.arguments.append((dest, (), {"default": value}))

    def values(self, options):
        """{dest: value} for the recorded options that `options` (a dict) does not set."""
        found = {}
        for dest, names, kwargs in self.arguments:
            if dest in options or dest in found:
                continue
            dashed = [n.lstrip("-") for n in names]
            given = next((options[d] for d in dashed if d in options), None)
            if given is None and kwargs.get("env_var") and kwargs["env_var"] in os.environ:
                given = os.environ[kwargs["env_var"]]
            if given is None:
                action = kwargs.get("action")
                if "default" in kwargs:
                    found[dest] = kwargs["default"]
                elif action == "store_true":
                    found[dest] = False
                elif action == "store_false":
                    found[dest] = True
                else:
                    found[dest] = None
                continue
            convert = kwargs.get("type")
            if convert is not None and isinstance(given, str):
                given = convert(given)
            found[dest] = given
        return found


__getattr__ = guard(__name__)
