"""In-process checks of the shim's small parts: cookie jar, headers, options, messages."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from locust.argument_parser import LocustArgumentParser
from locust.clients import CaseInsensitiveDict, CookieJar, _encode_body, _headers_from_pairs
from locust.env import ParsedOptions
from locust.event import EventHook, error_text
from locust.exception import CatchResponseError, StopUser
from locust.util.timespan import parse_timespan


class CookieJarTest(unittest.TestCase):
    def test_dict_access_and_headers(self):
        jar = CookieJar()
        self.assertIsNone(jar.header_for("http://a.test/"))
        jar.set("token", "t1")
        jar["lang"] = "en"
        self.assertEqual(jar.get("token"), "t1")
        self.assertEqual(jar["lang"], "en")
        self.assertIn("lang", jar)
        self.assertEqual(jar.get_dict(), {"token": "t1", "lang": "en"})
        self.assertEqual(jar.header_for("http://any.test/x"), "token=t1; lang=en")
        self.assertEqual(jar.header_for("http://any.test/x", {"lang": "fi", "k": "v"}), "token=t1; lang=fi; k=v")
        del jar["token"]
        self.assertEqual(jar.keys(), ["lang"])
        jar.clear()
        self.assertEqual(len(jar), 0)

    def test_cookies_from_responses_follow_domain_path_and_secure(self):
        jar = CookieJar()
        jar.take_from(
            "http://shop.test/account/login",
            [
                ["Set-Cookie", "sid=1; Path=/"],
                ["Set-Cookie", "deep=2; Path=/account"],
                ["Set-Cookie", "safe=3; Path=/; Secure"],
            ],
        )
        self.assertEqual(jar.header_for("http://shop.test/account/x"), "deep=2; sid=1")
        self.assertEqual(jar.header_for("http://shop.test/"), "sid=1")
        self.assertEqual(jar.header_for("https://shop.test/"), "sid=1; safe=3")
        self.assertIsNone(jar.header_for("http://other.test/"))
        jar.take_from("http://shop.test/", [["Set-Cookie", "sid=9; Path=/"]])
        self.assertEqual(jar.header_for("http://shop.test/"), "sid=9")
        jar.clear("shop.test", "/", "sid")
        self.assertIsNone(jar.header_for("http://shop.test/"))


class SmallPartsTest(unittest.TestCase):
    def test_case_insensitive_headers(self):
        headers = _headers_from_pairs([["Content-Type", "a"], ["set-cookie", "x"], ["Set-Cookie", "y"]])
        self.assertEqual(headers["content-type"], "a")
        self.assertEqual(headers["SET-COOKIE"], "x, y")
        self.assertEqual(list(headers), ["Content-Type", "set-cookie"])
        d = CaseInsensitiveDict({"Accept": "*/*"})
        d.update({"ACCEPT": "text/html"})
        self.assertEqual(dict(d.items()), {"ACCEPT": "text/html"})

    def test_bodies(self):
        self.assertEqual(
            _encode_body({"a": None, "b": [1, 2], "c": "x y"}, None, None),
            (b"b=1&b=2&c=x+y", "application/x-www-form-urlencoded"),
        )
        self.assertEqual(_encode_body(None, {"k": [1]}, None), (b'{"k": [1]}', "application/json"))
        self.assertEqual(_encode_body("t", {"ignored": 1}, None), (b"t", None))
        self.assertEqual(_encode_body(None, None, None), (None, None))

    def test_parsed_options_and_parser(self):
        parser = LocustArgumentParser()
        parser.add_argument("--my-flag", action="store_true")
        parser.add_argument("--count", type=int, default=3)
        parser.add_argument("--from-env", env_var="LOADLAB_TEST_FROM_ENV", default="no")
        os.environ["LOADLAB_TEST_FROM_ENV"] = "yes"
        self.addCleanup(os.environ.pop, "LOADLAB_TEST_FROM_ENV", None)
        values = parser.values({"count": "9"})
        self.assertEqual(values, {"my_flag": False, "from_env": "yes"})
        values = parser.values({"my-flag": True})
        self.assertEqual(values, {"my_flag": True, "count": 3, "from_env": "yes"})
        options = ParsedOptions({"users": 5})
        self.assertEqual(options.users, 5)
        self.assertIsNone(options.anything_else)

    def test_the_files_own_options_are_read_from_the_command_line_as_argparse_would(self):
        parser = LocustArgumentParser()
        parser.add_argument("--my-flag", action="store_true")
        parser.add_argument("--count", type=int, default=3)
        parser.add_argument("--name", "-n")
        parser.add_argument("--tag", action="append")
        parser.add_argument("--many", nargs="+")
        given, words = parser.parse_given(
            ["--my-flag", "WebUser", "--count", "7", "-n=ana", "--tag", "a", "--tag=b", "--many", "x", "y", "Other"]
        )
        self.assertEqual(given, {"my_flag": True, "count": 7, "name": "ana", "tag": ["a", "b"], "many": ["x", "y", "Other"]})
        self.assertEqual(words, ["WebUser"])
        with self.assertRaisesRegex(ValueError, "unrecognized arguments: --nope"):
            parser.parse_given(["--nope", "1"])
        with self.assertRaisesRegex(ValueError, "--count: invalid value"):
            parser.parse_given(["--count", "many"])
        with self.assertRaisesRegex(ValueError, "--name: expected one argument"):
            parser.parse_given(["--name"])

    def test_parse_timespan(self):
        self.assertEqual([parse_timespan(t) for t in ("90", "20s", "3m", "1h20m", "3h30m10s")], [90, 20, 180, 4800, 12610])
        with self.assertRaises(ValueError):
            parse_timespan("10x")

    def test_error_text_and_hooks(self):
        self.assertEqual(error_text(CatchResponseError("plain")), "CatchResponseError('plain')")
        self.assertEqual(error_text(ValueError("v")), "ValueError('v')")
        self.assertEqual(error_text(ValueError(object())), "ValueError(<object object at 0x....>)")
        self.assertEqual(error_text("s"), "s")
        self.assertIsNone(error_text(None))
        hook = EventHook()
        calls = []

        @hook.add_listener
        def first(**kw):
            calls.append(kw)
            raise RuntimeError("logged, not raised")

        hook.add_listener(lambda **kw: calls.append("second"))
        with self.assertLogs(level="ERROR"):
            hook.fire(a=1)
        self.assertEqual(calls, [{"a": 1}, "second"])
        hook.remove_listener(first)

        def stopper(**kw):
            raise StopUser()

        hook.add_listener(stopper)
        with self.assertRaises(StopUser):
            hook.fire()


if __name__ == "__main__":
    unittest.main()
