"""This helper's own request statistics (`environment.stats`), for locustfiles that read them
while running. loadlab keeps the run's real statistics; these count only this helper's
requests."""

import time

from ._cover import guard
from .event import error_text

PERCENTILES_TO_REPORT = [0.50, 0.66, 0.75, 0.80, 0.90, 0.95, 0.98, 0.99, 0.999, 0.9999, 1.0]


def _bucket(ms):
    """Response times kept as Locust keeps them: exact below 100 ms, then 2-3 significant digits."""
    if ms < 100:
        return round(ms)
    if ms < 1000:
        return round(ms, -1)
    if ms < 10000:
        return round(ms, -2)
    return round(ms, -3)


class StatsEntry:
    """Counts for one (method, name) pair, or the total."""

    def __init__(self, stats, name, method):
        self.stats = stats
        self.name = name
        self.method = method
        self.reset()

    def reset(self):
        self.start_time = time.time()
        self.num_requests = 0
        self.num_none_requests = 0
        self.num_failures = 0
        self.total_response_time = 0.0
        self.min_response_time = None
        self.max_response_time = 0.0
        self.total_content_length = 0
        self.response_times = {}
        self.last_request_timestamp = None

    def log(self, response_time, content_length):
        self.num_requests += 1
        self.last_request_timestamp = time.time()
        if response_time is None:
            self.num_none_requests += 1
        else:
            self.total_response_time += response_time
            if self.min_response_time is None or response_time < self.min_response_time:
                self.min_response_time = response_time
            if response_time > self.max_response_time:
                self.max_response_time = response_time
            key = _bucket(response_time)
            self.response_times[key] = self.response_times.get(key, 0) + 1
        self.total_content_length += content_length or 0

    def log_error(self, error):
        self.num_failures += 1

    @property
    def fail_ratio(self):
        if self.num_requests:
            return self.num_failures / self.num_requests
        return 1.0 if self.num_failures else 0.0

    @property
    def avg_response_time(self):
        timed = self.num_requests - self.num_none_requests
        return self.total_response_time / timed if timed else 0.0

    @property
    def median_response_time(self):
        return self.get_response_time_percentile(0.5)

    @property
    def avg_content_length(self):
        return self.total_content_length / self.num_requests if self.num_requests else 0.0

    @property
    def total_rps(self):
        elapsed = (self.last_request_timestamp or self.start_time) - self.start_time
        return self.num_requests / elapsed if elapsed > 0 else 0.0

    @property
    def total_fail_per_sec(self):
        elapsed = (self.last_request_timestamp or self.start_time) - self.start_time
        return self.num_failures / elapsed if elapsed > 0 else 0.0

    def get_response_time_percentile(self, percent):
        """The response time (ms) under which `percent` (0..1) of the requests fall."""
        total = sum(self.response_times.values())
        if not total:
            return 0
        limit = total * percent
        seen = 0
        for key in sorted(self.response_times):
            seen += self.response_times[key]
            if seen >= limit:
                return key
        return max(self.response_times)

    def __repr__(self):
        return f"<StatsEntry {self.method} {self.name}: {self.num_requests} requests, {self.num_failures} failures>"


class StatsError:
    """How often one failure happened for one (method, name)."""

    def __init__(self, method, name, error, occurrences=0):
        self.method = method
        self.name = name
        self.error = error
        self.occurrences = occurrences

    def occurred(self):
        self.occurrences += 1


class RequestStats:
    """Per (name, method) entries, `total`, and `errors`."""

    def __init__(self, use_response_times_cache=True):
        self.entries = {}
        self.errors = {}
        self.total = StatsEntry(self, "Aggregated", None)

    def get(self, name, method):
        """The entry for (name, method), created when missing."""
        entry = self.entries.get((name, method))
        if entry is None:
            entry = self.entries[(name, method)] = StatsEntry(self, name, method)
        return entry

    def log_request(self, method, name, response_time, content_length):
        self.total.log(response_time, content_length)
        self.get(name, method).log(response_time, content_length)

    def log_error(self, method, name, error):
        self.total.log_error(error)
        self.get(name, method).log_error(error)
        text = error_text(error)
        key = (method, name, text)
        row = self.errors.get(key)
        if row is None:
            row = self.errors[key] = StatsError(method, name, text)
        row.occurred()

    def record(self, method, name, response_time, content_length, error):
        """One request: counted, and counted as failed when `error` is set."""
        self.log_request(method, name, response_time, content_length)
        if error is not None:
            self.log_error(method, name, error)

    @property
    def num_requests(self):
        return self.total.num_requests

    @property
    def num_failures(self):
        return self.total.num_failures

    def reset_all(self):
        self.total.reset()
        self.errors = {}
        for entry in self.entries.values():
            entry.reset()

    def clear_all(self):
        self.total = StatsEntry(self, "Aggregated", None)
        self.entries = {}
        self.errors = {}


__getattr__ = guard(__name__)
