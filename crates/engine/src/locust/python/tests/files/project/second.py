from _shared import PATH
from locust import HttpUser, task


class Second(HttpUser):
    host = "http://second.test"

    @task
    def t(self):
        self.client.get(PATH)
