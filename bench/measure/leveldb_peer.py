"""LevelDB beside TreeDbm in the sequence workload (issue #20: the tree's gets, single and
batched, next to LevelDB's reads): bench/leveldb_sequence.cc, built here with g++ against
Debian's libleveldb (installed by `make deps`), runs `kura bench`'s keys, values and phases
(set, get, remove) on LevelDB itself. LevelDB has no batched get (RocksDB's MultiGet is not
in it), so its get is what TreeDbm's get_many rows stand next to."""

import functools
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
    """Whether LevelDB runs beside this engine: the tree's, unless BENCH_SKIP_LEVELDB is set or
    the driver cannot be built here (no g++ or no libleveldb-dev: said once, then skipped)."""
    return engine_name in ENGINES and not harness.skipped("LEVELDB") and built()


@functools.lru_cache(maxsize=None)
def built():
    """Compiles the driver unless it is newer than its sources; False when it cannot be."""
    if harness.driver_is_current(BINARY, SOURCE):
        return True
    os.makedirs(harness.WORK, exist_ok=True)
    command = ["g++", "-O2", "-std=c++17", SOURCE, "-o", BINARY, "-lleveldb", "-lpthread"]
    return harness.run_or_none(command, "no LevelDB columns (make deps installs libleveldb-dev)") is not None


def sequence(iterations, threads, random_key, value_size=8):
    """Phase -> figures of one run, in a fresh directory removed afterwards."""
    directory = tempfile.mkdtemp(dir=harness.WORK)
    try:
        output = harness.run([BINARY, str(iterations), str(threads), "1" if random_key else "0",
                              str(value_size), directory])
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return repeats.json_phases(output)
