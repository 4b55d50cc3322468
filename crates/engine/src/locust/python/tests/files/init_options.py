"""A file whose listeners change the run's options: `init` sets the users, spawn rate, run time,
the environment's host and the file's own option; `test_start` changes them again, which
Locust reads too late for the users, spawn rate and run time, in time for the host and the
file's option."""

from locust import HttpUser, constant, events, task


@events.init_command_line_parser.add_listener
def add_arguments(parser):
    parser.add_argument("--token", default="from-default")


@events.init.add_listener
def on_init(environment, **kwargs):
    options = environment.parsed_options
    options.num_users = 7
    options.spawn_rate = 3.5
    options.run_time = 4
    options.host = "http://ignored.test"
    options.token = f"init-{environment.runner.worker_index}"
    print("INIT_TOKEN", options.token, flush=True)


@events.test_start.add_listener
def on_test_start(environment, **kwargs):
    options = environment.parsed_options
    options.num_users = 99
    options.spawn_rate = 99
    options.run_time = 99
    options.token = options.token + "-started"
    environment.host = "http://started.test"
    environment.stop_timeout = 1.5


class Reader(HttpUser):
    host = "http://class.test"
    wait_time = constant(0.05)

    @task
    def read(self):
        self.client.get("/token", params={"token": self.environment.parsed_options.token})
