from locust import HttpUser, constant, task
from locust.exception import StopUser


class Brief(HttpUser):
    host = "http://brief.test"
    wait_time = constant(0)

    @task
    def once(self):
        self.client.get("/once")
        raise StopUser()
