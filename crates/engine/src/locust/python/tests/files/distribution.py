from locust import HttpUser, constant, task


class Heavy(HttpUser):
    host = "http://dist.test"
    weight = 3
    wait_time = constant(10)

    @task
    def t(self):
        self.client.get("/heavy")


class Light(HttpUser):
    host = "http://dist.test"
    weight = 1
    wait_time = constant(10)

    @task
    def t(self):
        self.client.get("/light")


class Admin(HttpUser):
    host = "http://dist.test"
    fixed_count = 1
    wait_time = constant(10)

    def on_stop(self):
        self.client.get("/admin-bye")

    @task
    def t(self):
        self.client.get("/admin")
