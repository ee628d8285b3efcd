"""The dictionary workload: the TSV of tools/make_dictionary.py loaded with each codec by
`kura import` and by `tkrzw_dbm_util import`; file size, build time, and the QPS of getting
every key in a shuffled order with 1 and 2 threads (`kura bench --keys-from` and
bench/tkrzw_get.cc, which shuffle alike), plus full and range scans on ordered engines."""

import os
import subprocess
import sys
import time

import harness
import tkrzw_peers
from measure import repeats
from measure.sequence import RANGE_SPAN

TKRZW_GET = os.path.join(harness.WORK, "tkrzw_get")
# Range scans per dictionary get run, split among the threads.
RANGE_SCANS = 10_000


def dictionary_tsv(limit):
    """The data set's path, generated on first use (`limit` records, 0: all)."""
    os.makedirs(harness.DATA, exist_ok=True)
    name = "dictionary.tsv" if limit <= 0 else f"dictionary-{limit}.tsv"
    path = os.path.join(harness.DATA, name)
    if not os.path.exists(path):
        harness.log(f"dictionary: generating {path}")
        command = [sys.executable, os.path.join(harness.ROOT, "tools", "make_dictionary.py"),
                   path]
        if limit > 0:
            command += ["--limit", str(limit)]
        subprocess.run(command, check=True)
    return path


def count_records(tsv):
    records = size = 0
    with open(tsv, "rb") as lines:
        for line in lines:
            records += 1
            size += len(line)
    return records, size


def build_tkrzw_get():
    source = os.path.join(harness.ROOT, "bench", "tkrzw_get.cc")
    if not harness.driver_is_current(TKRZW_GET, source):
        cflags = subprocess.run(["pkg-config", "--cflags", "tkrzw"], capture_output=True,
                                text=True).stdout.split()
        harness.run(["g++", "-O2", "-std=c++17", *cflags, source, "-o", TKRZW_GET, "-ltkrzw",
                     "-lpthread"])


def scan_flags(engine, threads, kura):
    """The extra phases of a get run on an ordered engine: full scans with one thread, range
    scans with each thread count."""
    if not engine["ordered"]:
        return []
    flags = ["--scan"] if threads == 1 else []
    if kura:
        return flags + ["--range-scan", str(RANGE_SPAN), "--iter", str(RANGE_SCANS)]
    return flags + ["--range", str(RANGE_SPAN), "--count", str(RANGE_SCANS)]


def kura_get(engine, db, tsv, threads):
    return repeats.best_of([harness.KURA, "bench", "--keys-from", tsv, "--path", db,
                            "--threads", str(threads), "--json",
                            *scan_flags(engine, threads, True)])


def tkrzw_get(engine, db, tsv, threads):
    return repeats.best_of([TKRZW_GET, db, tsv, str(threads),
                            *scan_flags(engine, threads, False)])


def store_gets(side, gets1, gets2):
    """get1/get2: the get phase of 1 and 2 threads; scan and scan_back (one thread), and
    range1/range2 where the run had them."""
    side["get1"], side["get2"] = gets1["get"], gets2["get"]
    for phase in ("scan", "scan_back"):
        if phase in gets1:
            side[phase] = gets1[phase]
    for threads, gets in ((1, gets1), (2, gets2)):
        if "range" in gets:
            side[f"range{threads}"] = gets["range"]


def kura_side(engine, tsv, codec, rebuild):
    db = os.path.join(harness.WORK, f"dict-{codec}.{engine['extension']}")
    harness.remove_files(db)
    harness.log(f"dictionary {engine['name']}: kura import, {codec}")
    started = time.monotonic()
    summary = harness.run([harness.KURA, "import", db, tsv, "--record-comp", codec])
    side = {"import_s": time.monotonic() - started, "summary": summary.strip()}
    if rebuild:
        harness.run([harness.KURA, "rebuild", db])
    side["build_s"] = time.monotonic() - started
    side["file_size"] = harness.database_bytes(db)
    store_gets(side, kura_get(engine, db, tsv, 1), kura_get(engine, db, tsv, 2))
    harness.remove_files(db)
    return side


def tkrzw_side(engine, peer, tsv, codec):
    db = os.path.join(harness.WORK, f"dict-{codec}.{peer['extension']}")
    harness.remove_files(db)
    harness.log(f"dictionary {engine['name']}: tkrzw import, {codec}")
    started = time.monotonic()
    harness.run(["tkrzw_dbm_util", "create", "--dbm", peer["dbm"], "--record_comp", codec,
                 *peer.get("create_args", []), db])
    harness.run(["tkrzw_dbm_util", "import", "--tsv", db, tsv])
    side = {"import_s": time.monotonic() - started}
    if peer.get("rebuild_after_import"):
        harness.run(["tkrzw_dbm_util", "rebuild", db])
    side["build_s"] = time.monotonic() - started
    side["file_size"] = harness.database_bytes(db)
    store_gets(side, tkrzw_get(engine, db, tsv, 1), tkrzw_get(engine, db, tsv, 2))
    harness.remove_files(db)
    return side


def dictionary_workload(engine, tsv, codecs, with_tkrzw):
    """One row per codec: Kura's side, and Tkrzw's where its peer has the codec. Where the
    peer rebuilds its imported file, Kura's is rebuilt too, both timed in the build."""
    peer = tkrzw_peers.peer(engine["name"]) or {}
    rebuild = bool(peer.get("rebuild_after_import"))
    results = []
    for codec in codecs:
        row = {"codec": codec, "engine": engine["name"],
               "kura": kura_side(engine, tsv, codec, rebuild)}
        if with_tkrzw and peer.get("extension") and codec in tkrzw_peers.CODECS:
            row["tkrzw"] = tkrzw_side(engine, peer, tsv, codec)
        results.append(row)
    return results
