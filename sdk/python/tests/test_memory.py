"""Memory and working state against a real custody serve."""

from __future__ import annotations

import threading
import unittest
from typing import List, Optional

import harness

import custody

srv: Optional[harness.Custody] = None


def setUpModule() -> None:
    global srv
    srv = harness.Custody({"s1": ("agents", "mem", "pod-1"), "s2": ("agents", "mem", "pod-2")})


def tearDownModule() -> None:
    if srv is not None:
        srv.stop()


def client(name: str) -> custody.Client:
    assert srv is not None
    return custody.Client(srv.url, srv.token_file(name), method="static")


class MemoryTest(unittest.TestCase):
    def test_remember_recall_forget(self) -> None:
        c = client("s1")
        r = c.remember("fact", "the build cache lives in /var/cache/büild", tags=["build", "cache"])
        self.assertEqual(r.status, "created")
        self.assertEqual(r.memory.tags, ["build", "cache"])
        self.assertEqual(r.memory.session, "pod-1")
        self.assertIsNotNone(r.memory.created_at)
        again = c.remember("fact", "the build cache lives in /var/cache/büild", tags=["build", "cache"])
        self.assertEqual((again.status, again.id), ("unchanged", r.id))

        got = c.recall("büild")
        self.assertEqual([m.id for m in got], [r.id])
        self.assertEqual(got[0].text, "the build cache lives in /var/cache/büild")

        other = c.remember("note", "a note about the cache")
        self.assertEqual([m.id for m in c.recall("cache", kind="note")], [other.id])
        self.assertEqual(len(c.recall("cache", limit=1)), 1)

        c.forget(r.id)
        self.assertEqual([m.id for m in c.recall("büild")], [])
        with self.assertRaises(custody.NotFound) as cm:
            c.forget(r.id)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

    def test_keyed_memory_supersedes(self) -> None:
        c = client("s1")
        a = c.remember("preference", "answers in French", key="language")
        b = c.remember("preference", "answers in German", key="language")
        self.assertEqual(b.status, "superseded")
        self.assertEqual(b.supersedes, a.id)
        self.assertEqual(b.memory.key, "language")
        active = c.recall("", kind="preference")
        self.assertEqual([m.text for m in active], ["answers in German"])
        hist = c.recall("", kind="preference", history=True)
        self.assertEqual(sorted(m.text for m in hist), ["answers in French", "answers in German"])
        old = [m for m in hist if m.id == a.id][0]
        self.assertEqual(old.superseded_by, b.id)
        self.assertIsNotNone(old.superseded_at)

    def test_bad_request(self) -> None:
        c = client("s1")
        with self.assertRaises(custody.BadRequest) as cm:
            c.remember("fact", "")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertTrue(cm.exception.message)

    def test_state_lease_and_fencing(self) -> None:
        c1, c2 = client("s1"), client("s2")
        with self.assertRaises(custody.NotFound):
            c1.get_state("plan")

        l1 = c1.acquire_lease("plan", ttl=30)
        self.assertEqual(l1.version, 0)
        self.assertIsNone(l1.state)
        self.assertGreater(l1.epoch, 0)
        s = c1.put_state("plan", l1.epoch, 0, {"step": 1, "todo": ["a", "b"]})
        self.assertEqual(s.version, 1)
        self.assertEqual(s.state, {"step": 1, "todo": ["a", "b"]})

        got = c1.get_state("plan")
        self.assertEqual((got.version, got.state, got.updated_by), (1, {"step": 1, "todo": ["a", "b"]}, "pod-1"))
        assert got.lease is not None
        self.assertEqual((got.lease.epoch, got.lease.holder), (l1.epoch, "pod-1"))

        # A stale version: 412 version_conflict, with the current version.
        with self.assertRaises(custody.Conflict) as cm:
            c1.put_state("plan", l1.epoch, 0, {"step": 99})
        e = cm.exception
        self.assertEqual((e.status, e.code, e.details.get("version")), (412, "version_conflict", 1))

        # Another session cannot take a live lease: 409 lease_held.
        with self.assertRaises(custody.Conflict) as cm:
            c2.acquire_lease("plan")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.details.get("holder")), (409, "lease_held", "pod-1"))
        self.assertIn("lease_held", str(e))

        # Released, it is taken over with a higher epoch; the old epoch is fenced off.
        c1.release_lease("plan", l1.epoch)
        l2 = c2.acquire_lease("plan")
        self.assertGreater(l2.epoch, l1.epoch)
        self.assertEqual((l2.version, l2.state), (1, {"step": 1, "todo": ["a", "b"]}))
        with self.assertRaises(custody.Conflict) as cm:
            c1.put_state("plan", l1.epoch, 1, {"step": 2})
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "lease_lost"))
        with self.assertRaises(custody.Conflict) as cm:
            c1.release_lease("plan", l1.epoch)
        self.assertEqual(cm.exception.code, "lease_lost")
        s = c2.put_state("plan", l2.epoch, 1, "plain text state")
        self.assertEqual((s.version, s.state), (2, "plain text state"))
        c2.release_lease("plan", l2.epoch)

    def test_threads_share_a_client(self) -> None:
        c = client("s2")
        errs: List[BaseException] = []

        def work(i: int) -> None:
            try:
                for j in range(5):
                    c.remember("thread", "thread %d item %d" % (i, j), tags=["t%d" % i])
            except BaseException as e:  # noqa: B902 - reported below
                errs.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errs, [])
        self.assertEqual(len(c.recall("", kind="thread", limit=100)), 30)

    def test_state_value_must_be_json(self) -> None:
        c = client("s1")
        lease = c.acquire_lease("nan")
        with self.assertRaises(ValueError):
            c.put_state("nan", lease.epoch, 0, float("nan"))
        with self.assertRaises(ValueError):
            c.put_state("nan", lease.epoch, 0, object())
        c.release_lease("nan", lease.epoch)


if __name__ == "__main__":
    unittest.main()
