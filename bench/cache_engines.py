#!/usr/bin/env python3
"""Kura's cache engines against Tkrzw's CacheDBM at the engine level (issue 42): memory per
record, set and get QPS, and each single get in units of the same run's memory floor.

Why a table of its own: the sequence tables of `bench/run.py` time Tkrzw's CacheDBM on set
only (`tkrzw_dbm_perf sequence` walks the database with an iterator whose every step costs
O(records), so its get phase at 1M records does not finish), and with 8-byte values. Issue
42's targets are at 1M records of 8-byte keys and 100-byte values: "memory <= 0.8x Tkrzw
CacheDBM's, set and get >= 1.2x its QPS", and "CacheDbm single get <= 1.3 dependent loads of
the same run's memory floor".

Two programs do the same work (their headers say it step for step): `bench/tkrzw_cache.cc`
(Tkrzw's CacheDBM, built by the Makefile's target, `make bench` depends on it) and
`crates/kura-bench/src/bin/cache_engines.rs` (Kura's engines through the registry, with their
benchmark parameters). Each opens one cache with a record cap above the record count (nothing
is evicted: both check the count), sets the keys `%08d` of 0..N-1 in order (`kura bench`'s
sequential keys) with 100-byte values naming their key, gets every key in the same order and
then in a shuffled order (the same SplitMix64 shuffle on both sides), copying each value into
one reused buffer and comparing it with the value set, and prints the resident set's growth
over the sets (after malloc_trim on both sides), and, untimed, a digest of every key and value,
which must be the same on every side. One process per run, one thread.

Each side runs CACHE_ENGINES_REPEAT times (default 3), the three taking turns (the first of a
round moves each round); per figure the best run counts (highest QPS, least memory). The
memory floor (memory_floor.py) is measured in the same run, as is the load average before and
after.

  bench/cache_engines.py measure   runs everything, writes bench/results/cache_engines.json
  bench/cache_engines.py report    reads ONLY that JSON, writes cache_engines.md and .png
  bench/cache_engines.py all       both

Sizes (environment): CACHE_ENGINES_RECORDS (default 1,000,000), CACHE_ENGINES_REPEAT.
"""

import datetime
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from measure import machine, memory_floor  # noqa: E402
from render.figures import qps  # noqa: E402

VALUE_SIZE = 100
JSON_PATH = os.path.join(harness.RESULTS, "cache_engines.json")
MD_PATH = os.path.join(harness.RESULTS, "cache_engines.md")
PNG_PATH = os.path.join(harness.RESULTS, "cache_engines.png")
# The Tkrzw driver, as the Makefile's target builds it.
TKRZW_CACHE = os.path.join("bench", "data", "work", "tkrzw_cache")
TKRZW = "tkrzw-cache"
# Kura's cache engines by their registry names: SegCacheDbm (`kura serve`'s default) and
# CacheDbm.
KURA_ENGINES = ("segcache", "cache")
# Issue 42's engine-level targets.
MEMORY_AT_MOST = 0.8
QPS_AT_LEAST = 1.2
CACHE_LOADS_AT_MOST = 1.3
# The get phases: the keys in the order they were set, and shuffled.
GETS = (("get_qps", "same order"), ("get_random_qps", "shuffled"))


def kura_binary():
    return os.path.join(harness.release_dir(), "cache_engines")


def build():
    """The Tkrzw driver through the Makefile (the one place its compile line lives) and Kura's
    side through cargo: both are no-ops when current."""
    harness.run(["make", "--no-print-directory", "-s", TKRZW_CACHE], cwd=harness.ROOT)
    harness.run(["cargo", "build", "--quiet", "--release", "-p", "kura-bench", "--bin", "cache_engines"],
                cwd=harness.ROOT)


def one_run(side, records):
    command = ([os.path.join(harness.ROOT, TKRZW_CACHE), str(records), str(VALUE_SIZE)] if side == TKRZW
               else [kura_binary(), side, str(records), str(VALUE_SIZE)])
    load = os.getloadavg()[0]
    result = json.loads(harness.run(command).strip().splitlines()[-1])
    if result["count"] != records or result["values_checked"] != 2 * records:
        sys.exit(f"cache_engines: {side} holds {result['count']} of {records} records or checked "
                 f"{result['values_checked']} values: the run measured less than the workload")
    result["load_average_1m"] = load
    harness.log(f"cache_engines: {side}: set {qps(result['set_qps'])}, get {qps(result['get_qps'])}, "
                f"shuffled get {qps(result['get_random_qps'])}, {result['bytes_per_record']:.1f} B/record "
                f"(load {load:.2f})")
    return result


def best(runs):
    """Per figure, the best of the runs: the highest QPS, the least memory."""
    summary = {field: max(run[field] for run in runs) for field in ("set_qps", "get_qps", "get_random_qps")}
    summary["bytes_per_record"] = min(run["bytes_per_record"] for run in runs)
    summary["rss_growth"] = min(run["rss_growth"] for run in runs)
    return summary


def measure():
    records = harness.env_int("CACHE_ENGINES_RECORDS", 1_000_000)
    repeat = max(1, harness.env_int("CACHE_ENGINES_REPEAT", 3))
    build()
    sides = (TKRZW, *KURA_ENGINES)
    load_before = os.getloadavg()
    runs = {side: [] for side in sides}
    for turn in range(repeat):
        # Taking turns: each round starts with the next side.
        for side in sides[turn % len(sides):] + sides[:turn % len(sides)]:
            runs[side].append(one_run(side, records))
    digests = {run["workload_digest"] for side_runs in runs.values() for run in side_runs}
    if len(digests) != 1:
        sys.exit(f"cache_engines: the programs set different keys or values (digests {sorted(digests)}): "
                 "bench/tkrzw_cache.cc and crates/kura-bench/src/bin/cache_engines.rs must build the same")
    floor = memory_floor.measure()
    document = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine.machine_info(), "records": records, "value_size": VALUE_SIZE, "repeat": repeat,
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "memory_floor": floor,
        "sides": {side: {"best": best(side_runs), "runs": side_runs} for side, side_runs in runs.items()},
    }
    os.makedirs(harness.RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as f:
        json.dump(document, f, indent=1)


def floor_ratio(value):
    """A ratio rounded down to two places, so that one under a threshold never prints as it."""
    return f"{math.floor(value * 100) / 100:.2f}x" if value else "-"


def loads_text(value):
    """Loads rounded up to two places, so that one over a threshold never prints as it."""
    return f"{math.ceil(value * 100) / 100:.2f}" if value else "-"


def met(ok):
    return "yes" if ok else "**no**"


def verdicts(data):
    """(engine, what, figure, target, met) for every target of issue 42 this table reads."""
    tkrzw = data["sides"][TKRZW]["best"]
    floor = (data.get("memory_floor") or {}).get("load_ns")
    rows = []
    for engine in KURA_ENGINES:
        ours = data["sides"][engine]["best"]
        memory = ours["rss_growth"] / tkrzw["rss_growth"]
        rows.append((engine, "memory (RSS growth) vs Tkrzw", floor_ratio(memory), f"<= {MEMORY_AT_MOST}x",
                     memory <= MEMORY_AT_MOST))
        for field, what in (("set_qps", "set"), *((f, f"get, {order}") for f, order in GETS)):
            ratio = ours[field] / tkrzw[field]
            rows.append((engine, f"{what} QPS vs Tkrzw", floor_ratio(ratio), f">= {QPS_AT_LEAST}x",
                         ratio >= QPS_AT_LEAST))
        if engine == "cache" and floor:
            for field, order in GETS:
                loads = 1e9 / ours[field] / floor
                rows.append((engine, f"single get, {order}, in loads", loads_text(loads),
                             f"<= {CACHE_LOADS_AT_MOST}", loads <= CACHE_LOADS_AT_MOST))
    return rows


def report(json_path=JSON_PATH, md_path=MD_PATH, png_path=PNG_PATH):
    """The table and the plot, from the JSON alone (no plot when `png_path` is None)."""
    with open(json_path) as f:
        data = json.load(f)
    floor = (data.get("memory_floor") or {}).get("load_ns")
    load_before, load_after = data["load_average_before"], data["load_average_after"]
    lines = [
        "# Cache engines against Tkrzw's CacheDBM", "",
        f"Measured {data['date']} by `bench/cache_engines.py` on: {data['machine']}.",
        f"{data['records']:,} records of 8-byte keys (`%08d`, set in order) and {data['value_size']}-byte "
        "values, 1 thread, one cache per process with a record cap above the record count (nothing "
        "evicted); every value read back and compared, in the order set and in a shuffled order. "
        "`bench/tkrzw_cache.cc` against `cache_engines` (crates/kura-bench), "
        f"best of {data['repeat']} runs per side, the sides taking turns. Load average (1, 5, 15 min) "
        f"before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{', '.join(f'{x:.2f}' for x in load_after)} (a shared 2-core machine).", "",
    ]
    if floor:
        lines += [f"One dependent load (the memory floor, {data['memory_floor']['floor_buffer_mib']} MiB "
                  f"buffer, same run): {floor:.0f} ns. ns/get is one thread's time per get; loads is "
                  "that over the floor.", ""]
    lines += ["| cache | bytes/record (RSS growth) | set | get, same order | ns/get | loads "
              "| get, shuffled | ns/get | loads |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for side in (TKRZW, *KURA_ENGINES):
        best_side = data["sides"][side]["best"]
        title = "Tkrzw CacheDBM" if side == TKRZW else data["sides"][side]["runs"][0]["class"]
        cells = [title, f"{best_side['bytes_per_record']:.1f}", qps(best_side["set_qps"])]
        for field, _ in GETS:
            ns = 1e9 / best_side[field]
            cells += [qps(best_side[field]), f"{ns:.0f}", loads_text(ns / floor) if floor else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Issue 42's engine-level targets", "",
              "| engine | figure | measured | target | met |", "|---|---|---:|---:|---|"]
    for engine, what, figure, target, ok in verdicts(data):
        lines.append(f"| {engine} | {what} | {figure} | {target} | {met(ok)} |")
    lines.append("")
    with open(md_path, "w") as f:
        f.write("\n".join(lines))
    harness.log(f"cache_engines: wrote {md_path}")
    if png_path:
        plot(data, png_path)


def plot(data, png_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        harness.log("cache_engines: matplotlib missing, no plot")
        return
    sides = (TKRZW, *KURA_ENGINES)
    names = ["Tkrzw CacheDBM" if s == TKRZW else data["sides"][s]["runs"][0]["class"] for s in sides]
    best_of = [data["sides"][s]["best"] for s in sides]
    figure, (memory_axis, qps_axis) = plt.subplots(1, 2, figsize=(11, 4.5))
    memory_axis.bar(names, [b["bytes_per_record"] for b in best_of], color=[f"C{index}" for index in range(len(sides))])
    tkrzw_bytes = best_of[0]["bytes_per_record"]
    memory_axis.axhline(MEMORY_AT_MOST * tkrzw_bytes, color="red", linestyle="--",
                        label=f"target: {MEMORY_AT_MOST}x Tkrzw")
    memory_axis.set_ylabel("bytes per record (RSS growth / records)")
    memory_axis.set_title(f"{data['records']:,} records, {data['value_size']}-byte values", fontsize=9)
    memory_axis.legend(fontsize=8)
    fields = (("set_qps", "set"), ("get_qps", "get, same order"), ("get_random_qps", "get, shuffled"))
    width = 0.8 / len(sides)
    for index, (name, best_side) in enumerate(zip(names, best_of)):
        positions = [f + index * width for f in range(len(fields))]
        qps_axis.bar(positions, [best_side[field] / 1e3 for field, _ in fields], width, label=name,
                     color=f"C{index}")
    for f, (field, _) in enumerate(fields):
        target = QPS_AT_LEAST * best_of[0][field] / 1e3
        qps_axis.hlines(target, f - width / 2, f + width * (len(sides) - 0.5), color="red", linestyle="--")
    qps_axis.set_xticks([f + width for f in range(len(fields))], [label for _, label in fields])
    qps_axis.set_ylabel("thousand operations per second, 1 thread")
    qps_axis.set_title(f"red: {QPS_AT_LEAST}x Tkrzw (the target)", fontsize=9)
    qps_axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(png_path, dpi=110)
    harness.log(f"cache_engines: wrote {png_path}")


def main():
    harness.run_steps(sys.argv[1:], measure, report)


if __name__ == "__main__":
    main()
