"""Memory and working state in the agent's own namespace.

Routes, below ``/v1/memory/{tenant}/{agent}`` (tenant and agent are the
key's; another namespace is 403 ``namespace_mismatch``)::

    POST   /memories              {kind, key?, text, tags?} -> 201 created | 200 unchanged | 200 superseded
    GET    /memories?q=&kind=&limit=&history=
    DELETE /memories/{id}
    GET    /state/{name}
    POST   /state/{name}/lease    {ttl_seconds?} -> {name, epoch, expires_at, version, state} | 409 lease_held
    PUT    /state/{name}          Lease-Epoch, If-Match -> 200 | 409 lease_lost | 412 version_conflict
    DELETE /state/{name}/lease    Lease-Epoch -> 204

A lease's epoch is a fencing token: custody checks it in the same
transaction as the write, so a writer whose lease was taken over gets
:class:`~custody.errors.Conflict` with code ``lease_lost`` and writes
nothing.
"""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._http import Response, encode_json, parse_time

__all__ = ["Memory", "Remembered", "Lease", "State", "StateLease", "MemoryMixin"]


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


@dataclass(frozen=True)
class Memory:
    """One remembered item.

    Attributes:
        id: custody's ID for it.
        kind: e.g. ``"preference"``, ``"fact"``.
        key: "" or the key under which it supersedes older values.
        text: the text remembered.
        tags: its tags (possibly empty).
        session: the pod that remembered it.
        created_at: when (UTC).
        superseded_by: "" or the ID of the memory that replaced it.
        superseded_at: None or when it was replaced.
    """

    id: str
    kind: str
    text: str
    key: str = ""
    tags: List[str] = field(default_factory=list)
    session: str = ""
    created_at: Optional[datetime] = None
    superseded_by: str = ""
    superseded_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Memory":
        return cls(
            id=str(d.get("id", "")),
            kind=str(d.get("kind", "")),
            text=str(d.get("text", "")),
            key=str(d.get("key") or ""),
            tags=[str(t) for t in d.get("tags") or []],
            session=str(d.get("session", "")),
            created_at=parse_time(d.get("created_at")),
            superseded_by=str(d.get("superseded_by") or ""),
            superseded_at=parse_time(d.get("superseded_at")),
        )


@dataclass(frozen=True)
class Remembered:
    """The outcome of :meth:`MemoryMixin.remember`.

    Attributes:
        id: the stored memory's ID.
        status: ``"created"``, ``"unchanged"`` (the same memory was already
            stored) or ``"superseded"`` (a keyed memory replaced its old
            value; ``supersedes`` is the old ID).
        memory: the stored memory.
        supersedes: "" or the replaced memory's ID.
    """

    id: str
    status: str
    memory: Memory
    supersedes: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Remembered":
        return cls(
            id=str(d.get("id", "")),
            status=str(d.get("status", "")),
            memory=Memory.from_json(d.get("memory") or {}),
            supersedes=str(d.get("supersedes") or ""),
        )


@dataclass(frozen=True)
class Lease:
    """A working-state lease, from :meth:`MemoryMixin.acquire_lease`.

    Attributes:
        name: the slot.
        epoch: the fencing token to pass to ``put_state`` and
            ``release_lease``; it grows with every new holder.
        expires_at: when the lease lapses unless renewed (UTC).
        version: the slot's current version (0: never written).
        state: the slot's current value, decoded from JSON (None if never
            written), to resume from.
    """

    name: str
    epoch: int
    expires_at: Optional[datetime]
    version: int
    state: Any = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Lease":
        return cls(
            name=str(d.get("name", "")),
            epoch=int(d.get("epoch") or 0),
            expires_at=parse_time(d.get("expires_at")),
            version=int(d.get("version") or 0),
            state=d.get("state"),
        )


@dataclass(frozen=True)
class StateLease:
    """Who holds a slot's lease: epoch, holder (a session) and expiry."""

    epoch: int
    holder: str
    expires_at: Optional[datetime]


@dataclass(frozen=True)
class State:
    """A working-state slot.

    Attributes:
        name: the slot.
        version: its version, incremented by every write (0: never written).
        state: its value decoded from JSON (None if never written).
        updated_at: None or when it was last written (UTC).
        updated_by: "" or the session that wrote it.
        lease: None or the current lease.
    """

    name: str
    version: int
    state: Any = None
    updated_at: Optional[datetime] = None
    updated_by: str = ""
    lease: Optional[StateLease] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "State":
        lease = None
        ld = d.get("lease")
        if isinstance(ld, dict):
            lease = StateLease(
                epoch=int(ld.get("epoch") or 0),
                holder=str(ld.get("holder", "")),
                expires_at=parse_time(ld.get("expires_at")),
            )
        return cls(
            name=str(d.get("name", "")),
            version=int(d.get("version") or 0),
            state=d.get("state"),
            updated_at=parse_time(d.get("updated_at")),
            updated_by=str(d.get("updated_by") or ""),
            lease=lease,
        )


class MemoryMixin:
    """The memory calls of :class:`custody.Client`.

    Every call raises :class:`~custody.errors.CustodyError` (a subclass by
    status) when custody refuses, and
    :class:`~custody.errors.TransportError` when it cannot be reached.
    """

    def _ns_call(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> Response:
        raise NotImplementedError  # pragma: no cover - provided by Client

    def remember(self, kind: str, text: str, *, key: str = "", tags: Sequence[str] = ()) -> Remembered:
        """Store ``text`` of ``kind`` (e.g. ``"preference"``, ``"fact"``)
        under an optional ``key`` (a keyed memory supersedes its previous
        value). Remembering the same thing twice stores it once.

        ``key`` and ``tags`` are keyword-only (the Go client takes
        ``kind, key, text, tags...``).

        Raises:
            BadRequest: empty kind or text, too long (413 ``too_large``).
        """
        body: Dict[str, Any] = {"kind": kind, "text": text}
        if key:
            body["key"] = key
        if tags:
            body["tags"] = list(tags)
        return Remembered.from_json(self._ns_call("POST", "/memories", encode_json(body)).object())

    def recall(self, q: str = "", *, kind: str = "", limit: int = 0, history: bool = False) -> List[Memory]:
        """Search memories by keywords (an empty ``q`` lists the newest).

        Args:
            q: keywords (Unicode-aware full-text search).
            kind: only memories of this kind ("" for any).
            limit: at most this many (0: custody's default, 10).
            history: include superseded memories too.
        """
        v: Dict[str, str] = {}
        if q:
            v["q"] = q
        if kind:
            v["kind"] = kind
        if limit > 0:
            v["limit"] = str(limit)
        if history:
            v["history"] = "true"
        path = "/memories"
        if v:
            path += "?" + urllib.parse.urlencode(sorted(v.items()))
        d = self._ns_call("GET", path).object()
        return [Memory.from_json(m) for m in d.get("memories") or []]

    def forget(self, id: str) -> None:
        """Delete a memory by ID.

        Raises:
            NotFound: no such memory in this namespace.
        """
        self._ns_call("DELETE", "/memories/" + _seg(id))

    def get_state(self, name: str) -> State:
        """Read a working-state slot.

        Raises:
            NotFound: the slot does not exist.
        """
        return State.from_json(self._ns_call("GET", "/state/" + _seg(name)).object())

    def acquire_lease(self, name: str, ttl: float = 0) -> Lease:
        """Take (or renew) the lease on a slot; returns the slot's current
        state to resume from.

        Args:
            name: the slot.
            ttl: the lease's lifetime in seconds, rounded up to whole
                seconds (under a second asks for 1 s, not the default);
                0 uses custody's default (5 minutes unless configured).

        Raises:
            Conflict: 409 ``lease_held``: another live session holds it
                (``details["holder"]``, ``details["expires_at"]``).
            ValueError: ttl is negative or not a finite number.
        """
        if not (ttl >= 0 and math.isfinite(ttl)):
            raise ValueError("lease ttl must be a finite number of seconds, 0 or more")
        body = None
        if ttl > 0:
            body = encode_json({"ttl_seconds": math.ceil(ttl)})
        return Lease.from_json(self._ns_call("POST", "/state/%s/lease" % _seg(name), body).object())

    def put_state(self, name: str, epoch: int, version: int, value: Any) -> State:
        """Write ``value`` (any JSON-serialisable value) to a slot under the
        lease ``epoch``, if the slot is still at ``version`` (0: it does not
        exist yet).

        Raises:
            Conflict: 409 ``lease_lost`` (the epoch is not the live lease's)
                or 412 ``version_conflict`` (``details["version"]`` is the
                current version).
            BadRequest: 413 ``too_large``.
            ValueError: value is not JSON-serialisable.
        """
        headers = {"Lease-Epoch": str(int(epoch)), "If-Match": str(int(version))}
        return State.from_json(self._ns_call("PUT", "/state/" + _seg(name), encode_json(value), headers).object())

    def release_lease(self, name: str, epoch: int) -> None:
        """Give up the lease held with ``epoch``.

        Raises:
            Conflict: 409 ``lease_lost``: that epoch is no longer the lease.
        """
        self._ns_call("DELETE", "/state/%s/lease" % _seg(name), headers={"Lease-Epoch": str(int(epoch))})
