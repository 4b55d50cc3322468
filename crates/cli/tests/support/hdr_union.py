"""Percentiles of the union of HdrHistogram interval logs, read by HdrHistogram's Python
implementation (PyPI `hdrhistogram`), not by loadlab: the independent reader the shard tests
check `loadlab merge` against.

Usage: hdr_union.py LOG... ; prints one JSON object: count and p50, p99, p99.9 in the log's
unit (microseconds), over the untagged intervals (latency from the intended start).

Both readers take the value of the smallest bucket holding a given rank of the sorted values,
but they pick the rank of quantile q of N values differently: the Rust crate loadlab uses
takes ceil(q*N), the Python (and Java) implementation rounds q*N to the nearest rank. The
values here are asked at the nearest-rank definition's rank ceil(q*N), so the two readers are
compared at the same rank; `nearest` holds the Python reader's own p99 and p99.9 as well.
"""

import json
import math
import sys

from hdrh.histogram import HdrHistogram

union = HdrHistogram(1, 3_600_000_000, 3)
for path in sys.argv[1:]:
    with open(path) as log:
        for line in log:
            if line.startswith(("#", '"', "Tag=")) or not line.strip():
                continue
            payload = line.strip().split(",")[3]
            union.add(HdrHistogram.decode(payload))

n = union.get_total_count()


def at_rank_of(quantile):
    """The value at rank ceil(quantile * n), asked through the Python reader's percentile."""
    rank = max(1, math.ceil(quantile * n))
    return union.get_value_at_percentile(100.0 * rank / n)


print(json.dumps({
    "count": n,
    "p50": at_rank_of(0.5),
    "p99": at_rank_of(0.99),
    "p99_9": at_rank_of(0.999),
    "nearest": {
        "p99": union.get_value_at_percentile(99),
        "p99_9": union.get_value_at_percentile(99.9),
    },
}))
