import io

from locust import HttpUser, constant, task
from locust.exception import StopUser


class Bodies(HttpUser):
    host = "http://body.test/base"
    wait_time = constant(0)

    @task
    def send(self):
        self.client.post("/form", data={"a": "1 2", "b": ["x", "y"]})
        self.client.put("/raw", data="plain text", headers={"Content-Type": "text/plain"})
        self.client.patch("/bytes", data=b"\x00\x01")
        self.client.post("/files", data={"field": "v"}, files={"up": ("hello.txt", io.BytesIO(b"HELLO"), "text/plain")})
        self.client.delete("http://other.test/abs path", allow_redirects=False, timeout=(2, 7))
        self.client.head("/head")
        self.client.request("OPTIONS", "/opt", headers={"Host": "ignored", "X-None": None})
        purged = self.client.request("purge", "/cache")
        self.client.get("/seen", params={"m": purged.request.method})
        try:
            self.client.request("", "/never")
        except ValueError:
            self.client.get("/bad-method")
        raise StopUser()
