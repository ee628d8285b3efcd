"""Read-modify-write helpers and atomic batches."""

import random

import pytest

import kura


def test_compare_exchange(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        assert db.compare_exchange(b"k", None, b"1")
        assert not db.compare_exchange(b"k", None, b"2")
        assert not db.compare_exchange(b"k", b"0", b"2")
        assert db.compare_exchange(b"k", b"1", b"2")
        assert db[b"k"] == b"2"
        assert db.compare_exchange(b"k", b"2", None)
        assert b"k" not in db


def test_increment_and_append(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        assert db.increment(b"n") == 1
        assert db.increment(b"n", 10) == 11
        assert db.increment(b"m", -1, initial=100) == 99
        assert db[b"n"] == (11).to_bytes(8, "big")
        db[b"s"] = b"abc"
        with pytest.raises(kura.Error):
            db.increment(b"s")
        db.append(b"list", b"a")
        db.append(b"list", b"b", b",")
        db.append(b"list", "c", ",")
        assert db[b"list"] == b"a,b,c"
        assert db.set(b"new", b"1") and not db.set(b"new", b"2", overwrite=False)
        assert db[b"new"] == b"1"


def test_process(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        seen = []
        db.process(b"k", lambda old: seen.append(old))
        assert seen == [None] and b"k" not in db
        db.process(b"k", lambda old: b"first")
        db.process(b"k", lambda old: old + b"+more")
        assert db[b"k"] == b"first+more"
        db.process(b"k", lambda old: False)
        assert b"k" not in db
        with pytest.raises(ZeroDivisionError):
            db.process(b"k", lambda old: 1 / 0)
        with pytest.raises(TypeError):
            db.process(b"k", lambda old: 5)


def test_batch_applies_all_or_nothing(tmp_path):
    with kura.open(tmp_path / "b.kut", "c") as db:
        db[b"gone"] = b"x"
        with db.batch() as batch:
            batch[b"a"] = b"1"
            batch.set(b"b", b"2")
            del batch[b"gone"]
            assert len(batch) == 3
            assert b"a" not in db  # not applied before the block ends
        assert dict(db.items()) == {b"a": b"1", b"b": b"2"}
        with pytest.raises(RuntimeError):
            with db.batch() as batch:
                batch[b"c"] = b"3"
                raise RuntimeError("abandon")
        assert b"c" not in db
    with kura.open(tmp_path / "b.kut", "r") as db:
        assert dict(db.items()) == {b"a": b"1", b"b": b"2"}


def test_batch_on_every_engine_matches_a_dict(engine):
    """Every engine takes a batch (atomic on the tree, in order on the others): random
    batches of sets and removes, repeated keys included, leave what a dict applying the same
    operations in order holds; a batch whose block raises leaves nothing."""
    path, params = engine
    rng = random.Random(str(path))
    with kura.open(path, "c", **params) as db:
        model = {}
        for _ in range(40):
            ops = [(b"k%d" % rng.randrange(30), rng.choice([None, b"v%d" % rng.randrange(99)]))
                   for _ in range(rng.randrange(12))]
            with db.batch() as batch:
                for key, value in ops:
                    if value is None:
                        del batch[key]
                    else:
                        batch[key] = value
                assert len(batch) == len(ops)
            for key, value in ops:
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            assert dict(db.items()) == model
        with pytest.raises(RuntimeError):
            with db.batch() as batch:
                batch[b"never"] = b"x"
                raise RuntimeError("abandon")
        assert b"never" not in db
