from locust import HttpUser, SequentialTaskSet, TaskSet, constant, task
from locust.exception import RescheduleTask


class Nested(TaskSet):
    def on_start(self):
        self.client.get("/nested/start")

    @task
    def inner(self):
        self.client.get("/nested/inner")
        self.interrupt()

    def on_stop(self):
        self.client.get("/nested/stop")


def fails(taskset):
    taskset.client.get("/fails")
    raise ValueError("broken task")


def reschedule(taskset):
    taskset.client.get("/resched")
    raise RescheduleTask()


class Flow(SequentialTaskSet):
    tasks = [Nested, fails, reschedule]


class Walker(HttpUser):
    host = "http://walk.test"
    wait_time = constant(0)
    tasks = [Flow]
