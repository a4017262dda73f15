"""The package installs with pip from the source tree, offline: the
in-tree build backend needs nothing from a package index, with build
isolation or without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)


class InstallTest(unittest.TestCase):
    def install(self, *flags: str) -> None:
        target = tempfile.mkdtemp(prefix="custody-install-")
        self.addCleanup(shutil.rmtree, target, True)
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", target]
        subprocess.run(cmd + list(flags) + [PROJECT], check=True, env=env, cwd=target)
        out = subprocess.run(
            [sys.executable, "-c", "import custody, custody.client; print(custody.__file__); print(custody.__version__)"],
            check=True,
            capture_output=True,
            text=True,
            env=dict(env, PYTHONPATH=target),
            cwd=target,
        ).stdout.split()
        self.assertTrue(out[0].startswith(target), out)
        self.assertEqual(out[1], "0.1.0")
        self.assertTrue(os.path.exists(os.path.join(target, "custody", "py.typed")))

    def test_install_isolated(self) -> None:
        self.install()

    def test_install_no_build_isolation(self) -> None:
        self.install("--no-build-isolation")


if __name__ == "__main__":
    unittest.main()
