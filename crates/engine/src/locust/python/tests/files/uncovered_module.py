from locust.contrib.dns import DNSUser
