"""Makes a shim module refuse, by name, what loadlab's locust does not provide."""

import importlib


class NotCoveredError(ImportError):
    """A locustfile asked for a part of Locust that loadlab's shim does not have."""


def not_covered(module_name, name):
    """The error for `from module_name import name` when the shim lacks it."""
    return NotCoveredError(
        f"loadlab's locust does not cover `{name}` (from {module_name}); "
        "loadlab runs a locustfile only with what its own locust package provides",
        name=module_name,
    )


def guard(module_name, package=False):
    """A module `__getattr__` that imports a shim submodule of that name if there is one,
    and otherwise fails with an ImportError naming what is missing."""

    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError(name)
        if package:
            try:
                return importlib.import_module(f"{module_name}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{module_name}.{name}":
                    raise
        raise not_covered(module_name, name)

    return __getattr__
