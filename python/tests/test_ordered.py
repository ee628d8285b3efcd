"""Ranges and cursors of the ordered engines; what hash engines say instead."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kura


def fill(db, keys):
    for key in keys:
        db[key] = key.upper()


def test_iteration_is_in_key_order(ordered):
    path, params = ordered
    keys = [b"%03d" % i for i in range(200)][::-1]
    with kura.open(path, "c", **params) as db:
        fill(db, keys)
        assert list(db) == sorted(keys)


def test_reversed_walks_down_and_hash_engines_refuse_it(ordered, tmp_path):
    path, params = ordered
    keys = [b"%03d" % i for i in range(300)][::-1]
    with kura.open(path, "c", **params) as db:
        fill(db, keys)
        assert list(reversed(db)) == sorted(keys, reverse=True)
    with kura.open(tmp_path / "plain.kuh", "c") as db:
        db[b"k"] = b"v"
        with pytest.raises(kura.NotOrderedError):
            reversed(db)


def test_in_place_union_updates_like_a_dict(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        model = {b"a": b"1", b"b": b"2"}
        db.update(model)
        same = db
        same |= {b"b": b"two", b"c": b"3"}
        model |= {b"b": b"two", b"c": b"3"}
        assert same is db
        assert dict(db.items()) == model
        with pytest.raises(TypeError):
            db | {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.sets(st.binary(max_size=3), max_size=30),
    start=st.none() | st.binary(max_size=3),
    stop=st.none() | st.binary(max_size=3),
    reverse=st.booleans(),
)
def test_range_matches_sorted_slice(ordered, keys, start, stop, reverse):
    path, params = ordered
    with kura.open(path, "n", **params) as db:
        fill(db, keys)
        expected = [
            (k, k.upper())
            for k in sorted(keys)
            if (start is None or k >= start) and (stop is None or k < stop)
        ]
        if reverse:
            expected.reverse()
        assert list(db.range(start, stop, reverse=reverse)) == expected


def test_cursor_moves_both_ways(ordered):
    path, params = ordered
    with kura.open(path, "c", **params) as db:
        fill(db, [b"a", b"c", b"e"])
        cursor = db.cursor()
        assert cursor.key() is None
        assert cursor.last() and cursor.key() == b"e"
        assert cursor.previous() and cursor.record() == (b"c", b"C")
        assert cursor.jump(b"b") and cursor.key() == b"c"
        assert cursor.jump_lower(b"c") and cursor.key() == b"a"
        assert cursor.jump_lower(b"c", inclusive=True) and cursor.key() == b"c"
        assert cursor.jump_upper(b"c") and cursor.key() == b"e"
        assert not cursor.next()
        assert cursor.first() and cursor.value() == b"A"
        cursor.set_value(b"new")
        assert db[b"a"] == b"new"
        cursor.remove()
        assert b"a" not in db and cursor.key() == b"c"
        # As an iterator: from where it stands, onwards.
        assert list(cursor) == [(b"c", b"C"), (b"e", b"E")]
        cursor.jump(b"d")
        assert [k for k, _ in cursor] == [b"e"]
        assert list(db.cursor()) == [(b"c", b"C"), (b"e", b"E")]


def test_hash_engines_refuse_key_order(tmp_path):
    with kura.open(tmp_path / "h.kuh", "c") as db:
        fill(db, [b"a", b"b"])
        with pytest.raises(kura.NotOrderedError):
            db.range()
        cursor = db.cursor()
        with pytest.raises(kura.NotOrderedError):
            cursor.last()
        with pytest.raises(TypeError):  # NotOrderedError is a TypeError too
            cursor.previous()
        # Forward cursors work on every engine.
        assert sorted(cursor) == [(b"a", b"A"), (b"b", b"B")]
        assert cursor.jump(b"b") and cursor.value() == b"B"


def test_cursor_after_close_raises(ordered):
    path, params = ordered
    db = kura.open(path, "c", **params)
    fill(db, [b"a"])
    cursor = db.cursor()
    keys = iter(db)
    db.close()
    with pytest.raises(kura.ClosedError):
        cursor.first()
    with pytest.raises(kura.ClosedError):
        next(keys)
