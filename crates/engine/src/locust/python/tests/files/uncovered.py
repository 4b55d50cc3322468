from locust import HttpLocust, task
