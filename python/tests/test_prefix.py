"""Prefix iteration and keys-only ranges, checked against a sorted list and a dict: the
model the engines must agree with."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kura

# The ordered engines, plus a tree with compressed records: its reads release the GIL, which
# takes the range's other path (records copied out instead of lent in place).
RANGED = [
    pytest.param(("kut", {}), id="tree"),
    pytest.param(("kut", {"record_comp": "lz4"}), id="tree-lz4"),
    pytest.param(("kumb", {}), id="baby"),
    pytest.param(("kut", {"num_shards": 3}), id="shard-tree"),
]

# Keys over a small alphabet that includes 0x00 and 0xff, so that prefixes share bytes with
# many keys and the prefix's end (its last byte below 0xff incremented) is exercised at 0xff.
KEYS = st.binary(max_size=4).map(lambda raw: bytes(b"\x00a\xfe\xff"[byte % 4] for byte in raw))


@pytest.fixture(params=RANGED)
def ranged(request, tmp_path):
    extension, params = request.param
    return tmp_path / f"db.{extension}", dict(params)


def fill(db, keys):
    for key in keys:
        db[key] = key + b"!"


def model_range(keys, start, stop, inclusive, prefix, reverse):
    """The keys the range must yield, from the sorted list."""
    chosen = [
        key
        for key in sorted(keys)
        if (start is None or key >= start)
        and (stop is None or key < stop or (inclusive and key == stop))
        and (prefix is None or key.startswith(prefix))
    ]
    return chosen[::-1] if reverse else chosen


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.sets(KEYS, max_size=40),
    start=st.none() | KEYS,
    stop=st.none() | KEYS,
    inclusive=st.booleans(),
    prefix=st.none() | KEYS,
    reverse=st.booleans(),
    keys_only=st.booleans(),
)
def test_range_matches_the_sorted_list(ranged, keys, start, stop, inclusive, prefix, reverse, keys_only):
    path, params = ranged
    with kura.open(path, "n", **params) as db:
        fill(db, keys)
        expected = model_range(keys, start, stop, inclusive, prefix, reverse)
        got = list(
            db.range(start, stop, reverse, prefix=prefix, inclusive=inclusive, keys_only=keys_only)
        )
        assert got == (expected if keys_only else [(key, key + b"!") for key in expected])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.sets(KEYS, max_size=40), prefix=KEYS)
def test_keys_and_items_with_a_prefix_match_the_dict(engine, keys, prefix):
    """Every engine: ordered ones in key order, the others in any order."""
    path, params = engine
    model = {key: key + b"!" for key in keys}
    with kura.open(path, "n", **params) as db:
        db.update(model)
        wanted = {key: value for key, value in model.items() if key.startswith(prefix)}
        got_keys = list(db.keys(prefix=prefix))
        got_items = list(db.items(prefix))
        assert sorted(got_keys) == sorted(wanted)
        assert dict(got_items) == wanted and len(got_items) == len(wanted)
        if db.ordered:
            assert got_keys == sorted(wanted)


def test_inclusive_stop_and_str_keys(tmp_path):
    with kura.open(tmp_path / "words.kut", "c", encoding="utf-8") as db:
        db.update({"apple": "1", "apricot": "2", "banana": "3", "cherry": "4"})
        assert list(db.range("apple", "banana", keys_only=True)) == ["apple", "apricot"]
        assert list(db.range("apple", "banana", inclusive=True, keys_only=True)) == ["apple", "apricot", "banana"]
        assert list(db.range(stop="banana", inclusive=True, reverse=True, keys_only=True)) == [
            "banana",
            "apricot",
            "apple",
        ]
        assert list(db.keys(prefix="ap")) == ["apple", "apricot"]
        assert list(db.items("b")) == [("banana", "3")]
        # Without a prefix, keys() and items() are still the live views.
        assert len(db.keys()) == 4 and ("cherry", "4") in db.items()


def test_prefix_on_a_numeric_tree_is_refused(tmp_path):
    with kura.open(tmp_path / "numbers.kut", "c", key_comparator="numeric") as db:
        db.update({b"9": b"", b"10": b"", b"11": b""})
        with pytest.raises(kura.InvalidArgumentError, match="bytewise"):
            db.range(prefix=b"1")
        # Plain bounds still follow the tree's own order.
        assert list(db.range(b"9", b"11", keys_only=True)) == [b"9", b"10"]


def test_hash_engines_refuse_ranges_but_take_prefixes(tmp_path):
    with kura.open(tmp_path / "h.kuh", "c") as db:
        db.update({b"ab": b"1", b"ac": b"2", b"b": b"3"})
        with pytest.raises(kura.NotOrderedError):
            db.range(prefix=b"a")
        assert sorted(db.keys(prefix=b"a")) == [b"ab", b"ac"]
