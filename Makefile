# Kura: build, test, demo and benchmark entry points.
#   make demo    install what is needed, build, load the dictionary data set with every codec
#   make test    unit, property, crash and CLI tests, plus lint (what CI runs)
#   make bench   Kura against Tkrzw side by side; writes bench/results/bench.{md,png}
#   make scale   100M records in TinyDbm and CacheDbm next to Tkrzw (bench/results/scale.md)
#   make scaleout  3 `kura serve` behind pymemcache's HashClient and twemproxy (docs/server.md)
# Shrink a benchmark with BENCH_ITER=100000 BENCH_DICT_LIMIT=20000 (see bench/run.py).

SHELL := /bin/bash
.DEFAULT_GOAL := build
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
DICTIONARY := bench/data/dictionary.tsv

# Debian packages: Tkrzw (the benchmark's reference and its C++ headers), the dictionary
# data set's sources, the C toolchain the codec crates build with, and memccapable
# (libmemcached-tools), memcached and twemproxy (nutcracker), which test and compare `kura serve`.
DEB_PACKAGES := tkrzw-utils libtkrzw-dev python3-tkrzw python3-gdbm wordnet-base edict pkg-config g++ \
	python3-venv ca-certificates curl libmemcached-tools memcached nutcracker
# Root installs directly; others go through sudo when there is one.
SUDO := $(shell if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then echo sudo; fi)

.PHONY: deps rust build python demo test test-only test-python lint bench scale scaleout venv dictionary clean distclean

## deps: install the missing Debian packages (checked with dpkg first, so a rerun is quick)
deps:
	@missing=""; \
	for package in $(DEB_PACKAGES); do \
		dpkg -s $$package >/dev/null 2>&1 || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || $(MAKE) --no-print-directory rust

## rust: install a Rust toolchain with rustup when none is on the PATH
rust:
	curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | \
		sh -s -- -y --profile minimal --component clippy,rustfmt

build: deps
	$(CARGO) build --release

## python: build the Python package and install it into .venv (with maturin, pytest, hypothesis)
python: deps
	python/build.sh

$(DICTIONARY):
	@mkdir -p bench/data
	$(PYTHON) tools/make_dictionary.py $(DICTIONARY)

dictionary: deps $(DICTIONARY)

## demo: the dictionary data set loaded with every codec: size, build time, get QPS
demo: build dictionary python
	$(PYTHON) bench/run.py --demo

## test: everything CI checks
test: deps lint test-only test-python

test-only:
	$(CARGO) test --workspace

test-python: python
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider python/tests

## lint: formatting and clippy, warnings as errors (skipped with a note if not installed)
lint:
	@if $(CARGO) fmt --version >/dev/null 2>&1; then \
		echo "$(CARGO) fmt --all --check"; $(CARGO) fmt --all --check; \
	else echo "lint: rustfmt is not installed, skipping the format check"; fi
	@if $(CARGO) clippy --version >/dev/null 2>&1; then \
		echo "$(CARGO) clippy --workspace --all-targets -- -D warnings"; \
		$(CARGO) clippy --workspace --all-targets -- -D warnings; \
	else echo "lint: clippy is not installed, skipping it"; fi

$(VENV)/.matplotlib:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet matplotlib
	@touch $@

venv: $(VENV)/.matplotlib

## bench: Kura against Tkrzw; results in bench/results/
bench: build venv dictionary python
	$(VENV)/bin/python bench/run.py
	$(VENV)/bin/python -m pip install --quiet plyvel lmdb || echo "bench: plyvel/lmdb not installable, skipped"
	$(VENV)/bin/python python/bench.py --md bench/results/python.md --json bench/results/python.json
	$(VENV)/bin/python bench/server.py  # kura serve vs memcached; small: BENCH_SERVER_SECONDS=2 BENCH_SERVER_ITEMS=50000 BENCH_SERVER_REPEAT=1

## scale: 100M in-memory records, Kura and Tkrzw (about 20 min, 15 GB of RAM; not in CI)
scale: build venv
	$(VENV)/bin/python bench/scale.py

## scaleout: 3 `kura serve` behind pymemcache's HashClient and twemproxy, 100k keys (docs/server.md)
scaleout: build python
	$(VENV)/bin/python tools/scaleout.py --keys 100000 --kura target/release/kura

clean:
	$(CARGO) clean
	rm -rf bench/data

distclean: clean
	rm -rf $(VENV)
