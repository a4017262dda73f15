"""custody's error bodies mapped to exceptions (no server needed)."""

from __future__ import annotations

import json
import unittest

import harness  # noqa: F401  (puts src/ on the path)

from custody import errors


class FromResponseTest(unittest.TestCase):
    def test_classes_by_status(self) -> None:
        cases = [
            (400, errors.BadRequest), (401, errors.Unauthorized), (403, errors.Forbidden),
            (404, errors.NotFound), (409, errors.Conflict), (410, errors.Conflict),
            (412, errors.Conflict), (413, errors.BadRequest), (428, errors.BadRequest),
            (429, errors.RateLimited), (500, errors.Unavailable), (503, errors.Unavailable),
            (418, errors.CustodyError), (307, errors.CustodyError),
        ]
        for status, cls in cases:
            with self.subTest(status=status):
                e = errors.from_response(status, b'{"error":"x","message":"y"}', None)
                self.assertIs(type(e), cls)
                self.assertEqual((e.status, e.code, e.message), (status, "x", "y"))

    def test_details_and_retry_after(self) -> None:
        body = json.dumps({"error": "lease_held", "message": "held", "holder": "pod-1", "expires_at": "2026-01-01T00:00:00Z"}).encode()
        e = errors.from_response(409, body, "3")
        self.assertEqual(e.details, {"holder": "pod-1", "expires_at": "2026-01-01T00:00:00Z"})
        self.assertEqual(e.retry_after, 3.0)
        self.assertEqual(str(e), "custody: 409 lease_held: held")
        self.assertEqual(repr(e), "Conflict(status=409, code='lease_held', message='held')")
        self.assertEqual(e.body, body)
        for header in (None, "", "0", "-1", "Wed, 21 Oct 2026 07:28:00 GMT"):
            with self.subTest(header=header):
                self.assertIsNone(errors.from_response(503, body, header).retry_after)

    def test_not_a_custody_body(self) -> None:
        for body in (b"", b"404 page not found\n", b"[1]", b'{"error": 5}', b"\xff"):
            with self.subTest(body=body):
                e = errors.from_response(404, body, None)
                self.assertEqual((e.code, e.message), ("", ""))
                self.assertIn("404 Not Found (not a custody error body", str(e))

    def test_hierarchy(self) -> None:
        self.assertTrue(issubclass(errors.TLSError, errors.TransportError))
        self.assertTrue(issubclass(errors.TransportError, errors.CustodyError))
        self.assertTrue(issubclass(errors.ConfigError, ValueError))
        e = errors.TransportError("custody: GET http://x/: timed out")
        self.assertEqual((e.status, e.code, e.message), (0, "", "custody: GET http://x/: timed out"))


if __name__ == "__main__":
    unittest.main()
