"""The helper driven as loadlab drives it: a subprocess on a socketpair, answered by FakeEngine."""

import base64
import json
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_engine import PYTHON_DIR, FakeEngine, file_path, ok_reply, reply, wait_output

sys.path.insert(0, PYTHON_DIR)


def body_of(request):
    return base64.b64decode(request["body"]) if request["body"] else None


def header(request, name):
    found = [v for k, v in request["headers"] if k.lower() == name.lower()]
    return found[0] if found else None


def requests_to(engine, suffix):
    return [m for m in engine.of("request") if m["url"].split("?")[0].endswith(suffix)]


class HelperTest(unittest.TestCase):
    def start(self, responder=ok_reply, extra_env=None):
        engine = FakeEngine(responder=responder, extra_env=extra_env)
        self.addCleanup(engine.close)
        return engine


class ReadyAndRequests(HelperTest):
    def responder(self, request):
        if request["url"].endswith("/login"):
            return reply(
                headers=[("Set-Cookie", "sid=abc; Path=/"), ("Set-Cookie", "theme=dark; Path=/")],
                url=request["url"],
            )
        return ok_reply(request)

    def test_ready_requests_cookies_and_stop(self):
        engine = self.start(self.responder)
        ready = engine.init("basic.py", options={"users": 3, "spawn_rate": 1, "given_arg": "7"})
        self.assertEqual(ready["op"], "ready", ready)
        self.assertFalse(ready["shape"])
        (shop,) = ready["classes"]
        self.assertEqual(
            shop,
            {
                "name": "Shop",
                "weight": 1,
                "fixed_count": 0,
                "host": "http://shop.test",
                "wait_time": "between(0, 0.01)",
                "tasks": [
                    {"name": "browse", "weight": 3, "tags": ["browse"]},
                    {"name": "buy", "weight": 1, "tags": ["buy"]},
                ],
                "kind": "http",
            },
        )
        wait_output(engine, "INIT None")
        wait_output(engine, "TEST_START the-default 7 3 None")

        engine.send({"op": "users", "count": 1, "rate": 0})
        self.assertEqual(engine.wait_for("spawned")["count"], 1)
        engine.wait_count(lambda m: m["op"] == "request" and "/cart" in m["url"], 1)
        engine.wait_count(lambda m: m["op"] == "request" and "/items" in m["url"], 1)

        login = engine.wait_for("request")
        self.assertEqual(login["method"], "POST")
        self.assertEqual(login["url"], "http://shop.test/login")
        self.assertEqual(body_of(login), b"user=a+b&pw=x%26y")
        self.assertEqual(header(login, "content-type"), "application/x-www-form-urlencoded")
        self.assertIsNone(header(login, "cookie"))
        self.assertIsNone(header(login, "host"))
        self.assertFalse(login["catch"])
        self.assertIsNone(login["intended"])

        items = requests_to(engine, "/items")[0]
        self.assertEqual(items["url"], "http://shop.test/items?page=2&q=a&q=b")
        self.assertEqual(items["name"], "/items?page=[n]")
        self.assertEqual(header(items, "cookie"), "sid=abc; theme=dark")
        self.assertIsNone(items["body"])

        cart = requests_to(engine, "/cart")[0]
        self.assertEqual(json.loads(body_of(cart)), {"id": 1})
        self.assertEqual(header(cart, "content-type"), "application/json")
        self.assertEqual(header(cart, "x-token"), "t")
        self.assertEqual(header(cart, "cookie"), "sid=abc; theme=dark; extra=1")
        self.assertIsNone(cart["name"])
        self.assertEqual(len({m["user"] for m in engine.of("request")}), 1)

        self.assertEqual(engine.stop(), 0)
        self.assertEqual(len(requests_to(engine, "/logout")), 1)
        wait_output(engine, "TEST_STOP")
        wait_output(engine, "QUITTING")
        line = wait_output(engine, "TEST_STOP")
        self.assertGreater(int(line.split()[1]), 2)

    def test_tags_and_class_choice(self):
        engine = self.start()
        ready = engine.init("basic.py", tags=["buy"])
        self.assertEqual([t["name"] for t in ready["classes"][0]["tasks"]], ["buy"])
        engine.send({"op": "users", "count": 2, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request" and "/cart" in m["url"], 4)
        self.assertEqual(requests_to(engine, "/items"), [])

        engine = self.start()
        ready = engine.init("basic.py", exclude_tags=["buy"])
        self.assertEqual([t["name"] for t in ready["classes"][0]["tasks"]], ["browse"])

        engine = self.start()
        failed = engine.init("basic.py", classes=["Nope"])
        self.assertEqual(failed["op"], "failed")
        self.assertIn("Unknown User(s): Nope", failed["error"])

    def slow_engine(self, file="slow.py", **init_fields):
        held = []

        def responder(request):
            if request["url"].endswith("/slow") and not held:
                held.append(request)
                answer = {"op": "response", "id": request["id"], **ok_reply(request)}
                threading.Timer(0.4, lambda: engine.send(answer)).start()
                return None
            return ok_reply(request)

        engine = self.start(responder)
        engine.init(file, **init_fields)
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_for(lambda m: m["op"] == "request" and m["url"].endswith("/slow"))
        engine.send({"op": "stop"})
        engine.wait_for("stopped")
        self.assertEqual(engine.proc.wait(5), 0)
        self.assertEqual(len(requests_to(engine, "/slow")), 1)
        self.assertEqual(len(requests_to(engine, "/bye")), 1)
        return engine

    def test_an_init_listeners_stop_timeout_lets_a_task_finish_at_the_end(self):
        # The environment's stop_timeout, set in init, is the grace the users get.
        engine = self.slow_engine(options={"users": 1, "stop_timeout": 0}, file="slow_grace.py")
        self.assertTrue(any("SLOW DONE" in line for line in engine.output), engine.output)

    def test_stop_timeout_lets_the_task_finish(self):
        engine = self.slow_engine(options={"users": 1, "stop_timeout": 2})
        wait_output(engine, "SLOW DONE")

    def test_stop_without_timeout_kills_at_once_and_runs_on_stop(self):
        engine = self.slow_engine(options={"users": 1, "stop_timeout": 0})
        self.assertFalse(any("SLOW DONE" in line for line in engine.output))

    def test_describe_fires_no_events(self):
        engine = self.start()
        ready = engine.init("basic.py", describe=True)
        self.assertEqual([c["name"] for c in ready["classes"]], ["Shop"])
        time.sleep(0.1)
        self.assertFalse(any("INIT" in line or "TEST_START" in line for line in engine.output))

    def test_socket_on_stdin(self):
        engine = FakeEngine(on_stdin=True)
        self.addCleanup(engine.close)
        self.assertEqual(engine.init("basic.py")["op"], "ready")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request", 2)
        self.assertEqual(engine.stop(), 0)

    def test_end_of_file_exits(self):
        engine = self.start()
        engine.init("basic.py")
        engine.send({"op": "users", "count": 2, "rate": 0})
        engine.wait_for("spawned")
        engine.sock.shutdown(socket.SHUT_RDWR)
        self.assertEqual(engine.proc.wait(3), 0)


class Responses(HelperTest):
    def responder(self, request):
        url = request["url"]
        if url.endswith("/missing"):
            return reply(404, b"no", reason="Not Found", url=url)
        if url.endswith("/down"):
            return reply(0, b"", reason="", url=url, error="ConnectionRefusedError: connect refused")
        if url.endswith("/json"):
            return reply(
                body=b'{"a": 5}',
                headers=[("Content-Type", "application/json"), ("X-Multi", "1"), ("x-multi", "2")],
                url="http://check.test/json-final",
                elapsed_ms=3.5,
            )
        return ok_reply(request)

    def test_catch_response_verdicts_and_response_object(self):
        engine = self.start(self.responder)
        engine.init("catch.py")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_for(lambda m: m["op"] == "request" and m["name"] == "raise")
        time.sleep(0.2)
        names = {m["id"]: m["name"] for m in engine.of("request")}
        verdicts = {
            names[v["id"]]: "dropped" if v.get("drop") else (v["ok"], v["error"]) for v in engine.of("verdict")
        }
        # Worded as Locust's statistics key failures: the exception's repr.
        self.assertEqual(
            verdicts,
            {
                "manual_failure": (False, "CatchResponseError('got ok')"),
                "manual_success": (True, None),
                "default_verdict": (False, "HTTPError('404 Client Error: Not Found for url: default_verdict')"),
                "response_error": (False, "ResponseError('nope')"),
                # another exception leaves the block unreported, as in Locust
                "other_error": "dropped",
                "connection_error_caught": (False, "ConnectionRefusedError: connect refused"),
            },
        )
        catches = {m["name"]: m["catch"] for m in engine.of("request")}
        self.assertTrue(catches["manual_failure"])
        self.assertFalse(catches["connection_error"])
        errors = engine.of("task_error")
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0]["user_class"], "Checker")
        self.assertEqual(errors[0]["task"], "other_error")
        self.assertEqual(errors[0]["error"], "ValueError: boom")
        self.assertIn("Traceback (most recent call last)", errors[0]["traceback"])
        wait_output(engine, "CONN 0 False ConnectionRefusedError ConnectionRefusedError: connect refused")
        wait_output(engine, "SHAPE 200 5 application/json 1, 2 OK True True http://check.test/json-final GET True")
        # raise_for_status() names the URL, as requests does (the failure recorded names "raise")
        wait_output(engine, "RAISED 404 Client Error: Not Found for url: http://check.test/missing")
        count = engine.count(lambda m: m["op"] == "request")
        time.sleep(0.2)
        self.assertEqual(engine.count(lambda m: m["op"] == "request"), count, "StopUser ends the user")
        self.assertEqual(engine.stop(), 0)

    def test_task_sets_interrupt_and_errors(self):
        engine = self.start()
        engine.init("tasksets.py")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request", 11)
        paths = ["/" + m["url"].split("/", 3)[3] for m in engine.of("request")][:11]
        cycle = ["/nested/start", "/nested/inner", "/nested/stop", "/fails", "/resched"]
        self.assertEqual(paths, cycle + cycle + ["/nested/start"])
        error = engine.wait_for("task_error")
        self.assertEqual((error["user_class"], error["task"], error["error"]), ("Walker", "fails", "ValueError: broken task"))
        self.assertIn("broken task", error["traceback"])

    def test_fast_http_user(self):
        def responder(request):
            url = request["url"]
            if url.endswith("/rest") or url.endswith("/rest-assert"):
                return reply(body=b'{"a": 1}', headers=[("Content-Type", "application/json")], url=url)
            if url.endswith("/rest-bad"):
                return reply(body=b"not json", url=url)
            return ok_reply(request)

        engine = self.start(responder)
        ready = engine.init("fast.py")
        self.assertEqual(ready["classes"][0]["kind"], "fasthttp")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "verdict", 3)
        plain, rest, bad, asserted = engine.of("request")[:4]
        self.assertEqual(plain["url"], "http://api.test/plain?x=1")
        self.assertEqual(plain["name"], "/plain")
        self.assertEqual(plain["timeout"], 60.0)
        self.assertEqual(header(plain, "x-default"), "d")
        self.assertEqual(header(rest, "content-type"), "application/json")
        self.assertEqual(header(rest, "accept"), "application/json")
        self.assertEqual(json.loads(body_of(rest)), {"a": 1})
        verdicts = {v["id"]: v for v in engine.of("verdict")}
        self.assertTrue(verdicts[rest["id"]]["ok"])
        self.assertFalse(verdicts[bad["id"]]["ok"])
        self.assertIn("Could not parse response as JSON", verdicts[bad["id"]]["error"])
        self.assertEqual(verdicts[asserted["id"]]["error"], """CatchResponseError('expected two, response was {"a": 1}')""")

    def test_bodies_methods_and_urls(self):
        engine = self.start()
        engine.init("bodies.py")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request", 10)
        form, raw, raw_bytes, files, delete, head, options, purge, seen, bad = engine.of("request")[:10]
        self.assertEqual(form["url"], "http://body.test/base/form")
        self.assertEqual(body_of(form), b"a=1+2&b=x&b=y")
        self.assertEqual((raw["method"], body_of(raw), header(raw, "content-type")), ("PUT", b"plain text", "text/plain"))
        self.assertEqual((raw_bytes["method"], body_of(raw_bytes), header(raw_bytes, "content-type")), ("PATCH", b"\x00\x01", None))
        content_type = header(files, "content-type")
        self.assertTrue(content_type.startswith("multipart/form-data; boundary="))
        boundary = content_type.split("boundary=")[1].encode()
        body = body_of(files)
        self.assertTrue(body.startswith(b"--" + boundary + b"\r\n"))
        self.assertTrue(body.endswith(b"--" + boundary + b"--\r\n"))
        self.assertIn(b'Content-Disposition: form-data; name="field"\r\n\r\nv\r\n', body)
        self.assertIn(
            b'Content-Disposition: form-data; name="up"; filename="hello.txt"\r\nContent-Type: text/plain\r\n\r\nHELLO\r\n',
            body,
        )
        self.assertEqual(delete["method"], "DELETE")
        self.assertEqual(delete["url"], "http://other.test/abs%20path")
        self.assertEqual((delete["redirects"], delete["timeout"]), (False, 7.0))
        self.assertEqual((head["method"], head["redirects"]), ("HEAD", False))
        self.assertEqual(options["method"], "OPTIONS")
        self.assertIsNone(header(options, "host"))
        self.assertIsNone(header(options, "x-none"))
        # the method as written goes to loadlab (its stats keep it, as Locust's); the wire's
        # and response.request's are upper case
        self.assertEqual(purge["method"], "purge")
        self.assertEqual(seen["url"], "http://body.test/base/seen?m=PURGE")
        # an empty method sends nothing: the call raises, as Locust's clients do
        self.assertEqual(bad["url"], "http://body.test/base/bad-method")


class Scheduling(HelperTest):
    def test_constant_pacing_sets_intended(self):
        engine = self.start()
        ready = engine.init("pacing.py", classes=["Paced"])
        self.assertEqual(ready["classes"][0]["wait_time"], "constant_pacing(0.2)")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request" and m["url"].endswith("/first"), 4)
        firsts = requests_to(engine, "/first")[:4]
        seconds = requests_to(engine, "/second")
        self.assertIsNone(firsts[0]["intended"])
        due = [m["intended"] for m in firsts[1:]]
        self.assertTrue(all(d is not None for d in due))
        for a, b in zip(due, due[1:]):
            self.assertAlmostEqual(b - a, 0.2, delta=0.05)
        self.assertTrue(all(m["intended"] is None for m in seconds))

    def test_constant_throughput(self):
        engine = self.start()
        ready = engine.init("pacing.py", classes=["Throughput"])
        self.assertEqual(ready["classes"][0]["wait_time"], "constant_throughput(5)")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request", 3)
        due = [m["intended"] for m in engine.of("request")[1:3]]
        self.assertAlmostEqual(due[1] - due[0], 0.2, delta=0.05)

    def test_shape(self):
        engine = self.start()
        ready = engine.init("shape.py")
        self.assertTrue(ready["shape"])
        self.assertEqual(ready["shape_name"], "Stages")
        engine.send({"op": "tick", "run_time": 1.0, "user_count": 0})
        self.assertEqual(engine.wait_for("shape"), {"op": "shape", "users": 5, "rate": 2.5})
        engine.send({"op": "tick", "run_time": 12.0, "user_count": 5})
        self.assertEqual(
            engine.wait_for(lambda m: m["op"] == "shape" and m.get("users") == 3),
            {"op": "shape", "users": 3, "rate": 1.0, "classes": ["UserB"]},
        )
        engine.send({"op": "users", "count": 2, "rate": 0, "classes": ["UserB"]})
        engine.wait_for("spawned")
        engine.wait_count(lambda m: m["op"] == "request", 2)
        self.assertEqual({m["url"] for m in engine.of("request")}, {"http://b.test/b"})
        engine.send({"op": "tick", "run_time": 25.0, "user_count": 3})
        engine.wait_for(lambda m: m["op"] == "shape" and m.get("stop"))
        error = engine.wait_for("task_error")
        self.assertEqual((error["user_class"], error["task"]), ("Stages", "tick"))
        engine.send({"op": "tick", "run_time": 31.0, "user_count": 3})
        engine.wait_count(lambda m: m["op"] == "shape" and m.get("stop"), 2)

    def test_distribution_over_helpers_and_lifo_stop(self):
        from loadlab_locust.swarm import ClassSequence

        class Cls:
            fixed_count = 0

            def __init__(self, name, weight=1, fixed=0):
                self.__name__ = name
                self.weight = weight
                self.fixed_count = fixed

        heavy, light, admin = Cls("Heavy", 3), Cls("Light", 1), Cls("Admin", 1, fixed=1)
        seq = ClassSequence([heavy, light, admin])
        names = [seq.at(i).__name__ for i in range(41)]
        self.assertEqual(names[0], "Admin")
        self.assertEqual(sorted(names[1:5]), ["Heavy", "Heavy", "Heavy", "Light"])
        self.assertEqual((names.count("Admin"), names.count("Heavy"), names.count("Light")), (1, 30, 10))
        only_fixed = ClassSequence([Cls("A", 1, fixed=2)])
        self.assertIsNotNone(only_fixed.at(1))
        self.assertIsNone(only_fixed.at(2))

        for helper in (0, 1):
            engine = self.start()
            engine.init("distribution.py", helper=helper, helpers=2)
            engine.send({"op": "users", "count": 3, "rate": 0})
            self.assertEqual(engine.wait_for("spawned")["count"], 3)
            engine.wait_count(lambda m: m["op"] == "request", 3)
            first = {}
            for m in engine.of("request"):
                first.setdefault(m["user"], m["url"].rsplit("/", 1)[1])
            expected = [names[k * 2 + helper].lower() for k in range(3)]
            self.assertEqual([first[u] for u in sorted(first)], expected)
            start = len(engine.messages)
            engine.send({"op": "users", "count": 1, "rate": 0})
            self.assertEqual(engine.wait_for("spawned", start=start)["count"], 1)
            self.assertEqual(len(requests_to(engine, "/admin-bye")), 0)
            if helper == 0:
                start = len(engine.messages)
                engine.send({"op": "users", "count": 0, "rate": 0})
                engine.wait_for("spawned", start=start)
                engine.wait_for(lambda m: m["op"] == "request" and m["url"].endswith("/admin-bye"))

    def test_spawn_rate(self):
        engine = self.start()
        engine.init("distribution.py")
        began = time.monotonic()
        engine.send({"op": "users", "count": 3, "rate": 2})
        self.assertEqual(engine.wait_for("spawned")["count"], 3)
        self.assertGreater(time.monotonic() - began, 0.9)
        self.assertEqual(len({m["user"] for m in engine.of("request")}), 3)

    def test_spawn_batches_follow_the_runs_rate_over_helpers(self):
        # Locust starts floor(R) users at once every floor(R)/R s: with R = 3 over two helpers
        # (1.5 each), helper 0's two users (run-wide numbers 0 and 2) both start at once.
        engine = self.start()
        engine.init("distribution.py", helper=0, helpers=2)
        began = time.monotonic()
        engine.send({"op": "users", "count": 2, "rate": 1.5})
        self.assertEqual(engine.wait_for("spawned")["count"], 2)
        self.assertLess(time.monotonic() - began, 0.5)

    def test_a_user_that_stopped_itself_is_not_replaced(self):
        engine = self.start()
        engine.init("stop_soon.py")
        # one user a second: the first has ended long before the second starts
        engine.send({"op": "users", "count": 2, "rate": 1})
        engine.wait_for("spawned")
        time.sleep(1.4)
        self.assertEqual(len(requests_to(engine, "/once")), 2)


class EventsAndFiles(HelperTest):
    def test_user_fired_request_events_and_quit(self):
        engine = self.start()
        ready = engine.init("custom_events.py")
        self.assertEqual(ready["classes"][0]["kind"], "user")
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_for("quit")
        events = engine.of("event")
        self.assertGreaterEqual(len(events), 4)
        self.assertEqual(
            {k: events[0][k] for k in ("request_type", "name", "response_length", "error")},
            {"request_type": "grpc", "name": "Hello", "response_length": 12, "error": None},
        )
        self.assertEqual(events[1]["error"], "RuntimeError('odd failure')")
        self.assertIsInstance(events[0]["response_time_ms"], float)
        self.assertEqual(engine.of("request"), [])

    def test_an_init_listener_that_raises_ends_the_run_before_it_starts(self):
        engine = self.start()
        failed = engine.init("init_raises.py")
        self.assertEqual(failed["op"], "failed")
        self.assertIn("`init` event listener raised", failed["error"])
        self.assertEqual(engine.proc.wait(5), 1)

    def test_uncovered_names_fail_the_import(self):
        engine = self.start()
        failed = engine.init("uncovered.py")
        self.assertEqual(failed["op"], "failed")
        self.assertIn("does not cover `HttpLocust`", failed["error"])
        self.assertEqual(engine.proc.wait(5), 1)

        engine = self.start()
        failed = engine.init("uncovered_module.py")
        self.assertIn("does not cover the module locust.contrib.dns", failed["error"])

    def test_foreign_locust_package_is_refused(self):
        engine = self.start(extra_env={"PYTHONPATH": file_path("foreign") + os.pathsep + PYTHON_DIR})
        failed = engine.init("basic.py")
        self.assertEqual(failed["op"], "failed")
        self.assertIn("not loadlab's locust package", failed["error"])
        self.assertEqual(engine.proc.wait(5), 1)

    def test_python_without_gevent_fails_clearly(self):
        engine = self.start(extra_env={"PYTHONPATH": file_path("no_gevent") + os.pathsep + PYTHON_DIR})
        failed = engine.init("basic.py")
        self.assertEqual(failed["op"], "failed")
        self.assertIn("needs gevent", failed["error"])
        self.assertEqual(engine.proc.wait(5), 1)

    def test_directory_and_comma_list(self):
        engine = self.start()
        ready = engine.init(file_path("project"))
        self.assertEqual(sorted(c["name"] for c in ready["classes"]), ["First", "Second"])
        engine.send({"op": "users", "count": 2, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request" and m["url"] == "http://second.test/second", 1)

        engine = self.start()
        listed = ",".join(file_path(f"project/{n}.py") for n in ("first", "second"))
        ready = engine.init(listed, host="http://override.test")
        self.assertEqual({c["host"] for c in ready["classes"]}, {"http://override.test"})

    def test_on_start_failure_and_iterations(self):
        engine = self.start()
        engine.init("lifecycle.py", iterations=5)
        engine.send({"op": "users", "count": 2, "rate": 0})
        error = engine.wait_for("task_error")
        self.assertEqual((error["user_class"], error["task"], error["error"]), ("Broken", "on_start", "KeyError: 'no start'"))
        engine.wait_for("quit")
        time.sleep(0.1)
        self.assertEqual(len(requests_to(engine, "/counted")), 5)
        self.assertEqual(requests_to(engine, "/never"), [])


class OptionsFromListeners(HelperTest):
    """What `init` and `test_start` listeners set in `parsed_options`, read as Locust reads it."""

    def test_the_settings_are_read_after_init_and_before_test_start(self):
        engine = self.start()
        ready = engine.init("init_options.py", host="http://cli.test", options={"users": 2, "spawn_rate": 1, "run_time": 2})
        self.assertEqual(ready["op"], "ready", ready)
        self.assertEqual(
            ready["settings"],
            {"num_users": 7, "spawn_rate": 3.5, "run_time": 4.0, "host": "http://started.test", "stop_timeout": 1.5},
        )
        # The environment's host (test_start's) is every class's; parsed_options.host is not read.
        self.assertEqual([c["host"] for c in ready["classes"]], ["http://started.test"])
        # The file's own option, and the tags a Locust master sends its workers too.
        self.assertEqual(
            ready["shared"],
            {
                "host": "http://started.test",
                "stop_timeout": 1.5,
                "options": {"token": "init-0-started", "tags": None, "exclude_tags": None},
            },
        )
        engine.send({"op": "users", "count": 1, "rate": 0})
        request = engine.wait_for("request")
        self.assertEqual(request["url"], "http://started.test/token?token=init-0-started")
        self.assertEqual(engine.stop(), 0)

    def test_other_helpers_take_the_first_ones_host_and_file_options_after_their_init(self):
        engine = self.start()
        shared = {"host": "http://first.test", "stop_timeout": 2.0, "options": {"token": "from-first"}}
        ready = engine.init("init_options.py", helper=1, helpers=2, shared=shared)
        self.assertEqual(ready["op"], "ready", ready)
        # Its own init ran (with its own values), then the first helper's options replaced them.
        wait_output(engine, "INIT_TOKEN init-1")
        self.assertEqual([c["host"] for c in ready["classes"]], ["http://first.test"])
        self.assertEqual(ready["settings"]["stop_timeout"], 2.0)
        engine.send({"op": "users", "count": 1, "rate": 0})
        request = engine.wait_for("request")
        self.assertEqual(request["url"], "http://first.test/token?token=from-first")
        self.assertEqual(engine.stop(), 0)

    def test_unset_options_take_locusts_headless_defaults(self):
        engine = self.start()
        ready = engine.init("basic.py", options={"spawn_rate": None, "run_time": 0})
        self.assertEqual(ready["settings"]["num_users"], 1)
        self.assertEqual(ready["settings"]["spawn_rate"], 1.0)
        self.assertIsNone(ready["settings"]["run_time"])
        self.assertEqual(ready["settings"]["host"], None)
        self.assertEqual(engine.stop(), 0)

    def test_one_helper_filters_tasks_by_the_tags_init_left_before_test_start(self):
        # init asks for two tags; test_start's exclusion comes after the local runner filtered.
        engine = self.start()
        ready = engine.init("init_tags.py", options={"users": 1, "spawn_rate": 1, "tags": None})
        self.assertEqual([t["name"] for t in ready["classes"][0]["tasks"]], ["kept", "dropped"])
        self.assertEqual(ready["shared"]["options"]["exclude_tags"], ["drop"])
        engine.send({"op": "users", "count": 1, "rate": 0})
        engine.wait_count(lambda m: m["op"] == "request", 6)
        urls = {m["url"] for m in engine.of("request")}
        self.assertEqual(urls, {"http://tags.test/kept", "http://tags.test/dropped"})
        self.assertEqual(engine.stop(), 0)

    def test_several_helpers_filter_tasks_by_the_tags_the_first_had_after_test_start(self):
        # As Locust's workers, by the options their master sent after its test_start.
        for helper in (0, 1):
            engine = self.start()
            shared = {"host": None, "options": {"tags": ["keep", "drop"], "exclude_tags": ["drop"]}}
            ready = engine.init("init_tags.py", helper=helper, helpers=2, shared=shared)
            self.assertEqual([t["name"] for t in ready["classes"][0]["tasks"]], ["kept"], helper)
            self.assertEqual(engine.stop(), 0)

    def test_the_files_own_options_given_on_the_command_line_reach_the_users(self):
        engine = self.start()
        ready = engine.init("basic.py", file_args=["--my-arg", "from-cli", "Shop", "--given-arg=5"])
        self.assertEqual(ready["op"], "ready", ready)
        self.assertEqual([c["name"] for c in ready["classes"]], ["Shop"])
        wait_output(engine, "TEST_START from-cli 5 1 None")
        self.assertEqual(engine.stop(), 0)

    def test_an_option_the_file_does_not_add_fails_naming_it(self):
        engine = self.start()
        ready = engine.init("basic.py", file_args=["--no-such-option", "1"])
        self.assertEqual(ready["op"], "failed", ready)
        self.assertIn("unrecognized arguments: --no-such-option", ready["error"])

    def test_an_option_that_is_not_a_number_fails_naming_it(self):
        engine = self.start()
        ready = engine.init("basic.py", options={"users": "many"})
        self.assertEqual(ready["op"], "failed", ready)
        self.assertIn("parsed_options.num_users", ready["error"])


if __name__ == "__main__":
    unittest.main()
