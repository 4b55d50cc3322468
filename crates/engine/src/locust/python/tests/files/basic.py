from locust import HttpUser, between, events, tag, task
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

requests_seen = []


@events.init_command_line_parser.add_listener
def add_arguments(parser):
    parser.add_argument("--my-arg", default="the-default")
    parser.add_argument("--given-arg", type=int, default=0)


@events.init.add_listener
def on_init(environment, **kwargs):
    assert isinstance(environment.runner, LocalRunner)
    assert not isinstance(environment.runner, (MasterRunner, WorkerRunner))
    print("INIT", environment.host, flush=True)


@events.test_start.add_listener
def on_test_start(environment, **kwargs):
    options = environment.parsed_options
    print("TEST_START", options.my_arg, options.given_arg, options.num_users, options.not_an_option, flush=True)


@events.test_stop.add_listener
def on_test_stop(environment, **kwargs):
    print("TEST_STOP", len(requests_seen), flush=True)


@events.quitting.add_listener
def on_quitting(environment, **kwargs):
    print("QUITTING", flush=True)


@events.request.add_listener
def on_request(request_type, name, response_time, response_length, exception, response, context, **kwargs):
    requests_seen.append((request_type, name))


class Shop(HttpUser):
    host = "http://shop.test"
    wait_time = between(0, 0.01)

    def on_start(self):
        self.client.post("/login", data={"user": "a b", "pw": "x&y"})

    def on_stop(self):
        self.client.get("/logout")

    @tag("browse")
    @task(3)
    def browse(self):
        self.client.get("/items", params={"page": 2, "q": ["a", "b"]}, name="/items?page=[n]")

    @tag("buy")
    @task
    def buy(self):
        response = self.client.post("/cart", json={"id": 1}, headers={"X-Token": "t"}, cookies={"extra": "1"})
        assert response.cookies.get("cart") in (None, "full")
