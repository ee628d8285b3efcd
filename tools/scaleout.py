#!/usr/bin/env python3
"""Scale-out through memcached's own ecosystem: 3 `kura serve` processes behind
(a) pymemcache's HashClient and (b) twemproxy (nutcracker, ketama).

For each: load N keys; check each server holds its share (within the tolerance of a third);
kill one server; check that exactly its keys miss while every other key still hits and new
writes succeed; restart it; check the service recovers (writes and reads all succeed).
twemproxy hashes with murmur: with its ketama and only 3 servers, fnv1a_64 gave shares of
44/23/33% in a trial, murmur 33.4/32.6/33.9%.
`make scaleout` runs it with 100k keys; python/tests/test_scaleout.py with a few thousand.
Exit status 0 when every check passes; each check is printed.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient

HOST = "127.0.0.1"
CHUNK = 100


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_port(port, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection((HOST, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Servers:
    """Three `kura serve` children on fixed ports (so one can restart on its port)."""

    def __init__(self, kura):
        self.kura = kura
        self.ports = [free_port() for _ in range(3)]
        self.processes = [self.start(port) for port in self.ports]

    def start(self, port):
        process = subprocess.Popen([self.kura, "serve", "--port", str(port)], stdout=subprocess.DEVNULL)
        wait_port(port)
        return process

    def kill(self, index):
        self.processes[index].kill()
        self.processes[index].wait()

    def restart(self, index):
        self.processes[index] = self.start(self.ports[index])

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


def owners(ports, keys):
    """Which server holds each key, asked of each server directly."""
    owner = {}
    for index, port in enumerate(ports):
        client = Client((HOST, port))
        for start in range(0, len(keys), CHUNK):
            for key in client.get_many(keys[start:start + CHUNK]):
                owner[key] = index
        client.close()
    return owner


def get_all(client, keys):
    """The keys that hit, tolerating the errors of a dead server (read key by key then)."""
    hits = set()
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        try:
            found = client.get_many(chunk)
            hits.update(k for k, v in found.items() if v is not None)
        except Exception:
            for key in chunk:
                try:
                    if client.get(key) is not None:
                        hits.add(key)
                except Exception:
                    pass
    return hits


def set_all(client, keys, value, attempts=3):
    """Stores every key, retrying the ones that fail (a dead server being detected)."""
    pending = list(keys)
    for _ in range(attempts):
        failed = []
        for start in range(0, len(pending), CHUNK):
            chunk = pending[start:start + CHUNK]
            try:
                failed += client.set_many({k: value for k in chunk}, noreply=False)
            except Exception:
                failed += chunk
        if not failed:
            return []
        pending = failed
        time.sleep(0.5)
    return pending


class Checks:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
        self.failures += 0 if ok else 1


def scenario(name, client_factory, servers, count, tolerance, checks, settle):
    print(f"{name}: {count} keys over 3 servers", flush=True)
    keys = [f"{name}:{i}" for i in range(count)]
    client = client_factory()
    checks.check(not set_all(client, keys, b"v" * 100), "every key stored")
    owner = owners(servers.ports, keys)
    checks.check(len(owner) == count, f"every key found on exactly one server ({len(owner)} of {count})")
    for index in range(3):
        share = sum(1 for o in owner.values() if o == index) / count
        # The tolerance is relative: +-5% of a third is 31.7% to 35.0%.
        checks.check(abs(share - 1 / 3) <= tolerance / 3, f"server {index} holds {share:.1%} (a third within +-{tolerance:.0%})")
    servers.kill(1)
    time.sleep(settle)
    get_all(client, keys[:CHUNK * 3])  # lets the client or proxy notice the dead server
    time.sleep(settle)
    hits = get_all(client, keys)
    dead_keys = {k for k, o in owner.items() if o == 1}
    checks.check(hits.isdisjoint(dead_keys), "every key of the killed server misses")
    checks.check(hits == set(keys) - dead_keys, f"every other key still hits ({len(hits)} of {count - len(dead_keys)})")
    fresh = [f"{name}:new:{i}" for i in range(count // 10)]
    checks.check(not set_all(client, fresh, b"n"), "new writes succeed with a server down")
    servers.restart(1)
    time.sleep(settle * 2)
    client = client_factory()
    again = [f"{name}:again:{i}" for i in range(count // 10)]
    failed = set_all(client, again, b"a")
    checks.check(not failed and get_all(client, again) == set(again), "after the restart, writes and reads all succeed")
    recovered = owners(servers.ports, again)
    checks.check(any(o == 1 for o in recovered.values()), "the restarted server takes keys again")


def twemproxy_factory(servers, directory):
    port = free_port()
    config = os.path.join(directory, "nutcracker.yml")
    with open(config, "w") as f:
        f.write(
            "kura:\n"
            f"  listen: {HOST}:{port}\n"
            "  hash: murmur\n"
            "  distribution: ketama\n"
            "  auto_eject_hosts: true\n"
            "  server_retry_timeout: 1000\n"
            "  server_failure_limit: 1\n"
            "  timeout: 1000\n"
            "  servers:\n"
            + "".join(f"   - {HOST}:{p}:1 kura{i}\n" for i, p in enumerate(servers.ports))
        )
    proxy = subprocess.Popen(
        ["nutcracker", "-c", config, "-o", os.path.join(directory, "nutcracker.log"),
         "-s", str(free_port()), "-a", HOST, "-p", os.path.join(directory, "nutcracker.pid")],
    )
    wait_port(port)
    return proxy, lambda: Client((HOST, port), connect_timeout=2, timeout=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--tolerance", type=float, default=0.05, help="allowed share error, relative to a third (0.05: +-5%%)")
    parser.add_argument("--kura", default=shutil.which("kura") or "target/release/kura")
    args = parser.parse_args()
    checks = Checks()
    with tempfile.TemporaryDirectory() as directory:
        servers = Servers(args.kura)
        try:
            scenario(
                "hashclient",
                lambda: HashClient([(HOST, p) for p in servers.ports], retry_attempts=1, retry_timeout=0,
                                   dead_timeout=1, ignore_exc=True, connect_timeout=1, timeout=2),
                servers, args.keys, args.tolerance, checks, settle=1.2)
        finally:
            servers.stop()
        if shutil.which("nutcracker") is None:
            print("twemproxy: skipped, nutcracker is not installed (Debian package nutcracker)")
        else:
            servers = Servers(args.kura)
            proxy, factory = twemproxy_factory(servers, directory)
            try:
                scenario("twemproxy", factory, servers, args.keys, args.tolerance, checks, settle=1.2)
            finally:
                proxy.terminate()
                proxy.wait(timeout=30)
                servers.stop()
    print("scaleout: all checks passed" if checks.failures == 0 else f"scaleout: {checks.failures} checks failed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
