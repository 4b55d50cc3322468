# Seed 002's users as its students wrote them, a locustfile: each visitor walks the
# institutional site as a Markov chain of pages with weighted transitions and a think time
# per page, then leaves; a new visitor takes its place. The same chain, think times and pages
# as examples/scenarios/seed-002-site.yml (loadlab's `markov` model of it).
#   loadlab serve --port 8080 &
#   loadlab locust -f examples/seed-002-site.locustfile.py -H http://127.0.0.1:8080 -u 40 -r 2 -t 4m
# SEED002_THINK_SCALE multiplies every think time and SEED002_WORK_MS sets the pages' work (the
# test walks the chain with 0.001 and 0).
import os
import random
import time

from locust import HttpUser, constant, task

SCALE = float(os.environ.get("SEED002_THINK_SCALE", "1"))
WORK_MS = int(os.environ.get("SEED002_WORK_MS", "250"))

# Each state: the page it loads (None for a state that only routes), its think time, and
# where the visitor goes next with what weight.
CHAIN = {
    "root": (None, None, {"home": 1}),
    "home": ("home", lambda: random.uniform(2, 5), {"news": 0.4, "about": 0.3, "events": 0.2, "end": 0.1}),
    "news": ("news", lambda: random.expovariate(1 / 8), {"home": 0.5, "news": 0.3, "events": 0.1, "end": 0.1}),
    "events": ("events", lambda: random.expovariate(1 / 5), {"home": 0.6, "news": 0.2, "end": 0.2}),
    "about": (None, None, {"institution": 0.6, "contact": 0.3, "legal": 0.1}),
    "institution": ("institution", lambda: random.uniform(5, 15), {"home": 0.7, "end": 0.3}),
    "contact": ("contact", lambda: random.uniform(3, 10), {"home": 0.5, "end": 0.5}),
    "legal": ("legal", lambda: random.uniform(30, 90), {"end": 1}),
}


class Visitor(HttpUser):
    wait_time = constant(0)

    @task
    def visit(self):
        state = "root"
        while state != "end":
            page, think, following = CHAIN[state]
            if page is not None:
                self.client.get(f"/site/{page}?work_ms={WORK_MS}", name=f"/site/{page}")
                time.sleep(think() * SCALE)
            state = random.choices(list(following), weights=list(following.values()))[0]
