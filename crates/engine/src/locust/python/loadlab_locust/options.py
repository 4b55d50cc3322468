"""The run's settings as Locust reads them from `environment.parsed_options` once `init` has
fired (the users, the spawn rate, the run time), and the options its master hands each worker
(the file's own, with the host): what helper 0 reports in `ready` and the other helpers apply.
"""

import json
import math

# The option names Locust 2.47.0's own command line defines (its master does not send these to
# its workers, but for the three listed in WORKER_NEEDS), with loadlab's aliases (`users`,
# `iterations`). Any other name in `parsed_options` is the file's: an option it added with
# `init_command_line_parser`, or an attribute a listener set.
LOCUST_OPTIONS = frozenset(
    """autoquit autostart build_path class_picker config config_users csv_prefix
    enable_rebalancing equal_weights exclude_tags exit_code_on_error expect_slaves expect_workers
    expect_workers_max_wait headful headless host html_file json json_file legacy_ui list_commands
    locustfile logfile loglevel master master_bind_host master_bind_port master_host master_port
    num_users only_summary otel print_stats processes profile reset_stats run_time
    show_task_ratio show_task_ratio_json skip_log_setup slave spawn_rate stats_history_enabled
    stop_timeout tags tls_cert tls_key user_classes web_auth web_base_path web_host
    web_host_display_name web_login web_port worker users iterations""".split()
)

# Standard options Locust's master sends its workers all the same.
WORKER_NEEDS = frozenset({"expect_workers", "tags", "exclude_tags"})


class OptionError(Exception):
    """An option a listener set that the run cannot use; the message names it."""


def _number(name, value, convert):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = convert(value)
        except (TypeError, ValueError):
            raise OptionError(
                f"environment.parsed_options.{name} is {value!r}, which Locust cannot run with: give a number"
            ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionError(f"environment.parsed_options.{name} is {value!r}: give a finite number")
    return value


def run_settings(parsed):
    """{num_users, spawn_rate, run_time} as Locust's headless start reads them after `init`:
    users and spawn rate 1 when unset, the run time in seconds or None (no limit) when unset or
    zero. Raises OptionError for a value that is not a number."""
    users = parsed.num_users
    rate = parsed.spawn_rate
    run_time = parsed.run_time
    users = 1 if users is None else _number("num_users", users, int)
    rate = 1 if rate is None else _number("spawn_rate", rate, float)
    if run_time is not None:
        run_time = _number("run_time", run_time, float)
    if users < 0:
        raise OptionError(f"environment.parsed_options.num_users is {users}: give 0 or more")
    if rate < 0:
        raise OptionError(f"environment.parsed_options.spawn_rate is {rate}: give 0 or more")
    return {
        "num_users": int(users),
        "spawn_rate": float(rate),
        "run_time": float(run_time) if run_time and run_time > 0 else None,
    }


def file_options(parsed):
    """The options Locust's master sends its workers: every option of the file's own (and
    tags, exclude_tags, expect_workers), as they stand now."""
    chosen = {}
    for key, value in vars(parsed).items():
        if key in LOCUST_OPTIONS and key not in WORKER_NEEDS:
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            # Not something a message carries (Locust's master could not send it either):
            # each helper keeps its own.
            continue
        chosen[key] = value
    return chosen


def tags_of(environment):
    """(tags, exclude_tags) the tasks are filtered by when users start, as Locust's runner
    takes them: the environment's own when set, else `parsed_options`' (empty: no filter)."""
    parsed = environment.parsed_options

    def chosen(own, option):
        if own is not None:
            return set(own)
        value = getattr(parsed, option, None) if parsed is not None else None
        return set(value) if value else None

    return chosen(environment.tags, "tags"), chosen(environment.exclude_tags, "exclude_tags")


def stop_timeout_of(environment):
    """The seconds users get to finish their task when the run ends: the environment's
    `stop_timeout` (0 when it is not a number of seconds)."""
    try:
        seconds = float(environment.stop_timeout or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return min(max(seconds, 0.0), 3600.0) if math.isfinite(seconds) else 0.0
