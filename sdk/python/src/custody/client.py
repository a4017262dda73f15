"""The custody client: identity exchange and re-exchange.

An agent inside a sandbox exchanges its pod's projected service-account
token (or, outside Kubernetes, a static token) for a short-lived key
(``ck_...``, 15 minutes by default) and uses the key for memory
(:mod:`custody.memory`) and the signer (:mod:`custody.signer`).

Configuration (see :meth:`Client.from_env`), as the deploy/ sandbox
template sets it::

    CUSTODY_URL         custody's API, e.g. http://custody.custody-system.svc:8865
    CUSTODY_TOKEN_FILE  the projected token, e.g. /var/run/secrets/custody/token
    CUSTODY_AUTH        "kubernetes" (default) or "static"
    CUSTODY_CA_FILE     PEM CA bundle trusted for an https URL (only it)

The token file is read again at every exchange, because the kubelet
rotates projected tokens. The key is kept in memory only. A key is
re-exchanged ``refresh_before`` seconds before it expires, and once more
when custody refuses a key that looked live with 401 (revoked, or a
replica's cache lost), after which the call is retried once.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping, Optional

from ._http import Response, Transport, encode_json, parse_time
from .errors import ConfigError, CustodyError, TransportError
from .memory import MemoryMixin
from .signer import SignerMixin

__all__ = ["Client", "Key"]

_METHODS = ("kubernetes", "static")


@dataclass(frozen=True)
class Key:
    """An exchanged key and the identity it speaks for.

    Attributes:
        key: the bearer key (``ck_...``). Never shown by ``repr``.
        key_id: the key's ID (hex SHA-256), what an operator revokes.
        expires_at: when custody stops accepting it (UTC).
        tenant: the sandbox's namespace.
        agent: the SandboxClaim's name (stable across pods).
        session: the pod's name.
    """

    key: str = field(repr=False)
    key_id: str
    expires_at: datetime
    tenant: str
    agent: str
    session: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Key":
        expires = parse_time(d.get("expires_at"))
        if not d.get("key") or expires is None:
            raise TransportError("custody: decode response: exchange answer has no key or expires_at")
        if not _KEY.match(str(d["key"])):
            # Not quoted: http.client's error for such a header quotes it.
            raise TransportError("custody: decode response: exchange answer's key is not a bearer token")
        return cls(
            key=str(d["key"]),
            key_id=str(d.get("key_id", "")),
            expires_at=expires,
            tenant=str(d.get("tenant", "")),
            agent=str(d.get("agent", "")),
            session=str(d.get("session", "")),
        )


# _KEY is what a bearer key may hold: visible ASCII, nothing a header
# would refuse.
_KEY = re.compile(r"\A[\x21-\x7e]+\Z")


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Client(MemoryMixin, SignerMixin):
    """Talks to custody for one agent. Safe for use from several threads.

    Args:
        url: custody's API base URL (http:// or https://). Required.
        token_file: the file holding the token to exchange. Required.
        method: the auth method, ``"kubernetes"`` (default) or ``"static"``.
        ca_file: PEM CA bundle trusted for an https URL; when set, only it
            is trusted, and an http URL is refused (TLS was meant). None:
            the system's store.
        timeout: seconds for connecting and for each read of one request;
            default 30.
        refresh_before: re-exchange this many seconds before the key's
            expiry; default 60.
        standby_wait: seconds a signer call keeps retrying while custody
            answers 503 ``signer_standby``, each retry after the answer's
            Retry-After; default 30; 0 or less: no retry.
        now: the clock, returning an aware datetime; default UTC now.

    Nothing is sent until the first call (or :meth:`exchange`).

    Raises:
        ConfigError: a required value is missing, the method unknown, the
            URL not http(s), ca_file unreadable or set with an http URL.
    """

    def __init__(
        self,
        url: str,
        token_file: str,
        *,
        method: str = "kubernetes",
        ca_file: Optional[str] = None,
        timeout: float = 30.0,
        refresh_before: float = 60.0,
        standby_wait: float = 30.0,
        now: Optional[Callable[[], datetime]] = None,
    ) -> None:
        if not url or not token_file:
            raise ConfigError("custody: url and token_file are required")
        method = method or "kubernetes"
        if method not in _METHODS:
            raise ConfigError("custody: unknown auth method %r (want kubernetes or static)" % method)
        if ca_file and not url.lower().startswith("https://"):
            raise ConfigError("custody: CUSTODY_CA_FILE is set but CUSTODY_URL is not https:// (the token would go in clear)")
        if timeout <= 0 or refresh_before < 0:
            raise ConfigError("custody: timeout must be positive and refresh_before not negative")
        self._http = Transport(url, timeout=timeout, ca_file=ca_file)
        self.url = self._http.base
        self.token_file = token_file
        self.method = method
        self.refresh_before = refresh_before
        self.standby_wait = standby_wait
        self._now = now or _utcnow
        self._lock = threading.Lock()
        self._key: Optional[Key] = None

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> "Client":
        """A client configured from CUSTODY_URL, CUSTODY_TOKEN_FILE,
        CUSTODY_AUTH and CUSTODY_CA_FILE in ``environ`` (default
        ``os.environ``); ``kwargs`` are passed on to :class:`Client` (e.g.
        ``timeout``) and win over the environment.

        Raises:
            ConfigError: CUSTODY_URL or CUSTODY_TOKEN_FILE is unset or
                empty, or the configuration is invalid.
        """
        env = os.environ if environ is None else environ
        url = env.get("CUSTODY_URL", "")
        token_file = env.get("CUSTODY_TOKEN_FILE", "")
        if not url or not token_file:
            raise ConfigError("custody: CUSTODY_URL and CUSTODY_TOKEN_FILE must be set")
        kwargs.setdefault("method", env.get("CUSTODY_AUTH", "") or "kubernetes")
        kwargs.setdefault("ca_file", env.get("CUSTODY_CA_FILE", "") or None)
        return cls(url, token_file, **kwargs)

    def __repr__(self) -> str:
        return "Client(url=%r, method=%r)" % (self.url, self.method)

    # -- keys --------------------------------------------------------------

    def exchange(self) -> Key:
        """Exchange the token file's current token for a new key and keep it.

        ``POST /v1/auth/{method}`` with ``{"token": ...}``.

        Raises:
            ConfigError: the token file cannot be read.
            Unauthorized: the token was refused (code ``unauthenticated``,
                ``warm_pool``, ``not_claimed``, ...).
            RateLimited: too many exchanges (code ``rate_limited``).
            CustodyError, TransportError: as for any call.
        """
        try:
            with open(self.token_file, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ConfigError("custody: read token file %s: %s" % (self.token_file, e.strerror or e)) from None
        token = raw.decode("utf-8", "replace").strip()
        resp = self._http.request("POST", "/v1/auth/" + self.method, body=encode_json({"token": token}))
        key = Key.from_json(resp.object())
        with self._lock:
            self._key = key
        return key

    def current_key(self) -> Key:
        """A live key: the kept one, or a new exchange if there is none or
        it expires within ``refresh_before`` seconds."""
        with self._lock:
            k = self._key
        if k is not None and self._now() + timedelta(seconds=self.refresh_before) < k.expires_at:
            return k
        return self.exchange()

    def revoke(self) -> None:
        """Revoke the kept key (if any) and forget it.

        ``POST /v1/auth/revoke`` with the key; custody answers 204.
        """
        with self._lock:
            k, self._key = self._key, None
        if k is None:
            return
        self._http.request("POST", "/v1/auth/revoke", key=k.key)

    # -- requests ----------------------------------------------------------

    def _authed(
        self,
        method: str,
        path: Callable[[Key], str],
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """Send an authenticated request to ``path(key)``. A 401 with a
        key that looked live triggers one re-exchange and one retry."""
        k = self.current_key()
        try:
            return self._http.request(method, path(k), key=k.key, body=body, headers=headers, timeout=timeout)
        except CustodyError as e:
            if e.status != 401:
                raise
        k = self.exchange()
        return self._http.request(method, path(k), key=k.key, body=body, headers=headers, timeout=timeout)

    def _ns_call(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Response:
        def full(k: Key) -> str:
            return "/v1/memory/%s/%s%s" % (_seg(k.tenant), _seg(k.agent), path)

        return self._authed(method, full, body, headers)

    def _signer_call(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        return self._authed(method, lambda _k: "/v1/signer/runs" + path, body, None, timeout)

    def _http_timeout(self) -> float:
        return self._http.timeout


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")
