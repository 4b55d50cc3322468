"""HttpSession, the `client` of an HttpUser: every request is sent by loadlab's engine.

A session keeps the user's cookies and default headers, builds the request (URL joined to the
host, params, form/JSON/multipart body, Cookie and Content-Type headers), sends it as a
`request` message and blocks the calling greenlet until loadlab's `response` comes back.
"""

import base64
import json as _json
import os
import re
import time
from collections.abc import Mapping, MutableMapping
from contextlib import contextmanager
from datetime import timedelta
from http.cookiejar import Cookie
from http.cookiejar import CookieJar as _StdCookieJar
from urllib.parse import quote, urlencode, urlsplit, urlunsplit
from urllib.request import Request as _UrlRequest


from loadlab_locust import runtime

from ._cover import NotCoveredError, guard
from .env import current_environment
from .event import error_text
from .exception import (
    CatchResponseError,
    InterruptTaskSet,
    LocustError,
    RescheduleTask,
    RescheduleTaskImmediately,
    ResponseError,
    StopTest,
    StopUser,
)

_ABSOLUTE = re.compile(r"^https?://", re.IGNORECASE)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NEEDS_QUOTE = re.compile(r"[^A-Za-z0-9\-._~!#$%&'()*+,/:;=?@\[\]]")
_SAFE = "!#$%&'()*+,/:;=?@[]~"
_LOADLAB_WRITES = ("host", "content-length", "connection")
_NOT_SET = object()

DEFAULT_HEADERS = (("User-Agent", "loadlab-locust"), ("Accept", "*/*"))


class CaseInsensitiveDict(MutableMapping):
    """A dict whose keys (header names) match regardless of case; keeps the case first set."""

    __slots__ = ("_store",)

    def __init__(self, data=None, **kwargs):
        self._store = {}
        if data:
            self.update(data)
        if kwargs:
            self.update(kwargs)

    def __setitem__(self, key, value):
        self._store[key.lower()] = (key, value)

    def __getitem__(self, key):
        return self._store[key.lower()][1]

    def __delitem__(self, key):
        del self._store[key.lower()]

    def __contains__(self, key):
        return isinstance(key, str) and key.lower() in self._store

    def __iter__(self):
        return (key for key, _ in self._store.values())

    def __len__(self):
        return len(self._store)

    def lower_items(self):
        """(lower-case name, value) pairs."""
        return ((low, kv[1]) for low, kv in self._store.items())

    def copy(self):
        new = CaseInsensitiveDict()
        new._store = dict(self._store)
        return new

    def __eq__(self, other):
        if isinstance(other, Mapping):
            other = CaseInsensitiveDict(other)
        else:
            return NotImplemented
        return dict(self.lower_items()) == dict(other.lower_items())

    def __repr__(self):
        return repr(dict(self.items()))


def _headers_from_pairs(pairs):
    """Response headers: repeated names joined with ', ', as HTTP allows."""
    headers = CaseInsensitiveDict()
    store = headers._store
    for name, value in pairs:
        low = name.lower()
        old = store.get(low)
        store[low] = (name, value) if old is None else (old[0], f"{old[1]}, {value}")
    return headers


class _HeaderView:
    """The `info()` of a response, as the standard cookie jar reads it."""

    __slots__ = ("_pairs",)

    def __init__(self, pairs):
        self._pairs = pairs

    def get_all(self, name, default=None):
        low = name.lower()
        found = [v for k, v in self._pairs if k.lower() == low]
        return found or default

    def info(self):
        return self


class CookieJar(_StdCookieJar):
    """A session's cookies: the standard cookie jar that also reads like a dict of
    name → value (`get`, `set`, `[name]`, `get_dict()`, `update()`, `clear()`).

    The Cookie header for a URL (without its query) is remembered until the jar changes or
    one of its cookies expires."""

    _CACHE_SIZE = 256

    def __init__(self, policy=None):
        super().__init__(policy)
        self._headers_by_url = {}
        self._valid_until = None

    def set_cookie(self, cookie):
        self._headers_by_url = {}
        super().set_cookie(cookie)

    def clear(self, domain=None, path=None, name=None):
        self._headers_by_url = {}
        super().clear(domain, path, name)

    def _matching(self, name, domain=None, path=None):
        return [
            c
            for c in self
            if c.name == name and (domain is None or c.domain == domain) and (path is None or c.path == path)
        ]

    def get(self, name, default=None, domain=None, path=None):
        """The value of cookie `name` (the first one when several domains have it)."""
        found = self._matching(name, domain, path)
        return found[0].value if found else default

    def set(self, name, value, domain="", path="/", **kwargs):
        """Set cookie `name`; `value` None removes it. A cookie without a domain is sent
        to every host."""
        if value is None:
            for c in self._matching(name, domain or None, None):
                self.clear(c.domain, c.path, c.name)
            return None
        for c in self._matching(name, domain, path):
            self.clear(c.domain, c.path, c.name)
        cookie = Cookie(
            0,
            name,
            str(value),
            None,
            False,
            domain,
            bool(domain),
            domain.startswith("."),
            path,
            True,
            bool(kwargs.get("secure", False)),
            kwargs.get("expires"),
            kwargs.get("expires") is None,
            None,
            None,
            {},
        )
        self.set_cookie(cookie)
        return cookie

    def __getitem__(self, name):
        found = self._matching(name)
        if not found:
            raise KeyError(name)
        return found[0].value

    def __setitem__(self, name, value):
        self.set(name, value)

    def __delitem__(self, name):
        self.set(name, None)

    def __contains__(self, name):
        if isinstance(name, Cookie):
            return any(c is name for c in self)
        return bool(self._matching(name))

    def keys(self):
        return [c.name for c in self]

    def values(self):
        return [c.value for c in self]

    def items(self):
        return [(c.name, c.value) for c in self]

    def get_dict(self, domain=None, path=None):
        """{name: value} of the cookies, optionally of one domain and path."""
        return {
            c.name: c.value
            for c in self
            if (domain is None or c.domain == domain) and (path is None or c.path == path)
        }

    def update(self, other):
        """Add cookies from a dict or another jar."""
        if isinstance(other, _StdCookieJar):
            for c in other:
                self.set_cookie(c)
        else:
            for name, value in dict(other).items():
                self.set(name, value)

    def header_for(self, url, extra=None):
        """The Cookie header value for a request to `url` (None when there is none);
        `extra` ({name: value}) are this request's own cookies and win over the jar's."""
        pairs = {}
        if self._cookies:
            pairs.update(self._stored_pairs(url))
        if extra:
            if isinstance(extra, _StdCookieJar):
                extra = {c.name: c.value for c in extra}
            for name, value in extra.items():
                pairs[name] = value
        if not pairs:
            return None
        return "; ".join(f"{k}={v}" for k, v in pairs.items())

    def _stored_pairs(self, url):
        """{name: value} of the jar's cookies for `url`, remembered per URL without query."""
        key = url.split("?", 1)[0].split("#", 1)[0]
        cache = self._headers_by_url
        if cache and self._valid_until is not None and time.time() >= self._valid_until:
            cache = self._headers_by_url = {}
        found = cache.get(key)
        if found is not None:
            return found
        found = {}
        request = _UrlRequest(url)
        self.add_cookie_header(request)
        header = request.get_header("Cookie")
        if header:
            for part in header.split("; "):
                name, _, value = part.partition("=")
                found.setdefault(name, value)
        expiries = []
        for c in self:
            if not c.domain and c.name not in found:
                found[c.name] = c.value
            if c.expires is not None:
                expiries.append(c.expires)
        self._valid_until = min(expiries) if expiries else None
        if len(cache) >= self._CACHE_SIZE:
            cache.clear()
        cache[key] = found
        return found

    def take_from(self, url, header_pairs):
        """Store the cookies that a response from `url` set."""
        self.extract_cookies(_HeaderView(header_pairs), _UrlRequest(url))


def _has_set_cookie(pairs):
    for name, _ in pairs:
        if len(name) == 10 and name.lower() == "set-cookie":
            return True
    return False


try:
    # Locust's HttpUser raises requests' exceptions, and files catch them by those names
    # (`except requests.exceptions.HTTPError`); Locust installs requests, and so does
    # loadlab's Python environment. A LOADLAB_PYTHON without it gets OSError's.
    from requests import exceptions as _requests_errors
except ImportError:
    _requests_errors = None


class HTTPError(_requests_errors.HTTPError if _requests_errors else OSError):
    """The failure of a response with status 400 or more."""

    def __init__(self, *args, response=None):
        super().__init__(*args)
        self.response = response


def _parses(url):
    """True when `url` is http(s) with a host and a valid port."""
    try:
        parts = urlsplit(url)
        return parts.scheme.lower() in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:
        return False


def _raise_url_error(url):
    """Raise requests' exception for a URL it cannot send, with its message; return when
    requests would send it after all."""
    if _requests_errors is None:
        raise ValueError(f"Invalid URL {url!r}")
    from requests.models import PreparedRequest as _Prepared

    _Prepared().prepare_url(url, None)
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise _requests_errors.InvalidSchema(f"No connection adapters were found for {url!r}")


def _as_requests_error(cls, base):
    """`cls` (a built-in OSError) that is also requests' `base` error, same name and repr."""
    if _requests_errors is None:
        return cls
    return type(cls.__name__, (getattr(_requests_errors, base), cls), {"__module__": __name__})


class PreparedRequest:
    """What was sent: `method`, `url`, `headers`, `body`, `path_url`."""

    __slots__ = ("method", "url", "_pairs", "_headers", "body")

    def __init__(self, method, url, pairs, body):
        self.method = method
        self.url = url
        self._pairs = pairs
        self._headers = None
        self.body = body

    @property
    def headers(self):
        if self._headers is None:
            self._headers = _headers_from_pairs(self._pairs)
        return self._headers

    @property
    def path_url(self):
        """The path and query of the URL."""
        parts = urlsplit(self.url)
        path = parts.path or "/"
        return f"{path}?{parts.query}" if parts.query else path

    def __repr__(self):
        return f"<PreparedRequest [{self.method}]>"


_ERROR_CLASSES = {
    cls.__name__: _as_requests_error(cls, base)
    for cls, base in (
        (ConnectionRefusedError, "ConnectionError"),
        (ConnectionResetError, "ConnectionError"),
        (ConnectionAbortedError, "ConnectionError"),
        (ConnectionError, "ConnectionError"),
        (BrokenPipeError, "ConnectionError"),
        (TimeoutError, "ReadTimeout"),
        (OSError, "RequestException"),
    )
}


def _engine_error(text):
    """An exception for loadlab's error text ("ConnectionRefusedError: ...", "timeout")."""
    name = text.partition(":")[0]
    cls = _ERROR_CLASSES.get(name) or _ERROR_CLASSES["TimeoutError" if "timeout" in text.lower() else "ConnectionError"]
    error = cls(text)
    error.plain_message = True
    return error


def _decoded_length(b64):
    if not b64:
        return 0
    n = len(b64) * 3 // 4
    if b64.endswith("=="):
        return n - 2
    if b64.endswith("="):
        return n - 1
    return n


def _charset(content_type):
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip("'\"")
    return None


class Response:
    """loadlab's answer to one request: `status_code` (0 when no response came, then
    `error` says why), `reason`, `headers`, `content`, `text`, `json()`, `cookies`,
    `elapsed`, `url` (after redirects), `ok`, `encoding`, `raise_for_status()`, `request`."""

    def __init__(self, reply, request, session, name, catch):
        self.status_code = reply.get("status") or 0
        self.reason = reply.get("reason") or ""
        self._pairs = reply.get("headers") or ()
        self._b64 = reply.get("body")
        self.url = reply.get("url") or request.url
        self._elapsed_ms = reply.get("elapsed_ms") or 0.0
        error = reply.get("error")
        self.error = _engine_error(error) if error else None
        self.request = request
        self.history = []
        self._id = reply.get("id")
        self._session = session
        self._name = name
        self._catch = catch
        self._entered = False
        self._manual_result = None
        self._content = _NOT_SET
        self._headers = None
        self._cookies = None
        self._encoding = _NOT_SET
        self._start_time = 0.0
        self._context = None
        self._meta = None
        self._request_type = None

    def __repr__(self):
        return f"<Response [{self.status_code}]>"

    def __bool__(self):
        return self.ok

    @property
    def headers(self):
        if self._headers is None:
            self._headers = _headers_from_pairs(self._pairs)
        return self._headers

    @property
    def content(self):
        if self._content is _NOT_SET:
            self._content = base64.b64decode(self._b64) if self._b64 else b""
        return self._content

    @property
    def encoding(self):
        if self._encoding is _NOT_SET:
            self._encoding = _charset(self.headers.get("content-type"))
        return self._encoding

    @encoding.setter
    def encoding(self, value):
        self._encoding = value

    @property
    def apparent_encoding(self):
        return "utf-8"

    @property
    def text(self):
        content = self.content
        try:
            return content.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:
            return content.decode("utf-8", errors="replace")

    def json(self, **kwargs):
        """The body parsed as JSON."""
        return _json.loads(self.content or self.text, **kwargs)

    @property
    def cookies(self):
        """The cookies this response set."""
        if self._cookies is None:
            jar = CookieJar()
            if _has_set_cookie(self._pairs):
                jar.take_from(self.url, self._pairs)
            self._cookies = jar
        return self._cookies

    @property
    def elapsed(self):
        return timedelta(milliseconds=self._elapsed_ms)

    @property
    def ok(self):
        return self.error is None and 0 < self.status_code < 400

    @property
    def is_redirect(self):
        return "location" in self.headers and self.status_code in (301, 302, 303, 307, 308)

    @property
    def links(self):
        return {}

    def iter_content(self, chunk_size=1, decode_unicode=False):
        """The body in pieces of `chunk_size` bytes (text when `decode_unicode`)."""
        data = self.text if decode_unicode else self.content
        size = chunk_size or len(data) or 1
        for i in range(0, len(data), size):
            yield data[i : i + size]

    def iter_lines(self, chunk_size=512, decode_unicode=False, delimiter=None):
        """The body's lines."""
        data = self.text if decode_unicode else self.content
        yield from (data.split(delimiter) if delimiter else data.splitlines())

    def close(self):
        """Nothing to release: the body is already here."""

    # An HttpUser's raise_for_status() names the URL requested (as requests does); the
    # failure recorded in the statistics names the request's stats name (as Locust does).
    _raise_names_url = True

    def _failure(self, url=None):
        """The exception that fails this response by default, or None when it is ok; its
        message names `url`, or the stats name."""
        if self.error is not None:
            return self.error
        if self.status_code >= 400:
            kind = "Client" if self.status_code < 500 else "Server"
            return HTTPError(
                f"{self.status_code} {kind} Error: {self.reason} for url: {url or self._session._stats_name(self)}",
                response=self,
            )
        return None

    def raise_for_status(self):
        """Raise the failure of this response (a connection error, an HTTP error status,
        or the one given to `failure()`)."""
        if isinstance(self._manual_result, Exception):
            raise self._manual_result
        if self._manual_result is None:
            failure = self._failure(self.url if self._raise_names_url else None)
            if failure is not None:
                raise failure

    @property
    def request_meta(self):
        """What the `request` event gets for this response."""
        if self._meta is None:
            self._meta = self._session._meta(self, None)
        return self._meta

    def __enter__(self):
        if not self._catch:
            raise LocustError("In order to use a with-block for requests, you must also pass catch_response=True")
        self._entered = True
        return self

    def __exit__(self, exc_type, value, tb):
        manual = self._manual_result
        if manual is not None:
            self._settle(None if manual is True else manual)
            return exc_type is None
        if exc_type is None:
            self._settle(self._failure())
            return True
        if isinstance(value, ResponseError):
            self._settle(value)
            return True
        # As Locust: any other exception (StopUser, a KeyError...) leaves the block unreported.
        self._settle(None, drop=True)
        return False

    def _settle(self, failure, drop=False):
        """Send this catch_response request's verdict and fire its request event (neither
        records nor fires when `drop`)."""
        if not self._catch or self._id is None:
            return
        engine = runtime.current()
        if engine is not None:
            verdict = {"op": "verdict", "id": self._id, "ok": failure is None, "error": error_text(failure)}
            if drop:
                verdict["drop"] = True
            engine.send(verdict)
        self._id = None
        if not drop:
            self._session._report(self, failure)

    # What success()/failure() raise on the response of a request made without
    # catch_response; None: Locust's HttpSession's text (its every response is a context
    # manager, never entered then).
    _uncaught_error = None

    def success(self):
        """Record this request as successful, whatever its status."""
        self._check_entered("success()")
        self._manual_result = True

    def failure(self, exc):
        """Record this request as failed with `exc` (a message or an exception)."""
        self._check_entered("failure(...)")
        if not isinstance(exc, Exception):
            exc = CatchResponseError(exc)
        self._manual_result = exc

    def _check_entered(self, call):
        if not self._catch and self._uncaught_error:
            raise LocustError(self._uncaught_error)
        if not self._entered:
            raise LocustError(
                "Tried to set status on a request that has not yet been made. Make sure you use a "
                f"with-block, like this:\n\nwith self.client.request(..., catch_response=True) as response:\n"
                f"    response.{call}"
            )


class ResponseContextManager(Response):
    """What HttpSession's methods return; with `catch_response=True` a context manager whose
    `success()`/`failure()` decide the request's outcome when the block ends."""

    # Defined here too, so that a call's errors name this class as Locust's do.
    def success(self):
        """Record this request as successful, whatever its status."""
        Response.success(self)

    def failure(self, exc):
        """Record this request as failed with `exc` (a message or an exception)."""
        Response.failure(self, exc)


def _pairs(data):
    if isinstance(data, Mapping):
        return list(data.items())
    return list(data)


def _form_pairs(data):
    """(key, value) pairs of a dict or pair list: list values repeat the key, None values
    are left out."""
    pairs = []
    for key, value in _pairs(data):
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            pairs.extend((key, v) for v in value if v is not None)
        else:
            pairs.append((key, value))
    return pairs


def _encode_params(params):
    if isinstance(params, (str, bytes)):
        return params.decode() if isinstance(params, bytes) else params
    return urlencode(_form_pairs(params))


def _with_params(url, params):
    query = _encode_params(params)
    if not query:
        return url
    scheme, netloc, path, old, fragment = urlsplit(url)
    return urlunsplit((scheme, netloc, path, f"{old}&{query}" if old else query, fragment))


def _as_bytes(value):
    if hasattr(value, "read"):
        value = value.read()
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value).encode()


def _multipart(data, files):
    boundary = os.urandom(16).hex()
    out = []
    for name, value in _pairs(data) if data and not isinstance(data, (str, bytes)) else ():
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
            out.append(_as_bytes(v))
            out.append(b"\r\n")
    for name, value in _pairs(files):
        filename, content, ctype, extra = None, value, None, {}
        if isinstance(value, (tuple, list)):
            filename, content = value[0], value[1]
            ctype = value[2] if len(value) > 2 else None
            extra = value[3] if len(value) > 3 else {}
        else:
            given = getattr(value, "name", None)
            filename = os.path.basename(given) if isinstance(given, str) and given[:1] != "<" else name
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
        if filename is not None:
            head += f'; filename="{filename}"'
        head += "\r\n"
        if ctype:
            head += f"Content-Type: {ctype}\r\n"
        for key, val in dict(extra or {}).items():
            head += f"{key}: {val}\r\n"
        out.append((head + "\r\n").encode())
        out.append(_as_bytes(content))
        out.append(b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def _encode_body(data, json, files):
    """(body bytes or None, Content-Type to add or None)."""
    if files:
        return _multipart(data, files)
    if data is not None and data != {} and data != []:
        if isinstance(data, str):
            return data.encode(), None
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data), None
        if hasattr(data, "read"):
            return _as_bytes(data), None
        if isinstance(data, (Mapping, list, tuple)):
            return urlencode(_form_pairs(data)).encode(), "application/x-www-form-urlencoded"
        return b"".join(_as_bytes(part) for part in data), None
    if json is not None:
        return _json.dumps(json, allow_nan=False).encode(), "application/json"
    return None, None


def _basic_auth(auth):
    """The Authorization header for a (user, password) pair or an object with
    `username` and `password` (a basic-auth object)."""
    if hasattr(auth, "username") and hasattr(auth, "password"):
        user, password = auth.username, auth.password
    elif isinstance(auth, (tuple, list)) and len(auth) == 2:
        user, password = auth
    else:
        raise NotCoveredError(
            f"loadlab's locust does not cover auth={type(auth).__name__}: give a (user, password) pair",
            name=__name__,
        )
    user = user.encode("latin1") if isinstance(user, str) else user
    password = password.encode("latin1") if isinstance(password, str) else password
    return "Basic " + base64.b64encode(b":".join((user, password))).decode("ascii")


def _split_credentials(base_url):
    """(base URL without user:password, (user, password) or None)."""
    if not base_url or "@" not in base_url:
        return base_url, None
    parts = urlsplit(base_url)
    if not (parts.username and parts.password):
        return base_url, None
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), (parts.username, parts.password)


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, (tuple, list)):
        given = [t for t in timeout if t is not None]
        return float(max(given)) if given else None
    return float(timeout)


class _Session:
    """What HttpSession and FastHttpSession share: building, sending and reporting requests."""

    response_class = ResponseContextManager
    catch_class = ResponseContextManager
    name_from_url = False
    default_timeout = None

    def __init__(self, base_url, request_event=None, user=None, *args, **kwargs):
        self.base_url, self.auth = _split_credentials(base_url)
        self.base_url = self.base_url or ""
        if request_event is None:
            import locust

            request_event = locust.events.request
        self.request_event = request_event
        self.user = user
        self.headers = CaseInsensitiveDict(DEFAULT_HEADERS)
        self.cookies = CookieJar()
        self.request_name = None
        self.verify = True
        self.trust_env = False
        self.proxies = {}
        self.stream = False
        self.max_redirects = 30
        if user is not None and getattr(user, "_loadlab_uid", None):
            self._uid = user._loadlab_uid
        else:
            engine = runtime.current()
            self._uid = engine.new_user_id() if engine is not None else 0

    @property
    def headers(self):
        """Headers sent with every request of this session (case-insensitive names)."""
        return self._headers

    @headers.setter
    def headers(self, value):
        self._headers = value if isinstance(value, CaseInsensitiveDict) else CaseInsensitiveDict(value)

    @property
    def cookies(self):
        """This session's cookie jar."""
        return self._cookies

    @cookies.setter
    def cookies(self, value):
        if not isinstance(value, CookieJar):
            jar = CookieJar()
            jar.update(value)
            value = jar
        self._cookies = value

    @contextmanager
    def rename_request(self, name):
        """Report the requests made inside the `with` block under `name`."""
        self.request_name = name
        try:
            yield
        finally:
            self.request_name = None

    # Locust's HttpSession lets requests' URL errors (InvalidURL, MissingSchema,
    # InvalidSchema) out of the call, recording nothing; its FastHttpSession records them.
    _url_errors_raise = False

    def _build_url(self, path):
        path = str(path)
        full = path if _ABSOLUTE.match(path) else f"{self.base_url}{path}"
        # A path glued to the host without its slash (`"api/x"` on `http://h:80`) can make a
        # URL that does not parse: raise what requests raises for it.
        if self._url_errors_raise and not path.startswith("/") and not _parses(full):
            _raise_url_error(full)
        return full

    def _send(
        self,
        method,
        url,
        name,
        catch_response,
        context,
        params=None,
        data=None,
        json=None,
        headers=None,
        cookies=None,
        files=None,
        auth=None,
        timeout=_NOT_SET,
        allow_redirects=True,
        **_ignored,
    ):
        engine = runtime.current()
        if engine is None:
            raise LocustError("loadlab's locust sends requests only inside `loadlab locust`")
        if not name and self.request_name:
            name = self.request_name
        if isinstance(url, bytes):
            url = url.decode()
        full = self._build_url(url)
        if params:
            full = _with_params(full, params)
        if _NEEDS_QUOTE.search(full):
            full = quote(full, safe=_SAFE)
        body, content_type = _encode_body(data, json, files)
        store = dict(self._headers._store)
        if headers:
            for key, value in headers.items():
                if isinstance(key, bytes):
                    key = key.decode("latin1")
                if value is None:
                    store.pop(key.lower(), None)
                else:
                    if isinstance(value, bytes):
                        value = value.decode("latin1")
                    store[key.lower()] = (key, str(value))
        for low in _LOADLAB_WRITES:
            if low in store:
                del store[low]
        if content_type and "content-type" not in store:
            store["content-type"] = ("Content-Type", content_type)
        auth = auth or self.auth
        if auth and "authorization" not in store:
            store["authorization"] = ("Authorization", _basic_auth(auth))
        jar = self._cookies
        if "cookie" not in store and (cookies or jar._cookies):
            cookie = jar.header_for(full, cookies)
            if cookie:
                store["cookie"] = ("Cookie", cookie)
        pairs = [[k, v if isinstance(v, str) else str(v)] for k, v in store.values()]
        if name is not None and not isinstance(name, str):
            name = str(name)
        sent_name = name or (url if self.name_from_url else None)
        user = self.user
        intended = interval = None
        if user is not None and user._loadlab_intended is not None:
            intended, interval = user._loadlab_intended
            user._loadlab_intended = None
        # Locust's statistics and request events keep the method as the file wrote it
        # (`request("get", ...)` is `get`); loadlab upper-cases it on the wire.
        given = method if isinstance(method, str) else method.decode()
        if not _TOKEN.fullmatch(given):
            # as Locust's clients: no request goes out, the task fails
            raise ValueError(f"invalid HTTP method {given!r}")
        method = given.upper()
        start_time = time.time()
        reply = engine.request(
            {
                "op": "request",
                "user": self._uid,
                "method": given,
                "url": full,
                "headers": pairs,
                "body": base64.b64encode(body).decode("ascii") if body else None,
                "name": sent_name,
                "timeout": _timeout_seconds(self.default_timeout if timeout is _NOT_SET else timeout),
                "redirects": bool(allow_redirects),
                "catch": bool(catch_response),
                "intended": intended,
                "interval": interval,
            }
        )
        request = PreparedRequest(method, full, pairs, body)
        cls = self.catch_class if catch_response else self.response_class
        response = cls(reply, request, self, sent_name, bool(catch_response))
        response._start_time = start_time
        response._context = context
        response._request_type = given
        resp_pairs = response._pairs
        if resp_pairs and _has_set_cookie(resp_pairs):
            jar.take_from(response.url, resp_pairs)
        if not catch_response:
            self._report(response, response._failure())
        return response

    def _stats_name(self, response):
        return response._name or response.request.path_url

    def _meta(self, response, failure):
        context = response._context or {}
        user = self.user
        if user is not None:
            context = {**user.context(), **context}
        return {
            "request_type": response._request_type or response.request.method,
            "name": self._stats_name(response),
            "response_time": response._elapsed_ms,
            "response_length": _decoded_length(response._b64),
            "response": response,
            "context": context,
            "exception": failure,
            "start_time": response._start_time,
            "url": response.request.url,
        }

    def _report(self, response, failure):
        """Record the request in this helper's stats and fire the `request` event."""
        env = current_environment()
        if env is not None:
            env.stats.record(
                response._request_type or response.request.method,
                self._stats_name(response),
                response._elapsed_ms,
                _decoded_length(response._b64),
                failure,
            )
        hook = self.request_event
        fire = getattr(hook, "fire_answered", None)
        if fire is None:
            hook.fire(**self._meta(response, failure))
        elif hook._handlers:
            meta = self._meta(response, failure)
            response._meta = meta
            fire(meta)

    def request(self, method, url, name=None, catch_response=False, context={}, **kwargs):
        """Send a request. `name` groups it in the statistics; `catch_response=True` returns
        a context manager that decides success or failure when its block ends."""
        return self._send(method, url, name, catch_response, context, **kwargs)

    def get(self, url, **kwargs):
        """Send a GET request."""
        kwargs.setdefault("allow_redirects", True)
        return self.request("GET", url, **kwargs)

    def options(self, url, **kwargs):
        """Send an OPTIONS request."""
        kwargs.setdefault("allow_redirects", True)
        return self.request("OPTIONS", url, **kwargs)

    def head(self, url, **kwargs):
        """Send a HEAD request (redirects not followed unless asked)."""
        kwargs.setdefault("allow_redirects", False)
        return self.request("HEAD", url, **kwargs)

    def post(self, url, data=None, json=None, **kwargs):
        """Send a POST request."""
        return self.request("POST", url, data=data, json=json, **kwargs)

    def put(self, url, data=None, **kwargs):
        """Send a PUT request."""
        return self.request("PUT", url, data=data, **kwargs)

    def patch(self, url, data=None, **kwargs):
        """Send a PATCH request."""
        return self.request("PATCH", url, data=data, **kwargs)

    def delete(self, url, **kwargs):
        """Send a DELETE request."""
        return self.request("DELETE", url, **kwargs)

    def close(self):
        """Nothing to close: loadlab owns the connections."""

    def mount(self, prefix, adapter):
        """Accepted and ignored: loadlab sends every request."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class HttpSession(_Session):
    """An HttpUser's client: a session with cookies and default `headers`, whose requests
    loadlab sends. Relative URLs are appended to `base_url` (the user's host)."""

    _url_errors_raise = True

    def __init__(self, base_url, request_event=None, user=None, *args, pool_manager=None, **kwargs):
        super().__init__(base_url, request_event, user)


__getattr__ = guard(__name__)
