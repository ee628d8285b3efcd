"""pymemcache against `kura serve -Z` (its `tls_context`) and `kura serve -s` (its unix-socket
client), as a memcached user would connect.

They need the `kura` binary ($KURA_BIN, else the newest of target/{release,debug}/kura) and,
for TLS, /usr/bin/openssl to make the certificates; each test skips, saying why, without them.
"""

import os
import ssl
import subprocess

import pytest

from test_serve_pymemcache import kura_binary

OPENSSL = "/usr/bin/openssl"
NEW_KEY = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2".split()


def serve(*args):
    """Starts `kura serve ARGS`; returns the process and the address of its "listening on" line."""
    binary = kura_binary()
    if binary is None:
        pytest.skip("no kura binary: build it (cargo build) or set KURA_BIN")
    server = subprocess.Popen([str(binary), "serve", *args], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    assert "listening on" in line, line
    return server, line.split()[4]


def stop(server):
    server.terminate()
    assert server.wait(timeout=30) == 0


@pytest.fixture
def certificates(tmp_path):
    if not os.path.exists(OPENSSL):
        pytest.skip(f"{OPENSSL} is absent (Debian package openssl)")

    def openssl(*args):
        subprocess.run([OPENSSL, *args], cwd=tmp_path, check=True, capture_output=True)

    openssl("req", "-x509", *NEW_KEY, "-subj", "/CN=kura-ca", "-keyout", "ca.key", "-out", "ca.pem",
            "-addext", "basicConstraints=critical,CA:TRUE")
    openssl("req", "-x509", *NEW_KEY, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.pem",
            "-CA", "ca.pem", "-CAkey", "ca.key", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:FALSE")
    openssl("req", "-x509", *NEW_KEY, "-subj", "/CN=other-ca", "-keyout", "other.key", "-out", "other.pem",
            "-addext", "basicConstraints=critical,CA:TRUE")
    return tmp_path


def test_pymemcache_tls_context_talks_to_kura_serve_z(certificates):
    base = pytest.importorskip("pymemcache.client.base", reason="pymemcache is installed by python/build.sh")
    files = f"ssl_chain_cert={certificates / 'server.pem'},ssl_key={certificates / 'server.key'}"
    server, address = serve("--port", "0", "-Z", "-o", files)
    try:
        host, port = address.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
        client = base.Client((host, int(port)), tls_context=context, timeout=10)
        client.set("greeting", b"hello over tls", noreply=False)
        assert client.get("greeting") == b"hello over tls"
        assert client.get_many(["greeting", "nope"]) == {"greeting": b"hello over tls"}
        assert client.incr("n", 1) is None
        client.close()
        # A client that trusts another CA refuses the server.
        stranger = ssl.create_default_context(cafile=str(certificates / "other.pem"))
        with pytest.raises(ssl.SSLCertVerificationError):
            base.Client((host, int(port)), tls_context=stranger, timeout=10).get("greeting")
    finally:
        stop(server)


def test_pymemcache_unix_socket_client_talks_to_kura_serve_s(tmp_path):
    base = pytest.importorskip("pymemcache.client.base", reason="pymemcache is installed by python/build.sh")
    path = tmp_path / "kura.sock"
    server, address = serve("-s", str(path), "-a", "700")
    try:
        assert address == f"unix:{path}"
        assert oct(path.stat().st_mode & 0o777) == oct(0o700)
        client = base.Client(str(path), timeout=10)
        client.set("k", b"over a unix socket", noreply=False)
        assert client.get("k") == b"over a unix socket"
        assert client.stats("settings")[b"domain_socket"] == str(path).encode()
        client.close()
    finally:
        stop(server)
    assert not path.exists()
