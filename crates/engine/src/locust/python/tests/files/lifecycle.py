from locust import HttpUser, constant, task


class Broken(HttpUser):
    host = "http://life.test"
    wait_time = constant(0.05)
    weight = 0
    fixed_count = 1

    def on_start(self):
        raise KeyError("no start")

    @task
    def never(self):
        self.client.get("/never")


class Counted(HttpUser):
    host = "http://life.test"
    wait_time = constant(0)

    @task
    def t(self):
        self.client.get("/counted")
