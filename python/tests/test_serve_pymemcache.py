"""pymemcache's own integration tests (shipped in the package) against `kura serve`.

They need the `kura` binary: $KURA_BIN, else the newest of target/{release,debug}/kura.
pymemcache skips 3 cases itself: `test_tls` (marked skip upstream, pinterest/pymemcache#39;
`kura serve -Z` is tested with pymemcache's `tls_context` in test_serve_tls_unix.py). Every
other case must pass.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def kura_binary():
    if os.environ.get("KURA_BIN"):
        return pathlib.Path(os.environ["KURA_BIN"])
    built = [ROOT / "target" / kind / "kura" for kind in ("release", "debug")]
    built = [path for path in built if path.exists()]
    return max(built, key=lambda p: p.stat().st_mtime) if built else None


def test_pymemcache_integration_suite_passes_against_kura_serve():
    pymemcache = pytest.importorskip("pymemcache", reason="pymemcache is installed by python/build.sh")
    binary = kura_binary()
    if binary is None:
        pytest.skip("no kura binary: build it (cargo build) or set KURA_BIN")
    server = subprocess.Popen([str(binary), "serve", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().split()[4].rsplit(":", 1)[1]
        tests = pathlib.Path(pymemcache.__file__).parent / "test" / "test_integration.py"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tests),
             "--server", "127.0.0.1", "--port", port],
            capture_output=True, text=True, timeout=300, cwd=tests.parent.parent.parent,
        )
        summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
        assert run.returncode == 0, run.stdout + run.stderr
        assert "failed" not in summary and "passed" in summary, summary
    finally:
        server.terminate()
        server.wait(timeout=30)
