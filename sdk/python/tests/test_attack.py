"""Attacks from a stand-in custody on 127.0.0.1: answers that must not
make the SDK put the key into an exception, or follow a redirect."""

from __future__ import annotations

import json
import os
import tempfile
import traceback
import unittest
from typing import Any, Dict

import harness

import custody


class AttackTest(unittest.TestCase):
    def setUp(self) -> None:
        fd, self.token = tempfile.mkstemp()
        os.write(fd, b"static-token-secret\n")
        os.close(fd)

    def tearDown(self) -> None:
        os.unlink(self.token)

    def test_attack_key_with_control_character_not_in_exception(self) -> None:
        # An exchange answer whose key cannot go in a header: the error
        # must not quote it (http.client's ValueError would).
        secret = "ck_attack_secret_0123456789"

        def handler(method: str, path: str, headers: Dict[str, str], body: bytes) -> Any:
            if path == "/v1/auth/static":
                return 200, {}, harness.key_answer(secret + "\n")
            return 200, {}, {"memories": []}

        srv = harness.StandIn(handler)
        try:
            c = custody.Client(srv.url, self.token, method="static")
            with self.assertRaises(custody.CustodyError) as cm:
                c.recall()
            text = "".join(traceback.format_exception(type(cm.exception), cm.exception, cm.exception.__traceback__))
            self.assertNotIn(secret, text)
            self.assertNotIn(secret, repr(cm.exception))
        finally:
            srv.stop()

    def test_attack_redirect_not_followed(self) -> None:
        other: Dict[str, Any] = {}

        def elsewhere(method: str, path: str, headers: Dict[str, str], body: bytes) -> Any:
            other["auth"] = headers.get("authorization")
            return 200, {}, {"memories": []}

        dst = harness.StandIn(elsewhere)

        def handler(method: str, path: str, headers: Dict[str, str], body: bytes) -> Any:
            if path == "/v1/auth/static":
                return 200, {}, harness.key_answer("ck_attack_redirect")
            return 307, {"Location": dst.url + path}, b""

        srv = harness.StandIn(handler)
        try:
            c = custody.Client(srv.url, self.token, method="static")
            with self.assertRaises(custody.CustodyError):
                c.recall()
            self.assertEqual(other, {})
        finally:
            srv.stop()
            dst.stop()

    def test_attack10_lease_ttl_under_a_second(self) -> None:
        # acquire_lease sent int(ttl): a lease asked for under a second was
        # sent as ttl_seconds 0, custody's default (5 minutes), and a
        # negative one as the default too.
        sent = []

        def handler(method: str, path: str, headers: Dict[str, str], body: bytes) -> Any:
            if path == "/v1/auth/static":
                return 200, {}, harness.key_answer("ck_attack_ttl")
            sent.append(body)
            return 200, {}, {"name": "plan", "epoch": 1, "expires_at": "2026-10-12T09:00:00Z", "version": 0, "state": None}

        srv = harness.StandIn(handler)
        try:
            c = custody.Client(srv.url, self.token, method="static")
            for ttl, want in ((0.5, 1), (1, 1), (1.5, 2), (60, 60)):
                sent.clear()
                c.acquire_lease("plan", ttl=ttl)
                self.assertEqual(len(sent), 1)
                self.assertEqual(json.loads(sent[0]), {"ttl_seconds": want}, "ttl=%r" % ttl)
            sent.clear()
            for bad in (-1, float("nan"), float("inf")):
                with self.assertRaises(ValueError):
                    c.acquire_lease("plan", ttl=bad)
            self.assertEqual(sent, [])
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
