import time

from locust import User, constant, events, task


class CustomClientUser(User):
    wait_time = constant(0.01)
    rounds = 0

    @task
    def call(self):
        start = time.perf_counter()
        CustomClientUser.rounds += 1
        events.request.fire(
            request_type="grpc",
            name="Hello",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=12,
            exception=None if CustomClientUser.rounds % 2 else RuntimeError("odd failure"),
            context={},
        )
        if CustomClientUser.rounds == 4:
            self.environment.runner.quit()
