from locust import HttpUser, constant, task


class BenchUser(HttpUser):
    wait_time = constant(0)

    @task
    def index(self):
        self.client.get("/items", headers={"X-Trace": "1"})
