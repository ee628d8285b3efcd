"""CompactDbm opened from Python with no parameter but the engine (issue 42, item 6): random
sets, deletes and gets checked against a dict across the write that trains its dictionary,
then a close and a reopen from the snapshot, which must bring the dictionary back."""

import random

import kura

# Past the default auto-training threshold (65,536 records or 8 MiB, docs/compact.md): about
# 45,000 records of some 300 bytes.
RECORDS = 70_000
WORDS = ["tree", "river", "light", "stone", "night", "garden", "silver", "morning", "gate", "cloud"]


def value(rng):
    """Dictionary-like text: shared structure, varied words."""
    senses = ",".join(
        f'{{"label":"wn","pos":"noun","text":"a {rng.choice(WORDS)} of the {rng.choice(WORDS)} ({rng.randrange(10**6)})"}}'
        for _ in range(rng.randrange(2, 5))
    )
    return f'{{"word":"{rng.choice(WORDS)}","item":[{senses}]}}'.encode()


def test_the_default_compact_dbm_trains_its_dictionary_and_round_trips_through_its_snapshot(tmp_path):
    rng = random.Random(0x6B7A)
    path = tmp_path / "default.kumz"
    model = {}
    with kura.open(path, "c", engine="compact") as db:
        assert db.inspect()["bucket_comp"] == "zstd-dict"
        assert db.inspect()["dict_trained"] is False
        for i in range(RECORDS):
            key = f"w{rng.randrange(RECORDS * 2):07d}".encode()
            choice = rng.randrange(10)
            if choice < 8:
                model[key] = db[key] = value(rng)
            elif choice == 8:
                assert db.pop(key, None) == model.pop(key, None)
            else:
                assert db.get(key) == model.get(key)
        stats = db.inspect()
        assert stats["dict_trained"] is True and stats["dict_trigger"] == "auto", stats
        assert stats["dict_size"] > 0 and stats["dict_trained_records"] >= 1000, stats
        assert len(db) == len(model)
        for key, expected in model.items():
            assert db[key] == expected
    with kura.open(path, "r") as db:
        again = db.inspect()
        for name in ("dict_size", "dict_trigger", "dict_trained_at", "dict_trained_records", "num_buckets"):
            assert again[name] == stats[name], name
        assert dict(db.items()) == model
