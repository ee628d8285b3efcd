"""The sequence workload: `tkrzw_dbm_perf sequence` (and, beside the tree, LevelDB through
bench/leveldb_sequence.cc) against `kura bench`, the same keys and 8-byte values, 1 and 2
threads, sequential and random keys; QPS of set, get, iterate and remove, the file size or
the RSS, Kura's batched gets (`get_many`, batches of GET_BATCHES keys; neither peer has a
batched get), and on ordered engines Kura's full and range scans."""

import os

import engines
import harness
import tkrzw_peers
from measure import leveldb_peer, repeats, tkrzw_output

# (threads, random keys), in the order of the report's rows.
CONFIGURATIONS = [(1, False), (2, False), (1, True), (2, True)]
# The range-scan length of the ordered engines' scan phases.
RANGE_SPAN = 100
# Batch sizes of Kura's batched get phases (`get_many`), beside its single gets.
GET_BATCHES = [16, 64]


def label(threads, random_key):
    return (f"{threads} thread{'s' if threads > 1 else ''}, "
            f"{'random' if random_key else 'sequential'} keys")


def tkrzw_sequence(engine, iterations, threads, random_key, extra=()):
    """One `tkrzw_dbm_perf sequence` run on the Tkrzw peer of `engine` (a registry entry)."""
    peer = tkrzw_peers.peer(engine["name"])
    path = os.path.join(harness.WORK, f"perf.{peer['extension']}") if peer["extension"] else None
    command = ["tkrzw_dbm_perf", "sequence", "--dbm", peer["dbm"], "--iter", str(iterations),
               "--size", "8", "--threads", str(threads), *extra]
    if path:
        harness.remove_files(path)
        command += ["--path", path]
    if peer.get("cap_rec_num"):
        command += ["--cap_rec_num", str(tkrzw_peers.cache_capacity(iterations, threads))]
    if peer.get("set_only"):
        command.append("--set_only")
    if random_key:
        command.append("--random_key")
    output = harness.run(command)
    if path:
        harness.remove_files(path)
    return tkrzw_output.perf_phases(output)


def kura_sequence_command(engine, iterations, threads, random_key, scans=True):
    """`kura bench` for a sequence run, and the file it writes (None in memory)."""
    command = [harness.KURA, "bench", "--engine", engine["name"], "--iter", str(iterations),
               "--size", "8", "--threads", str(threads), "--json",
               "--batch", ",".join(str(b) for b in GET_BATCHES)]
    path = None
    if not engines.in_memory(engine):
        path = os.path.join(harness.WORK, f"perf.{engine['extension']}")
        # Each run starts from an empty database: callers that repeat a command (repeats.py)
        # run it over the file the run before left, which `kura bench` refuses unless told.
        command += ["--path", path, "--force"]
    if scans and engine["ordered"]:
        command += ["--scan", "--range-scan", str(RANGE_SPAN)]
    if (tkrzw_peers.peer(engine["name"]) or {}).get("cap_rec_num"):
        capacity = tkrzw_peers.cache_capacity(iterations, threads)
        command += ["--params", f"cap_rec_num={capacity}"]
    if random_key:
        command.append("--random-key")
    return command, path


def kura_sequence(engine, iterations, threads, random_key):
    command, path = kura_sequence_command(engine, iterations, threads, random_key)
    if path:
        harness.remove_files(path)
    output = harness.run(command)
    if path:
        harness.remove_files(path)
    return repeats.json_phases(output)


def sequence_workload(engine, iterations, with_tkrzw):
    """Each configuration runs `harness.sequence_repeat()` times, Tkrzw, LevelDB (the tree's
    only) and Kura taking turns, and each side keeps its best run per phase: taking turns
    exposes all to the same spells of outside load."""
    with_leveldb = with_tkrzw and leveldb_peer.wanted(engine["name"])
    with_tkrzw = with_tkrzw and tkrzw_peers.peer(engine["name"]) is not None
    results = []
    for threads, random_key in CONFIGURATIONS:
        name = label(threads, random_key)
        harness.log(f"sequence {engine['name']}: {name}, {iterations} iterations per thread, "
                    f"{harness.sequence_repeat()} runs each")
        tkrzw_runs, leveldb_runs, kura_runs = [], [], []
        for _ in range(harness.sequence_repeat()):
            if with_tkrzw:
                tkrzw_runs.append(tkrzw_sequence(engine, iterations, threads, random_key))
            if with_leveldb:
                leveldb_runs.append(leveldb_peer.sequence(iterations, threads, random_key))
            kura_runs.append(kura_sequence(engine, iterations, threads, random_key))
        row = {"engine": engine["name"], "threads": threads, "random_key": random_key,
               "label": name, "iterations": iterations,
               "tkrzw": repeats.best_phases(tkrzw_runs),
               "kura": repeats.best_phases(kura_runs)}
        if with_leveldb:
            row["leveldb"] = repeats.best_phases(leveldb_runs)
        results.append(row)
    return results
