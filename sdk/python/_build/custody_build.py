"""A PEP 517 build backend for the custody package, standard library only.

It packs ``src/custody`` into a pure-Python wheel (and the tree into an
sdist) with the name, version, summary and Requires-Python from
pyproject.toml's ``[project]`` table, so installing needs no package index
(no setuptools or wheel to download). PEP 660 editable installs are
served by a wheel holding a ``.pth`` file that points at ``src``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PKG = "custody"


def _project() -> Dict[str, str]:
    """The string members of pyproject.toml's [project] table."""
    with open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not section:
        raise RuntimeError("pyproject.toml has no [project] table")
    out = {}
    for m in re.finditer(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', section.group(1), re.M):
        out[m.group(1)] = m.group(2)
    for need in ("name", "version"):
        if need not in out:
            raise RuntimeError("pyproject.toml [project] has no %s" % need)
    return out


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + p["name"],
        "Version: " + p["version"],
    ]
    if "description" in p:
        lines.append("Summary: " + p["description"])
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist_info() -> str:
    p = _project()
    return "%s-%s.dist-info" % (p["name"].replace("-", "_"), p["version"])


def _wheel_name() -> str:
    p = _project()
    return "%s-%s-py3-none-any.whl" % (p["name"].replace("-", "_"), p["version"])


def _package_files() -> List[Tuple[str, str]]:
    """(archive name, path) of every file of the package, sorted."""
    base = os.path.join(_ROOT, "src")
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(base, _PKG)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            out.append((os.path.relpath(path, base).replace(os.sep, "/"), path))
    return out


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    info = _dist_info()
    files = files + [
        (info + "/METADATA", _metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: custody_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = io.StringIO()
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write("%s,sha256=%s,%d\n" % (name, digest, len(data)))
    record.write(info + "/RECORD,,\n")
    files.append((info + "/RECORD", record.getvalue().encode("utf-8")))
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            zi = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    info = _dist_info()
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(
    wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None
) -> str:
    return _write_wheel(wheel_directory, [(arc, _read(path)) for arc, path in _package_files()])


def build_editable(
    wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None
) -> str:
    pth = (os.path.join(_ROOT, "src") + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("_custody_editable.pth", pth)])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    name = base + ".tar.gz"
    members = ["pyproject.toml", p.get("readme", "README.md"), "_build/custody_build.py"]
    members += ["src/" + arc for arc, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in members:
            t.add(os.path.join(_ROOT, rel), arcname=base + "/" + rel, recursive=False)
        data = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(data)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
    return name
