"""LevelDB beside TreeDbm in the sequence workload (issue #20: the tree's gets, single and
batched, next to LevelDB's reads): bench/leveldb_sequence.cc, built here with g++ against
Debian's libleveldb (installed by `make deps`), runs `kura bench`'s keys, values and phases
(set, get, remove) on LevelDB itself. LevelDB has no batched get (RocksDB's MultiGet is not
in it), so its get is what TreeDbm's get_many rows stand next to."""

import os
import shutil
import tempfile

import harness
from measure import repeats

SOURCE = os.path.join(harness.ROOT, "bench", "leveldb_sequence.cc")
BINARY = os.path.join(harness.WORK, "leveldb_sequence")
# The Kura engines whose sequence tables show LevelDB: the ordered file engine it competes with.
ENGINES = {"tree"}
TITLE = "LevelDB"


def wanted(engine_name):
    """Whether LevelDB runs beside this engine: the tree's, unless BENCH_SKIP_LEVELDB is set."""
    return engine_name in ENGINES and not harness.skipped("LEVELDB")


def build():
    """Compiles the driver unless it is newer than its source."""
    if not os.path.exists(BINARY) or os.path.getmtime(BINARY) < os.path.getmtime(SOURCE):
        os.makedirs(harness.WORK, exist_ok=True)
        harness.run(["g++", "-O2", "-std=c++17", SOURCE, "-o", BINARY, "-lleveldb", "-lpthread"])


def sequence(iterations, threads, random_key, value_size=8):
    """Phase -> figures of one run, in a fresh directory removed afterwards."""
    build()
    directory = tempfile.mkdtemp(dir=harness.WORK)
    try:
        output = harness.run([BINARY, str(iterations), str(threads), "1" if random_key else "0",
                              str(value_size), directory])
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return repeats.json_phases(output)
