from locust import HttpUser, constant, task


class Slow(HttpUser):
    host = "http://slow.test"
    wait_time = constant(0)

    @task
    def slow(self):
        self.client.get("/slow")
        print("SLOW DONE", flush=True)

    def on_stop(self):
        self.client.get("/bye")
