"""Exceptions a locustfile raises or catches, with Locust's names and meanings."""

from ._cover import guard


class LocustError(Exception):
    """A misuse of the locust API."""


class ResponseError(Exception):
    """Raised inside a `catch_response` block: marks that request failed."""


class CatchResponseError(Exception):
    """The failure given to `response.failure(message)`."""


class MissingWaitTimeError(LocustError):
    """Neither the user nor the task set has a wait time."""


class InterruptTaskSet(Exception):
    """Leave the running TaskSet for its parent; `reschedule` runs the parent's next task at once."""

    def __init__(self, reschedule=True):
        super().__init__(reschedule)
        self.reschedule = reschedule


class StopTest(Exception):
    """Stop the whole run."""


class StopUser(Exception):
    """Stop the user that raises it (its on_stop runs)."""


class RescheduleTask(Exception):
    """End the task now; the user waits, then picks its next task."""


class RescheduleTaskImmediately(Exception):
    """End the task now; the user picks its next task without waiting."""


class RPCError(Exception):
    """Kept for imports only: loadlab has no master/worker messaging."""


class RPCSendError(Exception):
    """Kept for imports only: loadlab has no master/worker messaging."""


class RPCReceiveError(Exception):
    """Kept for imports only: loadlab has no master/worker messaging."""

    def __init__(self, *args, addr=None):
        super().__init__(*args)
        self.addr = addr


class RunnerAlreadyExistsError(Exception):
    """An environment got a second runner."""


__getattr__ = guard(__name__)
