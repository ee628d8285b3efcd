import os
from typing import Any

import kura

error: tuple[type[BaseException], ...]

class Database(kura.Database):
    def keys(self) -> list[Any]: ...  # type: ignore[override]
    def firstkey(self) -> Any | None: ...
    def nextkey(self, key: kura.Data) -> Any | None: ...
    def reorganize(self) -> None: ...

def open(file: str | os.PathLike[str], flag: str = "r", mode: int = 0o666, **params: Any) -> Database: ...
