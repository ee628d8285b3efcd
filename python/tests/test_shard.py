"""Shard sets and the parallel loader from Python: `kura.import_file` into one database and
into shard sets gives the same records, keyless rows arrive, bad lines raise, and a set opens
by its base path like any database."""

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
