"""The exceptions of Kura.

Every failure of the database raises a subclass of :class:`Error`. Some also derive from the
builtin a Python programmer would catch: :class:`FileError` is an ``OSError`` (with
``errno``), :class:`FileMissingError` a ``FileNotFoundError``, :class:`InvalidArgumentError`
and :class:`ClosedError` are ``ValueError``\\ s, :class:`NotOrderedError` is a ``TypeError``.
A missing key raises the builtin ``KeyError``; a key or value of the wrong type ``TypeError``.
"""


class Error(Exception):
    """Base class of every Kura error."""


class NotFoundError(Error, LookupError):
    """A record or cursor position does not exist (outside the mapping protocol)."""


class DuplicateError(Error):
    """A record exists where the call asked not to overwrite one."""


class InvalidArgumentError(Error, ValueError):
    """An argument is malformed: unknown parameter or codec, oversized key, bad flag."""


class BrokenDataError(Error):
    """The file fails a check: bad magic, checksum mismatch, impossible length."""


class LockedError(Error):
    """Another process (or handle) holds the database's lock."""


class FileError(Error, OSError):
    """The operating system failed a file operation; ``errno`` tells which."""


class FileMissingError(FileError, FileNotFoundError):
    """The database file does not exist (opening with mode ``r`` or ``w``)."""


class InfeasibleError(Error):
    """The operation cannot be done in this state (read-only handle, for example)."""


class LimitError(Error):
    """A limit of the format was reached (file larger than ``max_file_size``...)."""


class InternalError(Error):
    """An invariant of Kura's own code did not hold: a bug in Kura, to report (not damaged data)."""


class ClosedError(Error, ValueError):
    """The database was used after ``close()``."""


class NotOrderedError(Error, TypeError):
    """A key-order operation (``range``, ``Cursor.last``...) on a hash or cache engine."""


__all__ = [
    "Error",
    "NotFoundError",
    "DuplicateError",
    "InvalidArgumentError",
    "BrokenDataError",
    "LockedError",
    "FileError",
    "FileMissingError",
    "InfeasibleError",
    "LimitError",
    "InternalError",
    "ClosedError",
    "NotOrderedError",
]
