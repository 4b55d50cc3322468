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

    def parse_given(self, tokens):
        """Read the file's own options from command-line `tokens` (`--name VALUE`,
        `--name=VALUE`, `--flag`), as argparse would for the options recorded; returns
        ({dest: value}, [the other words: user class names]). Raises ValueError naming a
        token no recorded option takes."""
        by_name = {}
        for dest, names, kwargs in self.arguments:
            for name in names:
                by_name[name] = (dest, kwargs)
        given = {}
        words = []
        tokens = list(tokens)
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if not token.startswith("-") or token == "-":
                words.append(token)
                continue
            name, has_value, inline = token.partition("=")
            if name not in by_name:
                raise ValueError(f"unrecognized arguments: {token}")
            dest, kwargs = by_name[name]
            action = kwargs.get("action")
            if action in ("store_true", "store_false", "store_const", "count"):
                if has_value:
                    raise ValueError(f"argument {name}: ignored explicit argument {inline!r}")
                if action == "count":
                    given[dest] = (given.get(dest) or 0) + 1
                else:
                    given[dest] = {"store_true": True, "store_false": False}.get(action, kwargs.get("const"))
                continue
            nargs = kwargs.get("nargs")
            if has_value:
                values = [inline]
            elif nargs in ("*", "+", "?") or isinstance(nargs, int):
                values = []
                limit = nargs if isinstance(nargs, int) else (1 if nargs == "?" else len(tokens))
                while i < len(tokens) and len(values) < limit and not tokens[i].startswith("-"):
                    values.append(tokens[i])
                    i += 1
            else:
                if i >= len(tokens):
                    raise ValueError(f"argument {name}: expected one argument")
                values = [tokens[i]]
                i += 1
            convert = kwargs.get("type")
            if convert is not None:
                try:
                    values = [convert(v) for v in values]
                except (TypeError, ValueError) as error:
                    raise ValueError(f"argument {name}: invalid value {values!r} ({error})") from None
            choices = kwargs.get("choices")
            if choices is not None and any(v not in choices for v in values):
                raise ValueError(f"argument {name}: invalid choice {values!r} (choose from {list(choices)!r})")
            if nargs in ("*", "+") or isinstance(nargs, int):
                value = values
            elif nargs == "?":
                value = values[0] if values else kwargs.get("const")
            else:
                value = values[0]
            if action == "append":
                given[dest] = list(given.get(dest) or []) + [value]
            else:
                given[dest] = value
        return given, words

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
