"""Tags set by listeners: init asks for two, test_start excludes one of them. Locust's local
runner filters the tasks by parsed_options' tags just before test_start fires, so only init's
count; with several processes, the workers filter by what the master had after test_start."""

from locust import HttpUser, constant, events, tag, task


@events.init.add_listener
def on_init(environment, **kwargs):
    environment.parsed_options.tags = ["keep", "drop"]


@events.test_start.add_listener
def on_test_start(environment, **kwargs):
    environment.parsed_options.exclude_tags = ["drop"]


class Tagged(HttpUser):
    host = "http://tags.test"
    wait_time = constant(0.01)

    @tag("keep")
    @task
    def kept(self):
        self.client.get("/kept")

    @tag("drop")
    @task
    def dropped(self):
        self.client.get("/dropped")

    @task
    def plain(self):
        self.client.get("/plain")
