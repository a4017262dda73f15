"""Exceptions the custody client raises.

Every exception is a :class:`CustodyError`. A refusal from custody carries
the HTTP status and the JSON error body custody answers with::

    {"error": "<code>", "message": "<fixed text>", ...details}

``code`` is custody's short snake_case code (``"lease_held"``,
``"version_conflict"``, ``"signer_standby"``, ...) and is always the thing
to branch on; the subclass only groups codes by HTTP status class:

=================  =========================================================
class              statuses
=================  =========================================================
BadRequest         400, 413, 428 (the request itself is wrong)
Unauthorized       401 (key or token refused; ``warm_pool`` too)
Forbidden          403 (``namespace_mismatch``, ``forbidden``)
NotFound           404
Conflict           409, 410, 412 (``lease_held``, ``lease_lost``,
                   ``version_conflict``, ``run_closed``, approval states)
RateLimited        429 (``retry_after`` says when to try again)
Unavailable        5xx (``signer_standby``, ``unavailable``, ...)
CustodyError       any other status >= 300
TransportError     no HTTP answer: connection refused, timeout, TLS
TLSError           the TLS handshake failed (certificate not trusted,
                   name mismatch, protocol)
ConfigError        the client is misconfigured (missing URL, unreadable
                   token file, bad CA file)
=================  =========================================================

No exception's message, ``repr`` or attributes ever hold the key or the
token: custody's messages are fixed text, and the client never formats a
request header into an error.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Dict, Optional, Type

__all__ = [
    "CustodyError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "RateLimited",
    "Unavailable",
    "TransportError",
    "TLSError",
    "ConfigError",
    "from_response",
]


class CustodyError(Exception):
    """A refusal from custody, or (status 0) a failure to reach it.

    Attributes:
        status: the HTTP status; 0 when there was no HTTP answer.
        code: custody's error code from the body's ``"error"`` member;
            ``""`` when the body was not a custody error body (a proxy's
            page, a wrong URL).
        message: the body's ``"message"`` (fixed text chosen by custody).
        retry_after: the response's ``Retry-After`` in seconds, or None
            when it had none.
        details: the other members of the error body, e.g. ``holder`` and
            ``expires_at`` for 409 ``lease_held``, ``version`` for 412
            ``version_conflict``, ``limit_bytes`` for 413.
        body: the whole response body (at most 8 MiB).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        retry_after: Optional[float] = None,
        details: Optional[Dict[str, Any]] = None,
        body: bytes = b"",
        server_message: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = server_message if status else message
        self.retry_after = retry_after
        self.details: Dict[str, Any] = dict(details or {})
        self.body = body

    def __repr__(self) -> str:
        return "%s(status=%d, code=%r, message=%r)" % (
            type(self).__name__,
            self.status,
            self.code,
            self.message,
        )


class BadRequest(CustodyError):
    """400, 413 or 428: custody found the request malformed or too large."""


class Unauthorized(CustodyError):
    """401: the token or key was refused (also ``warm_pool``)."""


class Forbidden(CustodyError):
    """403: the key is live but not for this namespace or run."""


class NotFound(CustodyError):
    """404: no such memory, state, run, call or approval."""


class Conflict(CustodyError):
    """409, 410 or 412: the resource is not in the state the call needs."""


class RateLimited(CustodyError):
    """429: too many requests; ``retry_after`` says when to retry."""


class Unavailable(CustodyError):
    """5xx: custody (or its store, or its signer) cannot answer now."""


class TransportError(CustodyError):
    """custody could not be reached, or its answer could not be read."""


class TLSError(TransportError):
    """The TLS handshake with custody failed (untrusted certificate, name
    mismatch, protocol version)."""


class ConfigError(CustodyError, ValueError):
    """The client's configuration is invalid or its files unreadable."""


_BY_STATUS: Dict[int, Type[CustodyError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Conflict,
    412: Conflict,
    413: BadRequest,
    428: BadRequest,
    429: RateLimited,
}


def _class_for(status: int) -> Type[CustodyError]:
    if status >= 500:
        return Unavailable
    return _BY_STATUS.get(status, CustodyError)


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After in whole seconds, as custody sends it; an HTTP date or
    anything else unparseable is ignored (None)."""
    if not value:
        return None
    try:
        secs = int(value.strip())
    except ValueError:
        return None
    return float(secs) if secs > 0 else None


def from_response(status: int, body: bytes, retry_after: Optional[str]) -> CustodyError:
    """The exception for a response with ``status`` >= 300.

    Args:
        status: the HTTP status.
        body: the response body (custody's ``{"error","message",...}``).
        retry_after: the raw ``Retry-After`` header, or None.
    """
    code = ""
    server_message = ""
    details: Dict[str, Any] = {}
    try:
        parsed = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        code = parsed["error"]
        msg = parsed.get("message")
        server_message = msg if isinstance(msg, str) else ""
        details = {k: v for k, v in parsed.items() if k not in ("error", "message")}
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    if code:
        text = "custody: %d %s: %s" % (status, code, server_message)
    else:
        text = (
            "custody answered %d %s (not a custody error body: is the URL or auth method right?)"
            % (status, reason)
        )
    return _class_for(status)(
        text,
        status=status,
        code=code,
        retry_after=_parse_retry_after(retry_after),
        details=details,
        body=body,
        server_message=server_message,
    )
