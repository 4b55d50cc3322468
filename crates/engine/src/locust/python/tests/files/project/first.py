from locust import HttpUser, task


class First(HttpUser):
    host = "http://first.test"

    @task
    def t(self):
        self.client.get("/first")
