"""kura.dask on a 2-process LocalCluster: to_kura of a bag and of a dataframe checked
against a dict model, keyless rows, a bad row (the partition named, no shard file left),
read_kura round trips, and load_servers into 3 `kura serve` read back through HashClient.
Also kura.shard_of and kura.ShardWriter themselves. Small: a few thousand rows."""

import json
import os
import random
import subprocess

import pytest

import kura

dask = pytest.importorskip("dask", reason="kura[dask] is installed by python/build.sh")
distributed = pytest.importorskip("distributed")
pandas = pytest.importorskip("pandas")
import dask.bag  # noqa: E402
import dask.dataframe  # noqa: E402
import kura.dask as kd  # noqa: E402

ROWS = 3000


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, silence_logs=40
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def model_value(value):
    """The stored bytes of a value, as the importer stores JSON values."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def random_rows(seed, count=ROWS):
    """Keys of three types with repeats (the later row wins), values of several types."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        number = rng.randrange(count // 2)
        key = rng.choice([f"k{number}", f"k{number}".encode(), number + 10**6])
        value = rng.choice([f"v{i}", f"b{i}".encode(), {"i": i, "s": "ü"}, [i, None], i * 0.5])
        rows.append((key, value))
    return rows


def model_of(rows):
    model = {}
    for key, value in rows:
        stored = key if isinstance(key, bytes) else str(key).encode()
        model[stored] = model_value(value)
    return model


def read_set(base):
    with kura.open(base, "r") as db:
        return dict(db.items())


def test_shard_of_and_shard_writer_route_as_a_set_does(tmp_path):
    base = tmp_path / "set.kuh"
    with kura.open(base, "c", num_shards=3) as db:
        for i in range(200):
            db[f"k{i}"] = f"v{i}"
    # The set's own files hold exactly the keys shard_of sends them.
    engine, paths = kura.shard_files(base)
    assert engine == "hash" and len(paths) == 3
    for index, path in enumerate(paths):
        with kura.open(path, "r", engine=engine) as shard:
            assert len(shard) > 0
            assert all(kura.shard_of(key, 3) == index for key in shard.keys())
    other = tmp_path / "other.kut"
    key = next(f"x{i}" for i in range(100) if kura.shard_of(f"x{i}", 2) == 1)
    writer = kura.ShardWriter(other, 0, 2)
    with pytest.raises(kura.InvalidArgumentError, match="routes to shard 1 of 2"):
        writer.set(key, "v")
    writer.abort()
    assert not [name for name in os.listdir(tmp_path) if name.startswith("other")], "an aborted writer leaves no file"
    with pytest.raises(RuntimeError):
        with kura.ShardWriter(other, 1, 2) as writer:
            writer.set(key, "v")
            raise RuntimeError("the with block fails")
    assert not [name for name in os.listdir(tmp_path) if name.startswith("other")], "the failed block left a file"
    with kura.ShardWriter(other, 1, 2) as writer:
        writer.set(key, "v")
    with pytest.raises(kura.DuplicateError, match="exists"):
        kura.ShardWriter(other, 1, 2)
    with pytest.raises(kura.InvalidArgumentError):
        kura.shard_of("k", 0)


def test_to_kura_of_a_bag_matches_the_model_and_reads_back(client, tmp_path):
    rows = random_rows(1)
    keyless = [(None, f"keyless{i}") for i in range(50)] + [{"value": {"n": i}} for i in range(50)]
    bag = dask.bag.from_sequence(rows + keyless, npartitions=5)
    base = tmp_path / "bag.kut"
    written = kd.to_kura(bag, base, 3, params={"record_comp": "lz4"})
    model = model_of(rows)
    assert [w["path"] for w in written] == [os.fspath(kura.shard_path(base, i, 3)) for i in range(3)]
    stored = read_set(base)
    assert sum(w["count"] for w in written) == len(model) + 100 == len(stored)
    generated = {k: v for k, v in stored.items() if k not in model}
    assert {k: stored[k] for k in model} == model
    assert sorted(generated.values()) == sorted([f"keyless{i}".encode() for i in range(50)] + [model_value({"n": i}) for i in range(50)])
    # Keyless rows land where their generated keys route, and the same seed makes the same keys.
    again = kd.to_kura(bag, tmp_path / "again.kut", 3, params={"record_comp": "lz4"})
    assert [w["count"] for w in again] == [w["count"] for w in written]
    assert read_set(tmp_path / "again.kut") == stored
    # read_kura: one partition per shard, the same records.
    back = kd.read_kura(base)
    assert back.npartitions == 3
    assert dict(back.compute()) == stored
    # An existing set is refused, then replaced with overwrite=True.
    with pytest.raises(kura.DuplicateError):
        kd.to_kura(bag, base, 3)
    kd.to_kura(dask.bag.from_sequence([("a", "b")], npartitions=1), base, 3, overwrite=True)
    assert read_set(base) == {b"a": b"b"}


def test_to_kura_of_a_dataframe_with_keyless_rows(client, tmp_path):
    rng = random.Random(2)
    keys = [rng.randrange(ROWS) if i % 10 else None for i in range(ROWS)]
    values = [f"value {i}" for i in range(ROWS)]
    frame = pandas.DataFrame({"id": pandas.array(keys, dtype="Int64"), "text": values})
    base = tmp_path / "frame.kuh"
    written = kd.to_kura(dask.dataframe.from_pandas(frame, npartitions=4), base, 2, key="id", value="text")
    model = {}
    for key, value in zip(keys, values):
        if key is not None:
            model[str(key).encode()] = value.encode()
    stored = read_set(base)
    assert {k: stored[k] for k in model} == model
    assert len(stored) == len(model) + keys.count(None) == sum(w["count"] for w in written)
    back = kd.read_kura(base, dataframe=True, encoding="utf-8").compute()
    assert back.shape == (len(stored), 2)
    assert dict(zip(back["key"], back["value"])) == {k.decode(): v.decode() for k, v in stored.items()}


def test_a_bad_row_names_its_partition_and_leaves_no_shard_file(client, tmp_path):
    rows = [(f"k{i}", f"v{i}") for i in range(400)]
    rows[250] = (["a list"], "v")
    bag = dask.bag.from_sequence(rows, npartitions=4)
    with pytest.raises(kd.BadRowError, match=r"partition 2 row 50: key \['a list'\]"):
        kd.to_kura(bag, tmp_path / "bad.kuh", 2)
    assert os.listdir(tmp_path) == []
    # Writers that fail (a codec no engine has) leave nothing either.
    with pytest.raises(kura.InvalidArgumentError, match="bogus"):
        kd.to_kura(bag.filter(lambda row: isinstance(row[0], str)), tmp_path / "codec.kuh", 2, params={"record_comp": "bogus"})
    assert os.listdir(tmp_path) == []
    frame = pandas.DataFrame({"key": ["a", "b"], "value": [float("nan"), 1.0]})
    with pytest.raises(kd.BadRowError, match="partition 0 row 0: value nan"):
        kd.to_kura(dask.dataframe.from_pandas(frame, npartitions=1), tmp_path / "nan.kuh", 2)
    assert os.listdir(tmp_path) == []


@pytest.fixture
def servers():
    from test_serve_pymemcache import kura_binary

    binary = kura_binary()
    if binary is None:
        pytest.skip("no kura binary: build it (cargo build) or set KURA_BIN")
    processes = [subprocess.Popen([str(binary), "serve", "--port", "0"], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        # "kura serve: listening on HOST:PORT ..." is its first line.
        ports = [int(p.stdout.readline().split()[4].rsplit(":", 1)[1]) for p in processes]
        yield [("127.0.0.1", port) for port in ports]
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


def test_load_servers_then_every_key_reads_back_through_hash_client(client, servers):
    pytest.importorskip("pymemcache")
    # Unique keys: partitions load side by side, so which of two rows of one key in two
    # partitions wins is not defined (within a partition the later one does).
    rows = list(model_of(random_rows(3)).items()) + [(1234567890, {"int": "key"})]
    model = model_of(rows)
    bag = dask.bag.from_sequence(rows, npartitions=4)
    counts = kd.load_servers(bag, servers, batch=16)
    assert len(counts) == 4
    assert sum(counts) == len(rows)
    # A plain HashClient (pymemcache's own hashing) and kura's reader both find every key.
    from pymemcache.client.hash import HashClient
    from pymemcache.client.rendezvous import RendezvousHash

    keys = list(model)
    for reader in (HashClient(servers), kd.server_client(servers)):
        got = {}
        for start in range(0, len(keys), 100):
            got.update(reader.get_many(keys[start : start + 100]))
        reader.close()
        assert got == model
    # Each server holds a share: the keys were spread, not all sent to one.
    from pymemcache.client.base import Client

    # Each key is on the server pymemcache's RendezvousHash names for it.
    names = RendezvousHash(["%s:%s" % server for server in servers])
    shares = []
    for server in servers:
        direct = Client(server)
        held = set()
        for start in range(0, len(keys), 100):
            held.update(direct.get_many(keys[start : start + 100]))
        direct.close()
        assert held == {key for key in keys if names.get_node(key) == "%s:%s" % server}
        shares.append(len(held))
    assert sum(shares) == len(model) and min(shares) > len(model) // 6


def random_text(rng, alphabet):
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24)))


def test_rendezvous_hash_chooses_the_node_pymemcache_chooses():
    """kura.RendezvousHash against pymemcache's own on random node sets and keys of every
    kind HashClient is given: ASCII and non-ASCII text (code points past 255 too), bytes
    (their str() is hashed), integers."""
    rendezvous = pytest.importorskip("pymemcache.client.rendezvous")
    rng = random.Random(46)
    alphabet = "abcxyz019:-._ éü€中\n'"
    for round_ in range(60):
        nodes = list({f"{random_text(rng, alphabet)}:{rng.randrange(65536)}" for _ in range(rng.randrange(1, 9))})
        seed = rng.choice([0, 0, rng.randrange(2**32)])
        theirs, ours = rendezvous.RendezvousHash(list(nodes), seed=seed), kura.RendezvousHash(nodes, seed=seed)
        keys = []
        for _ in range(60):
            kind = rng.randrange(3)
            text = random_text(rng, alphabet)
            keys.append(text if kind == 0 else text.encode() + bytes([rng.randrange(256)]) if kind == 1 else rng.randrange(-(10**12), 10**12))
        expected = [theirs.get_node(key) for key in keys]
        assert [ours.get_node(key) for key in keys] == expected
        groups = {}
        for key, node in zip(keys, expected):
            groups.setdefault(node, {})[key] = f"v{key!r}"
        assert ours.split_many([(key, f"v{key!r}") for key in keys]) == groups
        # Removing and re-adding a node changes the choice as pymemcache's does.
        gone = nodes[0]
        theirs.remove_node(gone)
        ours.remove_node(gone)
        assert ours.nodes == theirs.nodes
        assert [ours.get_node(key) for key in keys] == [theirs.get_node(key) for key in keys]
        ours.add_node(gone)
        ours.add_node(gone)
        assert sorted(ours.nodes) == sorted(nodes)
    with pytest.raises(ValueError, match="No such node"):
        kura.RendezvousHash(["a:1"]).remove_node("b:2")
    assert kura.RendezvousHash().get_node("k") is None


def test_split_arrow_routes_as_split_rows():
    """The Arrow path of to_kura against the object path on random string and binary
    columns with null keys, sliced arrays and 64-bit offsets; damaged buffers are an error."""
    pa = pytest.importorskip("pyarrow")
    rng = random.Random(7)
    keys = [None if rng.random() < 0.1 else f"k{rng.randrange(500)}é" for _ in range(2000)]
    values = [random_text(rng, "ab中 ") for _ in range(2000)]
    prefix = b"0000000000000000-000003-"
    for kind in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        encode = (lambda t: t.encode()) if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) else (lambda t: t)
        key_array = pa.array([None if k is None else encode(k) for k in keys], type=kind)
        value_array = pa.array([encode(v) for v in values], type=kind)
        for start, stop in ((0, 2000), (13, 1500)):
            frame = pandas.DataFrame(
                {"key": pandas.Series(key_array[start:stop], dtype=pandas.ArrowDtype(kind)),
                 "value": pandas.Series(value_array[start:stop], dtype=pandas.ArrowDtype(kind))}
            )
            arrow = kd._arrow_columns(frame, "key", "value")
            assert arrow is not None, kind
            got = kura.split_arrow(arrow[0], arrow[1], 3, prefix)
            assert got == kura.split_rows(keys[start:stop], values[start:stop], 3, prefix, kd._encode_value)
            assert kd.split_partition(frame, 3, 3) == tuple(got)
            keyless = kura.split_arrow(None, arrow[1], 2, prefix)
            assert keyless == kura.split_rows([None] * (stop - start), values[start:stop], 2, prefix, kd._encode_value)
    length, offset, validity, offsets, data, wide = kd._arrow_buffers(pandas.Series(["abc", "de"], dtype="string[pyarrow]"))
    with pytest.raises(kura.InvalidArgumentError, match="row 1: offsets 3..5 outside the data"):
        kura.split_arrow(None, (length, offset, validity, offsets, data[:4], wide), 2, prefix)
    with pytest.raises(kura.InvalidArgumentError, match="row 2 is past|offsets buffer is too short"):
        kura.split_arrow(None, (length + 1, offset, validity, offsets, data, wide), 2, prefix)
    with pytest.raises(kura.InvalidArgumentError, match="1 keys but 2 values"):
        kura.split_arrow((1, 0, None, offsets, data, wide), (length, offset, validity, offsets, data, wide), 2, prefix)
    nulls = pandas.DataFrame({"key": ["a", "b"], "value": ["x", None]}, dtype="string[pyarrow]")
    with pytest.raises(kd.BadRowError, match="partition 5 row 1: the value is missing"):
        kd.split_partition(nulls, 5, 2)


def test_to_kura_of_an_arrow_dataframe_matches_the_model(client, tmp_path):
    rng = random.Random(5)
    keys = [None if i % 7 == 0 else f"k{rng.randrange(ROWS)}" for i in range(ROWS)]
    values = [f"value {i}" for i in range(ROWS)]
    frame = pandas.DataFrame({"key": keys, "value": values}, dtype="string[pyarrow]")
    base = tmp_path / "arrow.kuh"
    written = kd.to_kura(dask.dataframe.from_pandas(frame, npartitions=3, sort=False), base, 2)
    stored = read_set(base)
    model = {k.encode(): v.encode() for k, v in zip(keys, values) if k is not None}
    assert {k: stored[k] for k in model} == model
    assert len(stored) == len(model) + keys.count(None) == sum(w["count"] for w in written)
    assert sorted(v for k, v in stored.items() if k not in model) == sorted(v.encode() for k, v in zip(keys, values) if k is None)
