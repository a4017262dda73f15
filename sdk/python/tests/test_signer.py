"""The signer against a real custody serve, with the example policy of
deploy/base/policies/agents.yaml (Bash allowed, "rm -rf" asks, metadata
fetches denied by the built-in rules)."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Optional

import harness

import custody

srv: Optional[harness.Custody] = None


def setUpModule() -> None:
    global srv
    srv = harness.Custody({"a": ("agents", "runner", "pod-a"), "x": ("agents", "intruder", "pod-x")})


def tearDownModule() -> None:
    if srv is not None:
        srv.stop()


def client(name: str = "a") -> custody.Client:
    assert srv is not None
    return custody.Client(srv.url, srv.token_file(name), method="static")


class SignerTest(unittest.TestCase):
    def test_run_decide_complete_close(self) -> None:
        c = client()
        run = c.register_run()
        self.assertTrue(run.run)
        self.assertEqual((run.tenant, run.agent, run.session, run.closed), ("agents", "runner", "pod-a", False))

        d = c.decide(run.run, "c1", "Bash", {"command": "ls /workspace"})
        self.assertEqual(d.effect, "allow")
        self.assertIn("AGENTS-001", d.rule_ids)
        self.assertEqual(d.call_id, "c1")
        self.assertTrue(d.args_commitment)
        self.assertTrue(d.policy_hash)
        done = c.complete(run.run, "c1", "ok", result={"files": ["a.txt"], "size": 1.5})
        self.assertGreater(done.run_seq, d.run_seq)
        self.assertGreater(done.index, d.index)

        ev = c.record_model_event(
            run.run, custody.ModelEvent(event="response", provider="anthropic", model="m", input_tokens=10, output_tokens=3)
        )
        self.assertGreater(ev.run_seq, done.run_seq)

        with self.assertRaises(custody.Conflict) as cm:
            c.decide(run.run, "c1", "Bash", {"command": "ls"})
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "duplicate_call"))

        st = c.run_status(run.run)
        self.assertFalse(st.closed)
        self.assertGreaterEqual(st.records, 4)
        self.assertIsNotNone(st.last_activity)

        c.close_run(run.run)
        st = c.run_status(run.run)
        self.assertTrue(st.closed)
        self.assertTrue(st.closed_reason)
        with self.assertRaises(custody.Conflict) as cm:
            c.decide(run.run, "c2", "Bash", {"command": "ls"})
        self.assertEqual(cm.exception.code, "run_closed")

    def test_deny(self) -> None:
        c = client()
        run = c.register_run()
        d = c.decide(run.run, "f1", "WebFetch", {"url": "http://169.254.169.254/latest/meta-data/"})
        self.assertEqual(d.effect, "deny")
        self.assertIn("CUSTODY-NET-METADATA", d.rule_ids)
        d = c.decide(run.run, "u1", "NoSuchTool")  # no args: {}; no rule matches: denied
        self.assertEqual(d.effect, "deny")
        c.close_run(run.run)

    def test_not_found_forbidden_bad_request(self) -> None:
        c = client()
        with self.assertRaises(custody.NotFound) as cm:
            c.run_status("no-such-run")
        self.assertEqual(cm.exception.code, "not_found")
        run = c.register_run()
        with self.assertRaises(custody.Forbidden) as forbidden:
            client("x").decide(run.run, "c1", "Bash", {"command": "ls"})
        self.assertEqual((forbidden.exception.status, forbidden.exception.code), (403, "forbidden"))
        with self.assertRaises(custody.BadRequest) as bad:
            c.decide(run.run, "", "Bash", {})
        self.assertEqual(bad.exception.code, "bad_request")
        with self.assertRaises(custody.BadRequest):
            c.record_model_event(run.run, custody.ModelEvent(event=""))
        c.close_run(run.run)

    def test_approval_flow(self) -> None:
        assert srv is not None
        c = client()
        run = c.register_run()
        args = {"command": "rm -rf /workspace/tmp"}
        d = c.decide(run.run, "rm1", "Bash", args)
        self.assertEqual(d.effect, "ask")
        self.assertIn("AGENTS-003", d.rule_ids)

        with self.assertRaises(custody.Conflict) as cm:
            c.request_approval(run.run, "rm1", "Bash", {"command": "rm -rf /"})
        self.assertEqual(cm.exception.code, "not_ask")

        a = c.request_approval(run.run, "rm1", "Bash", args)
        self.assertEqual((a.state, a.call_id, a.tool, a.run), ("pending", "rm1", "Bash", run.run))
        self.assertTrue(a.id)
        self.assertIsNotNone(a.expires_at)
        self.assertEqual(c.run_status(run.run).pending_approvals, 1)

        with self.assertRaises(custody.Conflict) as cm:
            c.consume_approval(run.run, a.id, args)
        self.assertEqual(cm.exception.code, "approval_pending")

        # An operator approves while the agent waits.
        def approve() -> None:
            time.sleep(0.5)
            assert srv is not None
            srv.admin("POST", "/v1/signer/approvals/%s/approve" % a.id)

        t = threading.Thread(target=approve)
        t.start()
        start = time.monotonic()
        got = c.wait_approval(run.run, a.id, wait=20)
        t.join()
        self.assertEqual(got.state, "approved")
        self.assertLess(time.monotonic() - start, 15, "the wait returned when it was approved")

        with self.assertRaises(custody.Conflict) as cm:
            c.consume_approval(run.run, a.id, {"command": "rm -rf /"})
        self.assertEqual(cm.exception.code, "args_mismatch")
        used = c.consume_approval(run.run, a.id, args)
        self.assertEqual(used.state, "consumed")
        with self.assertRaises(custody.Conflict) as cm:
            c.consume_approval(run.run, a.id, args)
        self.assertEqual(cm.exception.code, "approval_consumed")
        c.complete(run.run, "rm1", "ok")
        c.close_run(run.run)

    def test_denied_approval(self) -> None:
        assert srv is not None
        c = client()
        run = c.register_run()
        args = {"command": "rm -rf /data"}
        self.assertEqual(c.decide(run.run, "rm2", "Bash", args).effect, "ask")
        a = c.request_approval(run.run, "rm2", "Bash", args)
        self.assertEqual(c.wait_approval(run.run, a.id).state, "pending")
        status, _ = srv.admin("POST", "/v1/signer/approvals/%s/deny" % a.id)
        self.assertEqual(status, 200)
        self.assertEqual(c.wait_approval(run.run, a.id, wait=5).state, "denied")
        with self.assertRaises(custody.Conflict) as cm:
            c.consume_approval(run.run, a.id, args)
        self.assertEqual(cm.exception.code, "approval_denied")
        c.close_run(run.run)


if __name__ == "__main__":
    unittest.main()
