"""kura.dbm: the interface of Python's dbm modules, and shelve on top of it."""

import os
import shelve

import pytest

import kura
import kura.dbm


def test_shelve_round_trip(tmp_path):
    path = str(tmp_path / "shelf")
    value = {"list": [1, 2.5, "three"], "nested": {"set": {1, 2}}, "bytes": b"\x00\xff"}
    with shelve.Shelf(kura.dbm.open(path, "c")) as shelf:
        shelf["config"] = value
        shelf["ünïcode"] = 42
        assert "config" in shelf
    with shelve.Shelf(kura.dbm.open(path, "r")) as shelf:
        assert shelf["config"] == value
        assert shelf["ünïcode"] == 42
        assert sorted(shelf) == ["config", "ünïcode"]
        assert len(shelf) == 2
    with shelve.Shelf(kura.dbm.open(path, "w"), writeback=True) as shelf:
        shelf["config"]["list"].append(4)
        del shelf["ünïcode"]
    with shelve.Shelf(kura.dbm.open(path, "r")) as shelf:
        assert shelf["config"]["list"] == [1, 2.5, "three", 4]
        assert "ünïcode" not in shelf


def test_flags_like_dbm(tmp_path):
    path = str(tmp_path / "flags.db")
    with pytest.raises(kura.dbm.error):
        kura.dbm.open(path, "r")  # r: the file must exist
    with pytest.raises(kura.dbm.error):
        kura.dbm.open(path, "w")  # w too
    with kura.dbm.open(path, "c") as db:  # c: created
        db[b"a"] = b"1"
    with kura.dbm.open(path, "c") as db:  # c: kept when it exists
        assert db[b"a"] == b"1"
    with kura.dbm.open(path, "w") as db:
        db[b"b"] = b"2"
    with kura.dbm.open(path, "r") as db:  # r: refuses writes
        assert db.keys() == [b"a", b"b"] or sorted(db.keys()) == [b"a", b"b"]
        with pytest.raises(kura.dbm.error):
            db[b"c"] = b"3"
    with kura.dbm.open(path, "n") as db:  # n: truncated
        assert len(db) == 0
    with kura.dbm.open(path, "cf") as db:  # gnu modifiers are accepted
        db[b"x"] = b"y"
    with kura.dbm.open(path, "ws") as db:
        db[b"z"] = b"w"
        assert sorted(db.keys()) == [b"x", b"z"]
    with pytest.raises(kura.dbm.error):
        kura.dbm.open(path, "q")


def test_dbm_object_interface(tmp_path):
    with kura.dbm.open(tmp_path / "obj.db", "c") as db:
        db["text"] = "str keys and values are encoded"
        assert db[b"text"] == b"str keys and values are encoded"
        assert isinstance(db.keys(), list)
        assert db.get(b"missing") is None
        assert db.get(b"missing", b"d") == b"d"
        assert db.setdefault(b"sd") == b""
        assert db.setdefault(b"sd", b"other") == b""
        assert db.setdefault(b"sd2", b"val") == b"val"
        assert db.firstkey() in db
        seen, key = [], db.firstkey()
        while key is not None:
            seen.append(key)
            key = db.nextkey(key)
        assert sorted(seen) == sorted(db.keys())
        db.reorganize()
        db.sync()
        with pytest.raises(KeyError):
            db[b"missing"]


def test_engine_by_extension_and_file_mode(tmp_path):
    with kura.dbm.open(tmp_path / "ordered.kut", "c") as db:
        assert db.engine == "tree"
    with kura.dbm.open(tmp_path / "plain.db", "c", mode=0o600) as db:
        assert db.engine == "hash"
    assert os.stat(tmp_path / "plain.db").st_mode & 0o777 == 0o600 & ~_umask()
    with kura.dbm.open(tmp_path / "plain.db", "r") as db:
        assert isinstance(db, kura.Database)


def _umask():
    current = os.umask(0)
    os.umask(current)
    return current


def test_dbm_module_is_reachable_from_the_package(tmp_path):
    """`import kura` alone makes `kura.dbm` usable, as in shelve.Shelf(kura.dbm.open(...))."""
    import subprocess
    import sys

    script = (
        "import kura, shelve, sys\n"
        "with shelve.Shelf(kura.dbm.open(sys.argv[1], 'c')) as shelf:\n"
        "    shelf['config'] = {'threads': 2}\n"
        "with shelve.Shelf(kura.dbm.open(sys.argv[1], 'r')) as shelf:\n"
        "    assert shelf['config'] == {'threads': 2}\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "objects.kuh")], check=True)


# Methods of kura.Database that never write (everything else must sync under flag "s").
_READ_ONLY = {
    "__contains__", "__getitem__", "__iter__", "__len__", "__enter__", "__exit__", "__repr__",
    "__reversed__", "get", "get_many", "keys", "values", "items", "cursor", "range", "count",
    "file_size", "should_be_rebuilt", "inspect", "sync", "close", "rebuild",
    "firstkey", "nextkey", "reorganize", "_iter_items", "_iter_values", "_walked", "_with_prefix",
}


def test_sync_flag_syncs_after_every_write(tmp_path):
    """With flag "s", each call that writes is followed by a sync: every writing method of the
    engine and MutableMapping's update and popitem, checked by counting the syncs."""
    syncs = []

    class Counting(kura.dbm._SyncedDatabase):
        __slots__ = ()

        def sync(self, hard=False):
            syncs.append(hard)
            super().sync(hard)

    writers = {name for name in dir(kura.Database) if callable(getattr(kura.Database, name))
               and not (name.startswith("__") and name not in ("__setitem__", "__delitem__"))
               and name not in _READ_ONLY}
    wrapped = set(kura.dbm._WRITES) | {"update", "popitem", "batch"}
    assert writers <= wrapped, f"writing methods that flag 's' does not sync: {writers - wrapped}"

    db = Counting(str(tmp_path / "synced.kuh"), "c")
    calls = [
        lambda: db.__setitem__(b"a", b"1"),
        lambda: db.set(b"b", b"2"),
        lambda: db.setdefault(b"c", b"3"),
        lambda: db.update({b"d": b"4"}),
        lambda: db.append(b"a", b"+"),
        lambda: db.increment(b"n", 1),
        lambda: db.compare_exchange(b"b", b"2", b"two"),
        lambda: db.process(b"c", lambda value: b"three"),
        lambda: db.pop(b"d"),
        lambda: db.__delitem__(b"a"),
        lambda: db.popitem(),
        lambda: db.clear(),
        lambda: _apply(db.batch(), {b"e": b"5"}),
    ]
    for number, call in enumerate(calls, 1):
        call()
        assert len(syncs) >= number, f"call {number} wrote without a sync"
    db.close()
    with kura.dbm.open(tmp_path / "synced.kuh", "cs") as db:
        assert isinstance(db, kura.dbm.Database)
        db[b"k"] = b"v"
    with kura.dbm.open(tmp_path / "synced.kuh", "r") as db:
        assert db[b"k"] == b"v"


def _apply(batch, records):
    with batch as open_batch:
        for key, value in records.items():
            open_batch[key] = value


@pytest.mark.parametrize("extension", ["kuh", "kut", "kumt", "kumb"])
def test_walk_that_deletes_as_it_goes(tmp_path, extension):
    """The dbm.gnu loop that deletes keys while walking with firstkey/nextkey visits every key
    once, on hash and ordered engines alike, and leaves exactly the kept ones."""
    keys = [b"k%03d" % i for i in range(300)]
    with kura.dbm.open(tmp_path / f"walk.{extension}", "c") as db:
        for key in keys:
            db[key] = key
        seen, key = [], db.firstkey()
        while key is not None:
            seen.append(key)
            if int(key[1:]) % 3:
                del db[key]
            key = db.nextkey(key)
        assert sorted(seen) == keys
        assert sorted(db.keys()) == [k for k in keys if int(k[1:]) % 3 == 0]
        if db.ordered:
            # A key the walk did not give starts a new one just above it, present or not.
            assert db.nextkey(b"k001") == b"k003"
            assert db.nextkey(b"k003") == b"k006"
            assert db.nextkey(b"k999") is None


def test_whichdb_tells_kura_files(tmp_path):
    for engine in kura.engines():
        if engine["name"] == "shard":
            continue
        path = tmp_path / f"which.{engine['extension']}"
        params = {"cap_rec_num": 100} if "cap_rec_num" in engine["params"] else {}
        with kura.open(path, "c", **params) as db:
            db[b"k"] = b"v"
        assert kura.dbm.whichdb(path) == "kura.dbm", engine["name"]
        # Told by the first bytes, not the name.
        renamed = tmp_path / f"renamed-{engine['name']}"
        path.rename(renamed)
        assert kura.engine_of_file(renamed) == engine["name"]
        assert kura.dbm.whichdb(renamed) == "kura.dbm", engine["name"]
        # The description's marks are the file's bytes at their offsets.
        head = renamed.read_bytes()
        assert engine["magic"], engine["name"]
        for offset, mark in engine["magic"]:
            assert head[offset : offset + len(mark)] == mark, engine["name"]
        assert set(engine["sized_by"]) <= set(engine["params"]), engine["name"]
        assert engine["order"] == ("ordered" if engine["ordered"] else "unordered"), engine["name"]
    with kura.open(tmp_path / "set.kut", "c", num_shards=3) as db:
        db[b"k"] = b"v"
    assert kura.dbm.whichdb(tmp_path / "set.kut") == "kura.dbm"
    assert kura.engine_of_file(tmp_path / "set.kut") == "shard"
    shard = next(engine for engine in kura.engines() if engine["name"] == "shard")
    assert (shard["order"], shard["magic"], shard["shard_set"]) == ("as shards", [], True)
    # What a power loss leaves: the file engines' own promises, the memory engines' snapshot.
    promises = {engine["name"]: engine["after_power_loss"] for engine in kura.engines()}
    assert (promises["tree"], promises["hash"], promises["shard"]) == ("commit prefix", "each record", "as shards")
    assert {promises[e["name"]] for e in kura.engines() if e["storage"] == "memory"} == {"last snapshot"}
    with kura.open(tmp_path / "set.kut", "r") as db:
        assert db.ordered, "a set of trees is ordered, as its entry's order says"
    (tmp_path / "other").write_bytes(b"GDBM and friends start otherwise")
    assert kura.dbm.whichdb(tmp_path / "other") == ""
    (tmp_path / "empty").write_bytes(b"")
    assert kura.dbm.whichdb(tmp_path / "empty") == ""
    assert kura.engine_of_file(tmp_path / "empty") is None
    assert kura.dbm.whichdb(tmp_path / "missing") is None
    assert kura.dbm.whichdb(tmp_path) is None


def test_setdefault_without_a_default_follows_the_encoding(tmp_path):
    with kura.open(tmp_path / "text.kuh", "c", encoding="utf-8") as db:
        assert db.setdefault("k") == ""
        assert db["k"] == ""
        assert db.setdefault("k", "other") == ""
    with kura.dbm.open(tmp_path / "bytes.kuh", "c") as db:
        assert db.setdefault(b"k") == b""


def test_a_shard_set_without_an_extension_is_not_hidden(tmp_path):
    """A name without a known extension opens as a hash file, except where a shard set lies
    under it: an empty hash file created there hid the set from every later open."""
    base = str(tmp_path / "objects")
    with kura.open(base, "c", engine="shard", num_shards=2) as db:
        db[b"k"] = b"v"
    with kura.dbm.open(base, "c") as db:
        assert db[b"k"] == b"v"
    assert not os.path.exists(base)
    assert kura.dbm.whichdb(base) == "kura.dbm"
