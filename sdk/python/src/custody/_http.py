"""One HTTP exchange with custody, over http or verified https.

Each request opens its own connection (``http.client``), so a
:class:`Transport` is safe to share between threads. Redirects are not
followed: custody's API never redirects, and following one could carry
the bearer key elsewhere, so a 3xx is an error like any status >= 300.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional

from .errors import ConfigError, TLSError, TransportError, from_response

# MAX_RESPONSE bounds the bytes read from one response (8 MiB), as the Go
# client does.
MAX_RESPONSE = 8 << 20


def tls_context(ca_file: Optional[str]) -> ssl.SSLContext:
    """The TLS client context for https URLs.

    Certificates are verified and the host name checked; TLS 1.2 is the
    minimum. With ``ca_file`` (a PEM bundle) only that bundle is trusted,
    otherwise the system's store.

    Raises:
        ConfigError: ca_file cannot be read or holds no certificate.
    """
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file or None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError("custody: CA file %s: %s" % (ca_file, _reason(e))) from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return "certificate verify failed: %s" % e.verify_message
    if isinstance(e, ssl.SSLError) and e.reason:
        return str(e.reason).lower().replace("_", " ")
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


class Response:
    """A 2xx answer: status, headers (names lower-cased) and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body decoded as JSON (None for an empty body).

        Raises:
            TransportError: the body is not JSON.
        """
        if not self.body:
            return None
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise TransportError("custody: decode response: not JSON (status %d)" % self.status) from None

    def object(self) -> Dict[str, Any]:
        """The body decoded as a JSON object.

        Raises:
            TransportError: the body is not a JSON object.
        """
        d = self.json()
        if not isinstance(d, dict):
            raise TransportError("custody: decode response: want a JSON object (status %d)" % self.status)
        return d


class Transport:
    """Sends requests to one custody base URL.

    Args:
        url: custody's base URL, ``http://`` or ``https://`` (a path prefix
            is kept).
        timeout: seconds for connecting and for each read; default 30.
        ca_file: PEM bundle trusted for https (None: the system store).

    Raises:
        ConfigError: the URL is not http(s) or the CA file is unusable.
    """

    def __init__(self, url: str, timeout: float = 30.0, ca_file: Optional[str] = None) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError("custody: URL must be http:// or https:// with a host, got scheme %r" % u.scheme)
        if u.query or u.fragment or u.username is not None or u.password is not None:
            raise ConfigError("custody: URL must not have a query, fragment or user info")
        try:
            port = u.port
        except ValueError:
            raise ConfigError("custody: URL has an invalid port") from None
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = port
        self.prefix = u.path.rstrip("/")
        self.base = "%s://%s%s" % (u.scheme, u.netloc, self.prefix)
        self.timeout = timeout
        self.ca_file = ca_file
        self._ctx = tls_context(ca_file) if u.scheme == "https" else None

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._ctx is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self._ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        key: str = "",
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """Send one request; return a 2xx answer or raise.

        Args:
            method: the HTTP method.
            path: the path (and query) below the base URL, starting "/".
            key: the bearer key for ``Authorization``; "" sends none.
            body: a JSON body (sent with Content-Type application/json).
            headers: extra request headers.
            timeout: seconds for this request; default the transport's.

        Raises:
            CustodyError: (a subclass by status) custody answered >= 300.
            TLSError: the TLS handshake failed.
            TransportError: custody could not be reached or read.
        """
        hdrs: Dict[str, str] = {"Accept": "application/json", "User-Agent": "custody-python"}
        if headers:
            hdrs.update(headers)
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
        if key:
            hdrs["Authorization"] = "Bearer " + key
        where = "%s %s%s" % (method, self.base, path.split("?", 1)[0])
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            try:
                conn.request(method, self.prefix + path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read(MAX_RESPONSE + 1)
            except ssl.SSLError as e:
                msg = "custody: %s: TLS failed: %s" % (where, _reason(e))
                if isinstance(e, ssl.SSLCertVerificationError):
                    msg += " (trusted: %s)" % (
                        "CA file " + self.ca_file if self.ca_file else "the system's CA store"
                    )
                raise TLSError(msg) from e
            except (OSError, http.client.HTTPException) as e:
                if isinstance(e, socket.timeout):
                    reason = "timed out"
                else:
                    reason = _reason(e)
                raise TransportError("custody: %s: %s" % (where, reason)) from e
        finally:
            conn.close()
        if len(data) > MAX_RESPONSE:
            raise TransportError("custody: %s: response over %d bytes" % (where, MAX_RESPONSE))
        if resp.status >= 300:
            raise from_response(resp.status, data, resp.getheader("Retry-After"))
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)


_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(value: Any) -> Optional[datetime]:
    """An RFC 3339 time as Go writes it ("2026-12-01T21:17:32.123456789Z")
    as an aware datetime (fractions past microseconds dropped); None for a
    missing or empty value or Go's zero time.

    Raises:
        TransportError: value is not an RFC 3339 time.
    """
    if value is None or value == "":
        return None
    m = _TIME.match(value) if isinstance(value, str) else None
    if not m:
        raise TransportError("custody: decode response: bad time %r" % (value,))
    date, clock, frac, zone = m.groups()
    text = "%sT%s.%s%s" % (date, clock, (frac or "0")[:6].ljust(6, "0"), "+00:00" if zone in ("Z", "z") else zone)
    t = datetime.fromisoformat(text)
    if t.year <= 1:
        return None
    return t.astimezone(timezone.utc)


def encode_json(value: Any) -> bytes:
    """value as compact UTF-8 JSON.

    Raises:
        ValueError: value holds NaN or infinity, or is not JSON-able.
    """
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except TypeError as e:
        raise ValueError("custody: value is not JSON-serialisable: %s" % e) from None


__all__ = ["Transport", "Response", "tls_context", "encode_json", "parse_time", "MAX_RESPONSE"]
