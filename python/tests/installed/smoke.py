"""Run by python/tests/installed/check.sh with an interpreter of a fresh virtual environment
into which only the built wheel was installed, from a directory outside the repository: the
package must work from site-packages alone, with its metadata and type stubs, and the
example in its long description (python/README.md) must run as printed."""

import importlib.metadata
import os
import pathlib
import re
import sys
import tempfile

import kura

repository = pathlib.Path(sys.argv[1]).resolve()
readme = pathlib.Path(sys.argv[2])
package = pathlib.Path(kura.__file__).resolve().parent
assert repository not in package.parents, f"kura imported from the repository: {package}"
assert "site-packages" in package.parts, package

# Metadata a package index shows: license, classifiers, the README as long description.
meta = importlib.metadata.metadata("kura")
assert meta["Name"] == "kura" and meta["Version"] == kura.__version__, (meta["Name"], meta["Version"])
assert meta["License"] == "Apache-2.0", meta["License"]
classifiers = meta.get_all("Classifier")
assert "License :: OSI Approved :: Apache Software License" in classifiers, classifiers
assert "Typing :: Typed" in classifiers
assert meta["Requires-Python"] == ">=3.9", meta["Requires-Python"]
assert meta["Description-Content-Type"].startswith("text/markdown"), meta["Description-Content-Type"]
assert "kura.open(" in meta.get_payload(), "the README is not the long description"

# PEP 561: the stubs and their marker are installed beside the package.
for name in ("py.typed", "__init__.pyi", "dbm.pyi"):
    assert (package / name).is_file(), f"{name} is not installed"
files = [str(f) for f in importlib.metadata.files("kura")]
assert any("LICENSE" in f for f in files), files

# The long description's example, run as written in a scratch directory.
block = re.search(r"```python\n(.*?)```", readme.read_text(), re.S)
assert block, "no python block in the README"
with tempfile.TemporaryDirectory() as scratch:
    os.chdir(scratch)
    exec(compile(block.group(1), "README.md", "exec"), {})
    with kura.open("fruits.kut") as db:  # the default mode reads
        assert not db.writable
        assert list(db.keys(prefix=b"ap")) == [b"apple", b"apricot"]
        assert list(db.range(b"apple", b"banana", inclusive=True, keys_only=True)) == [
            b"apple",
            b"apricot",
            b"banana",
        ]
    with kura.open("words.kuh", "c", record_comp="zstd") as db:
        db.update({b"k%d" % i: b"v" * 100 for i in range(1000)})
        assert db.inspect()["record_comp"] == "zstd" and len(db) == 1000
    with kura.open("words.kuh") as db:
        assert db.get_many([b"k1", b"nope"]) == [b"v" * 100, None]
print(f"smoke: kura {kura.__version__} from {package} on Python {sys.version.split()[0]}: ok")
