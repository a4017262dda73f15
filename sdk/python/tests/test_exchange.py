"""Exchange, re-exchange and refusals against a real custody serve."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone
from typing import Optional

import harness

import custody

srv: Optional[harness.Custody] = None
IDS = {
    "a": ("agents", "dev", "s1"),
    "b": ("agents", "other", "s2"),
    "flood": ("agents", "flood", "s3"),
}


def setUpModule() -> None:
    global srv
    srv = harness.Custody(IDS)


def tearDownModule() -> None:
    if srv is not None:
        srv.stop()


def client(name: str = "a", **kw: object) -> custody.Client:
    assert srv is not None
    return custody.Client(srv.url, srv.token_file(name), method="static", **kw)  # type: ignore[arg-type]


class ExchangeTest(unittest.TestCase):
    def setUp(self) -> None:
        assert srv is not None
        self.srv = srv
        # Tests that rewrite a token file put it back.
        for name in IDS:
            srv.write_token(name, srv.tokens[name])

    def test_exchange(self) -> None:
        c = client()
        k = c.exchange()
        self.assertTrue(k.key.startswith("ck_"), "key %s... lacks the ck_ prefix" % k.key[:3])
        self.assertEqual((k.tenant, k.agent, k.session), ("agents", "dev", "s1"))
        self.assertEqual(len(k.key_id), 64)
        left = k.expires_at - datetime.now(timezone.utc)
        self.assertTrue(timedelta(minutes=14) < left <= timedelta(minutes=15, seconds=5), left)
        self.assertNotIn(k.key, repr(k))
        self.assertNotIn(k.key, repr(c))
        self.assertIs(c.current_key(), k, "a live key is reused")

    def test_from_env(self) -> None:
        env = {"CUSTODY_URL": self.srv.url + "/", "CUSTODY_TOKEN_FILE": self.srv.token_file("b"), "CUSTODY_AUTH": "static"}
        c = custody.Client.from_env(env)
        self.assertEqual(c.exchange().agent, "other")
        with self.assertRaises(custody.ConfigError):
            custody.Client.from_env({"CUSTODY_URL": self.srv.url})
        with self.assertRaises(custody.ConfigError):
            custody.Client.from_env(dict(env, CUSTODY_AUTH="oidc"))

    def test_token_file_read_at_every_exchange(self) -> None:
        c = client()
        self.assertEqual(c.exchange().agent, "dev")
        self.srv.write_token("a", self.srv.tokens["b"])
        self.assertEqual(c.exchange().agent, "other")

    def test_refresh_before_expiry(self) -> None:
        shift = [timedelta(0)]
        c = client(now=lambda: datetime.now(timezone.utc) + shift[0])
        k1 = c.current_key()
        shift[0] = timedelta(minutes=13, seconds=30)  # 90 s left: still outside the 60 s margin
        self.assertIs(c.current_key(), k1)
        shift[0] = timedelta(minutes=14, seconds=30)  # 30 s left: inside it
        k2 = c.current_key()
        self.assertNotEqual(k2.key_id, k1.key_id)

    def test_reexchange_after_admin_revoke(self) -> None:
        c = client()
        c.remember("fact", "before the revocation")
        k1 = c.current_key()
        status, _ = self.srv.admin("POST", "/v1/admin/keys/%s/revoke" % k1.key_id)
        self.assertEqual(status, 204)
        got = c.recall("revocation")
        self.assertEqual([m.text for m in got], ["before the revocation"])
        k2 = c.current_key()
        self.assertNotEqual(k2.key_id, k1.key_id, "the call re-exchanged")
        status, _ = self.srv.admin("POST", "/v1/admin/keys/%s/revoke" % k1.key_id)
        self.assertIn(status, (204, 404))

    def test_reexchange_for_signer_after_agent_revoke(self) -> None:
        c = client()
        run = c.register_run()
        k1 = c.current_key()
        status, body = self.srv.admin("POST", "/v1/admin/agents/agents/dev/revoke")
        self.assertEqual(status, 200)
        self.assertGreaterEqual(body["revoked"], 1)
        self.assertEqual(c.run_status(run.run).run, run.run)
        self.assertNotEqual(c.current_key().key_id, k1.key_id)
        c.close_run(run.run)

    def test_self_revoke(self) -> None:
        c = client()
        k1 = c.exchange()
        c.revoke()
        c.revoke()  # no key: nothing to do
        c.remember("fact", "after a self revocation")
        self.assertNotEqual(c.current_key().key_id, k1.key_id)
        status, _ = self.srv.admin("POST", "/v1/admin/keys/%s/revoke" % k1.key_id)
        self.assertIn(status, (204, 404))

    def test_bad_token_refused_without_secret(self) -> None:
        bad = "tok-not-a-known-token-0123456789abcdef"
        self.srv.write_token("a", bad)
        c = client()
        with self.assertRaises(custody.Unauthorized) as cm:
            c.exchange()
        e = cm.exception
        self.assertEqual((e.status, e.code), (401, "unauthenticated"))
        self.assertEqual(e.message, "token refused")
        for text in (str(e), repr(e), e.message, e.body.decode(), repr(e.details)):
            self.assertNotIn(bad, text)
        self.assertIn("401 unauthenticated", str(e))

    def test_revoked_key_and_bad_token_no_secret(self) -> None:
        c = client()
        k = c.exchange()
        status, _ = self.srv.admin("POST", "/v1/admin/keys/%s/revoke" % k.key_id)
        self.assertEqual(status, 204)
        self.srv.write_token("a", "tok-wrong-" + "0" * 30)
        with self.assertRaises(custody.Unauthorized) as cm:
            c.get_state("anything")
        e = cm.exception
        for secret in (k.key, "tok-wrong-", self.srv.tokens["a"]):
            for text in (str(e), repr(e), e.message, e.body.decode()):
                self.assertNotIn(secret, text)

    def test_rate_limited_exchange(self) -> None:
        # custody lets one identity have a burst of 20 keys, then one a second.
        c = client("flood")
        with self.assertRaises(custody.RateLimited) as cm:
            for _ in range(40):
                c.exchange()
        e = cm.exception
        self.assertEqual((e.status, e.code), (429, "rate_limited"))
        assert e.retry_after is not None
        self.assertGreaterEqual(e.retry_after, 1.0)

    def test_missing_token_file(self) -> None:
        assert srv is not None
        c = custody.Client(srv.url, srv.dir + "/no-such-token", method="static")
        with self.assertRaises(custody.ConfigError) as cm:
            c.exchange()
        self.assertIn("no-such-token", str(cm.exception))

    def test_wrong_auth_method_says_so(self) -> None:
        # custody here serves no /v1/auth/kubernetes: not a custody error body.
        assert srv is not None
        c = custody.Client(srv.url, srv.token_file("a"))
        with self.assertRaises(custody.CustodyError) as cm:
            c.exchange()
        e = cm.exception
        self.assertEqual(e.code, "")
        self.assertIn("auth method", str(e))
        self.assertGreaterEqual(e.status, 400)

    def test_unreachable(self) -> None:
        c = custody.Client("http://127.0.0.1:%d" % harness.free_port(), srv.token_file("a"), method="static")  # type: ignore[union-attr]
        with self.assertRaises(custody.TransportError) as cm:
            c.exchange()
        self.assertEqual(cm.exception.status, 0)
        self.assertIn("/v1/auth/static", str(cm.exception))

    def test_config_errors(self) -> None:
        with self.assertRaises(custody.ConfigError):
            custody.Client("", "/tmp/x")
        with self.assertRaises(custody.ConfigError):
            custody.Client("ftp://127.0.0.1", "/tmp/x")
        with self.assertRaises(custody.ConfigError):
            custody.Client("http://127.0.0.1", "/tmp/x", method="oidc")
        for bad in ("http://u:secret@127.0.0.1", "http://127.0.0.1:99999", "http://127.0.0.1/?a=b", "127.0.0.1:8865"):
            with self.assertRaises(custody.ConfigError) as cm:
                custody.Client(bad, "/tmp/x")
            self.assertNotIn("secret", str(cm.exception))
        # ConfigError is also a ValueError.
        with self.assertRaises(ValueError):
            custody.Client("http://127.0.0.1", "")


if __name__ == "__main__":
    unittest.main()
