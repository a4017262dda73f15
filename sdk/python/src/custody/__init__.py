"""Python client for custody, for agents in Kubernetes sandboxes.

Standard library only. The surface and behaviour follow the Go package
``client`` in the custody repository::

    import custody

    c = custody.Client.from_env()        # CUSTODY_URL, CUSTODY_TOKEN_FILE, CUSTODY_AUTH, CUSTODY_CA_FILE
    c.remember("preference", "answers in French", key="language")
    run = c.register_run()
    d = c.decide(run.run, "c1", "Bash", {"command": "ls"})
    if d.effect == "allow":
        ...
        c.complete(run.run, "c1", "ok")
    c.close_run(run.run)

Modules: :mod:`custody.client` (exchange and re-exchange),
:mod:`custody.memory`, :mod:`custody.signer`, :mod:`custody.errors`.
"""

from .client import Client, Key
from .errors import (
    BadRequest,
    ConfigError,
    Conflict,
    CustodyError,
    Forbidden,
    NotFound,
    RateLimited,
    TLSError,
    TransportError,
    Unauthorized,
    Unavailable,
)
from .memory import Lease, Memory, Remembered, State, StateLease
from .signer import Appended, Approval, Decision, ModelEvent, Run

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Key",
    "Memory",
    "Remembered",
    "Lease",
    "State",
    "StateLease",
    "Run",
    "Decision",
    "Appended",
    "ModelEvent",
    "Approval",
    "CustodyError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "RateLimited",
    "Unavailable",
    "TransportError",
    "TLSError",
    "ConfigError",
]
