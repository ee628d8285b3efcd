"""kura.dask: build and load Kura from Dask collections, past one machine's cores
(``pip install kura[dask]``; docs/distributed.md).

- :func:`to_kura` writes a ``dask.bag`` of ``(key, value)`` pairs (or of ``{"key": ...,
  "value": ...}`` dicts) or a ``dask.dataframe`` with key and value columns as one shard set:
  each input partition is split by :func:`kura.shard_of`, one task per shard gathers its
  pieces from every partition and writes its file with :class:`kura.ShardWriter`.
- :func:`read_kura` reads a set back as a bag or a dataframe with one partition per shard.
- :func:`load_servers` loads running ``kura serve`` (or memcached) instances through
  pymemcache's ``HashClient``, one client per partition, ``set_many`` in batches;
  :func:`server_client` is the client that reads them back, routing keys the same way.

Rows are encoded as ``kura import`` encodes JSON lines: a key is bytes, str (UTF-8) or an
integer (its decimal text); ``None`` (or a missing key, or NaN in a dataframe) makes a keyless
row, stored under a generated key (``seed`` makes them reproducible) and so on a shard chosen
by that key's hash; a value that is bytes or str is stored as it is, any other value as its
compact JSON text. A row that fits none of these raises :class:`BadRowError` naming its
partition and row, and the build leaves no shard file behind.

The functions run on whatever scheduler is active: a ``distributed.Client`` (a
``LocalCluster`` or a real cluster), or Dask's local schedulers. On a cluster the set's base
path must be on storage every worker can write and the driver can read (a shared file
system): each shard is written by whichever worker runs its task.
"""

import json
import os

import dask
import dask.bag
from dask import delayed

import kura

# The Kura layout parameters the shard files take apart (kura.open on the whole set).
_SET_PARAMS = ("num_shards", "inner_engine", "engine")


class BadRowError(kura.InvalidArgumentError):
    """A row that cannot be stored: its key or value is of no type Kura stores (the message
    names the partition and the row)."""


def _plain(obj):
    """JSON for numpy scalars and arrays (what a pandas column holds)."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _encode_value(value):
    """A value that is neither bytes nor str, as its compact JSON (as the importer stores it)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_plain).encode()
    except (TypeError, ValueError) as e:
        raise ValueError(f"value {value!r:.80} is not bytes, str or JSON ({e})") from None


def _keyless_prefix(seed, number):
    """Generated keys of partition ``number`` begin with this: the seed (so that a rerun with
    the same seed makes the same keys, and so puts each keyless row on the same shard) and
    the partition; the row number follows."""
    return f"{seed:016x}-{number:06d}-".encode()


def _columns(part, number, key, value):
    """The keys and the values of one input partition, a pandas DataFrame or a list of
    ``(key, value)`` pairs or of dicts, as two lists (a missing key as None)."""
    if hasattr(part, "columns"):
        if value not in part.columns:
            raise BadRowError(f"partition {number}: no value column {value!r} (columns: {list(part.columns)})")
        values = part[value].tolist()
        if key is None:
            return [None] * len(values), values
        if key not in part.columns:
            raise BadRowError(f"partition {number}: no key column {key!r} (columns: {list(part.columns)})")
        keys = part[key]
        if not keys.hasnans:
            return keys.tolist(), values
        # Missing keys (None, NaN, pandas.NA) as None: keyless rows.
        return keys.astype(object).where(keys.notna(), None).tolist(), values
    keys, values = [], []
    for index, row in enumerate(part):
        if isinstance(row, dict):
            if value not in row:
                raise BadRowError(f"partition {number} row {index}: no {value!r} field in {row!r:.80}")
            keys.append(row.get(key) if key is not None else None)
            values.append(row[value])
        elif isinstance(row, (tuple, list)) and len(row) == 2:
            keys.append(row[0] if key is not None else None)
            values.append(row[1])
        else:
            raise BadRowError(f"partition {number} row {index}: {row!r:.80} is not a (key, value) pair")
    return keys, values


def _arrow_buffers(series):
    """A pyarrow-backed string or binary column (``string[pyarrow]``, what
    ``dd.read_csv(engine="pyarrow")`` makes) as the buffers :func:`kura.split_arrow` reads,
    or None for any other column (which goes through Python objects)."""
    if not hasattr(series.array, "__arrow_array__"):
        return None
    import pyarrow

    array = pyarrow.array(series.array)
    if isinstance(array, pyarrow.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if pyarrow.types.is_string(kind) or pyarrow.types.is_binary(kind):
        wide = False
    elif pyarrow.types.is_large_string(kind) or pyarrow.types.is_large_binary(kind):
        wide = True
    else:
        return None
    validity, offsets, data = array.buffers()
    # A column of empty strings may have no data buffer.
    data = data.to_pybytes() if data is not None else b""
    return (len(array), array.offset, validity.to_pybytes() if validity is not None else None, offsets.to_pybytes(), data, wide)


def _arrow_columns(part, key, value):
    """``(keys, values)`` buffers of a dataframe partition whose key (unless ``key`` is None)
    and value columns are Arrow strings or binaries, or None."""
    if not hasattr(part, "columns") or value not in part.columns or (key is not None and key not in part.columns):
        return None
    values = _arrow_buffers(part[value])
    if values is None:
        return None
    if key is None:
        return None, values
    keys = _arrow_buffers(part[key])
    return None if keys is None else (keys, values)


def split_partition(part, number, num_shards, key="key", value="value", seed=0):
    """Input partition ``number`` routed to ``num_shards`` shards: one ``(packed bytes,
    record count)`` per shard (:func:`kura.split_rows`), what :func:`to_kura`'s split tasks
    return and its writer tasks write with ``ShardWriter.write_packed``. Arrow string columns
    go to :func:`kura.split_arrow` as their buffers, without a Python object a row."""
    prefix = _keyless_prefix(seed, number)
    try:
        arrow = _arrow_columns(part, key, value)
        if arrow is not None:
            return tuple(kura.split_arrow(arrow[0], arrow[1], num_shards, prefix))
        keys, values = _columns(part, number, key, value)
        return tuple(kura.split_rows(keys, values, num_shards, prefix, _encode_value))
    except BadRowError:
        raise
    except kura.InvalidArgumentError as e:
        raise BadRowError(f"partition {number} {e}") from None


def _write_shard(base, index, num_shards, params, *pieces):
    """Writes shard ``index`` from its piece of every input partition. A retried task (its
    worker lost) replaces what an earlier attempt left: the driver checked that no set was
    there before the build."""
    expected = sum(count for _, count in pieces)
    writer = kura.ShardWriter(base, index, num_shards, params, overwrite=True, expected_records=expected)
    try:
        for packed, _ in pieces:
            writer.write_packed(packed)
        written = writer.finish()
    except BaseException:
        writer.abort()
        raise
    written["path"] = os.fspath(written["path"])
    return written


def _remove_files(paths):
    """Removes shard files and any journal beside them."""
    for path in paths:
        for leftover in (path, f"{path}.journal"):
            try:
                os.remove(leftover)
            except FileNotFoundError:
                pass


def _existing_set(base, params):
    try:
        return kura.shard_files(base, **params)[1]
    except kura.FileMissingError:
        return []
    except kura.NotFoundError:
        return []


def _compute_all(tasks):
    """Computes `tasks`; when one fails, waits for the others to end before raising (so that
    no writer finishes after the caller cleaned up)."""
    try:
        from distributed import get_client, wait
    except ImportError:
        return list(dask.compute(*tasks))
    try:
        client = get_client()
    except ValueError:
        return list(dask.compute(*tasks))
    futures = client.compute(list(tasks))
    try:
        return client.gather(futures)
    except BaseException:
        wait(futures)
        raise


def _partitions(collection):
    if not hasattr(collection, "to_delayed"):
        raise TypeError(f"expected a dask bag or dataframe, not {type(collection).__name__}")
    return collection.to_delayed()


def to_kura(collection, base, num_shards, params=None, key="key", value="value", seed=0, overwrite=False):
    """Writes ``collection`` as a shard set of ``num_shards`` under ``base`` and returns one
    dict per shard (``path``, ``stored``, ``count``, ``file_size``, ``rebuilt``).

    ``params`` are the set's engine parameters as ``kura.open`` takes them (``inner_engine``,
    ``record_comp``, ...; the inner engine otherwise follows ``base``'s extension). ``key``
    and ``value`` name the dataframe columns or the dict fields (``key=None``: every row is
    keyless). An existing set under ``base`` raises ``kura.DuplicateError`` unless
    ``overwrite=True``, which removes it first. When the build fails (a bad row, a lost
    writer), every shard file it wrote is removed before the error is raised.
    """
    params = dict(params or {})
    base = os.fspath(base)
    kura.shard_path(base, 0, num_shards)  # checks the count
    if params.get("num_shards", num_shards) != num_shards:
        raise kura.InvalidArgumentError(f"num_shards={params['num_shards']} in params but {num_shards} asked")
    existing = _existing_set(base, {k: v for k, v in params.items() if k in ("inner_engine",)})
    if existing and not overwrite:
        raise kura.DuplicateError(f"{base}: a shard set exists ({len(existing)} shards); pass overwrite=True to replace it")
    _remove_files(existing)
    shard_params = {k: v for k, v in params.items() if k != "num_shards"}
    split = [
        delayed(split_partition, nout=num_shards, pure=True)(part, number, num_shards, key, value, seed)
        for number, part in enumerate(_partitions(collection))
    ]
    writes = [
        delayed(_write_shard, pure=False)(base, index, num_shards, shard_params, *[pieces[index] for pieces in split])
        for index in range(num_shards)
    ]
    try:
        return _compute_all(writes)
    except BaseException:
        _remove_files([kura.shard_path(base, index, num_shards) for index in range(num_shards)])
        raise


def _shard_params(params):
    return {k: v for k, v in params.items() if k not in _SET_PARAMS}


def _read_shard(path, engine, params, encoding):
    with kura.open(path, "r", engine=engine, encoding=encoding, **params) as db:
        return list(db.items())


def _read_shard_frame(path, engine, params, encoding):
    import pandas

    records = _read_shard(path, engine, params, encoding)
    return pandas.DataFrame(
        {"key": pandas.Series([k for k, _ in records], dtype=object), "value": pandas.Series([v for _, v in records], dtype=object)}
    )


def read_kura(base, params=None, dataframe=False, encoding=None):
    """The records of the shard set under ``base``: a ``dask.bag`` of ``(key, value)`` (or,
    with ``dataframe=True``, a ``dask.dataframe`` with ``key`` and ``value`` columns), one
    partition per shard, each read by its own task. ``encoding="utf-8"`` gives ``str``."""
    params = dict(params or {})
    engine, paths = kura.shard_files(os.fspath(base), **{k: v for k, v in params.items() if k == "inner_engine"})
    shard_params = _shard_params(params)
    paths = [os.fspath(path) for path in paths]
    if not dataframe:
        return dask.bag.from_delayed([delayed(_read_shard)(path, engine, shard_params, encoding) for path in paths])
    import dask.dataframe as dd
    import pandas

    meta = pandas.DataFrame({"key": pandas.Series([], dtype=object), "value": pandas.Series([], dtype=object)})
    parts = [delayed(_read_shard_frame)(path, engine, shard_params, encoding) for path in paths]
    return dd.from_delayed(parts, meta=meta)


class LoadError(kura.Error):
    """A server refused or lost keys during :func:`load_servers` (the message names the
    partition and the first key)."""


def server_client(servers, **options):
    """pymemcache's ``HashClient`` over ``servers`` (``(host, port)`` pairs or ``"host:port"``)
    with ``options``: :func:`load_servers` loads through it, and reads made through one built
    alike, or through a plain ``HashClient``, find every key on the server it was stored on.
    Its hasher is :class:`kura.RendezvousHash` (pymemcache's own choice of server, in Rust)
    unless ``options`` name another."""
    from pymemcache.client.hash import HashClient

    options.setdefault("hasher", kura.RendezvousHash)
    return HashClient([_server(server) for server in servers], **options)


def _server(server):
    if isinstance(server, str):
        host, _, port = server.rpartition(":")
        return (host, int(port))
    return tuple(server)


def _by_server(hasher, records):
    """``{node: {key: value}}`` of ``records`` as ``hasher`` routes their keys."""
    if isinstance(hasher, kura.RendezvousHash):
        return hasher.split_many(records)
    groups = {}
    for key, value in records:
        groups.setdefault(hasher.get_node(key), {})[key] = value
    return groups


def _load_partition(part, number, servers, batch, key, value, seed, options):
    ((packed, _),) = split_partition(part, number, 1, key, value, seed)
    records = kura.unpack_rows(packed)
    client = server_client(servers, **options)
    # Each batch split among the servers in one call (the client's hasher routes as
    # HashClient does) and each server's part pipelined to it by its own client.
    try:
        for start in range(0, len(records), batch):
            chunk = records[start : start + batch]
            for node, values in _by_server(client.hasher, chunk).items():
                failed = client.clients[node].set_many(values, noreply=False)
                if failed:
                    raise LoadError(
                        f"partition {number}: {len(failed)} of {len(values)} keys were not stored by {node} "
                        f"(first: {failed[0]!r:.80})"
                    )
    finally:
        client.close()
    return len(records)


def load_servers(collection, servers, batch=64, key="key", value="value", seed=0, client_options=None):
    """Stores every row of ``collection`` in the memcached-protocol servers ``servers``
    (``kura serve`` or memcached) and returns the rows stored per input partition. Each
    partition's task opens its own :func:`server_client` and sends ``set_many`` requests of
    ``batch`` rows (pymemcache splits each among the servers and pipelines each server's
    part). Rows are encoded as :func:`to_kura` encodes them. A key a server does not store
    raises :class:`LoadError`."""
    if batch < 1:
        raise kura.InvalidArgumentError("batch must be at least 1")
    options = dict(client_options or {})
    servers = [_server(server) for server in servers]
    loads = [
        delayed(_load_partition, pure=False)(part, number, servers, batch, key, value, seed, options)
        for number, part in enumerate(_partitions(collection))
    ]
    return _compute_all(loads)
