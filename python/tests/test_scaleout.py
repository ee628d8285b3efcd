"""A short `make scaleout`: 3 `kura serve` behind pymemcache's HashClient and twemproxy,
3,000 keys (shares within +-10% of a third, sampling noise being larger than at 100k),
kill one, exactly its keys miss, restart, recovery. Needs the kura binary ($KURA_BIN or
target/{release,debug}/kura) and pymemcache; twemproxy's half needs nutcracker."""

import pathlib
import subprocess
import sys

import pytest

from test_serve_pymemcache import ROOT, kura_binary


def test_three_servers_share_keys_and_survive_losing_one():
    pytest.importorskip("pymemcache", reason="pymemcache is installed by python/build.sh")
    binary = kura_binary()
    if binary is None:
        pytest.skip("no kura binary: build it (cargo build) or set KURA_BIN")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "scaleout.py"), "--keys", "3000", "--tolerance", "0.1", "--kura", str(binary)],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all checks passed" in run.stdout
