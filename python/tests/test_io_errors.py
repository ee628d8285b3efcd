"""I/O failures raise OSError subclasses naming the file: a missing directory, a file the
user may not write (permission bits, which root ignores: as root a read-only mount stands
in), and a full disk (a file-size limit in a child process)."""

import errno
import os
import subprocess
import sys
import textwrap

import pytest

import kura


def run_child(code, file_size_limit=None):
    """Runs `code` in a fresh interpreter, optionally under RLIMIT_FSIZE."""

    def limit():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        preexec_fn=limit if file_size_limit else None,
        timeout=120,
    )


def test_missing_directory_is_file_not_found_with_the_path(tmp_path):
    path = tmp_path / "no-such-dir" / "db.kuh"
    with pytest.raises(FileNotFoundError) as caught:
        kura.open(path, "c")
    assert isinstance(caught.value, kura.Error)
    assert caught.value.errno == errno.ENOENT
    assert str(path) in str(caught.value)


def test_permission_denied_is_permission_error_with_the_path(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores permission bits (the Rust tests check this as nobody)")
    db = tmp_path / "db.kuh"
    with kura.open(db, "c") as handle:
        handle[b"k"] = b"v"
    db.chmod(0o444)
    with pytest.raises(PermissionError) as caught:
        kura.open(db, "w")
    assert isinstance(caught.value, kura.FileError) and caught.value.errno == errno.EACCES
    assert str(db) in str(caught.value)
    with kura.open(db, "r") as handle:
        assert handle[b"k"] == b"v"


def test_read_only_file_system_is_an_os_error_with_the_path(tmp_path):
    """A read-only mount stops root too: a writer gets OSError(EROFS), a reader reads."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "db.kuh"
    with kura.open(db, "c") as handle:
        handle[b"k"] = b"v"
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount here: {mounted.stderr.decode()[-200:]}")
    try:
        for path, mode in [(db, "w"), (folder / "new.kuh", "c")]:
            with pytest.raises(OSError) as caught:
                kura.open(path, mode)
            assert isinstance(caught.value, kura.FileError), caught.value
            assert caught.value.errno in (errno.EROFS, errno.EACCES), caught.value
            assert str(path) in str(caught.value)
        with kura.open(db, "r") as handle:
            assert handle[b"k"] == b"v"
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("extension, params", [("kuh", {"num_buckets": 1000}), ("kut", {}), ("kumt", {})])
def test_full_disk_is_an_os_error_and_committed_records_survive(tmp_path, extension, params):
    db = tmp_path / f"db.{extension}"
    result = run_child(
        f"""
        import errno, kura
        value = bytes(range(256)) * 6
        committed = 0
        try:
            with kura.open({str(db)!r}, "c", **{params!r}) as handle:
                for i in range(100000):
                    handle[b"key%06d" % i] = value
                    if (i + 1) % 20 == 0:
                        handle.sync(True)
                        committed = i + 1
        except OSError as e:
            assert e.errno in (errno.EFBIG, errno.ENOSPC), e
            assert {str(db)!r} in str(e), e
            print(committed)
        else:
            raise SystemExit("never full")
        """,
        file_size_limit=2 << 20,
    )
    assert result.returncode == 0, result.stderr
    committed = int(result.stdout.split()[-1])
    assert committed > 0
    with kura.open(db, "w") as handle:
        for i in range(committed):
            assert handle[b"key%06d" % i] == bytes(range(256)) * 6
        handle[b"after"] = b"space came back"
