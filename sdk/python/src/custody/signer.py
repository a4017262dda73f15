"""The signer: runs, decisions, approvals and records.

Routes, below ``/v1/signer/runs``::

    POST ""                                   -> 201 run
    POST /{run}/decide        {call_id, tool, args}
    POST /{run}/complete      {call_id, outcome, result?}
    POST /{run}/model-events  {event, provider?, model?, request_id?, stop_reason?, input_tokens?, output_tokens?}
    POST /{run}/approvals     {call_id, tool, args}   -> 201 approval
    GET  /{run}/approvals/{id}?wait=SECONDS
    POST /{run}/approvals/{id}/consume   {args}
    POST /{run}/close
    GET  /{run}/status

Every call is decided and recorded by custody as a signed record; args and
results are kept only as salted commitments. With several replicas one
holds the signer's writer lease and the others answer 503
``signer_standby`` with ``Retry-After`` before recording anything: such a
call is retried after each Retry-After for up to the client's
``standby_wait`` seconds. No other answer is retried.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional

from ._http import Response, encode_json, parse_time
from .errors import CustodyError

__all__ = ["Run", "Decision", "Appended", "ModelEvent", "Approval", "SignerMixin"]


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


@dataclass(frozen=True)
class Run:
    """A signer run as custody reports it.

    Attributes:
        run: the run's ID.
        tenant, agent, session: whose run it is.
        closed: whether it is closed; ``closed_reason`` says why.
        records: how many records the run holds.
        last_activity: None or the last call's time (UTC).
        pending_approvals: approvals still pending.
    """

    run: str
    tenant: str = ""
    agent: str = ""
    session: str = ""
    closed: bool = False
    closed_reason: str = ""
    records: int = 0
    last_activity: Optional[datetime] = None
    pending_approvals: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Run":
        return cls(
            run=str(d.get("run", "")),
            tenant=str(d.get("tenant", "")),
            agent=str(d.get("agent", "")),
            session=str(d.get("session", "")),
            closed=bool(d.get("closed", False)),
            closed_reason=str(d.get("closed_reason") or ""),
            records=int(d.get("records") or 0),
            last_activity=parse_time(d.get("last_activity")),
            pending_approvals=int(d.get("pending_approvals") or 0),
        )


@dataclass(frozen=True)
class Decision:
    """The signer's decision on one tool call.

    Attributes:
        call_id: the call.
        effect: ``"allow"``, ``"deny"`` or ``"ask"``.
        rule_ids: every matching rule (built-in rules first).
        policy_hash: the hash of the policy that decided.
        errors: rule id -> evaluation error, for rules that failed.
        args_commitment: the salted commitment to the args.
        index: the call.decided record's leaf index in the log.
        run_seq: its sequence number within the run.
    """

    call_id: str
    effect: str
    rule_ids: List[str] = field(default_factory=list)
    policy_hash: str = ""
    errors: Dict[str, str] = field(default_factory=dict)
    args_commitment: str = ""
    index: int = 0
    run_seq: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Decision":
        return cls(
            call_id=str(d.get("call_id", "")),
            effect=str(d.get("effect", "")),
            rule_ids=[str(r) for r in d.get("rule_ids") or []],
            policy_hash=str(d.get("policy_hash", "")),
            errors={str(k): str(v) for k, v in (d.get("errors") or {}).items()},
            args_commitment=str(d.get("args_commitment", "")),
            index=int(d.get("index") or 0),
            run_seq=int(d.get("run_seq") or 0),
        )


@dataclass(frozen=True)
class Appended:
    """Where the signer appended a record: leaf ``index`` in the log and
    ``run_seq`` within the run."""

    index: int
    run_seq: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Appended":
        return cls(index=int(d.get("index") or 0), run_seq=int(d.get("run_seq") or 0))


@dataclass(frozen=True)
class ModelEvent:
    """Metadata about one model call (never its prompt or output).

    Attributes:
        event: what happened, e.g. ``"request"``, ``"response"`` (required,
            at most 64 bytes).
        provider, model, request_id, stop_reason: optional ("" omitted).
        input_tokens, output_tokens: optional counts (0 omitted).
    """

    event: str
    provider: str = ""
    model: str = ""
    request_id: str = ""
    stop_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"event": self.event}
        for name in ("provider", "model", "request_id", "stop_reason"):
            v = getattr(self, name)
            if v:
                d[name] = v
        for name in ("input_tokens", "output_tokens"):
            v = getattr(self, name)
            if v:
                d[name] = int(v)
        return d


@dataclass(frozen=True)
class Approval:
    """An approval request.

    Attributes:
        id: the approval's ID (``approval_id`` on the wire).
        run, call_id, tool: the call it is for.
        state: ``"pending"``, ``"approved"``, ``"denied"``, ``"consumed"``
            or ``"expired"``.
        args_commitment: commitment to the args it is bound to.
        expires_at: when it expires (UTC).
        index: 0 or the leaf index of the record this call appended.
    """

    id: str
    run: str
    call_id: str
    tool: str
    state: str
    args_commitment: str = ""
    expires_at: Optional[datetime] = None
    index: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Approval":
        return cls(
            id=str(d.get("approval_id", "")),
            run=str(d.get("run", "")),
            call_id=str(d.get("call_id", "")),
            tool=str(d.get("tool", "")),
            state=str(d.get("state", "")),
            args_commitment=str(d.get("args_commitment", "")),
            expires_at=parse_time(d.get("expires_at")),
            index=int(d.get("index") or 0),
        )


def _args(args: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    return dict(args) if args is not None else {}


class SignerMixin:
    """The signer calls of :class:`custody.Client`.

    Every call raises :class:`~custody.errors.CustodyError` (a subclass by
    status) when custody refuses: e.g. NotFound (no such run), Forbidden
    (another agent's run), Conflict (``run_closed``, ``duplicate_call``,
    ``not_ask``, ``approval_*``), Unavailable (``signer_standby`` after
    ``standby_wait``, ``unavailable``).
    """

    standby_wait: float

    def _signer_call(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        raise NotImplementedError  # pragma: no cover - provided by Client

    def _signer(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        timeout: Optional[float] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Response:
        """A signer call, retried while custody answers 503
        ``signer_standby`` (after each Retry-After, at least 0.1 s) for up
        to ``standby_wait`` seconds."""
        deadline = time.monotonic() + self.standby_wait
        while True:
            try:
                return self._signer_call(method, path, body, timeout)
            except CustodyError as e:
                if e.status != 503 or e.code != "signer_standby":
                    raise
                pause = max(e.retry_after or 0.0, 0.1)
                if self.standby_wait <= 0 or time.monotonic() + pause > deadline:
                    raise
                sleep(pause)

    def register_run(self) -> Run:
        """Start a run for this agent."""
        return Run.from_json(self._signer("POST", "").object())

    def decide(self, run: str, call_id: str, tool: str, args: Optional[Mapping[str, Any]] = None) -> Decision:
        """Ask whether ``tool`` may run with ``args`` (a JSON object; only a
        salted commitment to it is logged). ``call_id`` is unique within
        the run (a second decide with it is 409 ``duplicate_call``).

        Returns the decision; a ``"deny"`` or ``"ask"`` is an answer, not
        an exception.
        """
        body = {"call_id": call_id, "tool": tool, "args": _args(args)}
        return Decision.from_json(self._signer("POST", "/%s/decide" % _seg(run), encode_json(body)).object())

    def complete(self, run: str, call_id: str, outcome: str, result: Any = None) -> Appended:
        """Record the outcome (``"ok"``, ``"error"``, ...; a short word) of a
        decided call. ``result``, if given, is the call's output as a JSON
        value: custody records only a salted commitment to it."""
        body: Dict[str, Any] = {"call_id": call_id, "outcome": outcome}
        if result is not None:
            body["result"] = result
        return Appended.from_json(self._signer("POST", "/%s/complete" % _seg(run), encode_json(body)).object())

    def record_model_event(self, run: str, event: ModelEvent) -> Appended:
        """Record metadata about one model call."""
        body = encode_json(event.to_json())
        return Appended.from_json(self._signer("POST", "/%s/model-events" % _seg(run), body).object())

    def request_approval(
        self, run: str, call_id: str, tool: str, args: Optional[Mapping[str, Any]] = None
    ) -> Approval:
        """Ask an operator to approve a call decided ``"ask"``, bound to
        exactly ``tool`` and ``args``.

        Raises:
            Conflict: 409 ``not_ask``: the call was not decided ask with
                this tool and args.
        """
        body = {"call_id": call_id, "tool": tool, "args": _args(args)}
        return Approval.from_json(self._signer("POST", "/%s/approvals" % _seg(run), encode_json(body)).object())

    def wait_approval(self, run: str, id: str, wait: float = 0) -> Approval:
        """Read an approval, custody waiting up to ``wait`` seconds (whole
        seconds; custody caps it at 60) while it is pending. The request's
        read timeout is extended by ``wait``."""
        path = "/%s/approvals/%s" % (_seg(run), _seg(id))
        timeout = None
        if wait > 0:
            path += "?wait=%d" % int(wait)
            timeout = self._http_timeout() + min(float(wait), 60.0)
        return Approval.from_json(self._signer("GET", path, timeout=timeout).object())

    def consume_approval(self, run: str, id: str, args: Optional[Mapping[str, Any]] = None) -> Approval:
        """Use an approved approval once, with exactly its args.

        Raises:
            Conflict: ``approval_pending``, ``approval_denied``,
                ``approval_consumed``, ``args_mismatch`` (409) or
                ``approval_expired`` (410).
        """
        path = "/%s/approvals/%s/consume" % (_seg(run), _seg(id))
        return Approval.from_json(self._signer("POST", path, encode_json({"args": _args(args)})).object())

    def close_run(self, run: str) -> Appended:
        """Close a run; later calls in it are refused (409 ``run_closed``)
        and recorded."""
        return Appended.from_json(self._signer("POST", "/%s/close" % _seg(run)).object())

    def run_status(self, run: str) -> Run:
        """Read a run's state."""
        return Run.from_json(self._signer("GET", "/%s/status" % _seg(run)).object())

    def _http_timeout(self) -> float:
        raise NotImplementedError  # pragma: no cover - provided by Client
