from locust import HttpUser, constant_pacing, constant_throughput, task


class Paced(HttpUser):
    host = "http://pace.test"
    wait_time = constant_pacing(0.2)

    @task
    def twice(self):
        self.client.get("/first")
        self.client.get("/second")


class Throughput(HttpUser):
    host = "http://pace.test"
    wait_time = constant_throughput(5)

    @task
    def once(self):
        self.client.get("/tp")
