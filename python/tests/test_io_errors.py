"""I/O failures raise OSError subclasses naming the file: a missing directory, a file or
directory the user may not write (checked as the `nobody` user when the tests run as root,
since root ignores permission bits), and a full disk (a file-size limit in a child process)."""

import errno
import os
import subprocess
import sys
import textwrap

import pytest

import kura


def run_child(code, user=None, file_size_limit=None):
    """Runs `code` in a fresh interpreter, optionally as another user or under RLIMIT_FSIZE."""

    def limit():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        user=user,
        group=user,
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
    tmp_path.chmod(0o755)
    db = tmp_path / "db.kuh"
    with kura.open(db, "c") as handle:
        handle[b"k"] = b"v"
    db.chmod(0o444)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o000)
    user = 65534 if os.geteuid() == 0 else None
    probe = run_child("import kura", user=user)
    if probe.returncode != 0:
        pytest.skip(f"the package cannot be imported as the nobody user here: {probe.stderr[-200:]}")
    result = run_child(
        f"""
        import errno, kura
        for path, mode in [({str(db)!r}, "w"), ({str(closed / 'new.kuh')!r}, "c")]:
            try:
                kura.open(path, mode)
            except PermissionError as e:
                assert isinstance(e, kura.FileError) and e.errno == errno.EACCES, e
                assert path in str(e), e
            else:
                raise SystemExit(f"{{path}} opened with mode {{mode}}")
        with kura.open({str(db)!r}, "r") as handle:
            assert handle[b"k"] == b"v"
        """,
        user=user,
    )
    closed.chmod(0o755)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("extension", ["kuh", "kut", "kumt"])
def test_full_disk_is_an_os_error_and_committed_records_survive(tmp_path, extension):
    db = tmp_path / f"db.{extension}"
    result = run_child(
        f"""
        import errno, kura
        value = bytes(range(256)) * 6
        committed = 0
        try:
            with kura.open({str(db)!r}, "c") as handle:
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
