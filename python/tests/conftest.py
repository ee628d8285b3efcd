"""Shared fixtures: every engine, as (name, file extension, open parameters)."""

import pytest
from hypothesis import settings

# No example database on disk: runs are reproducible from the seed hypothesis prints, and
# nothing is left in the work tree.
settings.register_profile("kura", database=None, deadline=None)
settings.load_profile("kura")

# Each engine once plainly, the file engines once more with compressed records, and shard sets
# of hash and tree files (ordered when their shards are).
ENGINES = [
    pytest.param(("kuh", {}), id="hash"),
    pytest.param(("kuh", {"record_comp": "zstd"}), id="hash-zstd"),
    pytest.param(("kut", {}), id="tree"),
    pytest.param(("kut", {"record_comp": "lz4"}), id="tree-lz4"),
    pytest.param(("kumt", {}), id="tiny"),
    pytest.param(("kumb", {}), id="baby"),
    pytest.param(("kumc", {"cap_rec_num": 1_000_000}), id="cache"),
    pytest.param(("kumz", {"num_buckets": 256}), id="compact"),
    pytest.param(("kuh", {"num_shards": 3}), id="shard-hash"),
    pytest.param(("kut", {"num_shards": 3}), id="shard-tree"),
]

# Engines that keep keys in order.
ORDERED = [
    pytest.param(("kut", {}), id="tree"),
    pytest.param(("kumb", {}), id="baby"),
    pytest.param(("kut", {"num_shards": 3}), id="shard-tree"),
]


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    """(path, params) of a new database file for each engine."""
    extension, params = request.param
    return tmp_path / f"db.{extension}", dict(params)


@pytest.fixture(params=ORDERED)
def ordered(request, tmp_path):
    extension, params = request.param
    return tmp_path / f"db.{extension}", dict(params)
