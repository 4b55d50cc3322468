"""loadlab's Locust helper: runs a locustfile's users as gevent greenlets and sends every
HTTP request they make to loadlab's engine over the socket on file descriptor 3.

Modules: `helper` (entry point and message handling), `runtime` (the socket), `loader`
(importing locustfiles, choosing classes), `swarm` (starting and stopping users).
"""
