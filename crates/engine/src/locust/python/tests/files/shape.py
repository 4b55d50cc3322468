from locust import HttpUser, LoadTestShape, constant, task


class UserA(HttpUser):
    host = "http://a.test"
    wait_time = constant(1)

    @task
    def a(self):
        self.client.get("/a")


class UserB(HttpUser):
    host = "http://b.test"
    wait_time = constant(1)

    @task
    def b(self):
        self.client.get("/b")


class Stages(LoadTestShape):
    def tick(self):
        run_time = self.get_run_time()
        if run_time < 10:
            return (5, 2.5)
        if run_time < 20:
            return (3, 1, [UserB])
        if run_time < 30:
            raise RuntimeError("shape broke")
        return None
