#!/usr/bin/env python3
"""`kura serve` next to Debian's memcached, same load generator, same run (`make bench`).

measure: for each workload, memcached and `kura serve` take turns (BENCH_SERVER_REPEAT
rounds) under the project's load generator (crates/kura-server/examples/load_client.rs)
with 50 connections, one request in flight each, 100-byte values, BENCH_SERVER_SECONDS a
run: a 90/10 get/set mix, set only, and 16-key multi-gets. Throughput is the best of each
side's turns, p50/p99 latency the lowest. Every reply is parsed; a run with one wrong reply
fails the benchmark. Then memcaslap (libmemcached-tools, a third party's load generator),
the 90/10 mix and 16-key gets, the same turns, judged by the servers' own `stats` counters
(memcaslap counts an error reply as a transaction; see MEMCASLAP below). Then the mix over
TLS, both servers with `-Z` on the same generated certificate. Then a load check: 64 connections, 100,000 keys,
BENCH_SERVER_LOAD_REQUESTS requests (default 64 x 100k) of the 90/10 mix, one turn each,
no wrong reply allowed; then each server's RSS after BENCH_SERVER_ITEMS items of 100
random bytes, with `stats curr_items` checked so that no side evicted. `kura serve` over
CompactDbm (lz4 buckets) is a third side for the mix and the RSS. Writes bench/results/server.json.
report: reads only that JSON; writes bench/results/server.md (kura/memcached ratios, the
targets below checked) and bench/results/server.png.

Small run: BENCH_SERVER_SECONDS=2 BENCH_SERVER_ITEMS=50000 BENCH_SERVER_REPEAT=1
BENCH_SERVER_LOAD_REQUESTS=100000. The load generator is built by `make bench` (cargo build
--release -p kura-server --example load_client); LOAD_CLIENT overrides its path.
"""

import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
JSON_PATH = os.path.join(RESULTS, "server.json")

# Targets (issue 17): metric, comparison of kura against memcached, threshold.
TARGETS = [
    ("mix_90_10_ops", ">=", 1.0),
    ("set_only_ops", ">=", 1.0),
    ("multiget_16_keys", ">=", 1.2),
    ("rss_bytes", "<=", 0.7),
    ("mix_90_10_p99_us", "<=", 1.0),
    ("set_only_p99_us", "<=", 1.0),
    # Issue 41: memcaslap (libmemcached-tools), a third party's load generator.
    ("memcaslap_mix_ops", ">=", 1.0),
    ("memcaslap_multiget_16_keys", ">=", 1.2),
    # Issue 41: both servers with -Z (TLS), the load generator over TLS.
    ("tls_mix_90_10_ops", ">=", 1.0),
]

SECONDS = float(os.environ.get("BENCH_SERVER_SECONDS", "10"))
ITEMS = int(os.environ.get("BENCH_SERVER_ITEMS", "1000000"))
REPEAT = int(os.environ.get("BENCH_SERVER_REPEAT", "3"))
# The load check of issue 17: 64 connections x 100k operations each.
LOAD_REQUESTS = int(os.environ.get("BENCH_SERVER_LOAD_REQUESTS", str(64 * 100_000)))
CONNECTIONS = 50
VALUE_BYTES = 100

# Workloads: throughput metric, share of gets, keys per get, latency metric prefix (or None).
WORKLOADS = {
    "mix_90_10_ops": (0.9, 1, "mix_90_10"),
    "set_only_ops": (0.0, 1, "set_only"),
    "multiget_16_keys": (1.0, 16, None),
}
WORKLOAD_KEYS = 10000
# The dense configuration: `kura serve` over CompactDbm (lz4 buckets), measured for the mix
# and the RSS beside the default in-memory cache. It evicts nothing (neither side does at
# this item count), so it is the choice for a data set known to fit, not a bounded cache.
COMPACT = "kura_compact"
COMPACT_PARAMS = f"engine=compact,bucket_comp=lz4,expected_records={ITEMS}"
COMPACT_METRICS = ("mix_90_10_ops", "mix_90_10_p99_us", "rss_bytes")
LOAD_CONNECTIONS = 64
LOAD_KEYS = 100000
# memcaslap's runs (issue 41): one thread, 32 connections, 100-byte values (its default mix is
# 90% gets, 10% sets over its own key window), and 16 keys a get with `-d 16`. Its own TPS
# counts an error reply as a transaction, so the figure kept is the servers' own: the
# commands `stats` counted during the run (cmd_get + cmd_set; for 16-key gets, keys), and a
# run is refused unless the server counted at least 90% of what memcaslap claims and found
# at least 90% of the keys asked for (get_hits).
MEMCASLAP = ["memcaslap", "-T", "1", "-c", "32", "-X", "100"]
MEMCASLAP_WORKLOADS = {"memcaslap_mix_ops": [], "memcaslap_multiget_16_keys": ["-d", "16"]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no server on {port}")


def make_certificates(directory):
    """A CA and a server certificate for localhost and 127.0.0.1 (P-256, quick to make), as
    the TLS tests make them; returns (ca, cert, key) paths."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]
    def openssl(*args):
        subprocess.run(["openssl", "req", "-x509", *key, *args], cwd=directory, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    openssl("-subj", "/CN=kura-bench-ca", "-keyout", "ca.key", "-out", "ca.pem",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    openssl("-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.pem", "-CA", "ca.pem",
            "-CAkey", "ca.key", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth")
    return tuple(os.path.join(directory, name) for name in ("ca.pem", "server.pem", "server.key"))


def start(side, port, kura, tls=None):
    """Starts a server; `tls`, a (ca, cert, key) triple, adds memcached's -Z with the same
    certificate files on either side (`-o ssl_chain_cert=...,ssl_key=...`)."""
    if side == "memcached":
        command = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "1024", "-t", "2", "-u", "root"]
    elif side == "kura":
        command = [kura, "serve", "--port", str(port), "--memory-limit", "1G", "--threads", "2"]
    else:
        command = [kura, "serve", "--port", str(port), "--threads", "2", "--params", COMPACT_PARAMS]
    if tls:
        command += ["-Z", "-o", f"ssl_chain_cert={tls[1]},ssl_key={tls[2]}"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return process


def load_client(client, port, connections, seconds, get_share, keys, keys_per_get, requests=0, tls_ca=None):
    """The load generator's figures; raises if any reply was wrong. With `tls_ca`, over TLS."""
    environment = dict(os.environ, LOAD_CLIENT_TLS_CA=tls_ca) if tls_ca else None
    run = subprocess.run(
        [client, f"127.0.0.1:{port}", str(connections), str(seconds), str(get_share), str(keys),
         str(VALUE_BYTES), str(keys_per_get), str(requests)],
        capture_output=True, text=True, timeout=seconds + 300, env=environment,
    )
    if run.returncode != 0:
        raise RuntimeError(f"load client failed:\n{run.stdout}\n{run.stderr}")
    figures = json.loads(run.stdout)
    if figures["errors"]:
        raise RuntimeError(f"load client saw {figures['errors']} wrong replies: {figures}")
    return figures


def stat(port, name):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"stats\r\n")
        reply = b""
        while not reply.endswith(b"END\r\n"):
            reply += s.recv(65536)
    found = re.search(rb"STAT " + name.encode() + rb" (\d+)", reply)
    return int(found.group(1))


def stats(port):
    """The server's `stats` as {name: int} (the numeric ones)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"stats\r\n")
        reply = b""
        while not reply.endswith(b"END\r\n"):
            reply += s.recv(65536)
    return {m.group(1).decode(): int(m.group(2)) for m in re.finditer(rb"STAT (\w+) (\d+)\r\n", reply)}


def memcaslap(port, extra, seconds):
    """One memcaslap run against the server on `port`; the server's own counts of the run."""
    before = stats(port)
    run = subprocess.run(MEMCASLAP + ["-s", f"127.0.0.1:{port}", "-t", f"{int(seconds)}s"] + extra,
                         capture_output=True, text=True, timeout=seconds + 120)
    after = stats(port)
    claimed = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", run.stdout)
    if run.returncode != 0 or not claimed:
        raise RuntimeError(f"memcaslap failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    elapsed, claimed_ops = float(claimed.group(1)), int(claimed.group(2))
    counted = {name: after.get(name, 0) - before.get(name, 0) for name in ("cmd_get", "cmd_set", "get_hits")}
    served = counted["cmd_get"] + counted["cmd_set"]
    if served < 0.9 * claimed_ops:
        raise RuntimeError(f"memcaslap claims {claimed_ops} operations, the server counted {served}: {counted}")
    if counted["get_hits"] < 0.9 * counted["cmd_get"]:
        raise RuntimeError(f"the server found {counted['get_hits']} of {counted['cmd_get']} keys asked: {counted}")
    return {"ops_per_second": served / elapsed, "claimed_tps": int(claimed.group(3)), **counted}


def load_items(port, count):
    """Sets `key:0` .. `key:count-1` to 100 random bytes each, over one connection, noreply."""
    # Random values, the same on every side: no side (CompactDbm's lz4 buckets) may gain from
    # values that compress.
    values = random.Random(ITEMS)
    with socket.create_connection(("127.0.0.1", port)) as s:
        batch = 1000
        for start in range(0, count, batch):
            s.sendall(b"".join(b"set key:%d 0 0 %d noreply\r\n%s\r\n" % (i, VALUE_BYTES, values.randbytes(VALUE_BYTES))
                               for i in range(start, min(start + batch, count))))
        s.sendall(b"version\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += s.recv(100)


def rss_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) * 1024


def rss_after_loading(port, pid):
    load_items(port, ITEMS)
    items = stat(port, "curr_items")
    if items != ITEMS:
        raise RuntimeError(f"the server holds {items} items of the {ITEMS} stored: RSS would not compare")
    return rss_of(pid)


def take_turns(kura, work, rounds=REPEAT, sides=("memcached", "kura"), tls=None):
    """Runs `work(port)` on a fresh server of each side, `rounds` times; {side: [result, ...]}."""
    results = {side: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            port = free_port()
            process = start(side, port, kura, tls)
            try:
                results[side].append(work(port))
            finally:
                process.terminate()
                process.wait(timeout=30)
    return results


def measure(kura, client):
    results = {"seconds": SECONDS, "items": ITEMS, "repeat": REPEAT, "connections": CONNECTIONS,
               "value_bytes": VALUE_BYTES, "load_requests": LOAD_REQUESTS, "client": "load_client",
               "metrics": {}}
    metrics = results["metrics"]
    for workload, (get_share, keys_per_get, latency_prefix) in WORKLOADS.items():
        sides = ("memcached", "kura", COMPACT) if workload in COMPACT_METRICS else ("memcached", "kura")
        runs = take_turns(kura, lambda port: load_client(
            client, port, CONNECTIONS, SECONDS, get_share, WORKLOAD_KEYS, keys_per_get), sides=sides)
        counted = "keys" if keys_per_get > 1 else "requests"
        # Throughput: the best turn of each side; latency: the lowest (least disturbed) turn.
        metrics[workload] = {side: round(max(r[counted] / r["seconds"] for r in side_runs))
                             for side, side_runs in runs.items()}
        if latency_prefix:
            for quantile in ("p50_us", "p99_us"):
                metric = f"{latency_prefix}_{quantile}"
                metrics[metric] = {side: min(r[quantile] for r in side_runs)
                                   for side, side_runs in runs.items() if side != COMPACT or metric in COMPACT_METRICS}
        print(f"{workload}: {metrics[workload]}", flush=True)
    for workload, extra in MEMCASLAP_WORKLOADS.items():
        runs = take_turns(kura, lambda port: memcaslap(port, extra, SECONDS))
        metrics[workload] = {side: round(max(r["ops_per_second"] for r in side_runs))
                             for side, side_runs in runs.items()}
        results.setdefault("memcaslap_runs", {})[workload] = runs
        print(f"{workload}: {metrics[workload]}", flush=True)
    with tempfile.TemporaryDirectory() as directory:
        tls = make_certificates(directory)
        runs = take_turns(kura, lambda port: load_client(
            client, port, CONNECTIONS, SECONDS, 0.9, WORKLOAD_KEYS, 1, tls_ca=tls[0]), tls=tls)
    metrics["tls_mix_90_10_ops"] = {side: round(max(r["requests"] / r["seconds"] for r in side_runs))
                                    for side, side_runs in runs.items()}
    for quantile in ("p50_us", "p99_us"):
        metrics[f"tls_mix_90_10_{quantile}"] = {side: min(r[quantile] for r in side_runs)
                                                for side, side_runs in runs.items()}
    print(f"tls_mix_90_10_ops: {metrics['tls_mix_90_10_ops']}", flush=True)
    runs = take_turns(kura, lambda port: load_client(
        client, port, LOAD_CONNECTIONS, 3600, 0.9, LOAD_KEYS, 1, LOAD_REQUESTS), rounds=1)
    metrics[f"load_{LOAD_CONNECTIONS}_connections_ops"] = {
        side: round(max(r["requests"] / r["seconds"] for r in side_runs)) for side, side_runs in runs.items()}
    print(f"load check: {runs}", flush=True)
    rss = {}
    for side in ("memcached", "kura", COMPACT):
        port = free_port()
        process = start(side, port, kura)
        try:
            rss[side] = rss_after_loading(port, process.pid)
        finally:
            process.terminate()
            process.wait(timeout=30)
    results["metrics"]["rss_bytes"] = rss
    print(f"rss_bytes: {rss}", flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as f:
        json.dump(results, f, indent=2)


def report():
    with open(JSON_PATH) as f:
        results = json.load(f)
    metrics = results["metrics"]
    lines = [
        "# `kura serve` next to memcached",
        "",
        f"The project's load generator (`load_client`, every reply parsed, 0 wrong replies), "
        f"{results['connections']} connections with one request in flight each, "
        f"{results['value_bytes']}-byte values, {results['seconds']} s a run, the two servers taking "
        f"turns, best of {results['repeat']} turns each (latency `_us`, microseconds: the lowest "
        f"turn). `multiget_16_keys`: keys asked per second in 16-key gets. `load_64_connections_ops`: "
        f"{results['load_requests']:,} requests of the 90/10 mix over 100,000 keys. RSS after "
        f"{results['items']:,} items of random bytes (`curr_items` checked on every side). All servers "
        f"with 2 worker threads. `kura`: the default engine (SegCacheDbm: segments, CLOCK eviction), bounded by `--memory-limit`; "
        f"`compact`: `--params {COMPACT_PARAMS}` (CompactDbm, lz4 buckets, no eviction), measured for "
        f"the mix and the RSS only. `memcaslap_*`: memcaslap (libmemcached-tools) with "
        f"`{' '.join(MEMCASLAP[1:])}` (and `-d 16` for 16-key gets), the same turns; the figure is the "
        f"server's own count of the run (`stats` cmd_get + cmd_set before and after, over memcaslap's "
        f"run time), and a run counts only if the server counted at least 90% of the operations "
        f"memcaslap claims and hit at least 90% of its gets. `tls_*`: the load generator's 90/10 mix "
        f"over TLS, both servers with `-Z -o ssl_chain_cert=...,ssl_key=...` on the same generated "
        f"P-256 certificate.",
        "",
        "| metric | memcached | kura | kura/memcached | compact | compact/memcached | target | met (kura, compact) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    targets = {metric: (comparison, threshold) for metric, comparison, threshold in TARGETS}

    def ratio_of(sides, side):
        return sides[side] / sides["memcached"] if sides.get(side) is not None and sides["memcached"] else None

    for metric, sides in metrics.items():
        comparison, threshold = targets.get(metric, ("", None))
        target = "" if threshold is None else f"{comparison} {threshold}"
        ratios = [ratio_of(sides, side) for side in ("kura", COMPACT)]
        met = "" if threshold is None else ", ".join(
            "-" if r is None else ("yes" if (r >= threshold if comparison == ">=" else r <= threshold) else "no")
            for r in ratios)
        compact = sides.get(COMPACT)
        lines.append(f"| {metric} | {sides['memcached']:,} | {sides['kura']:,} | {ratios[0]:.2f} | "
                     f"{'' if compact is None else f'{compact:,}'} | "
                     f"{'' if ratios[1] is None else f'{ratios[1]:.2f}'} | {target} | {met} |")
    with open(os.path.join(RESULTS, "server.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is missing, no PNG")
        return
    names = list(metrics)
    ratios = [metrics[n]["kura"] / metrics[n]["memcached"] if metrics[n]["memcached"] else 0 for n in names]
    figure, axis = plt.subplots(figsize=(7, 3.5))
    axis.bar(names, ratios, color="#4a7ab0")
    for index, name in enumerate(names):
        if name in targets:
            axis.hlines(targets[name][1], index - 0.4, index + 0.4, colors="#c03030")
    axis.axhline(1.0, color="grey", linewidth=0.5)
    axis.set_ylabel("kura / memcached")
    axis.set_title("kura serve vs memcached (red: target)")
    figure.tight_layout()
    figure.savefig(os.path.join(RESULTS, "server.png"), dpi=100)


# The memory rows (issue 42), `bench/server.py memory`: each server's RSS when started
# (baseline) and after MEMORY_ITEMS sets with a limit that holds them all (memcached -m 1024,
# kura --memory-limit 1G; curr_items checked), then under a limit smaller than the data
# (64 MiB, LIMITED_ITEMS sets): RSS and the items each holds. Sides: memcached, kura's default
# (SegCacheDbm), kura over CacheDbm (the former default) and, without a limit, CompactDbm.
MEMORY_JSON = os.path.join(RESULTS, "server_memory.json")
MEMORY_ITEMS = int(os.environ.get("BENCH_SERVER_MEMORY_ITEMS", "1000000"))
LIMITED_ITEMS = int(os.environ.get("BENCH_SERVER_LIMITED_ITEMS", "2000000"))
MEMORY_SIDES = {
    "memcached": lambda port, megabytes: ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                                          "-m", str(megabytes), "-t", "2", "-u", "root"],
    "kura": lambda port, megabytes: ["serve", "--port", str(port), "--memory-limit", f"{megabytes}M",
                                     "--threads", "2"],
    "kura_cache": lambda port, megabytes: ["serve", "--port", str(port), "--memory-limit", f"{megabytes}M",
                                           "--threads", "2", "--params", "engine=cache"],
}


def measure_memory(kura):
    rows = {}
    for limit, count in ((1024, MEMORY_ITEMS), (64, LIMITED_ITEMS)):
        for side, arguments in MEMORY_SIDES.items():
            port = free_port()
            command = arguments(port, limit)
            command = command if side == "memcached" else [kura] + command
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_port(port)
                baseline = rss_of(process.pid)
                load_items(port, count)
                items = stat(port, "curr_items")
                rss = rss_of(process.pid)
            finally:
                process.terminate()
                process.wait(timeout=30)
            if limit == 1024 and items != count:
                raise RuntimeError(f"{side} holds {items} items of the {count} stored under 1 GiB")
            rows.setdefault(f"limit_{limit}M_{count}_sets", {})[side] = {
                "baseline_rss": baseline, "rss": rss, "items": items}
            print(f"limit {limit} MiB, {count} sets, {side}: items {items}, RSS {rss:,} (baseline {baseline:,})",
                  flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    with open(MEMORY_JSON, "w") as f:
        json.dump({"value_bytes": VALUE_BYTES, "rows": rows}, f, indent=2)


def report_memory():
    with open(MEMORY_JSON) as f:
        rows = json.load(f)["rows"]
    lines = [
        "# `kura serve`'s memory next to memcached",
        "",
        "Each server started alone with 2 worker threads, then sets of `key:N` (10-byte keys) and 100 "
        "random bytes over one connection (noreply). `kura`: the default engine (SegCacheDbm); "
        "`kura_cache`: `--params engine=cache` (CacheDbm, the former default). RSS from /proc; "
        "`baseline`: the RSS right after start. Ratios are against memcached's row in the same run.",
        "",
        "| run | side | items held | RSS | baseline RSS | RSS / memcached's | items / memcached's | RSS - baseline per item |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run, sides in rows.items():
        reference = sides["memcached"]
        for side, row in sides.items():
            per_item = (row["rss"] - row["baseline_rss"]) / max(row["items"], 1)
            lines.append(f"| {run} | {side} | {row['items']:,} | {row['rss']:,} | {row['baseline_rss']:,} | "
                         f"{row['rss'] / reference['rss']:.3f} | {row['items'] / reference['items']:.2f} | "
                         f"{per_item:.1f} |")
    with open(os.path.join(RESULTS, "server_memory.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    step = sys.argv[1] if len(sys.argv) > 1 else "all"
    kura = os.environ.get("KURA_BIN", os.path.join(ROOT, "target", "release", "kura"))
    client = os.environ.get("LOAD_CLIENT", os.path.join(ROOT, "target", "release", "examples", "load_client"))
    if step in ("measure", "all"):
        measure(kura, client)
    if step in ("report", "all"):
        report()
    if step in ("memory", "all"):
        measure_memory(kura)
        report_memory()


if __name__ == "__main__":
    main()
