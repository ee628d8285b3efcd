"""db.get_many: batched reads against a dict model, for every engine; type errors; threads."""

import random
import threading

import pytest
from hypothesis import given, strategies as st

import kura

KEYS = st.binary(min_size=0, max_size=12)


def test_list_and_dict_forms_match_a_dict_model(engine):
    path, params = engine
    rng = random.Random(20)
    model = {}
    with kura.open(path, "c", **params) as db:
        assert db.get_many([]) == []
        assert db.get_many([], as_dict=True) == {}
        for round in range(30):
            for _ in range(100):
                key = b"k%d" % rng.randrange(1500)
                if rng.random() < 0.25:
                    db.pop(key, None)
                    model.pop(key, None)
                else:
                    value = bytes(rng.randrange(256) for _ in range(rng.choice([0, 5, 30, 200])))
                    db[key] = value
                    model[key] = value
            batch = [b"k%d" % rng.randrange(2000) for _ in range(rng.choice([1, 16, 17, 100]))]
            assert db.get_many(batch) == [model.get(key) for key in batch]
            found = {key: model[key] for key in batch if key in model}
            assert db.get_many(batch, as_dict=True) == found
            # Any iterable: a generator, a tuple.
            assert db.get_many(key for key in batch) == [model.get(key) for key in batch]
            assert db.get_many(tuple(batch)) == [model.get(key) for key in batch]
        big = [b"k%d" % rng.randrange(2000) for _ in range(100_000)]
        assert db.get_many(big) == [model.get(key) for key in big]


@given(st.dictionaries(KEYS, st.binary(max_size=40), max_size=40), st.lists(KEYS, max_size=60))
def test_random_batches_equal_per_key_gets(tmp_path_factory, records, batch):
    path = tmp_path_factory.mktemp("gm") / "db.kuh"
    with kura.open(path, "n") as db:
        db.update(records)
        assert db.get_many(batch) == [db.get(key) for key in batch]


def test_str_keys_and_encoding(tmp_path):
    with kura.open(tmp_path / "db.kumt", "c", encoding="utf-8") as db:
        db["ä"] = "ü"
        assert db.get_many(["ä", b"\xc3\xa4", "x"]) == ["ü", "ü", None]
        # The dict keeps the key objects as given.
        assert db.get_many(["ä", "x"], as_dict=True) == {"ä": "ü"}


def test_keys_of_other_types_are_type_errors(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        db[b"a"] = b"1"
        for bad in ([b"a", 1], [None], [b"a", 2.5, b"b"], [[b"a"]]):
            with pytest.raises(TypeError):
                db.get_many(bad)
        with pytest.raises(TypeError):
            db.get_many(b"a")  # one key, not an iterable of keys
        with pytest.raises(TypeError):
            db.get_many("ab")
        with pytest.raises(TypeError):
            db.get_many(5)
    with pytest.raises(kura.ClosedError):
        db.get_many([b"a"])


def test_readers_see_only_values_the_keys_held_while_writers_run(engine):
    path, params = engine
    keys = [b"%05d" % i for i in range(1000)]
    versions = lambda key: {key + b"-%d" % generation for generation in range(4)}
    failures = []
    with kura.open(path, "c", **params) as db:
        for key in keys:
            db[key] = key + b"-0"
        done = threading.Event()

        def writer(seed):
            rng = random.Random(seed)
            for _ in range(3000):
                key = rng.choice(keys)
                db[key] = key + b"-%d" % rng.randrange(4)

        def reader():
            rng = random.Random(3)
            while not done.is_set():
                batch = [rng.choice(keys) for _ in range(64)]
                for key, value in zip(batch, db.get_many(batch)):
                    if value not in versions(key):
                        failures.append((key, value))

        threads = [threading.Thread(target=writer, args=(s,)) for s in range(2)]
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for thread in threads + readers:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        done.set()
        for thread in readers:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in threads + readers), "a thread is stuck"
    assert failures == []
