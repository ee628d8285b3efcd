#!/usr/bin/env bash
# Builds what a Python user installs, into target/dist/ (`make wheel`):
#   kura-VERSION-cp39-abi3-PLATFORM.whl  one wheel for CPython 3.9 and every later version
#                                        (pyo3's abi3-py39: CPython's stable ABI)
#   kura-VERSION.tar.gz                  the sdist: python/ plus the Rust crates it builds from;
#                                        `pip install` of it compiles with maturin and cargo
# with the maturin that python/build.sh installs into .venv (run first by `make wheel`). The
# wheel is built with the same arguments as build.sh's, so cargo finds it built already.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$root/.venv
dist=$root/target/dist
export PATH="$HOME/.cargo/bin:$PATH"

mkdir -p "$dist"
rm -f "$dist"/kura-*.whl "$dist"/kura-*.tar.gz
cd "$root/python"
"$venv/bin/maturin" build --release --interpreter "$venv/bin/python" --out "$dist"
"$venv/bin/maturin" sdist --out "$dist"
ls -l "$dist"
