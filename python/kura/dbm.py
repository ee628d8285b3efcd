"""Kura with the interface of Python's ``dbm`` modules, so that ``dbm``-style code and
``shelve`` work unchanged::

    import shelve, kura.dbm
    with shelve.Shelf(kura.dbm.open("data.kuh", "c")) as shelf:
        shelf["config"] = {"retries": 3}

``open(file, flag='r', mode=0o666, **params)`` opens ``file`` with the engine its extension
names (``.kuh``, ``.kut``, ...) and the hash engine for any other name. The flags are those
of ``dbm``: ``r`` read only, ``w`` read and write, ``c`` create if missing, ``n`` always new;
the ``dbm.gnu`` modifiers ``f`` (fast), ``s`` (sync: write through on every change) and ``u``
(no lock: ignored, Kura always locks) may follow. ``mode`` is the permission of a file
created here (less the umask). Keyword parameters go to the engine as in :func:`kura.open`.
"""

import glob as _glob
import os as _os

import kura as _kura

error = (_kura.Error, OSError)
"""The exceptions ``dbm`` code catches: ``except kura.dbm.error:``."""

_FLAGS = "rwcn"
_MODIFIERS = "fsu"


class Database(_kura.Database):
    """A Kura database with ``dbm``'s conventions: ``keys()`` is a list, ``setdefault``
    stores ``b""`` when no default is given, ``sync()`` writes changes to the file."""

    # The cursor of the current ``firstkey()``/``nextkey()`` walk and the key it last gave.
    __slots__ = ("_walk",)

    def keys(self):
        """All keys, as a list (``dbm`` returns a list, not a view)."""
        return list(self)

    def firstkey(self):
        """The first key of a ``firstkey()``/``nextkey()`` walk (``dbm.gnu``), or None."""
        cursor = self.cursor()
        return self._walked(cursor, cursor.first())

    def nextkey(self, key):
        """The key after ``key`` in the walk (``dbm.gnu``), or None at the end.

        The walk keeps its cursor, so deleting ``key`` before asking for the next one (the
        usual loop that deletes as it walks) neither ends nor skips the walk. A ``key`` the
        walk did not just give starts a new cursor there: on ordered engines at the first key
        above it, present or not; on hash engines at ``key`` itself, so None if it is gone.
        """
        walk = getattr(self, "_walk", None)
        if walk is not None and walk[1] == key:
            return self._walked(walk[0], walk[0].next())
        cursor = self.cursor()
        if self.ordered:
            return self._walked(cursor, cursor.jump_upper(key))
        if not cursor.jump(key):
            return self._walked(cursor, False)
        return self._walked(cursor, cursor.next())

    def _walked(self, cursor, landed):
        """The key ``cursor`` landed on (None when it did not), remembered for ``nextkey``."""
        key = cursor.key() if landed else None
        self._walk = None if key is None else (cursor, key)
        return key

    def reorganize(self):
        """Compacts the file (``dbm.gnu``)."""
        self.rebuild()


class _SyncedDatabase(Database):
    """``flag`` with ``s``: every change is written to the file before the call returns."""

    __slots__ = ()

    def batch(self):
        """A batch that syncs the database once it is applied."""
        return _SyncedBatch(super().batch(), self)


class _SyncedBatch:
    """The batch of a database opened with ``s``: applying it also syncs the database."""

    __slots__ = ("_batch", "_db")

    def __init__(self, batch, db):
        self._batch = batch
        self._db = db

    def __getattr__(self, name):
        return getattr(self._batch, name)

    def __setitem__(self, key, value):
        self._batch[key] = value

    def __delitem__(self, key):
        del self._batch[key]

    def __len__(self):
        return len(self._batch)

    def commit(self):
        self._batch.commit()
        self._db.sync()

    def __enter__(self):
        self._batch.__enter__()
        return self

    def __exit__(self, *exc):
        self._batch.__exit__(*exc)
        if exc[0] is None:
            self._db.sync()
        return False


def _synced(method):
    def call(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        self.sync()
        return result

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


# Every method that writes, from the engine (the rest of MutableMapping's, ``update`` and
# ``popitem``, write through ``__setitem__`` and ``__delitem__``).
_WRITES = ("__setitem__", "__delitem__", "set", "setdefault", "pop", "clear", "compare_exchange",
           "increment", "append", "process")
for _name in _WRITES:
    setattr(_SyncedDatabase, _name, _synced(getattr(Database, _name)))


def _shard_files(path):
    """The shard files of a set under ``path`` (``path-00000-of-00004`` ...), sorted."""
    if _os.path.exists(path):
        return []
    return sorted(_glob.glob(_glob.escape(path) + "-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]"))


def whichdb(filename):
    """``"kura.dbm"`` when ``filename`` is a Kura database (a file of any engine, or the base
    name of a shard set, told by the first bytes of the file or of the set's first shard:
    the library's registry knows each engine's magic), ``""`` when it is some other file,
    None when it cannot be read, as ``dbm.whichdb`` answers."""
    try:
        engine = _kura.engine_of_file(_os.fspath(filename))
    except OSError:
        return None
    return "" if engine is None else "kura.dbm"


def open(file, flag="r", mode=0o666, **params):
    """Opens a database the way ``dbm.open`` does; see the module's docstring."""
    if not flag or flag[0] not in _FLAGS or any(m not in _MODIFIERS for m in flag[1:]):
        raise _kura.InvalidArgumentError(
            f"flag {flag!r}: the first letter is one of r, w, c, n; then f, s, u may follow"
        )
    path = _os.fspath(file)
    if "engine" not in params and not _shard_files(path):
        # A name without a known extension is a hash file, unless it is the base of a shard
        # set: forcing the hash engine there would create an empty file that hides the set.
        extension = _os.path.splitext(path)[1].lstrip(".")
        if extension not in _kura.EXTENSIONS:
            params["engine"] = _kura.DEFAULT_ENGINE
    created = flag[0] == "n" or (flag[0] == "c" and not _os.path.exists(path))
    db = (_SyncedDatabase if "s" in flag[1:] else Database)(path, flag[0], **params)
    if created and _os.path.exists(path):
        umask = _os.umask(0)
        _os.umask(umask)
        try:
            _os.chmod(path, mode & ~umask)
        except OSError:
            pass
    return db


__all__ = ["open", "error", "whichdb", "Database"]
