"""TLS: a local https stand-in with certificates made here by the openssl
CLI. The right CA is accepted, another CA and a certificate for another
name are refused with TLSError, and only the CA file is trusted when one
is given."""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import subprocess
import tempfile
import unittest
import warnings
from typing import Any, Dict, Optional, Tuple

import harness

import custody
from custody import _http

tmp = ""


def openssl(*args: str) -> None:
    subprocess.run(["openssl"] + list(args), cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name,
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )


def make_leaf(name: str, ca: str, san: str) -> None:
    with open(os.path.join(tmp, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n" % san)
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name,
    )
    openssl(
        "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
        "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
    )


def setUpModule() -> None:
    global tmp
    if shutil.which("openssl") is None:
        raise RuntimeError("the TLS tests need the openssl CLI")
    tmp = tempfile.mkdtemp(prefix="custody-tls-")
    make_ca("ca")
    make_ca("other-ca")
    make_leaf("good", "ca", "IP:127.0.0.1,DNS:localhost")
    make_leaf("wrongname", "ca", "DNS:custody.example")


def tearDownModule() -> None:
    shutil.rmtree(tmp, ignore_errors=True)


def path(name: str) -> str:
    return os.path.join(tmp, name)


def answer(method: str, p: str, headers: Dict[str, str], body: bytes) -> Tuple[int, Dict[str, str], Any]:
    if p == "/v1/auth/static":
        return 200, {}, harness.key_answer("ck_tls")
    return 200, {}, {"memories": [{"id": "m1", "kind": "fact", "text": "over TLS"}]}


class TLSTest(unittest.TestCase):
    srv: Optional[harness.StandIn] = None

    def serve(self, leaf: str) -> harness.StandIn:
        srv = harness.StandIn(answer, tls=(path(leaf + ".pem"), path(leaf + ".key")))
        self.addCleanup(srv.stop)
        return srv

    def token(self) -> str:
        p = path("token")
        with open(p, "w") as f:
            f.write("t\n")
        return p

    def test_right_ca_accepted(self) -> None:
        srv = self.serve("good")
        c = custody.Client(srv.url, self.token(), method="static", ca_file=path("ca.pem"))
        self.assertEqual([m.text for m in c.recall()], ["over TLS"])
        c = custody.Client(srv.url.replace("127.0.0.1", "localhost"), self.token(), method="static", ca_file=path("ca.pem"))
        self.assertEqual(c.exchange().key, "ck_tls")

    def test_ca_file_from_env(self) -> None:
        srv = self.serve("good")
        env = {"CUSTODY_URL": srv.url, "CUSTODY_TOKEN_FILE": self.token(), "CUSTODY_AUTH": "static", "CUSTODY_CA_FILE": path("ca.pem")}
        self.assertEqual(custody.Client.from_env(env).exchange().key, "ck_tls")

    def test_wrong_ca_refused(self) -> None:
        srv = self.serve("good")
        c = custody.Client(srv.url, self.token(), method="static", ca_file=path("other-ca.pem"))
        with self.assertRaises(custody.TLSError) as cm:
            c.exchange()
        msg = str(cm.exception)
        self.assertIn("certificate verify failed", msg)
        self.assertIn("other-ca.pem", msg)
        self.assertEqual(cm.exception.status, 0)
        self.assertEqual(srv.requests, [], "nothing was sent")

    def test_system_store_does_not_trust_test_ca(self) -> None:
        srv = self.serve("good")
        c = custody.Client(srv.url, self.token(), method="static")
        with self.assertRaises(custody.TLSError) as cm:
            c.exchange()
        self.assertIn("system's CA store", str(cm.exception))

    def test_name_mismatch_refused(self) -> None:
        srv = self.serve("wrongname")
        c = custody.Client(srv.url, self.token(), method="static", ca_file=path("ca.pem"))
        with self.assertRaises(custody.TLSError) as cm:
            c.exchange()
        self.assertIn("mismatch", str(cm.exception).lower())
        self.assertEqual(srv.requests, [])

    def test_plain_http_to_tls_server_fails(self) -> None:
        srv = self.serve("good")
        c = custody.Client(srv.url.replace("https://", "http://"), self.token(), method="static")
        with self.assertRaises(custody.TransportError):
            c.exchange()

    def test_tls_1_1_refused(self) -> None:
        # A server speaking only TLS 1.1 (allowed at OpenSSL security level 0).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old = ssl.TLSVersion.TLSv1_1
            srv = harness.StandIn(answer)
            self.addCleanup(srv.stop)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(path("good.pem"), path("good.key"))
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.minimum_version = ctx.maximum_version = old
            srv.server.socket = ctx.wrap_socket(srv.server.socket, server_side=True)
            url = srv.url.replace("http://", "https://")
            c = custody.Client(url, self.token(), method="static", ca_file=path("ca.pem"))
            with self.assertRaises(custody.TLSError) as cm:
                c.exchange()
            self.assertIn("protocol version", str(cm.exception))
            # Control: a client that allows TLS 1.1 gets through, so the
            # minimum version, not the setup, refused it.
            cc = ssl.create_default_context(cafile=path("ca.pem"))
            cc.set_ciphers("DEFAULT:@SECLEVEL=0")
            cc.minimum_version = old
            conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=cc, timeout=10)
            conn.request("POST", "/v1/auth/static", body=b"{}")
            self.assertEqual(conn.getresponse().status, 200)
            conn.close()

    def test_bad_ca_file(self) -> None:
        with self.assertRaises(custody.ConfigError) as cm:
            custody.Client("https://127.0.0.1:1", "/tmp/t", ca_file=path("missing.pem"))
        self.assertIn("missing.pem", str(cm.exception))
        with open(path("junk.pem"), "w") as f:
            f.write("not a certificate\n")
        with self.assertRaises(custody.ConfigError):
            custody.Client("https://127.0.0.1:1", "/tmp/t", ca_file=path("junk.pem"))

    def test_context_settings(self) -> None:
        ctx = _http.tls_context(path("ca.pem"))
        self.assertEqual(ctx.minimum_version, ssl.TLSVersion.TLSv1_2)
        self.assertTrue(ctx.check_hostname)
        self.assertEqual(ctx.verify_mode, ssl.CERT_REQUIRED)
        self.assertEqual(len(ctx.get_ca_certs()), 1, "only the CA file is trusted")


if __name__ == "__main__":
    unittest.main()
