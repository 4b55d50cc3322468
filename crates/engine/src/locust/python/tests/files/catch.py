from locust import HttpUser, SequentialTaskSet, constant, task
from locust.exception import ResponseError, StopUser


class Checks(SequentialTaskSet):
    @task
    def manual_failure(self):
        with self.client.get("/ok", name="manual_failure", catch_response=True) as r:
            if r.text == "ok":
                r.failure("got ok")

    @task
    def manual_success(self):
        with self.client.get("/missing", name="manual_success", catch_response=True) as r:
            r.success()

    @task
    def default_verdict(self):
        with self.client.get("/missing", name="default_verdict", catch_response=True):
            pass

    @task
    def response_error(self):
        with self.client.get("/ok", name="response_error", catch_response=True):
            raise ResponseError("nope")

    @task
    def other_error(self):
        with self.client.get("/ok", name="other_error", catch_response=True):
            raise ValueError("boom")

    @task
    def connection_error(self):
        r = self.client.get("/down", name="connection_error")
        print("CONN", r.status_code, r.ok, type(r.error).__name__, str(r.error), flush=True)
        with self.client.get("/down", name="connection_error_caught", catch_response=True):
            pass

    @task
    def response_shape(self):
        r = self.client.get("/json", name="shape")
        print(
            "SHAPE",
            r.status_code,
            r.json()["a"],
            r.headers["content-type"],
            r.headers.get("X-MULTI"),
            r.reason,
            r.ok,
            r.elapsed.total_seconds() > 0,
            r.url,
            r.request.method,
            r.request.headers["user-agent"] != "",
            flush=True,
        )
        try:
            self.client.get("/missing", name="raise").raise_for_status()
        except OSError as e:
            print("RAISED", e, flush=True)

    @task
    def done(self):
        raise StopUser()


class Checker(HttpUser):
    host = "http://check.test"
    wait_time = constant(0)
    tasks = [Checks]
