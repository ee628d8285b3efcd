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
