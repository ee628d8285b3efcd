#!/usr/bin/env bash
# Builds the Python package `kura` and installs it into the repository's virtual
# environment .venv/ (created here if missing), together with what its tests and benchmark
# use: maturin (the builder), pytest and hypothesis, pymemcache, and kura[dask]'s dependencies.
#   python/build.sh            release build, installed into .venv
#   PYTHON=python3.12 python/build.sh   choose the interpreter that creates .venv
# Afterwards: .venv/bin/python -c "import kura"; .venv/bin/python -m pytest python/tests
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/.venv
python=${PYTHON:-python3}
export PATH="$HOME/.cargo/bin:$PATH"

if [ ! -x "$venv/bin/python" ]; then
	"$python" -m venv "$venv"
fi
# Installed once; a marker file keeps reruns quick.
if [ ! -f "$venv/.kura-python-tools" ]; then
	"$venv/bin/python" -m pip install --quiet --upgrade pip
	"$venv/bin/python" -m pip install --quiet "maturin>=1.7,<2" pytest hypothesis
	touch "$venv/.kura-python-tools"
fi
# pymemcache: its own integration tests run against `kura serve` (python/tests/test_serve_pymemcache.py).
"$venv/bin/python" -c "import pymemcache" 2>/dev/null || "$venv/bin/python" -m pip install --quiet pymemcache
# kura[dask]'s dependencies, read from pyproject.toml's optional extra: python/tests/test_dask.py
# and bench/dask.py run kura.dask on a LocalCluster.
"$venv/bin/python" -c "import dask.dataframe, distributed, pandas" 2>/dev/null || "$venv/bin/python" -m pip install \
	--quiet $("$venv/bin/python" -c 'import tomllib; print(" ".join(tomllib.load(open("python/pyproject.toml", "rb"))["project"]["optional-dependencies"]["dask"]))')

# A wheel built into target/ and installed over any previous one: the package lands in
# site-packages like any other, with nothing built left inside python/.
wheels=$root/target/wheels/kura-python
rm -rf "$wheels"
(cd "$root/python" && "$venv/bin/maturin" build --release --interpreter "$venv/bin/python" --out "$wheels")
wheel=$(ls "$wheels"/kura-*.whl)
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
"$venv/bin/python" -c "import kura; print('kura', kura.__version__, 'installed in $venv')"
