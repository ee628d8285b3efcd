"""Shard sets and the parallel loader from Python: `kura.import_file` into one database and
into shard sets gives the same records, from a path or a binary file object, keyless rows
arrive, bad lines raise, and a set opens by its base path like any database."""

import gzip
import io
import json

import pytest
from hypothesis import given, strategies as st

import kura


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("shards, threads", [(None, 1), (1, 1), (2, 2), (4, 2)])
def test_import_gives_the_same_records_whatever_the_split(tmp_path, shards, threads):
    records = {f"key{i:04}": f"value {i}" for i in range(2000)}
    tsv = write_lines(tmp_path / "in.tsv", [f"{k}\t{v}" for k, v in records.items()])
    path = tmp_path / "db.kut"
    summary = kura.import_file(path, tsv, shards=shards, threads=threads, batch=64, record_comp="lz4")
    assert summary["stored"] == summary["count"] == 2000
    assert summary["shards"] == (shards or 0)
    with kura.open(path, "r", encoding="utf-8") as db:
        assert len(db) == 2000
        assert dict(db.items()) == records
        assert db["key0042"] == "value 42"


@pytest.mark.parametrize("shards", [None, 3])
def test_a_binary_file_object_is_read_once_as_a_stream(tmp_path, shards):
    records = {f"key{i:05}".encode(): f"value {i} {'x' * (i % 70)}".encode() for i in range(5000)}
    body = b"".join(key + b"\t" + value + b"\n" for key, value in records.items())
    with gzip.open(tmp_path / "dump.tsv.gz", "wb") as packed:
        packed.write(body)
    sources = [
        ("bytesio", lambda: io.BytesIO(body)),
        ("gzip", lambda: gzip.open(tmp_path / "dump.tsv.gz", "rb")),
        ("open file", lambda: open(tmp_path / "plain.tsv", "rb")),
    ]
    (tmp_path / "plain.tsv").write_bytes(body)
    for name, source in sources:
        path = tmp_path / f"{name.replace(' ', '-')}-{shards}.kuh"
        with source() as stream:
            summary = kura.import_file(path, stream, shards=shards, threads=2)
        assert summary["stored"] == summary["count"] == len(records), name
        with kura.open(path, "r") as db:
            assert dict(db.items()) == records, name
    rows = io.BytesIO(b"".join(json.dumps({"key": k.decode(), "value": v.decode()}).encode() + b"\n"
                               for k, v in list(records.items())[:100]))
    kura.import_file(tmp_path / "rows.kut", rows, format="jsonl")
    with kura.open(tmp_path / "rows.kut", "r") as db:
        assert dict(db.items()) == dict(list(records.items())[:100])


def escaped(field):
    """Escaped TSV as docs/shard.md specifies it, written independently of the library."""
    named = {0x09: b"\\t", 0x0A: b"\\n", 0x0D: b"\\r", 0x5C: b"\\\\"}
    return b"".join(named.get(byte) or (b"\\x%02x" % byte if byte < 0x20 or byte == 0x7F else bytes([byte]))
                    for byte in field)


@given(st.dictionaries(st.binary(max_size=10), st.binary(max_size=30), max_size=80))
def test_escaped_tsv_holds_any_bytes(tmp_path_factory, model):
    body = b"".join(escaped(key) + b"\t" + escaped(value) + b"\n" for key, value in model.items())
    path = tmp_path_factory.mktemp("escaped") / "db.kuh"
    if not model:
        with pytest.raises(kura.InvalidArgumentError, match="empty"):
            kura.import_file(path, io.BytesIO(body), format="tsv-escaped")
        return
    kura.import_file(path, io.BytesIO(body), format="tsv-escaped")
    with kura.open(path, "r") as db:
        assert dict(db.items()) == model


def test_a_stream_that_fails_or_is_not_binary_raises(tmp_path):
    class Failing(io.RawIOBase):
        def __init__(self):
            self.calls = 0

        def read(self, size=-1):
            self.calls += 1
            if self.calls > 3:
                raise ValueError("the network went away")
            return b"".join(b"k%d\tv\n" % (self.calls * 10_000 + i) for i in range(min(size, 65536) // 16))

    with pytest.raises(kura.FileError, match="the network went away"):
        kura.import_file(tmp_path / "failing.kuh", Failing())
    text = write_lines(tmp_path / "text.tsv", ["a\t1"])
    with open(text, "r") as handle, pytest.raises(kura.FileError, match="binary mode"):
        kura.import_file(tmp_path / "text.kuh", handle)
    with pytest.raises(kura.InvalidArgumentError, match="empty"):
        kura.import_file(tmp_path / "empty.kuh", io.BytesIO(b""))
    assert not (tmp_path / "empty.kuh").exists()
    with pytest.raises(TypeError, match="binary file object"):
        kura.import_file(tmp_path / "number.kuh", 42)


def test_keyless_json_rows_get_distinct_keys(tmp_path):
    rows = [json.dumps({"value": f"row {i}"}) for i in range(500)]
    rows += [json.dumps({"key": f"k{i}", "value": {"n": i}}) for i in range(500)]
    source = write_lines(tmp_path / "rows.jsonl", rows)
    path = tmp_path / "rows.kuh"
    summary = kura.import_file(path, source, shards=3)
    assert summary["keyless"] == 500
    with kura.open(path, "r", encoding="utf-8") as db:
        assert len(db) == 1000
        assert db["k7"] == '{"n":7}'
        assert {f"row {i}" for i in range(500)} <= set(db.values())


def test_a_malformed_line_raises_after_the_lines_before_it(tmp_path):
    source = write_lines(tmp_path / "bad.jsonl", ['{"key": "a", "value": "1"}', '{"key": "b", "val'])
    path = tmp_path / "bad.kuh"
    with pytest.raises(kura.BrokenDataError, match="line 2"):
        kura.import_file(path, source, shards=2)
    with kura.open(path, "r") as db:
        assert dict(db.items()) == {b"a": b"1"}
    summary = kura.import_file(tmp_path / "skip.kuh", source, skip_bad=True)
    assert summary["skipped"] == 1
    with pytest.raises(kura.InvalidArgumentError):
        kura.import_file(tmp_path / "x.kuh", source, format="xml")


@given(st.dictionaries(st.binary(min_size=1, max_size=12), st.binary(max_size=40), max_size=60),
       st.integers(min_value=1, max_value=5))
def test_a_shard_set_is_a_mapping_like_any_database(tmp_path_factory, model, shards):
    path = tmp_path_factory.mktemp("set") / "db.kuh"
    with kura.open(path, "n", num_shards=shards) as db:
        for key, value in model.items():
            db[key] = value
        assert len(db) == len(model)
    # Reopened by the base path alone: the shard count comes from the file names.
    with kura.open(path, "w") as db:
        assert dict(db.items()) == model
        for key in list(model)[::2]:
            del db[key]
            del model[key]
        assert dict(db.items()) == model


def test_tree_shards_give_ordered_ranges_both_ways(tmp_path):
    path = tmp_path / "ordered.kut"
    keys = [f"k{i:03}" for i in range(200)]
    with kura.open(path, "n", num_shards=4, encoding="utf-8") as db:
        for key in reversed(keys):
            db[key] = key.upper()
        assert db.ordered
        assert list(db.keys()) == keys
        assert [k for k, _ in db.range("k050", "k060")] == keys[50:60]
        assert [k for k, _ in db.range("k050", "k060", reverse=True)] == keys[50:60][::-1]
