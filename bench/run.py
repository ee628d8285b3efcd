#!/usr/bin/env python3
"""Kura against Tkrzw, side by side on this machine (`make bench`), and the demo table
(`make demo`, with --demo): the entry point that runs the three steps

  measure (bench/measure/, one module per workload)
    -> bench/results/bench.json (every measurement, the engines and the machine)
    -> report (bench/report.py: bench.md and bench.png, redrawn from the JSON alone).

The engines come from the library's registry (`kura engines --json`, engines.py); the Tkrzw
engine beside each from tkrzw_peers.py; the targets the report checks from targets.py.
Workloads: the sequence workload per engine (measure/sequence.py), Kura's thread scaling on
equal data (measure/thread_scaling.py), the memory floor (measure/memory_floor.py), the
dictionary data set per codec on the file engines (measure/dictionary.py), cache hit ratios
(measure/hit_ratio.py). docs/bench.md describes them.

Environment variables shrink a run: BENCH_ITER (default 1000000 operations per thread),
BENCH_DICT_LIMIT (records of the dictionary, default all), BENCH_CODECS (comma list, hash and
tree), BENCH_TREE_CODECS (comma list for ordered engines only, default BENCH_CODECS),
BENCH_HIT_OPS (requests of the hit-ratio trace, default 5000000), BENCH_SEQUENCE_REPEAT (runs
of each sequence configuration per side, default 3); BENCH_SKIP_SEQUENCE=1,
BENCH_SKIP_DICTIONARY=1, BENCH_SKIP_HITRATIO=1, BENCH_SKIP_FLOOR=1, BENCH_SKIP_TKRZW=1
(every peer), BENCH_SKIP_LEVELDB=1 (the tree's LevelDB columns),
BENCH_SKIP_MEMORY=1 (every in-memory engine) and BENCH_SKIP_<ENGINE>=1 (BENCH_SKIP_HASH, ...)
skip parts; BENCH_RESUME=1 reuses the sequence part a failed run left in
bench/results/bench.sequences.json; BENCH_MERGE=1 writes what this run measured into the
existing bench.json (the engines measured replace theirs; `merged_at` records it, and
`floor_of_engine` the memory floor of the engines it did not re-measure); BENCH_REPEAT (default 3) sets how many times each dictionary get and
thread-scaling measurement runs, the best one counting (a run longer than BENCH_REPEAT_MAX_S
seconds, default 8, is not repeated). CARGO_TARGET_DIR or KURA_BIN say where `kura` is.
"""

import argparse
import datetime
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402
import harness  # noqa: E402
import report  # noqa: E402
import targets  # noqa: E402
from measure import dictionary, hit_ratio, machine, memory_floor, sequence  # noqa: E402
from measure import thread_scaling  # noqa: E402
from render import tables  # noqa: E402

SCHEMA = 2


def codec_lists():
    codecs = [c for c in os.environ.get("BENCH_CODECS", ",".join(engines.codecs())).split(",") if c]
    ordered_codecs = [c for c in os.environ.get("BENCH_TREE_CODECS", ",".join(codecs)).split(",")
                      if c]
    return codecs, ordered_codecs


def settings_of_run(codecs, ordered_codecs):
    return {"iter": harness.env_int("BENCH_ITER", 1_000_000),
            "dict_limit": harness.env_int("BENCH_DICT_LIMIT", 0), "codecs": codecs,
            "tree_codecs": ordered_codecs, "sequence_repeat": harness.sequence_repeat(),
            "repeat": harness.repeat(), "repeat_max_s": harness.repeat_max_s(),
            "range_span": sequence.RANGE_SPAN}


def measure_dictionary(file_engines, settings, with_tkrzw, codecs, ordered_codecs):
    """The dictionary workload on each file engine; fills the data set's facts in `settings`."""
    tsv = dictionary.dictionary_tsv(settings["dict_limit"])
    settings["dictionary_path"] = os.path.relpath(tsv, harness.ROOT)
    settings["dict_records"], settings["dict_bytes"] = dictionary.count_records(tsv)
    if with_tkrzw:
        dictionary.build_tkrzw_get()
    return {engine["name"]: dictionary.dictionary_workload(
        engine, tsv, ordered_codecs if engine["ordered"] else codecs, with_tkrzw)
        for engine in file_engines}


def measure_sequences(wanted, settings, with_tkrzw):
    """The sequence workload of every engine, the thread scaling the targets read, and the
    memory floor: {sequence, thread_scaling, memory_latency} of bench.json."""
    measured = {"sequence": {}, "thread_scaling": {}, "memory_latency": None}
    for engine in wanted:
        measured["sequence"][engine["name"]] = sequence.sequence_workload(
            engine, settings["iter"], with_tkrzw)
    for engine in (e for e in wanted if e["name"] in targets.scaling_engines()):
        measured["thread_scaling"][engine["name"]] = thread_scaling.thread_scaling(
            engine, settings["iter"])
    if not harness.skipped("FLOOR"):
        measured["memory_latency"] = memory_floor.measure()
    return measured


def checkpoint_path():
    return os.path.join(harness.RESULTS, "bench.sequences.json")


def save_checkpoint(measured, settings):
    """The sequence part (the longest) kept on disk as soon as it is measured, so that a later
    workload that fails does not cost it: BENCH_RESUME=1 starts from it."""
    os.makedirs(harness.RESULTS, exist_ok=True)
    with open(checkpoint_path(), "w") as f:
        json.dump({"settings": settings, "measured": measured}, f)


def resumed_sequences(settings):
    """With BENCH_RESUME=1, the checkpoint's sequences if it was taken with these settings."""
    if not os.environ.get("BENCH_RESUME", "").strip() or not os.path.exists(checkpoint_path()):
        return None
    with open(checkpoint_path()) as f:
        saved = json.load(f)
    if saved["settings"] != settings:
        harness.log("bench: BENCH_RESUME: the checkpoint has other settings; measuring again")
        return None
    harness.log("bench: BENCH_RESUME: sequences, thread scaling and floor from the checkpoint")
    return saved["measured"]


def measure(demo):
    """Every workload of the run as the dict that bench.json holds."""
    registry = engines.registry()
    wanted = [engine for engine in registry if engines.wanted(engine)]
    with_tkrzw = not demo and not harness.skipped("TKRZW")
    if with_tkrzw and not shutil.which("tkrzw_dbm_perf"):
        sys.exit("bench: tkrzw_dbm_perf not found; run `make deps`")
    codecs, ordered_codecs = codec_lists()
    settings = settings_of_run(codecs, ordered_codecs)
    os.makedirs(harness.WORK, exist_ok=True)
    began = time.monotonic()
    measured = {"sequence": {}, "thread_scaling": {}, "memory_latency": None}
    if not demo and not harness.skipped("SEQUENCE"):
        measured = resumed_sequences(settings) or measure_sequences(wanted, settings, with_tkrzw)
        save_checkpoint(measured, settings)
    # The demo loads the registry's first file engine; a benchmark every file engine.
    file_engines = [engine for engine in wanted if not engines.in_memory(engine)]
    if demo:
        file_engines = file_engines[:1]
    measured["dictionary"] = {}
    if not harness.skipped("DICTIONARY") and file_engines:
        measured["dictionary"] = measure_dictionary(file_engines, settings, with_tkrzw, codecs,
                                                    ordered_codecs)
    measured["hit_ratio"] = []
    if not demo and not harness.skipped("HITRATIO"):
        measured["hit_ratio"] = hit_ratio.hit_ratio_workload()
    harness.remove_files(harness.WORK)
    if os.path.exists(checkpoint_path()):
        os.remove(checkpoint_path())
    settings["elapsed_s"] = time.monotonic() - began
    harness.log(f"bench: measured in {settings['elapsed_s'] / 60:.1f} min")
    return {"schema": SCHEMA,
            "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "machine": machine.machine_info(), "engines": registry, "settings": settings,
            **measured}


def print_demo(bench):
    settings = bench["settings"]
    if not bench["dictionary"]:
        sys.exit("bench: the demo needs a file engine and the dictionary workload")
    print(f"\nDictionary data set: {settings['dictionary_path']}, {settings['dict_records']} "
          f"records, {settings['dict_bytes'] / 1e6:.1f} MB\n")
    for rows in bench["dictionary"].values():
        print(tables.dictionary_table(rows, False))


def merged(previous, bench):
    """BENCH_MERGE=1: the engines (and parts) measured now replace theirs in the previous run,
    the rest of the previous run stays; `merged_at` lists what was measured when. Each
    engine's single gets stay compared with the memory floor of the run that measured them
    (`floor_of_engine`, where that is not the floor the merged file shows; None: that run
    measured none)."""
    new_floor = (bench.get("memory_latency") or {}).get("load_ns")
    old_floor = (previous.get("memory_latency") or {}).get("load_ns")
    kept = previous.get("floor_of_engine") or {}
    remeasured = set(bench.get("sequence") or {})
    for engine in remeasured:
        if new_floor:
            kept.pop(engine, None)  # compared with the floor this merge brings
        else:
            kept[engine] = None  # the file keeps an earlier run's floor: not this engine's
    if new_floor:
        for engine in set(previous.get("sequence") or {}) - remeasured:
            kept.setdefault(engine, old_floor)  # the floor it leaves is theirs
    previous.pop("floor_of_engine", None)
    if kept:
        previous["floor_of_engine"] = kept
    for section in ("sequence", "thread_scaling", "dictionary"):
        previous.setdefault(section, {}).update(bench.get(section) or {})
    for section in ("memory_latency", "hit_ratio"):
        if bench.get(section):
            previous[section] = bench[section]
    measured = sorted(set(bench.get("sequence") or {}) | set(bench.get("dictionary") or {}))
    previous.setdefault("merged_at", []).append({"date": bench["date"], "engines": measured,
                                                 "settings": bench["settings"]})
    return previous


def main():
    parser = argparse.ArgumentParser(description="Kura benchmarks against Tkrzw")
    parser.add_argument("--demo", action="store_true",
                        help="dictionary workload with Kura only; print the table")
    args = parser.parse_args()
    if not os.path.exists(harness.KURA):
        sys.exit(f"bench: {harness.KURA} is missing; run `cargo build --release` (make build)")
    bench = measure(args.demo)
    if args.demo:
        print_demo(bench)
        return
    os.makedirs(harness.RESULTS, exist_ok=True)
    path = os.path.join(harness.RESULTS, "bench.json")
    if os.environ.get("BENCH_MERGE", "").strip() and os.path.exists(path):
        with open(path) as previous:
            bench = merged(json.load(previous), bench)
    with open(path, "w") as out:
        json.dump(bench, out, indent=1)
    harness.log(f"bench: wrote {os.path.relpath(path, harness.ROOT)}")
    print(report.write_report(bench, harness.RESULTS))


if __name__ == "__main__":
    main()
