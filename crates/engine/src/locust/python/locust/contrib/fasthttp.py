"""FastHttpUser: the same API as HttpUser with FastHttpUser's response shape and `rest()`."""

import re
import time
import traceback
from contextlib import contextmanager
from json import JSONDecodeError

from .._cover import guard
from ..clients import Response, _Session
from ..exception import LocustError, StopTest
from ..user.users import _NO_HOST, User


class FastResponse(Response):
    """A FastHttpUser response: `url` is the URL requested (not the one redirected to)."""

    _raise_names_url = False
    _uncaught_error = (
        "If you want to change the state of the request, you must pass catch_response=True. "
        "See http://docs.locust.io/en/stable/writing-a-locustfile.html#validating-responses"
    )

    def failure(self, *args, **kwargs):
        """Record this request as failed (as Locust's, a plain response takes any arguments
        and refuses)."""
        if not self._catch:
            raise LocustError(self._uncaught_error)
        Response.failure(self, *args, **kwargs)

    def __init__(self, reply, request, session, name, catch):
        super().__init__(reply, request, session, name, catch)
        self.url = request.url

    @property
    def text(self):
        if self.status_code == 0 and not self._b64:
            return None
        return super().text


class ResponseContextManager(FastResponse):
    """What `catch_response=True` returns: `success()`/`failure()` decide the outcome."""

    # Defined here, so that a call's errors name this class as Locust's do.
    def success(self):
        """Record this request as successful, whatever its status."""
        Response.success(self)

    def failure(self, exc):
        """Record this request as failed with `exc` (a message or an exception)."""
        Response.failure(self, exc)


class RestResponseContextManager(ResponseContextManager):
    """The response inside `rest()`: `js` holds the parsed JSON body (None when it is not JSON)."""

    js = None


class FastHttpSession(_Session):
    """A FastHttpUser's client. `name` defaults to the URL as given (without `params`)."""

    response_class = FastResponse
    catch_class = ResponseContextManager
    name_from_url = True

    def __init__(self, base_url, request_event=None, user=None, insecure=True, client_pool=None,
                 ssl_context_factory=None, **kwargs):
        super().__init__(base_url, request_event, user)
        self.default_timeout = kwargs.get("network_timeout", 60.0)
        headers = kwargs.get("headers")
        if headers:
            self.headers.update(headers)
        self.cookiejar = self.cookies

    def _stats_name(self, response):
        return response._name

    def request(self, method, url, name=None, data=None, catch_response=False, stream=False, headers=None,
                auth=None, json=None, allow_redirects=True, context={}, **kwargs):
        """Send a request; with `json=` (and no `data`) Accept defaults to application/json."""
        if json is not None and not data and not (headers and ("Accept" in headers or "accept" in headers)):
            headers = {**(headers or {}), "Accept": "application/json"}
        return self._send(method, url, name, catch_response, context, data=data, headers=headers, auth=auth,
                          json=json, allow_redirects=allow_redirects, **kwargs)

    def head(self, url, **kwargs):
        """Send a HEAD request."""
        return self.request("HEAD", url, **kwargs)

    def iter_lines(self, url, method="GET", **kwargs):
        """The lines of a response body (the body arrives whole)."""
        response = self.request(method, url, stream=True, **kwargs)
        response.raise_for_status()
        yield from response.text.splitlines()


class FastHttpUser(User):
    """A user whose `client` is a FastHttpSession. `network_timeout` is each request's
    timeout and `default_headers` go with every request; the connection settings
    (`concurrency`, `insecure`, `max_retries`, proxies, pools) are loadlab's to decide."""

    network_timeout = 60.0
    connection_timeout = 60.0
    max_redirects = 30
    max_retries = 0
    insecure = True
    default_headers = None
    concurrency = 10
    proxy_host = None
    proxy_port = None
    client_pool = None
    ssl_context_factory = None
    abstract = True

    _callstack_regex = re.compile(r'  File "(\/.[^"]*)", line (\d*),(.*)')

    def __init__(self, environment):
        super().__init__(environment)
        if self.host is None:
            raise StopTest(_NO_HOST)
        self.client = FastHttpSession(
            base_url=self.host,
            request_event=self.environment.events.request,
            user=self,
            network_timeout=self.network_timeout,
            headers=self.default_headers,
        )

    @contextmanager
    def rest(self, method, url, headers=None, **kwargs):
        """A JSON request as a `with` block: Content-Type and Accept default to
        application/json, `response.js` is the parsed body (a body that is not JSON fails the
        request), and an exception in the block fails the request instead of the task."""
        headers = dict(headers or {})
        if not ("Content-Type" in headers or "content-type" in headers):
            headers["Content-Type"] = "application/json"
        if not ("Accept" in headers or "accept" in headers):
            headers["Accept"] = "application/json"
        kwargs["catch_response"] = True
        with self.client.request(method, url, headers=headers, **kwargs) as response:
            response.__class__ = RestResponseContextManager
            response.js = None
            if response.status_code == 0:
                response.failure(str(response.error))
            elif response.text:
                try:
                    response.js = response.json()
                except JSONDecodeError as e:
                    response.failure(
                        f"Could not parse response as JSON. {response.text[:250]}, "
                        f"response code {response.status_code}, error {e}"
                    )
            try:
                yield response
            except AssertionError as e:
                if e.args and isinstance(e.args[0], str):
                    message = e.args[0]
                    if message.endswith(","):
                        body = response.text[:200] if response.text else response.text
                        response.failure(f"{message[:-1]}, response was {body}")
                    else:
                        response.failure(message)
                else:
                    response.failure("Assertion failed")
            except Exception as e:
                places = []
                for line in traceback.format_exc().split("\n"):
                    match = self._callstack_regex.match(line)
                    if match:
                        filename = re.sub(r"/((home|Users)/\w*)/", "~/", match.group(1))
                        places.append(f"{filename}:{match.group(2)}{match.group(3)}")
                body = response.text[:200] if response.text else response.text
                response.failure(f"{type(e).__name__}: {e} at {', '.join(places)}. Response was {body}")

    @contextmanager
    def rest_(self, method, url, name=None, **kwargs):
        """rest() with a `_=<milliseconds>` query parameter against caches; the stats name
        keeps `_=...` in place of the number."""
        separator = "&" if "?" in url else "?"
        if name is None:
            name = f"{url}{separator}_=..."
        with self.rest(method, f"{url}{separator}_={int(time.time() * 1000)}", name=name, **kwargs) as response:
            yield response


__getattr__ = guard(__name__)
