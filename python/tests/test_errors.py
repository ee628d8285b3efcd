"""Errors: each failure raises the exception a Python programmer would catch."""

import os
import subprocess
import sys
import textwrap

import pytest

import kura
import kura.dbm


def test_missing_file_with_r_or_w(tmp_path):
    for mode in ("r", "w"):
        with pytest.raises(FileNotFoundError) as caught:
            kura.open(tmp_path / "missing.kuh", mode)
        assert isinstance(caught.value, kura.Error)
        assert isinstance(caught.value, kura.dbm.error)
        assert caught.value.errno == 2
    assert not (tmp_path / "missing.kuh").exists()


def test_wrong_types(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        with pytest.raises(TypeError):
            db[1] = 2
        with pytest.raises(TypeError):
            db[b"k"] = None
        with pytest.raises(TypeError):
            db[b"k"] = 3.5
        with pytest.raises(TypeError):
            db[None]
        with pytest.raises(TypeError):
            1 in db
        with pytest.raises(TypeError):
            db.get(["list"])
        assert len(db) == 0


def test_bad_mode_and_parameters(tmp_path):
    with pytest.raises(ValueError):
        kura.open(tmp_path / "x.kuh", "x")
    with pytest.raises(kura.InvalidArgumentError):
        kura.open(tmp_path / "x.kuh", "c", no_such_parameter=1)
    with pytest.raises(kura.InvalidArgumentError):
        kura.open(tmp_path / "x.unknown", "c")
    with pytest.raises(TypeError):
        kura.open(tmp_path / "x.kuh", "c", num_buckets=[1])
    with kura.open(tmp_path / "x.data", "c", engine="tree") as db:
        assert db.engine == "tree"


def test_read_only_refuses_writes(engine):
    path, params = engine
    with kura.open(path, "c", **params) as db:
        db[b"k"] = b"v"
    with kura.open(path, "r", **params) as db:
        assert not db.writable
        with pytest.raises(kura.Error):
            db[b"k"] = b"w"
        with pytest.raises(kura.Error):
            del db[b"k"]
        assert db[b"k"] == b"v"


def test_closed_database(engine):
    path, params = engine
    db = kura.open(path, "c", **params)
    db.close()
    with pytest.raises(kura.ClosedError):
        db[b"k"]
    with pytest.raises(ValueError):  # ClosedError is a ValueError, as for closed files
        len(db)
    with pytest.raises(kura.ClosedError):
        with db:
            pass


HOLD_LOCK = textwrap.dedent(
    """
    import sys, kura
    db = kura.open(sys.argv[1], sys.argv[2])
    print("locked", flush=True)
    sys.stdin.read()  # hold the lock until the parent closes our stdin
    db.close()
    """
)


@pytest.mark.parametrize("holder_mode", ["w", "r"])
def test_locked_by_another_process(tmp_path, holder_mode):
    path = tmp_path / "locked.kuh"
    with kura.open(path, "c") as db:
        db[b"k"] = b"v"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), holder_mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(kura.LockedError):
            kura.open(path, "w")
        if holder_mode == "r":
            # Readers share the lock.
            with kura.open(path, "r") as db:
                assert db[b"k"] == b"v"
        else:
            with pytest.raises(kura.LockedError):
                kura.open(path, "r")
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    with kura.open(path, "w") as db:
        assert db[b"k"] == b"v"


@pytest.mark.parametrize("extension", ["kuh", "kut"])
def test_corrupted_file(tmp_path, extension):
    path = tmp_path / f"broken.{extension}"
    with open(path, "wb") as f:
        f.write(b"this is not a database, just some text " * 200)
    with pytest.raises(kura.BrokenDataError):
        kura.open(path, "r")


def test_truncated_file(tmp_path):
    path = tmp_path / "short.kuh"
    with kura.open(path, "c") as db:
        db[b"k"] = b"v"
    data = path.read_bytes()
    path.write_bytes(data[:10])
    with pytest.raises(kura.BrokenDataError):
        kura.open(path, "r")


def test_not_a_regular_file(tmp_path):
    (tmp_path / "dir.kuh").mkdir()
    with pytest.raises(kura.Error):
        kura.open(tmp_path / "dir.kuh", "r")


def test_errors_are_kura_errors():
    for name in kura.errors.__all__:
        assert issubclass(getattr(kura, name), kura.Error)
    assert issubclass(kura.FileError, OSError)
    assert issubclass(kura.InvalidArgumentError, ValueError)
    assert os.strerror(2)


def test_check_reports_damage_and_broken_data_names_the_file(tmp_path):
    """``kura.check`` finds a flipped byte that ``inspect``'s clean-close flag cannot, and
    the error a read then raises names the file (issue 43)."""
    path = tmp_path / "db.kuh"
    with kura.open(path, "c", num_buckets=16) as db:
        for i in range(8):
            db[f"key{i}"] = f"MARKER-{i}-value"
    assert kura.check(path) == {"clean": True, "records": 8, "pages": 0, "problems": 0, "first_problems": []}
    data = bytearray(path.read_bytes())
    data[data.index(b"MARKER-3") + 2] ^= 0x10
    path.write_bytes(bytes(data))
    report = kura.check(path)
    assert not report["clean"] and report["problems"] == 1 and report["records"] == 7
    assert "checksum mismatch" in report["first_problems"][0]
    with kura.open(path, "r") as db:
        with pytest.raises(kura.BrokenDataError, match=str(path)):
            db["key3"]


def test_a_bug_in_kura_has_its_own_class_apart_from_damaged_data():
    assert issubclass(kura.InternalError, kura.Error)
    assert not issubclass(kura.InternalError, kura.BrokenDataError)
    assert "InternalError" in kura.errors.__all__
