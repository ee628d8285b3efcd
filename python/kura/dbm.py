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

import os as _os

import kura as _kura

error = (_kura.Error, OSError)
"""The exceptions ``dbm`` code catches: ``except kura.dbm.error:``."""

_FLAGS = "rwcn"
_MODIFIERS = "fsu"


class Database(_kura.Database):
    """A Kura database with ``dbm``'s conventions: ``keys()`` is a list, ``setdefault``
    stores ``b""`` when no default is given, ``sync()`` writes changes to the file."""

    __slots__ = ()

    def keys(self):
        """All keys, as a list (``dbm`` returns a list, not a view)."""
        return list(self)

    def firstkey(self):
        """The first key of a ``firstkey()``/``nextkey()`` walk (``dbm.gnu``), or None."""
        return next(iter(self), None)

    def nextkey(self, key):
        """The key after ``key`` in the walk (``dbm.gnu``), or None at the end."""
        cursor = self.cursor()
        if not cursor.jump(key):
            return None
        cursor.next()
        return cursor.key()

    def reorganize(self):
        """Compacts the file (``dbm.gnu``)."""
        self.rebuild()


def open(file, flag="r", mode=0o666, **params):
    """Opens a database the way ``dbm.open`` does; see the module's docstring."""
    if not flag or flag[0] not in _FLAGS or any(m not in _MODIFIERS for m in flag[1:]):
        raise _kura.InvalidArgumentError(
            f"flag {flag!r}: the first letter is one of r, w, c, n; then f, s, u may follow"
        )
    path = _os.fspath(file)
    if "engine" not in params:
        extension = _os.path.splitext(path)[1].lstrip(".")
        if extension not in _kura.EXTENSIONS:
            params["engine"] = "hash"
    created = flag[0] == "n" or (flag[0] == "c" and not _os.path.exists(path))
    db = Database(path, flag[0], **params)
    if created and _os.path.exists(path):
        umask = _os.umask(0)
        _os.umask(umask)
        try:
            _os.chmod(path, mode & ~umask)
        except OSError:
            pass
    if "s" in flag[1:]:
        return _SyncedDatabase(db)
    return db


class _SyncedDatabase:
    """``flag`` with ``s``: every change is written to the file before the call returns."""

    def __init__(self, db):
        self._db = db

    def __getattr__(self, name):
        return getattr(self._db, name)

    def __getitem__(self, key):
        return self._db[key]

    def __setitem__(self, key, value):
        self._db[key] = value
        self._db.sync()

    def __delitem__(self, key):
        del self._db[key]
        self._db.sync()

    def __contains__(self, key):
        return key in self._db

    def __len__(self):
        return len(self._db)

    def __iter__(self):
        return iter(self._db)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._db.close()
        return False

    def setdefault(self, key, default=b""):
        value = self._db.setdefault(key, default)
        self._db.sync()
        return value


__all__ = ["open", "error", "Database"]
