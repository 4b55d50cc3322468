from locust import HttpUser, events, task


@events.init.add_listener
def needs_web_ui(environment, **kwargs):
    assert environment.web_ui, "needs the web UI"


class Never(HttpUser):
    host = "http://never.test"

    @task
    def t(self):
        self.client.get("/")
