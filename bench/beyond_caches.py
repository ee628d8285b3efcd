#!/usr/bin/env python3
"""Batched gets beyond the caches (issue 20): `get_many` against single gets when the data set
is many times the CPU's caches, next to Tkrzw's single gets on the same workload.

Why a table of its own: the issue's targets are read on the 1M-record sequence tables
(`bench/run.py`), and a million records of 8-byte values take 40-70 MB, which this machine's
35.8 MiB L3 largely holds; a lookup there waits on few memory misses, and a batch has few to
overlap. The same workload at 10M records takes 0.3-1 GB, so every single get waits on its
misses one after the other, as the issue describes, and the batch overlaps them.

Two steps:
  bench/beyond_caches.py measure   runs everything, writes bench/results/beyond_caches.json
  bench/beyond_caches.py report    reads ONLY that JSON, writes bench/results/beyond_caches.md
  bench/beyond_caches.py all       both

Workload: `tkrzw_dbm_perf sequence` and `kura bench` (set, get, then `get_many` in batches of
BATCH), 8-byte values, 1 thread, sequential and random keys; both sides get one bucket per two
records' worth of keys (`--buckets` / `num_buckets`, 2x the records), and CacheDbm a record cap
above the key count. Tkrzw's CacheDBM cannot be timed on gets (see tkrzw_peers.py): the cache
rows compare with Kura's own single get only. Each configuration runs BEYOND_REPEAT times
(default 2), the two sides taking turns; the best run of each side counts. The memory floor
(one dependent load, `memory_latency`) is measured in the same run.

Sizes (environment): BEYOND_RECORDS (default 10,000,000), BEYOND_REPEAT. KURA_BIN overrides
the kura binary.
"""

import datetime
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as bench  # noqa: E402  (paths, run, log, env_int, remove_files, run_steps)
from measure import machine, memory_floor, repeats, tkrzw_output  # noqa: E402
from render.figures import qps  # noqa: E402

BATCH = 64
JSON_PATH = os.path.join(bench.RESULTS, "beyond_caches.json")
MD_PATH = os.path.join(bench.RESULTS, "beyond_caches.md")
# Engine -> the Tkrzw DBM measured beside it (None: Kura's own single get only).
ENGINES = {"hash": "hash", "tiny": "tiny", "cache": None}
# The targets for batches of 64 (HashDbm, TinyDbm, CacheDbm), read here.
TARGET_OWN = 2.0
TARGET_TKRZW = 3.0


def kura_params(engine, records):
    if engine == "cache":
        return f"cap_rec_num={records * 5 // 4 + 1024}"
    return f"num_buckets={2 * records}"


def run_sequence(command, file_name, random_flag, random_key):
    """Runs a sequence command and returns its output: on a file of that name in bench/data/work
    (removed before and after) when `file_name` is given, with `random_flag` for random keys."""
    path = os.path.join(bench.WORK, file_name) if file_name else None
    if path:
        bench.remove_files(path)
        command = [*command, "--path", path]
    if random_key:
        command = [*command, random_flag]
    output = bench.run(command)
    if path:
        bench.remove_files(path)
    return output


def kura_run(engine, records, random_key):
    command = [bench.KURA, "bench", "--engine", engine, "--iter", str(records), "--size", "8",
               "--params", kura_params(engine, records), "--batch", str(BATCH), "--json"]
    output = run_sequence(command, "beyond.kuh" if engine == "hash" else None, "--random-key", random_key)
    phases = repeats.json_phases(output)
    return {"get": phases.get("get", {}).get("qps"), "get_many": phases.get(f"get_batch{BATCH}", {}).get("qps")}


def tkrzw_run(dbm, records, random_key):
    command = ["tkrzw_dbm_perf", "sequence", "--dbm", dbm, "--iter", str(records), "--size", "8",
               "--buckets", str(2 * records)]
    output = run_sequence(command, "beyond.tkh" if dbm == "hash" else None, "--random_key", random_key)
    return {"get": tkrzw_output.perf_phases(output).get("get", {}).get("qps")}


def best(runs, field):
    values = [run[field] for run in runs if run.get(field)]
    return max(values) if values else None


def measure():
    records = bench.env_int("BEYOND_RECORDS", 10_000_000)
    repeat = max(1, bench.env_int("BEYOND_REPEAT", 2))
    os.makedirs(bench.WORK, exist_ok=True)
    rows = []
    for engine, peer in ENGINES.items():
        for random_key in (False, True):
            kura, tkrzw = [], []
            for turn in range(repeat):
                # Taking turns: the sides swap who goes first on each round.
                order = ("kura", "tkrzw") if turn % 2 == 0 else ("tkrzw", "kura")
                for side in order:
                    if side == "kura":
                        kura.append(kura_run(engine, records, random_key))
                    elif peer:
                        tkrzw.append(tkrzw_run(peer, records, random_key))
            row = {"engine": engine, "tkrzw_dbm": peer, "random_key": random_key,
                   "kura_get": best(kura, "get"), "kura_get_many": best(kura, "get_many"),
                   "tkrzw_get": best(tkrzw, "get"), "kura_runs": kura, "tkrzw_runs": tkrzw}
            bench.log(f"beyond_caches: {engine} {'random' if random_key else 'sequential'}: "
                      f"get {qps(row['kura_get'])}, get_many({BATCH}) {qps(row['kura_get_many'])}, "
                      f"Tkrzw {qps(row['tkrzw_get'])}")
            rows.append(row)
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": machine.machine_info(), "records": records, "batch": BATCH, "repeat": repeat,
                "memory_floor": memory_floor.measure(), "rows": rows}
    os.makedirs(bench.RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as f:
        json.dump(document, f, indent=1)


def times(value):
    """A ratio as 1.97x, rounded down so that a ratio under a threshold never prints as it."""
    return f"{math.floor(value * 100) / 100:.2f}x" if value else "-"


def verdict(value, threshold):
    if value is None:
        return "-"
    return "yes" if value >= threshold else "**no**"


def report(json_path=JSON_PATH, md_path=MD_PATH):
    with open(json_path) as f:
        data = json.load(f)
    floor = (data.get("memory_floor") or {}).get("load_ns")
    lines = [
        "# Batched gets beyond the caches", "",
        f"Measured {data['date']} by `bench/beyond_caches.py` on: {data['machine']}.",
        f"{data['records']:,} records of 8-byte values, 1 thread; `kura bench --batch {data['batch']}` "
        f"(set, get, then `get_many` in batches of {data['batch']}) against `tkrzw_dbm_perf sequence`, "
        f"both with 2 buckets per record (CacheDbm: a record cap above the key count). "
        f"Best of {data['repeat']} runs per side, the sides taking turns. Tkrzw's CacheDBM cannot "
        "be timed on gets (docs/bench.md), so the cache rows stand against Kura's own get only.",
        "",
    ]
    if floor:
        lines += [f"One dependent load (the memory floor, 64 MiB buffer, same run): {floor:.0f} ns; "
                  "ns/get and loads are the single get's time per key.", ""]
    lines += [
        f"| engine | keys | Tkrzw get | Kura get | ns/get | loads | Kura get_many({data['batch']}) "
        f"| vs own get (>= {TARGET_OWN:.0f}x) | vs Tkrzw (>= {TARGET_TKRZW:.0f}x) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in data["rows"]:
        get, many, tkrzw = row["kura_get"], row["kura_get_many"], row["tkrzw_get"]
        ns = 1e9 / get if get else None
        own = many / get if many and get else None
        peer = many / tkrzw if many and tkrzw else None
        lines.append(
            f"| {row['engine']} | {'random' if row['random_key'] else 'sequential'} | {qps(tkrzw)} "
            f"| {qps(get)} | {f'{ns:.0f}' if ns else '-'} | {f'{ns / floor:.2f}' if ns and floor else '-'} "
            f"| {qps(many)} | {times(own)} {verdict(own, TARGET_OWN)} "
            f"| {times(peer)} {verdict(peer, TARGET_TKRZW) if tkrzw else ''} |")
    lines.append("")
    with open(md_path, "w") as f:
        f.write("\n".join(lines))
    bench.log(f"beyond_caches: wrote {md_path}")


def main():
    bench.run_steps(sys.argv[1:], measure, report)


if __name__ == "__main__":
    main()
