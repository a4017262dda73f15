"""Retries against a local stand-in (127.0.0.1) that answers what a single
custody cannot be made to: 503 signer_standby (several replicas during a
writer hand-over), a 401 on a key that looked live twice in a row, keys
about to expire. Only signer_standby is retried, and a 401 re-exchanges
once."""

from __future__ import annotations

import os
import tempfile
import time
import unittest
from typing import Any, Dict, List, Tuple

import harness

import custody


Answer = Tuple[int, Dict[str, str], Any]


class Script:
    """Answers from a list per route prefix; the last answer repeats."""

    def __init__(self) -> None:
        self.answers: Dict[str, List[Answer]] = {}
        self.exchanges = 0

    def __call__(self, method: str, path: str, headers: Dict[str, str], body: bytes) -> Answer:
        if path == "/v1/auth/static":
            self.exchanges += 1
            ans = self.answers.get("exchange")
            if ans:
                return ans.pop(0) if len(ans) > 1 else ans[0]
            return 200, {}, harness.key_answer("ck_key%d" % self.exchanges)
        for prefix, ans in self.answers.items():
            if path.startswith(prefix):
                return ans.pop(0) if len(ans) > 1 else ans[0]
        return 404, {"Content-Type": "text/plain"}, b"404 page not found\n"


STANDBY: Answer = (503, {"Retry-After": "1"}, {"error": "signer_standby", "message": "standing by"})
RUN: Answer = (201, {}, {"run": "r1", "tenant": "agents", "agent": "dev", "session": "s1", "closed": False, "records": 1, "pending_approvals": 0})


class RetryTest(unittest.TestCase):
    def setUp(self) -> None:
        self.script = Script()
        self.srv = harness.StandIn(self.script)
        fd, self.token = tempfile.mkstemp()
        os.write(fd, b"static-token\n")
        os.close(fd)

    def tearDown(self) -> None:
        self.srv.stop()
        os.unlink(self.token)

    def client(self, **kw: Any) -> custody.Client:
        return custody.Client(self.srv.url, self.token, method="static", **kw)

    def test_standby_retried_after_retry_after(self) -> None:
        self.script.answers["/v1/signer/runs"] = [STANDBY, STANDBY, RUN]
        start = time.monotonic()
        run = self.client().register_run()
        took = time.monotonic() - start
        self.assertEqual(run.run, "r1")
        self.assertEqual(self.srv.paths().count("/v1/signer/runs"), 3)
        self.assertGreaterEqual(took, 1.9, "two Retry-After: 1 pauses")
        self.assertLess(took, 10)

    def test_standby_gives_up_after_standby_wait(self) -> None:
        self.script.answers["/v1/signer/runs"] = [STANDBY]
        start = time.monotonic()
        with self.assertRaises(custody.Unavailable) as cm:
            self.client(standby_wait=2.5).register_run()
        took = time.monotonic() - start
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retry_after), (503, "signer_standby", 1.0))
        self.assertEqual(self.srv.paths().count("/v1/signer/runs"), 3)  # at 0, 1 and 2 s; a third pause would pass 2.5 s
        self.assertLess(took, 4)

    def test_standby_not_retried_when_disabled(self) -> None:
        self.script.answers["/v1/signer/runs"] = [STANDBY, RUN]
        with self.assertRaises(custody.Unavailable):
            self.client(standby_wait=0).register_run()
        self.assertEqual(self.srv.paths().count("/v1/signer/runs"), 1)

    def test_other_503_not_retried(self) -> None:
        self.script.answers["/v1/signer/runs"] = [
            (503, {"Retry-After": "1"}, {"error": "unavailable", "message": "signer unavailable"}),
            RUN,
        ]
        with self.assertRaises(custody.Unavailable) as cm:
            self.client().register_run()
        self.assertEqual(cm.exception.code, "unavailable")
        self.assertEqual(self.srv.paths().count("/v1/signer/runs"), 1)

    def test_memory_standby_not_retried(self) -> None:
        self.script.answers["/v1/memory/"] = [STANDBY, (200, {}, {"memories": []})]
        with self.assertRaises(custody.Unavailable):
            self.client().recall("x")
        self.assertEqual(len([p for p in self.srv.paths() if p.startswith("/v1/memory/")]), 1)

    def test_rate_limited_not_retried(self) -> None:
        self.script.answers["/v1/memory/"] = [(429, {"Retry-After": "7"}, {"error": "rate_limited", "message": "slow down"})]
        with self.assertRaises(custody.RateLimited) as cm:
            self.client().recall("x")
        self.assertEqual(cm.exception.retry_after, 7.0)
        self.assertEqual(len([p for p in self.srv.paths() if p.startswith("/v1/memory/")]), 1)

    def test_401_reexchanges_once(self) -> None:
        unauth: Answer = (401, {}, {"error": "unauthenticated", "message": "missing, invalid, expired or revoked key"})
        self.script.answers["/v1/memory/"] = [unauth]
        c = self.client()
        with self.assertRaises(custody.Unauthorized):
            c.recall("x")
        self.assertEqual(self.script.exchanges, 2, "one exchange, one re-exchange")
        calls = [(p, h.get("authorization")) for _, p, h, _ in self.srv.requests if p.startswith("/v1/memory/")]
        self.assertEqual([a for _, a in calls], ["Bearer ck_key1", "Bearer ck_key2"])
        self.assertEqual(calls[0][0], "/v1/memory/agents/dev/memories?q=x")

    def test_401_then_success(self) -> None:
        unauth: Answer = (401, {}, {"error": "unauthenticated", "message": "revoked"})
        self.script.answers["/v1/memory/"] = [unauth, (200, {}, {"memories": [{"id": "m1", "kind": "fact", "text": "t"}]})]
        got = self.client().recall("x")
        self.assertEqual([m.id for m in got], ["m1"])
        self.assertEqual(self.script.exchanges, 2)

    def test_key_near_expiry_reexchanged(self) -> None:
        self.script.answers["exchange"] = [(200, {}, harness.key_answer("ck_short", ttl=30))]
        self.script.answers["/v1/memory/"] = [(200, {}, {"memories": []})]
        c = self.client()
        c.recall()
        c.recall()
        self.assertEqual(self.script.exchanges, 2, "a key with 30 s left is inside the 60 s margin")
        c2 = self.client(refresh_before=10)
        c2.recall()
        c2.recall()
        self.assertEqual(self.script.exchanges, 3)

    def test_not_a_custody_body(self) -> None:
        self.script.answers["/v1/memory/"] = [(502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>")]
        with self.assertRaises(custody.Unavailable) as cm:
            self.client().recall()
        e = cm.exception
        self.assertEqual((e.status, e.code), (502, ""))
        self.assertIn("not a custody error body", str(e))

    def test_redirect_not_followed(self) -> None:
        self.script.answers["/v1/memory/"] = [(307, {"Location": "http://127.0.0.1:1/elsewhere"}, b"")]
        with self.assertRaises(custody.CustodyError) as cm:
            self.client().recall()
        self.assertEqual(cm.exception.status, 307)
        self.assertFalse(any("elsewhere" in p for p in self.srv.paths()))

    def test_wire_shapes(self) -> None:
        self.script.answers["/v1/memory/agents/dev/state/a%2Fb"] = [
            (200, {}, {"name": "a/b", "version": 3, "state": [1], "updated_at": "2026-12-01T10:00:00.5Z"})
        ]
        self.script.answers["/v1/signer/runs/r%201/approvals/ap1"] = [
            (200, {}, {"approval_id": "ap1", "run": "r 1", "call_id": "c", "tool": "Bash", "state": "pending"})
        ]
        c = self.client()
        s = c.put_state("a/b", 7, 2, [1])
        self.assertEqual((s.version, s.state, s.updated_at.microsecond), (3, [1], 500000))  # type: ignore[union-attr]
        c.wait_approval("r 1", "ap1", wait=2.9)
        reqs = [(m, p, h, b) for m, p, h, b in self.srv.requests if not p.startswith("/v1/auth/")]
        m, p, h, b = reqs[0]
        self.assertEqual((m, p, h["lease-epoch"], h["if-match"], h["content-type"], b), ("PUT", "/v1/memory/agents/dev/state/a%2Fb", "7", "2", "application/json", b"[1]"))
        m, p, h, b = reqs[1]
        self.assertEqual((m, p, b), ("GET", "/v1/signer/runs/r%201/approvals/ap1?wait=2", b""))


if __name__ == "__main__":
    unittest.main()
