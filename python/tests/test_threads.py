"""Threads: one database shared by readers and writers, no deadlock, consistent results."""

import threading

import pytest

import kura


def run_all(threads):
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a thread is stuck (deadlock?)"


@pytest.mark.parametrize("release_gil", [None, True, False])
def test_concurrent_readers_and_writers(engine, release_gil):
    path, params = engine
    keys = [b"%06d" % i for i in range(2000)]
    failures = []
    with kura.open(path, "c", release_gil=release_gil, **params) as db:
        for key in keys:
            db[key] = key

        def writer(offset):
            try:
                for i, key in enumerate(keys[offset::4]):
                    db[key] = key + b"-written"
                    db.increment(b"counter")
                    if i % 50 == 0:
                        db.process(b"shared", lambda old: (old or b"") + b"x")
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(e)

        def reader():
            try:
                for _ in range(2):
                    for key in keys:
                        value = db[key]
                        assert value in (key, key + b"-written"), value
                    assert len(db) >= len(keys)
                    sum(1 for _ in db.items())
            except Exception as e:  # noqa: BLE001
                failures.append(e)

        run_all(
            [threading.Thread(target=writer, args=(i,)) for i in range(4)]
            + [threading.Thread(target=reader) for _ in range(3)]
        )
        assert not failures, failures
        assert all(db[key] == key + b"-written" for key in keys)
        assert db.increment(b"counter", 0) == len(keys)
        # process() is atomic: 4 writers x 10 calls each (i % 50 == 0 for 500 keys each).
        assert db[b"shared"] == b"x" * 40


def test_compare_exchange_counts_exactly(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        db[b"n"] = b"0"

        def bump():
            for _ in range(200):
                while True:
                    old = db[b"n"]
                    if db.compare_exchange(b"n", old, str(int(old) + 1)):
                        break

        run_all([threading.Thread(target=bump) for _ in range(4)])
        assert db[b"n"] == b"800"


def test_cursors_in_threads_while_writing(ordered):
    path, params = ordered
    with kura.open(path, "c", **params) as db:
        for i in range(1000):
            db[b"%05d" % i] = b"v"
        results = []

        def scan():
            results.append([k for k, _ in db.range(b"00100", b"00200")])

        def write():
            for i in range(1000, 3000):
                db[b"%05d" % i] = b"w"

        run_all([threading.Thread(target=scan) for _ in range(3)] + [threading.Thread(target=write)])
        expected = [b"%05d" % i for i in range(100, 200)]
        assert results == [expected] * 3


def test_close_while_other_threads_read(engine):
    path, params = engine
    db = kura.open(path, "c", **params)
    for i in range(500):
        db[b"%d" % i] = b"v"
    outcomes = []

    def read():
        try:
            for _ in range(50):
                for i in range(500):
                    db.get(b"%d" % i)
            outcomes.append("done")
        except kura.Error as e:
            outcomes.append(type(e).__name__)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    db.close()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert all(o in ("done", "ClosedError", "InfeasibleError") for o in outcomes), outcomes


def test_many_readers_retake_the_gil(tmp_path):
    """More reading threads than cores on a compressed database (each read releases the GIL
    and spins briefly to take it back), next to a thread that lets go of the GIL elsewhere
    (time.sleep) between its own reads: every read is right and nobody gets stuck."""
    import time

    keys = [b"%06d" % i for i in range(3000)]
    failures = []
    with kura.open(tmp_path / "db.kuh", "c", record_comp="zstd") as db:
        assert db.release_gil
        for key in keys:
            db[key] = key * 20

        def reader(offset):
            try:
                for key in keys[offset::3] * 2:
                    assert db[key] == key * 20
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(e)

        def sleeper():
            try:
                for key in keys[:40]:
                    assert db[key] == key * 20
                    time.sleep(0.001)
            except Exception as e:  # noqa: BLE001
                failures.append(e)

        run_all([threading.Thread(target=reader, args=(i % 3,)) for i in range(8)] + [threading.Thread(target=sleeper)])
        assert not failures, failures


CODEC_ENGINES = [e for e in kura.engines() if e["codec_param"] is not None]


def test_the_registry_names_each_engine_s_codec_parameter():
    params = {e["name"]: e["codec_param"] for e in CODEC_ENGINES}
    assert params.get("compact") == "bucket_comp" and params.get("hash") == "record_comp", params
    assert all(e["codec_param"] in e["params"] for e in CODEC_ENGINES)


@pytest.mark.parametrize("engine", CODEC_ENGINES, ids=lambda e: e["name"])
def test_reads_that_decompress_release_the_gil_whatever_the_engine_calls_its_codec(tmp_path, engine):
    """The decision comes from the engine's typed codec, not from a property's name: a zstd
    CompactDbm (`bucket_comp`) releases the GIL around reads as a zstd HashDbm does, an
    uncompressed one keeps it; two threads reading it see every value. The speed-up is
    measured by the benchmarks, not asserted here."""
    extension, codec_param = engine["extension"], engine["codec_param"]
    with kura.open(tmp_path / f"plain.{extension}", "n", **{codec_param: "none"}) as db:
        assert not db.release_gil
    keys = [b"%08d" % i for i in range(2000)]
    with kura.open(tmp_path / f"zstd.{extension}", "n", **{codec_param: "zstd"}) as db:
        assert db.release_gil
        for key in keys:
            db[key] = key * 8
        seen = [[], []]

        def reader(half):
            seen[half] = [db[key] == key * 8 for key in keys[half::2]]

        run_all([threading.Thread(target=reader, args=(half,)) for half in (0, 1)])
        assert all(seen[0]) and all(seen[1]) and len(seen[0]) + len(seen[1]) == len(keys)


def reads_seen_by_another_thread(db, key, reads):
    """How many of `reads` reads of `key` another thread saw happening: the thread counts only
    while a flag says the main thread is inside a read, and it can run then only if the read
    let go of the GIL (a thread holding the GIL in native code keeps it until it returns, and
    the interpreter checks for a switch at calls and loop jumps, not between the two flag
    stores around the read)."""
    inside, seen, stop = [False], [0], threading.Event()

    def watch():
        while not stop.is_set():
            if inside[0]:
                seen[0] += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    counted = 0
    try:
        for _ in range(reads):
            before = seen[0]
            inside[0] = True
            value = db[key]
            inside[0] = False
            counted += seen[0] != before
            assert len(value) > 0
    finally:
        stop.set()
        watcher.join(timeout=60)
    return counted


@pytest.mark.parametrize("release_gil", [None, False])
def test_a_zstd_compact_dbm_read_lets_another_thread_run_during_the_read(tmp_path, release_gil):
    """A zstd CompactDbm releases the GIL inside each read (by default, as its typed codec
    decompresses): another thread runs while a multi-megabyte value decompresses, in some of
    20 reads (each needs only that thread to be woken meanwhile; nothing is timed).
    `release_gil=False` keeps the GIL, and then no other thread runs inside a read."""
    value = b"".join(b"%08d value that compresses;" % i for i in range(150_000))
    with kura.open(tmp_path / "db.kumz", "n", bucket_comp="zstd", release_gil=release_gil) as db:
        assert db.release_gil == (release_gil is None)
        db[b"big"] = value
        assert db[b"big"] == value
        seen = reads_seen_by_another_thread(db, b"big", 20)
    if release_gil is None:
        assert seen > 0, "no other thread ran during 20 reads: the read held the GIL"
    else:
        assert seen == 0, f"another thread ran inside {seen} of 20 reads that hold the GIL"
