"""What every step of the benchmark shares: the repository's paths, where the release
binaries are, the BENCH_* environment switches, logging, and running a program so that a
failure stops the run with the program's output."""

import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "data")
WORK = os.path.join(DATA, "work")
RESULTS = os.path.join(ROOT, "bench", "results")


def release_dir():
    """Where `cargo build --release` put the binaries: $CARGO_TARGET_DIR/release when that is
    set (relative to the repository, as cargo reads it), else target/release."""
    target = os.environ.get("CARGO_TARGET_DIR", "").strip() or "target"
    return os.path.join(ROOT, target, "release")


# KURA_BIN names the `kura` binary to measure when it is not the release build's (for example
# a copy kept apart from a target directory that other builds share).
KURA = os.environ.get("KURA_BIN", "").strip() or os.path.join(release_dir(), "kura")
KURA_CACHE_BENCH = os.path.join(os.path.dirname(KURA), "kura-cache-bench")


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, **kwargs):
    """Runs a command and returns its stdout, stopping the benchmark with the command's
    output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"bench: {' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def run_or_none(command, consequence, **kwargs):
    """Runs a command of an optional part of the benchmark and returns its stdout; None, after
    saying why and what the report goes without (`consequence`), when it cannot start or
    fails."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    except OSError as error:
        log(f"bench: cannot run {command[0]} ({error}); {consequence}")
        return None
    if result.returncode != 0:
        log(f"bench: {' '.join(command)} failed ({result.returncode}); {consequence}:\n"
            f"{result.stderr[-2000:]}")
        return None
    return result.stdout


# A C++ driver's include of a header of its own (`#include "split_mix.h"`).
LOCAL_INCLUDE = re.compile(r'^\s*#include\s+"([^"]+)"')


def driver_is_current(binary, source):
    """Whether the C++ driver `binary` is newer than its `source` and than every header of
    the repository the source includes (`#include "name.h"` found beside it, read from the
    source itself so that no list of headers can fall behind it): else it must be rebuilt."""
    if not os.path.exists(binary):
        return False
    sources = [source]
    with open(source, encoding="utf-8") as text:
        for line in text:
            match = LOCAL_INCLUDE.match(line)
            header = match and os.path.join(os.path.dirname(source), match.group(1))
            if header and os.path.exists(header):
                sources.append(header)
    return os.path.getmtime(binary) >= max(map(os.path.getmtime, sources))


def database_files(path):
    """The files of the database at `path`: the file itself, or a shard set's members
    (`PATH-00000-of-00004` ..., Tkrzw's and Kura's naming), which exist without `path`."""
    members = glob.glob(glob.escape(path) + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]")
    return ([path] if os.path.exists(path) else []) + sorted(members)


def database_bytes(path):
    """Bytes on disk of the database at `path`, every shard of a set counted."""
    files = database_files(path)
    if not files:
        raise FileNotFoundError(f"no database at {path}")
    return sum(os.path.getsize(f) for f in files)


def remove_files(*paths):
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            continue
        for member in database_files(path):
            os.remove(member)


def run_steps(steps, measure, report):
    """The command line of a benchmark script in two steps: `measure` (runs everything, writes
    its JSON), `report` (reads only that JSON), `all` (both, the default)."""
    steps = steps or ["all"]
    for step in steps:
        if step not in ("measure", "report", "all"):
            sys.exit(f"usage: {sys.argv[0]} measure|report|all")
    if "measure" in steps or "all" in steps:
        measure()
    if "report" in steps or "all" in steps:
        report()


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def skipped(part):
    """BENCH_SKIP_<PART> set to anything: that part of the benchmark does not run."""
    return bool(os.environ.get(f"BENCH_SKIP_{part.upper()}", "").strip())


def sequence_repeat():
    """Runs of each sequence configuration per side (BENCH_SEQUENCE_REPEAT, default 3)."""
    return max(1, env_int("BENCH_SEQUENCE_REPEAT", 3))


def repeat():
    """Runs of each dictionary get and thread-scaling measurement (BENCH_REPEAT, default 3)."""
    return max(1, env_int("BENCH_REPEAT", 3))


def repeat_max_s():
    """A run longer than this (BENCH_REPEAT_MAX_S, default 8 s) is not repeated."""
    return env_int("BENCH_REPEAT_MAX_S", 8)
