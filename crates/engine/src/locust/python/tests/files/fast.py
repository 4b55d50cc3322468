from locust import FastHttpUser, constant, task
from locust.exception import StopUser


class Api(FastHttpUser):
    host = "http://api.test"
    wait_time = constant(0)
    default_headers = {"X-Default": "d"}

    @task
    def calls(self):
        self.client.get("/plain", params={"x": 1})
        with self.rest("POST", "/rest", json={"a": 1}) as r:
            assert r.js["a"] == 1, "wrong a"
        with self.rest("GET", "/rest-bad") as r:
            pass
        with self.rest("GET", "/rest-assert") as r:
            assert r.js["a"] == 2, "expected two,"
        raise StopUser()
