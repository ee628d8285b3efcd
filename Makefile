# Kura: build, test, demo and benchmark entry points.
#   make demo    install what is needed, build, load the dictionary data set with every codec
#   make test    unit, property, crash and CLI tests, plus lint (what CI runs)
#   make wheel   the Python wheel (abi3, CPython 3.9+) and sdist; make gem: the source and
#                platform gems; make man: the manual pages; all into target/ (README, Install)
#   make test-gem-source  the source gem installed (cargo compiles it: minutes, not in make test)
#   make test-install     `cargo install --path crates/kura-cli` into a scratch root, release build
#                (not in make test; make test runs the debug install, test-install-debug)
#   make publish-check    `cargo publish --dry-run -p kura` (needs crates.io's index; not in make test)
#   make bench   Kura against Tkrzw side by side; writes bench/results/bench.{md,png}
#   make scale   100M records in TinyDbm and CacheDbm next to Tkrzw (bench/results/scale.md)
#   make fuzz    each cargo-fuzz target for FUZZ_SECONDS (nightly); make soak: the kill -9 soak
#   make scaleout  3 `kura serve` behind pymemcache's HashClient and twemproxy (docs/server.md)
#   make bench-peers  TreeDbm and HashDbm against LMDB, RocksDB, fjall and redb in redb's benchmark
#                phases (bench/peers/, its own workspace); writes bench/results/peers.{json,md,png}
# Shrink a benchmark with BENCH_ITER=100000 BENCH_DICT_LIMIT=20000 (see bench/run.py);
# the Ruby one with BENCH_RUBY_RECORDS=100000 BENCH_RUBY_ZSTD_RECORDS=20000 (bench/ruby.py),
# bench/shard.py with SHARD_LINES=200000 SHARD_DICT_LIMIT=50000 SHARD_ITER=100000,
# CompactDbm's density table with BENCH_COMPACT_RECORDS=100000 (bench/compact.py), the
# batched gets beyond the caches with BEYOND_RECORDS=1000000 (bench/beyond_caches.py), the cache
# engines against Tkrzw CacheDBM with CACHE_ENGINES_RECORDS=100000 (bench/cache_engines.py), and the
# server's with BENCH_SERVER_SECONDS=2 BENCH_SERVER_ITEMS=50000 BENCH_SERVER_REPEAT=1
# BENCH_SERVER_LATENCY_SECONDS=2; the peers' with PEERS_RECORDS=20000 PEERS_ROUNDS=1 (bench/peers.py);
# kura.dask's with DASK_ROWS=1000000 DASK_SERVER_ROWS=100000 (bench/dask_load.py, docs/distributed.md).
# Redraw bench/results/bench.{md,png} from bench.json without measuring: python3 bench/report.py

SHELL := /bin/bash
.DEFAULT_GOAL := build
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo
# Where cargo builds: the debug binaries that test-only makes are reused by test-examples,
# test-install-debug and test-readme rather than built again.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
PYTHON ?= python3
VENV := .venv
DICTIONARY := bench/data/dictionary.tsv

# Debian packages: Tkrzw (the benchmark's reference and its C++ headers), the dictionary
# data set's sources, the C toolchain the codec crates build with, and memccapable
# (libmemcached-tools), memcached and twemproxy (nutcracker), which test and compare `kura serve`.
DEB_PACKAGES := tkrzw-utils libtkrzw-dev python3-tkrzw python3-gdbm wordnet-base edict pkg-config g++ \
	python3-venv ca-certificates curl
# The Ruby binding: Ruby 3.1 and its headers, minitest and rake for its tests, libclang for
# rb-sys' bindgen; Ruby's DBM and LevelDB for its benchmark (bench/ruby.py), LevelDB also for
# make bench's tree table (bench/leveldb_sequence.cc).
DEB_PACKAGES += ruby ruby-dev ruby-minitest rake libclang-dev ruby-dbm libleveldb-dev
# kura serve: memcached and its tools (memccapable, memcaslap) and twemproxy, for its tests,
# the scale-out check and the benchmark.
DEB_PACKAGES += libmemcached-tools memcached nutcracker
# strace counts the system calls of a durable commit (crates/kura/tests/durable_commit_syscalls.rs).
DEB_PACKAGES += strace
# The lz4 codec decodes with liblz4, the C library Tkrzw uses too: crates/kura/build.rs links its
# liblz4.a, found with pkg-config (listed above).
DEB_PACKAGES += liblz4-dev
# make bench-peers: RocksDB 7.8, linked by bench/peers (librocksdb-sys with ROCKSDB_LIB_DIR) rather
# than compiled from source; its bindgen uses libclang-dev, listed above.
DEB_PACKAGES += librocksdb-dev
# Root installs directly; others go through sudo when there is one.
SUDO := $(shell if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then echo sudo; fi)

.PHONY: deps rust build python ruby demo test test-only test-python test-ruby lint bench scale scaleout venv \
	dictionary clean distclean fuzz fuzz-smoke soak salvage-soak salvage-soak-tree salvage-soak-sets salvage-soak-snapshots loom bench-peers wheel gem man test-wheel \
	test-gem test-gem-source test-install test-install-debug test-examples test-readme publish-check check-toolchain

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

## ruby: build the Ruby extension and put it where ruby/lib/kura.rb loads it
## (then `ruby -Iruby/lib -e 'require "kura"'` works)
RUBY_EXT := ruby/lib/kura/kura_ext.so
ruby: deps
	$(CARGO) build --release -p kura-ruby
	@# Copied beside and renamed into place: a running Ruby that loaded the old file keeps it.
	cp $(or $(CARGO_TARGET_DIR),target)/release/libkura_ext.so $(RUBY_EXT).tmp
	mv -f $(RUBY_EXT).tmp $(RUBY_EXT)

## wheel: the Python wheel (abi3: one file for CPython 3.9 and later) and the sdist, into target/dist/
wheel: python
	python/dist.sh

## gem: the source gem (the extension compiled by cargo at install time) and the platform gem
## (this machine's compiled extension), into target/dist/
gem: ruby
	ruby/gem.sh

## man: a manual page per subcommand into target/man/ (`man -l target/man/kura-import.1`)
man: deps
	$(CARGO) run --release -p kura-cli -- man target/man

$(DICTIONARY):
	@mkdir -p bench/data
	$(PYTHON) tools/make_dictionary.py $(DICTIONARY)

dictionary: deps $(DICTIONARY)

## demo: the dictionary data set loaded with every codec: size, build time, get QPS
demo: build dictionary python ruby
	$(PYTHON) bench/run.py --demo
	ruby -Iruby/lib ruby/examples/demo.rb

## test: everything CI checks
test: deps check-toolchain lint test-only test-examples test-install-debug test-python test-wheel test-ruby \
	test-gem test-readme loom fuzz-smoke

## check-toolchain: whether the rustc on the PATH builds the programs of tools/toolchain_check/
## correctly at -O (each a miscompilation met in this project, reduced to a few lines); warns
## when it does not, fails with STRICT_TOOLCHAIN=1. rustc 1.95.0 miscompiles closure_by_value.rs.
check-toolchain:
	@sh tools/check_toolchain.sh

test-only:
	$(CARGO) test --workspace

## test-examples: the library's usage examples (crates/kura/examples) and the embedded server
## (crates/kura-server/examples/embedded.rs), each asserting what it shows. `cargo test
## --workspace` built them; the binaries run directly, because `cargo run -p kura` resolves
## features for one package and would build kura again (a minute) for the same code.
USAGE_EXAMPLES := basics ranges batches shards embedded
test-examples:
	$(CARGO) build --quiet --workspace --examples
	@for example in $(USAGE_EXAMPLES); do \
		echo "example $$example"; $(TARGET_DIR)/debug/examples/$$example || exit 1; \
	done

## test-readme: every code block of README.md run in a scratch directory (tools/readme_blocks.py:
## the shell blocks with test-only's debug kura, Python with .venv, Ruby with ruby/lib, Rust as
## crates/kura/examples/readme.rs); blocks that cannot run say why in the README
test-readme: python ruby
	$(VENV)/bin/python tools/readme_blocks.py --kura $(TARGET_DIR)/debug/kura --python $(VENV)/bin/python \
		--ruby-lib ruby/lib --cargo $(CARGO)

test-python: python
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider python/tests bench/tests tools/tests

test-ruby: ruby
	cd ruby && rake test

## test-wheel: the wheel installed with pip --no-index into fresh virtual environments (CPython
## 3.9 and the newest here) and a smoke script run outside the repository; the sdist's contents
test-wheel: wheel
	python/tests/installed/check.sh

## test-gem: the platform gem installed into a scratch GEM_HOME, a smoke script run outside the
## repository; test-gem-source: the same for the source gem, whose install compiles the
## extension with cargo (a few minutes on 2 cores, so not in make test)
test-gem: gem
	ruby/test/installed/check.sh platform

test-gem-source: gem
	ruby/test/installed/check.sh source

## test-install: `cargo install --path crates/kura-cli` into a scratch root, then that kura runs
## (a release build of its own: minutes, so not in make test); test-install-debug, in make
## test: the same install as a debug build in test-only's target directory, which it reuses
## (seconds: what is checked is the install, not the optimizer)
INSTALL_CHECK = scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
	$(CARGO) install --locked $(1) --path crates/kura-cli --root "$$scratch" && \
	"$$scratch/bin/kura" --version && "$$scratch/bin/kura" set "$$scratch/smoke.kut" apple red && \
	test "$$("$$scratch/bin/kura" get "$$scratch/smoke.kut" apple)" = red && echo "$@: ok"
test-install: deps
	@$(call INSTALL_CHECK,)

test-install-debug:
	@$(call INSTALL_CHECK,--offline --debug --target-dir $(TARGET_DIR))

## publish-check: `cargo publish --dry-run -p kura`: the library crate packaged as crates.io
## would get it (metadata, README, no path dependency) and built alone from that package. It
## reads crates.io's index, and a dirty tree is refused (commit first), so it is not in make test.
publish-check: deps
	$(CARGO) publish --dry-run --locked -p kura

## lint: formatting and clippy, warnings as errors (skipped with a note if not installed)
lint:
	@if $(CARGO) fmt --version >/dev/null 2>&1; then \
		echo "$(CARGO) fmt --all --check"; $(CARGO) fmt --all --check; \
	else echo "lint: rustfmt is not installed, skipping the format check"; fi
	@if $(CARGO) clippy --version >/dev/null 2>&1; then \
		echo "$(CARGO) clippy --workspace --all-targets -- -D warnings"; \
		$(CARGO) clippy --workspace --all-targets -- -D warnings; \
	else echo "lint: clippy is not installed, skipping it"; fi
	@# The library's API documentation builds without a warning (missing_docs is denied in
	@# lib.rs, so every public item has its documentation; broken intra-doc links fail here).
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps -p kura

## fuzz: each cargo-fuzz target (fuzz/) for FUZZ_SECONDS, new inputs kept in fuzz/work/
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := open_file codec_decode import_lines memcached_session journal_replay
# address (the default) finds what unsafe code gets wrong; none runs several times faster
# and still finds panics, hangs and oversized allocations (fuzz/src/lib.rs), for long runs.
FUZZ_SANITIZER ?= address
FUZZ_FLAGS := -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=20 -max_len=65536 -print_final_stats=1
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	@$(CARGO) +nightly --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
	@for target in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/work/$$target && \
		$(CARGO) +nightly fuzz run -s $(FUZZ_SANITIZER) $$target fuzz/work/$$target fuzz/corpus/$$target -- \
			-max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) || exit 1; \
	done

## fuzz-smoke: a few seconds of each fuzz target, only where nightly and cargo-fuzz already are
## (the corpus replay on stable is part of test-only: crates/kura/tests/fuzz_corpus.rs)
fuzz-smoke:
	@if $(CARGO) +nightly --version >/dev/null 2>&1 && command -v cargo-fuzz >/dev/null; then \
		$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=5; \
	else echo "fuzz-smoke: skipped (no nightly toolchain or no cargo-fuzz)"; fi

## loom: SpinRwLock's waiting path, the journal's append order (file/append_order.rs) and CacheDbm's and SegCacheDbm's slots model-checked with loom (--cfg loom,
## in a target directory of its own so that it does not invalidate the normal build)
loom:
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --profile loom -p kura --lib loom_tests
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --profile loom -p kura --test loom_cache --test loom_segcache

## soak: the kill -9 soak, SOAK_TRIALS trials over the file engines (CI runs 200 in test-only)
SOAK_TRIALS ?= 10000
soak:
	KURA_SOAK_TRIALS=$(SOAK_TRIALS) $(CARGO) test --release -p kura --test kill_soak -- --nocapture killed_writers

## salvage-soak: `kura restore` and `kura check` after every single-bit flip of a 2,000-record
## file of each HashDbm and TreeDbm configuration and of 2-shard HashDbm sets, header region
## included (crates/kura/src/hash_dbm/salvage_tests.rs, tree_dbm/salvage_tests.rs; figures in
## docs/durability.md);
## SALVAGE_CONFIG=lz4 (or tree_zstd...) runs one configuration, SALVAGE_STEP=k every k-th byte,
## SALVAGE_AT=a,b the bytes an earlier run reported (HashDbm);
## salvage-soak-tree runs the TreeDbm configurations only; salvage-soak-sets every byte of each
## shard of 2-shard HashDbm sets, restored as sets; salvage-soak-snapshots every byte of each
## memory engine's snapshot (crates/kura/tests/snapshot_salvage.rs)
SALVAGE_RECORDS ?= 2000
SALVAGE_CONFIG ?=
SALVAGE_STEP ?= 1
SALVAGE_AT ?=
SALVAGE_ENV = KURA_SALVAGE_RECORDS=$(SALVAGE_RECORDS) KURA_SALVAGE_CONFIG=$(SALVAGE_CONFIG) KURA_SALVAGE_AT=$(SALVAGE_AT) \
	KURA_SALVAGE_STEP=$(SALVAGE_STEP)
salvage-soak:
	$(SALVAGE_ENV) $(CARGO) test --release -p kura --lib salvage_soak -- --ignored --nocapture
salvage-soak-tree:
	$(SALVAGE_ENV) $(CARGO) test --release -p kura --lib tree_salvage_soak -- --ignored --nocapture
salvage-soak-sets:
	$(SALVAGE_ENV) $(CARGO) test --release -p kura --lib every_flipped_byte_of_a_shard_set_salvage_soak -- --ignored --nocapture
salvage-soak-snapshots:
	$(CARGO) test --release -p kura --test snapshot_salvage -- --ignored --nocapture

$(VENV)/.matplotlib:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet matplotlib
	@touch $@

venv: $(VENV)/.matplotlib

# Tkrzw's CacheDBM at the engine level, which tkrzw_dbm_perf cannot time on gets: the C++ side
# of bench/cache_engines.py (issue 42), against the installed Tkrzw (libtkrzw-dev, make deps).
TKRZW_CACHE := bench/data/work/tkrzw_cache
$(TKRZW_CACHE): bench/tkrzw_cache.cc bench/split_mix.h
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 $$(pkg-config --cflags tkrzw) bench/tkrzw_cache.cc -o $@ $$(pkg-config --libs tkrzw)

## bench: Kura against Tkrzw; results in bench/results/
bench: build venv dictionary python ruby $(TKRZW_CACHE)
	$(VENV)/bin/python bench/run.py
	$(VENV)/bin/python bench/ruby.py measure report
	$(VENV)/bin/python -m pip install --quiet plyvel lmdb || echo "bench: plyvel/lmdb not installable, skipped"
	$(VENV)/bin/python python/bench.py --md bench/results/python.md --json bench/results/python.json
	$(VENV)/bin/python bench/shard.py measure && $(VENV)/bin/python bench/shard.py report
	$(VENV)/bin/python bench/compact.py all
	$(VENV)/bin/python bench/beyond_caches.py all
	$(VENV)/bin/python bench/cache_engines.py all
	$(CARGO) build --release -p kura-server --example load_client
	$(VENV)/bin/python bench/server.py
	$(VENV)/bin/python bench/dask_load.py
	$(VENV)/bin/python bench/peers.py

## scale: 100M in-memory records, Kura and Tkrzw (about 20 min, 15 GB of RAM; not in CI)
scale: build venv
	$(VENV)/bin/python bench/scale.py

## bench-peers: Kura against LMDB, RocksDB, fjall and redb (bench/peers.py builds bench/peers, its own
## workspace, so `make test` never compiles the peers); PEERS_MEMORY_LIMIT=512M runs each store in a
## cgroup memory group of that size (bench/peers.py --memory-limit)
bench-peers: deps venv
	$(VENV)/bin/python bench/peers.py $(if $(PEERS_MEMORY_LIMIT),--memory-limit $(PEERS_MEMORY_LIMIT))

## scaleout: 3 `kura serve` behind pymemcache's HashClient and twemproxy, 100k keys (docs/server.md)
scaleout: build python
	$(VENV)/bin/python tools/scaleout.py --keys 100000 --kura target/release/kura

clean:
	$(CARGO) clean
	rm -rf bench/data

distclean: clean
	rm -rf $(VENV)
