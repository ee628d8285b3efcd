"""Kura: embedded key-value databases as Python mappings.

    import kura
    with kura.open("casket.kuh", "c", record_comp="zstd") as db:
        db[b"apple"] = b"red"          # str is accepted too, encoded as UTF-8
        print(db[b"apple"])            # b'red'; a missing key raises KeyError
        for key, value in db.items():
            ...

The engine follows the file's extension (``.kuh`` hash, ``.kut`` tree, ...: each engine's
``extension`` in ``kura.engines()``, from the library's registry) or ``engine=``. Ordered
engines (``ordered`` in ``kura.engines()``: tree, baby) also have
``db.range(start, stop, reverse=False, prefix=None, inclusive=False, keys_only=False)``
(``stop`` excluded unless ``inclusive=True``) and cursors that move backwards; every engine has
``db.keys(prefix=...)`` and ``db.items(prefix=...)``; the tree has atomic
``db.batch()``. ``kura.dbm`` gives the interface of Python's ``dbm`` modules (for ``shelve``).
"""

from collections.abc import ItemsView, KeysView, MutableMapping, ValuesView

from . import _kura
from . import errors as _errors
from .errors import (
    BrokenDataError,
    ClosedError,
    DuplicateError,
    Error,
    FileError,
    FileMissingError,
    InfeasibleError,
    InternalError,
    InvalidArgumentError,
    LimitError,
    LockedError,
    NotFoundError,
    NotOrderedError,
)

Batch = _kura.Batch
Cursor = _kura.Cursor
import_file = _kura.import_file
check = _kura.check
engine_of_file = _kura.engine_of_file
# Routing for loaders that split rows among shards themselves (kura.dask, docs/distributed.md).
shard_of = _kura.shard_of
shard_path = _kura.shard_path
shard_files = _kura.shard_files
split_rows = _kura.split_rows
unpack_rows = _kura.unpack_rows
split_arrow = _kura.split_arrow
# pymemcache's node choice in Rust: HashClient(servers, hasher=kura.RendezvousHash).
RendezvousHash = _kura.RendezvousHash
ShardWriter = _kura.ShardWriter
EXTENSIONS = dict(_kura.EXTENSIONS)
# The engine kura.dbm opens a name of no engine's extension as (the registry's default).
DEFAULT_ENGINE = _kura.DEFAULT_ENGINE


def engines():
    """The engines, from the library's registry: one dict each, with ``name``, ``class``,
    ``extension``, ``storage`` (``file`` or ``memory``), ``ordered`` (whatever its
    parameters), ``order`` (``ordered``, ``unordered`` or ``as shards``: a shard set of trees
    is ordered), ``params`` (the parameters ``open`` takes), ``codec_param`` (the parameter
    naming its codec, or None), ``sized_by`` (the parameters that size a new database),
    ``magic`` ((offset, bytes) pairs every file of it starts with), ``shard_set``, ``restore``
    (whether a damaged file can be salvaged), ``after_power_loss`` (what a power loss leaves
    of the writes since the last durable commit: ``commit prefix``, ``each record``, ``last
    snapshot`` or ``as shards``) and ``summary``: the description
    ``kura engines --json`` and Ruby's ``Kura.engines`` show too."""
    return [
        dict(engine, params=list(engine["params"]), sized_by=list(engine["sized_by"]), magic=list(engine["magic"]))
        for engine in _kura.ENGINES
    ]
__version__ = _kura.__version__


class _ItemsView(ItemsView):
    __slots__ = ()

    def __iter__(self):
        return self._mapping._iter_items()


class _ValuesView(ValuesView):
    __slots__ = ()

    def __iter__(self):
        return self._mapping._iter_values()


class Database(_kura.Database, MutableMapping):
    """An open Kura database: a ``MutableMapping`` of bytes to bytes.

    Create one with :func:`open`. The mapping methods (``[]``, ``in``, ``len``, ``get``,
    ``setdefault``, ``pop``, ``clear``, iteration) run in the engine; ``keys()``, ``values()``
    and ``items()`` are live views; ``update`` and ``popitem`` come from ``MutableMapping``.
    """

    __slots__ = ()

    def keys(self, prefix=None):
        """A live view of the keys; with ``prefix``, an iterator over the keys that begin
        with it (in key order on ordered engines, found by a seek; on the others by reading
        every key)."""
        if prefix is None:
            return KeysView(self)
        return self._with_prefix(prefix, keys_only=True)

    def values(self):
        """A live view of the values."""
        return _ValuesView(self)

    def items(self, prefix=None):
        """A live view of the ``(key, value)`` pairs; with ``prefix``, an iterator over the
        pairs whose keys begin with it (as for ``keys``)."""
        if prefix is None:
            return _ItemsView(self)
        return self._with_prefix(prefix, keys_only=False)

    def _with_prefix(self, prefix, keys_only):
        if self.ordered:
            return self.range(prefix=prefix, keys_only=keys_only)
        # No key order to seek in: every key is read and compared. Compared as given, so a
        # str prefix goes with a database opened with an encoding, bytes with one without.
        if keys_only:
            return (key for key in self if key.startswith(prefix))
        return ((key, value) for key, value in self._iter_items() if key.startswith(prefix))

    def __reversed__(self):
        """The keys from the last down, on ordered engines (``reversed(db)``); the others
        raise :class:`NotOrderedError` at once."""
        records = self.range(reverse=True)
        return (key for key, _ in records)

    def __ior__(self, other):
        """``db |= other``: ``update``, as for a ``dict`` (PEP 584). There is no ``db | other``,
        which would copy every record into a new mapping."""
        self.update(other)
        return self

    # A database is a handle, not a value: equal only to itself, and hashable by identity
    # (MutableMapping would compare contents record by record and make it unhashable).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__


def open(path, mode="r", **params):
    """Opens a database and returns a :class:`Database`.

    ``mode`` is one of ``"r"`` (read only, the file must exist), ``"w"`` (read and write, the
    file must exist), ``"c"`` (read and write, created if missing) and ``"n"`` (always a new,
    empty database), as for Python's ``dbm``.

    Keyword parameters go to the engine, e.g. ``record_comp="zstd"``, ``num_buckets=1000000``,
    ``engine="tree"``, ``max_page_size=8192``, ``cap_rec_num=100000``; an unknown name raises
    :class:`InvalidArgumentError`. Two are the binding's own: ``encoding="utf-8"`` returns keys
    and values as ``str`` decoded with that encoding (``bytes`` otherwise), and
    ``release_gil=True/False`` forces whether record calls release the GIL (by default they
    do when records are compressed, so that threads decompress in parallel; I/O calls such
    as ``sync``, ``rebuild`` and ``close`` always do).
    """
    return Database(path, mode, **params)


__all__ = ["open", "engines", "import_file", "check", "engine_of_file", "Database", "Cursor", "Batch", "EXTENSIONS", "DEFAULT_ENGINE", *_errors.__all__]

# `kura.dbm` is usable right after `import kura`, as in `shelve.Shelf(kura.dbm.open(...))`.
from . import dbm  # noqa: E402  (imported last: it uses the names above)
