#!/usr/bin/env bash
# `make test-wheel` (part of `make test`): installs the wheel `make wheel` built into a fresh
# virtual environment with `pip install --no-index` (nothing but the wheel itself, as on a
# machine with no index) and runs smoke.py from a scratch directory outside the repository,
# once for each CPython that the wheel's stable ABI covers and this machine has (3.9 is the
# oldest, so it is tried first; a missing version is named and skipped). Then checks that the
# sdist holds what a build from it needs.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
dist=$root/target/dist
wheels=("$dist"/kura-*-cp39-abi3-*.whl)
[ -f "${wheels[0]}" ] || { echo "test-wheel: no abi3 wheel in $dist (run make wheel)" >&2; exit 1; }
sdists=("$dist"/kura-*.tar.gz)
[ -f "${sdists[0]}" ] || { echo "test-wheel: no sdist in $dist" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp python/tests/installed/smoke.py python/README.md "$scratch/"

# Interpreters: python3.9 and the newest python3.1x found on the PATH or under pyenv, plus
# python3 itself; each at most once.
interpreters=()
for version in 3.9 3.13 3.12; do
	# pyenv's own install first: its shim on the PATH runs only the version pyenv selected.
	candidate=$(ls -d "$HOME"/.pyenv/versions/"$version".*/bin/python3 2>/dev/null | tail -1 || true)
	[ -n "$candidate" ] || candidate=$(command -v "python$version" || true)
	if [ -n "$candidate" ] && "$candidate" -c pass 2>/dev/null; then
		interpreters+=("$candidate")
		[ "$version" = 3.9 ] || break
	else
		echo "test-wheel: no python$version here, skipped"
	fi
done
interpreters+=("$(command -v python3)")

tried=0
for python in "${interpreters[@]}"; do
	venv=$scratch/venv-$tried
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "${wheels[0]}"
	(cd "$scratch" && "$venv/bin/python" -I smoke.py "$root" README.md)
	tried=$((tried + 1))
done

# The sdist: the Python half, the stubs, the README, the license and the Rust crates.
listing=$(tar -tzf "${sdists[0]}")
for wanted in pyproject.toml README.md LICENSE kura/__init__.py kura/py.typed kura/__init__.pyi \
	crates/kura-python/Cargo.toml crates/kura/Cargo.toml crates/kura/src/lib.rs PKG-INFO; do
	grep -q "/$wanted\$" <<<"$listing" || { echo "test-wheel: the sdist lacks $wanted" >&2; exit 1; }
done
echo "test-wheel: $tried interpreters passed, sdist complete"
