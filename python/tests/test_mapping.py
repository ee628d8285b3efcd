"""The mapping protocol of every engine, checked against a plain dict."""

import collections.abc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kura

KEYS = st.binary(max_size=6) | st.sampled_from([b"", b"a", b"b", b"\x00", b"\xff" * 3])
VALUES = st.binary(max_size=40) | st.binary(min_size=200, max_size=3000)

# One operation of a random sequence: a name and its arguments.
OPS = st.one_of(
    st.tuples(st.just("set"), KEYS, VALUES),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("del"), KEYS),
    st.tuples(st.just("contains"), KEYS),
    st.tuples(st.just("pop"), KEYS),
    st.tuples(st.just("setdefault"), KEYS, VALUES),
    st.tuples(st.just("update"), st.dictionaries(KEYS, VALUES, max_size=5)),
    st.tuples(st.just("len")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("reopen")),
)


def apply(db, model, op):
    """Runs one operation on both and checks that they agree."""
    name, *args = op
    if name == "set":
        db[args[0]] = args[1]
        model[args[0]] = args[1]
    elif name == "get":
        assert db.get(args[0]) == model.get(args[0])
        if args[0] in model:
            assert db[args[0]] == model[args[0]]
        else:
            with pytest.raises(KeyError):
                db[args[0]]
    elif name == "del":
        if args[0] in model:
            del db[args[0]]
            del model[args[0]]
        else:
            with pytest.raises(KeyError):
                del db[args[0]]
    elif name == "contains":
        assert (args[0] in db) == (args[0] in model)
    elif name == "pop":
        assert db.pop(args[0], None) == model.pop(args[0], None)
    elif name == "setdefault":
        assert db.setdefault(args[0], args[1]) == model.setdefault(args[0], args[1])
    elif name == "update":
        db.update(args[0])
        model.update(args[0])
    elif name == "len":
        assert len(db) == len(model)
    elif name == "clear":
        db.clear()
        model.clear()
    return db


def check_whole(db, model):
    assert len(db) == len(model)
    assert sorted(db) == sorted(model)
    assert dict(db.items()) == model
    assert sorted(db.values()) == sorted(model.values())
    assert set(db.keys()) == set(model)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, max_size=60))
def test_random_operations_match_a_dict(engine, ops):
    path, params = engine
    model = {}
    db = kura.open(path, "n", **params)
    try:
        for op in ops:
            if op[0] == "reopen":
                db.close()
                db = kura.open(path, "w", **params)
                check_whole(db, model)
            else:
                apply(db, model, op)
        check_whole(db, model)
    finally:
        db.close()


def test_is_a_mutable_mapping(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        assert isinstance(db, collections.abc.MutableMapping)
        db.update({b"a": b"1"}, b=b"2")
        assert db[b"b"] == b"2"
        key, value = db.popitem()
        assert key not in db and value in (b"1", b"2")
        assert len(db) == 1


def test_str_is_encoded_as_utf8_and_results_are_bytes(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        db["clé"] = "valeur é"
        assert db["clé".encode()] == "valeur é".encode()
        assert db["clé"] == "valeur é".encode()
        assert list(db) == ["clé".encode()]
        db[bytearray(b"ba")] = memoryview(b"mv")
        assert db[b"ba"] == b"mv"


def test_encoding_option_returns_str(engine):
    path, params = engine
    with kura.open(path, "c", encoding="utf-8", **params) as db:
        db["ключ"] = "значение"
        assert db["ключ"] == "значение"
        assert dict(db.items()) == {"ключ": "значение"}
        assert db.encoding_name == "utf-8"


def test_persists_after_close(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        for i in range(500):
            db[b"%05d" % i] = b"v%d" % i
        settings = {name: value for name, value in db.inspect().items() if name in params}
    # By its path alone: a file keeps what reopening it needs (a cache its caps).
    with kura.open(path, "r") as db:
        assert len(db) == 500
        assert db[b"00042"] == b"v42"
        assert {name: value for name, value in db.inspect().items() if name in params} == settings


def test_properties_and_maintenance(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        for i in range(100):
            db[b"k%d" % i] = b"x" * i
        assert db.count == 100
        assert db.file_size > 0
        info = db.inspect()
        assert info["count"] == 100 and "class" in info
        db.sync()
        db.sync(hard=True)
        db.rebuild()
        assert len(db) == 100 and db[b"k99"] == b"x" * 99
        assert isinstance(db.should_be_rebuilt(), bool)
        assert db.writable and not db.closed
        assert str(path) in repr(db)
    assert db.closed
    db.close()  # twice is harmless
