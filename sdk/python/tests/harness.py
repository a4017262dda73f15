"""Test harness: a real ``custody serve`` on 127.0.0.1, and small local
stand-in servers for what a single custody cannot be made to answer.

The custody binary is $CUSTODY_BIN, or built once per test process with
``nice -n 19 go build -o <tmp>/custody ./cmd/custody`` from the repository
this file sits in. Each :class:`Custody` runs with static auth (a tokens
file of SHA-256 hashes), SQLite in a temporary data directory, the signer
on with the example policies of deploy/base/policies, the admin listener
with a generated admin token, and no gateway or metrics listener. Nothing
listens beyond 127.0.0.1.

custody serves TLS on every listener unless told otherwise, so a
:class:`Custody` is either plaintext (the default: ``--plaintext=all``) or,
with ``tls``, serves a certificate issued by a test CA that is made once per
test process with the openssl CLI (:func:`tls_ca`).
"""

from __future__ import annotations

import atexit
import hashlib
import http.client
import http.server
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import ssl
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

_binary_lock = threading.Lock()
_binary: Optional[str] = None


def custody_binary() -> str:
    """The custody binary: $CUSTODY_BIN or one built for this process."""
    global _binary
    with _binary_lock:
        if _binary:
            return _binary
        env_bin = os.environ.get("CUSTODY_BIN")
        if env_bin:
            if not os.access(env_bin, os.X_OK):
                raise RuntimeError("CUSTODY_BIN=%s is not an executable" % env_bin)
            _binary = env_bin
            return _binary
        go = shutil.which("go") or "/usr/local/go/bin/go"
        bindir = tempfile.mkdtemp(prefix="custody-bin-")
        atexit.register(shutil.rmtree, bindir, True)
        out = os.path.join(bindir, "custody")
        cmd = ["nice", "-n", "19", go, "build", "-o", out, "./cmd/custody"]
        sys.stderr.write("building custody for the SDK tests: %s\n" % " ".join(cmd))
        subprocess.run(cmd, cwd=REPO, check=True)
        _binary = out
        return _binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(cwd: str, *args: str) -> None:
    """Runs the openssl CLI in cwd; its complaints become the exception."""
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args[:2]), r.stderr.decode("utf-8", "replace")))


class TestCA:
    """A CA made with the openssl CLI in its own directory (``ca.pem``,
    ``ca.key``), issuing server certificates with :meth:`issue`.
    ``cert``/``key`` are its default leaf, for IP:127.0.0.1 and
    DNS:localhost."""

    def __init__(self, name: str = "custody-sdk-test-ca") -> None:
        if shutil.which("openssl") is None:
            raise RuntimeError("the TLS tests need the openssl CLI")
        self.dir = tempfile.mkdtemp(prefix="custody-sdk-ca-")
        atexit.register(shutil.rmtree, self.dir, True)
        self.ca = os.path.join(self.dir, "ca.pem")
        self._ca_key = os.path.join(self.dir, "ca.key")
        self._lock = threading.Lock()
        self._n = 0
        openssl(
            self.dir, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", self._ca_key, "-out", self.ca, "-days", "2", "-subj", "/CN=" + name,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )
        self.cert, self.key = self.issue("IP:127.0.0.1,DNS:localhost")

    def issue(self, san: str, cert: str = "", key: str = "") -> Tuple[str, str]:
        """A server certificate for san (e.g. "DNS:localhost") with a fresh
        P-256 key, written to cert and key (default: new files in the CA's
        directory); returns their paths."""
        with self._lock:
            self._n += 1
            n = self._n
            base = os.path.join(self.dir, "leaf-%d" % n)
            cert = cert or base + ".pem"
            key = key or base + ".key"
            with open(base + ".ext", "w") as f:
                f.write(
                    "subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n" % san
                )
            openssl(
                self.dir, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", base + ".csr", "-subj", "/CN=custody-%d" % n,
            )
            openssl(
                self.dir, "x509", "-req", "-in", base + ".csr", "-CA", self.ca, "-CAkey", self._ca_key,
                "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-out", cert, "-days", "2",
                "-extfile", base + ".ext",
            )
            return cert, key


_ca_lock = threading.Lock()
_ca: Optional[TestCA] = None


def tls_ca() -> TestCA:
    """The test CA and its default leaf, made once per test process."""
    global _ca
    with _ca_lock:
        if _ca is None:
            _ca = TestCA()
        return _ca


class Custody:
    """A running ``custody serve``.

    Args:
        identities: token name -> (tenant, agent, session); each gets a
            random token, written to ``token_file(name)``.
        extra_args: more ``custody serve`` flags.
        tls: False (default) serves plain HTTP (``--plaintext=all``).
            True serves :func:`tls_ca`'s default leaf on every listener;
            a (cert file, key file) pair serves that certificate, which
            must be issued by :func:`tls_ca` for IP:127.0.0.1. ``url`` is
            then https and ``ca_file`` the CA to trust (else None).
    """

    def __init__(
        self,
        identities: Dict[str, Tuple[str, str, str]],
        extra_args: Optional[List[str]] = None,
        tls: Union[bool, Tuple[str, str]] = False,
    ) -> None:
        self.dir = tempfile.mkdtemp(prefix="custody-sdk-test-")
        self.tokens: Dict[str, str] = {}
        entries = []
        for name, (tenant, agent, session) in identities.items():
            tok = "tok-" + secrets.token_hex(24)
            self.tokens[name] = tok
            entries.append(
                {"sha256": hashlib.sha256(tok.encode()).hexdigest(), "tenant": tenant, "agent": agent, "session": session}
            )
            self.write_token(name, tok)
        with open(os.path.join(self.dir, "tokens.json"), "w") as f:
            json.dump({"tokens": entries}, f)
        self.admin_token = secrets.token_hex(32)
        with open(os.path.join(self.dir, "admin-token"), "w") as f:
            f.write(self.admin_token)
        self.api_port = free_port()
        self.admin_port = free_port()
        self.ca_file: Optional[str] = None
        self._ctx: Optional[ssl.SSLContext] = None
        if tls:
            ca = tls_ca()
            cert, key = (ca.cert, ca.key) if tls is True else tls  # type: ignore[misc]
            self.ca_file = ca.ca
            # The harness's own calls (readiness, admin) verify the
            # certificate and the name 127.0.0.1 like any client.
            self._ctx = ssl.create_default_context(cafile=ca.ca)
            tls_args = ["--tls-cert-file=" + cert, "--tls-key-file=" + key]
        else:
            tls_args = ["--plaintext=all"]
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.api_port)
        args = [
            custody_binary(),
            "serve",
            "--data-dir=" + os.path.join(self.dir, "data"),
            "--kubernetes-auth=false",
            "--static-tokens-file=" + os.path.join(self.dir, "tokens.json"),
            "--listen=127.0.0.1:%d" % self.api_port,
            "--admin-listen=127.0.0.1:%d" % self.admin_port,
            "--admin-token-file=" + os.path.join(self.dir, "admin-token"),
            "--gateway-listen=",
            "--metrics-listen=",
            "--signer",
            "--policy-dir=" + os.path.join(REPO, "deploy", "base", "policies"),
            "--log-level=debug",
        ] + tls_args + list(extra_args or [])
        self.log_path = os.path.join(self.dir, "custody.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(60.0)
        except BaseException:
            self.stop()
            raise

    def token_file(self, name: str) -> str:
        return os.path.join(self.dir, "token-" + name)

    def write_token(self, name: str, token: str) -> None:
        with open(self.token_file(name), "w") as f:
            f.write(token + "\n")

    def _conn(self, port: int, timeout: float) -> http.client.HTTPConnection:
        if self._ctx is not None:
            return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=self._ctx)
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def _wait_ready(self, limit: float) -> None:
        deadline = time.monotonic() + limit
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("custody exited with %s:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                conn = self._conn(self.api_port, 2)
                conn.request("GET", "/readyz")
                r = conn.getresponse()
                body = r.read()
                conn.close()
                if r.status == 200:
                    return
                last = "%d %r" % (r.status, body[:200])
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        raise RuntimeError("custody not ready after %.0fs (%s):\n%s" % (limit, last, self.log_tail()))

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def admin(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        """A request to the admin listener: (status, decoded JSON or None)."""
        conn = self._conn(self.admin_port, 30)
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Authorization": "Bearer " + self.admin_token}
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# -- stand-in servers ------------------------------------------------------

Handler = Callable[[str, str, Dict[str, str], bytes], Tuple[int, Dict[str, str], Any]]


class StandIn:
    """A local HTTP(S) server on 127.0.0.1 whose answers a test scripts.

    ``handler(method, path, headers, body)`` returns (status, headers,
    body) where body is bytes or a JSON-able value. Every request is kept
    in ``requests`` as (method, path, headers, body).
    """

    def __init__(self, handler: Handler, tls: Optional[Tuple[str, str]] = None) -> None:
        self.requests: List[Tuple[str, str, Dict[str, str], bytes]] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append((self.command, self.path, hdrs, body))
                status, rh, out = handler(self.command, self.path, hdrs, body)
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                for k, v in rh.items():
                    self.send_header(k, v)
                if "Content-Type" not in rh:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.port = self.server.server_address[1]
        self.url = "%s://127.0.0.1:%d" % (scheme, self.port)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths(self) -> List[str]:
        return [p for _, p, _, _ in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def key_answer(key: str, ttl: float = 900.0, agent: str = "dev") -> Dict[str, Any]:
    """An exchange answer as custody gives it."""
    exp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + ttl)) + ".123456789Z"
    return {"key": key, "key_id": "ab" * 32, "expires_at": exp, "tenant": "agents", "agent": agent, "session": "s1"}
