#!/usr/bin/env python3
"""`kura serve` next to Debian's memcached, same load generator, same run (`make bench`).

measure: for each workload, memcached and `kura serve` take turns (BENCH_SERVER_REPEAT
rounds, the best of each side counting) under memcaslap (libmemcached-tools) with 50
connections and 100-byte values: a 90/10 get/set mix, set only, and 16-key multi-gets;
then p50 and p99 latency on the 90/10 mix and set only, from the project's latency client
(crates/kura-server/examples/latency_client.rs: memcaslap prints averages only, and its
"Log2 Dist" histograms have power-of-two buckets, too coarse to tell p99s apart): 50
connections each sending one request at a time for BENCH_SERVER_LATENCY_SECONDS, every
request timed, the two servers taking turns; then each server's RSS after loading
BENCH_SERVER_ITEMS items of 100 bytes. Writes bench/results/server.json.
report: reads only that JSON; writes bench/results/server.md (kura/memcached ratios, the
targets below checked) and bench/results/server.png.

Small run: BENCH_SERVER_SECONDS=2 BENCH_SERVER_ITEMS=50000 BENCH_SERVER_REPEAT=1
BENCH_SERVER_LATENCY_SECONDS=2. The latency client is built by `make bench` (cargo build
--release -p kura-server --example latency_client); LATENCY_CLIENT overrides its path.
"""

import json
import os
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
    ("multiget_16_ops", ">=", 1.2),
    ("rss_bytes", "<=", 0.7),
    ("mix_90_10_p99_us", "<=", 1.0),
    ("set_only_p99_us", "<=", 1.0),
]

SECONDS = int(os.environ.get("BENCH_SERVER_SECONDS", "10"))
ITEMS = int(os.environ.get("BENCH_SERVER_ITEMS", "1000000"))
REPEAT = int(os.environ.get("BENCH_SERVER_REPEAT", "3"))
LATENCY_SECONDS = float(os.environ.get("BENCH_SERVER_LATENCY_SECONDS", "10"))
CONNECTIONS = 50
VALUE_BYTES = 100

# memcaslap configurations: key sizes, value sizes, command proportions (0 set, 1 get).
WORKLOADS = {
    "mix_90_10_ops": ("0.1", "0.9", []),
    "set_only_ops": ("1.0", "0.0", []),
    "multiget_16_ops": ("0.0", "1.0", ["--division=16"]),
}

# Latency client loads: metric prefix, share of gets.
LATENCY_LOADS = {"mix_90_10": 0.9, "set_only": 0.0}


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


def start(side, port, kura):
    if side == "memcached":
        command = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "1024", "-t", "2", "-u", "root"]
    else:
        command = [kura, "serve", "--port", str(port), "--memory-limit", "1G", "--threads", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return process


def memcaslap(port, workload, directory):
    set_share, get_share, extra = WORKLOADS[workload]
    config = os.path.join(directory, f"{workload}.cfg")
    with open(config, "w") as f:
        f.write(f"key\n16 16 1\nvalue\n{VALUE_BYTES} {VALUE_BYTES} 1\ncmd\n0 {set_share}\n1 {get_share}\n")
    run = subprocess.run(
        ["memcaslap", "-s", f"127.0.0.1:{port}", "-c", str(CONNECTIONS), "-T", "2", "-t", f"{SECONDS}s",
         "-F", config] + extra,
        capture_output=True, text=True, timeout=SECONDS + 120,
    )
    found = re.search(r"TPS: (\d+)", run.stdout)
    if not found:
        raise RuntimeError(f"memcaslap printed no TPS:\n{run.stdout}\n{run.stderr}")
    return int(found.group(1))


def latency(client, port, get_share):
    """p50 and p99 (microseconds) from the latency client; raises if any reply was wrong."""
    run = subprocess.run(
        [client, f"127.0.0.1:{port}", str(CONNECTIONS), str(LATENCY_SECONDS), str(get_share), "10000",
         str(VALUE_BYTES)],
        capture_output=True, text=True, timeout=LATENCY_SECONDS + 120,
    )
    if run.returncode != 0:
        raise RuntimeError(f"latency client failed:\n{run.stdout}\n{run.stderr}")
    figures = json.loads(run.stdout)
    if figures["errors"]:
        raise RuntimeError(f"latency client saw {figures['errors']} wrong replies")
    return figures["p50_us"], figures["p99_us"]


def rss_after_loading(port, pid):
    with socket.create_connection(("127.0.0.1", port)) as s:
        value = b"v" * VALUE_BYTES
        batch = 1000
        for start in range(0, ITEMS, batch):
            s.sendall(b"".join(b"set key:%d 0 0 %d noreply\r\n%s\r\n" % (i, VALUE_BYTES, value)
                               for i in range(start, min(start + batch, ITEMS))))
        s.sendall(b"version\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += s.recv(100)
    with open(f"/proc/{pid}/status") as f:
        kilobytes = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    return kilobytes * 1024


def measure(kura, client):
    results = {"seconds": SECONDS, "items": ITEMS, "repeat": REPEAT, "connections": CONNECTIONS,
               "value_bytes": VALUE_BYTES, "latency_seconds": LATENCY_SECONDS, "metrics": {}}
    with tempfile.TemporaryDirectory() as directory:
        for workload in WORKLOADS:
            best = {"memcached": 0, "kura": 0}
            for _ in range(REPEAT):
                for side in ("memcached", "kura"):
                    port = free_port()
                    process = start(side, port, kura)
                    try:
                        best[side] = max(best[side], memcaslap(port, workload, directory))
                    finally:
                        process.terminate()
                        process.wait(timeout=30)
            results["metrics"][workload] = best
            print(f"{workload}: {best}", flush=True)
        for load, get_share in LATENCY_LOADS.items():
            # Lowest of the turns for each side: the run least disturbed by the machine.
            best = {f"{load}_p50_us": {}, f"{load}_p99_us": {}}
            for _ in range(REPEAT):
                for side in ("memcached", "kura"):
                    port = free_port()
                    process = start(side, port, kura)
                    try:
                        p50, p99 = latency(client, port, get_share)
                    finally:
                        process.terminate()
                        process.wait(timeout=30)
                    for metric, value in ((f"{load}_p50_us", p50), (f"{load}_p99_us", p99)):
                        best[metric][side] = min(best[metric].get(side, value), value)
            results["metrics"].update(best)
            print(f"{load} latency: {best}", flush=True)
        rss = {}
        for side in ("memcached", "kura"):
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
        f"memcaslap, {results['connections']} connections, {results['value_bytes']}-byte values, "
        f"{results['seconds']} s a run, best of {results['repeat']} turns each; RSS after "
        f"{results['items']} items. Both servers with 2 worker threads. Latency (`_us`, "
        f"microseconds, lowest of the turns): the project's latency client, {results['connections']} "
        f"connections with one request in flight each, {results.get('latency_seconds', '?')} s a run.",
        "",
        "| metric | memcached | kura | kura/memcached | target | met |",
        "|---|---|---|---|---|---|",
    ]
    targets = {metric: (comparison, threshold) for metric, comparison, threshold in TARGETS}
    for metric, sides in metrics.items():
        ratio = sides["kura"] / sides["memcached"] if sides["memcached"] else float("nan")
        comparison, threshold = targets.get(metric, ("", None))
        target = "" if threshold is None else f"{comparison} {threshold}"
        met = "" if threshold is None else ("yes" if (ratio >= threshold if comparison == ">=" else ratio <= threshold) else "no")
        lines.append(f"| {metric} | {sides['memcached']:,} | {sides['kura']:,} | {ratio:.2f} | {target} | {met} |")
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


def main():
    step = sys.argv[1] if len(sys.argv) > 1 else "all"
    kura = os.environ.get("KURA_BIN", os.path.join(ROOT, "target", "release", "kura"))
    client = os.environ.get("LATENCY_CLIENT", os.path.join(ROOT, "target", "release", "examples", "latency_client"))
    if step in ("measure", "all"):
        measure(kura, client)
    if step in ("report", "all"):
        report()


if __name__ == "__main__":
    main()
