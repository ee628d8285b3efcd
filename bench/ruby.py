#!/usr/bin/env python3
"""The Ruby binding's benchmark: the seed's LevelDB workload from Ruby, side by side.

    python3 bench/ruby.py measure   -> bench/results/ruby.json
    python3 bench/ruby.py report    -> bench/results/ruby.md, bench/results/ruby.png
    python3 bench/ruby.py measure report

1. The seed's workload: BENCH_RUBY_RECORDS keys "%016d" % i (default 10,000,000) with equal
   values, written then read through `db[k] = v` / `db[k]` by bench/ruby_seed.rb, each store
   in its own fresh process: Kura's TreeDbm and HashDbm (`require "kura"`), Ruby's DBM
   (Debian ruby-dbm) and a plain Ruby Hash; and the same loop in C++ against LevelDB itself
   (bench/leveldb_seed.cc, built here with g++ against Debian's libleveldb), which bounds any
   Ruby binding of LevelDB. Each timed span is the whole program's: open, loop (key
   formatting included), close. BENCH_RUBY_REPEAT rounds (default 3), the stores taking turns
   in a rotating order; each keeps its best write and its best read (DBM, 60x slower, runs in
   the first round only).
2. (Measured first, while the machine is coolest.) Reads of a zstd-compressed database (text
   values of each size in BENCH_RUBY_ZSTD_VALUE_BYTES, default 1024,16384;
   BENCH_RUBY_ZSTD_RECORDS records of 1 KiB, default 1,000,000, and as many bytes at other
   sizes) from one Ruby thread, then from two: Kura releases the GVL while it decompresses. HashDbm (each read decompresses its record: the target) and TreeDbm (pages
   compressed, recently read ones cached). Best of the rounds for each.

3. Batched reads: BENCH_RUBY_BATCH_RECORDS records (default 1,000,000) written as in 1, then
   read back in one process through `db[k]` and through `db.values_at` in batches of
   BATCH_KEYS keys, the two alternating over BENCH_RUBY_REPEAT rounds (bench/ruby_seed.rb
   `batched`): Kura's TreeDbm and HashDbm, whose `values_at` is one batched lookup with the
   GVL released, and Ruby's DBM, whose `values_at` loops over its keys. Best of each.

BENCH_RUBY_PARTS (default zstd,seed,batched) measures only the parts named and keeps the
others from the existing ruby.json.

`report` reads only the JSON and checks the targets below (data, not code).
"""

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import harness

ROOT, RESULTS = harness.ROOT, harness.RESULTS
JSON_PATH = os.path.join(RESULTS, "ruby.json")
MD_PATH = os.path.join(RESULTS, "ruby.md")
PNG_PATH = os.path.join(RESULTS, "ruby.png")
WORK = os.path.join(ROOT, "bench", "data", "ruby-work")
SEED_SCRIPT = os.path.join(ROOT, "bench", "ruby_seed.rb")
LEVELDB_SOURCE = os.path.join(ROOT, "bench", "leveldb_seed.cc")
LEVELDB_BINARY = os.path.join(WORK, "leveldb_seed")
RUBY_LIB = os.path.join(ROOT, "ruby", "lib")

STORES = ["kura-tree", "kura-hash", "leveldb-c++", "dbm", "hash"]
PARTS = ["zstd", "seed", "batched"]
BATCHED_STORES = ["kura-tree", "kura-hash", "dbm"]
# Keys per `db.values_at` call in the batched part (as python/bench.py's `get_many`).
BATCH_KEYS = 1000
ZSTD_ENGINES = ["hash", "tree"]
# Stores measured in the first round only: Ruby's DBM takes minutes for 10M writes (60x the
# others), so a best of three would change nothing but the run's length.
FIRST_ROUND_ONLY = {"dbm"}
STORE_TITLES = {
    "kura-tree": "Kura TreeDbm (Ruby)",
    "kura-hash": "Kura HashDbm (Ruby)",
    "leveldb-c++": "LevelDB (C++ loop)",
    "dbm": "Ruby DBM",
    "hash": "Ruby Hash (memory)",
}

# Targets of issue 18, measured in the same run: ratio = numerator / denominator, where each
# is (section, store, field) of the JSON; a time of the peer over a time of ours.
TARGETS = [
    ("TreeDbm from Ruby, writes + reads, vs LevelDB's own C++ loop",
     ("seed", "leveldb-c++", "total_s"), ("seed", "kura-tree", "total_s"), 1.0),
    ("TreeDbm from Ruby vs Ruby DBM, writes",
     ("seed", "dbm", "write_s"), ("seed", "kura-tree", "write_s"), 5.0),
    ("zstd HashDbm reads, 2 Ruby threads vs 1 (1 KiB values)",
     ("zstd", "hash", "one_thread_s"), ("zstd", "hash", "two_threads_s"), 1.6),
    ("zstd HashDbm reads, 2 Ruby threads vs 1 (16 KiB values)",
     ("zstd", "hash-16384", "one_thread_s"), ("zstd", "hash-16384", "two_threads_s"), 1.6),
]


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_json(command):
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"bench/ruby.py: {' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def build_leveldb_driver():
    """Builds the LevelDB driver unless the binary is newer than its source and headers."""
    if harness.driver_is_current(LEVELDB_BINARY, LEVELDB_SOURCE):
        return
    os.makedirs(WORK, exist_ok=True)
    subprocess.run(["g++", "-O2", "-o", LEVELDB_BINARY, LEVELDB_SOURCE, "-lleveldb"], check=True)


def zstd_name(engine, value_bytes):
    """The JSON name of a zstd-read row: the engine, and the value size unless 1 KiB."""
    return engine if value_bytes == 1024 else f"{engine}-{value_bytes}"


def amdahl_bound(row):
    """The most two threads can gain when the Ruby part of each read (ruby_only_s, GVL held)
    cannot overlap and the rest splits perfectly."""
    held = min(row["ruby_only_s"], row["one_thread_s"])
    return row["one_thread_s"] / (held + (row["one_thread_s"] - held) / 2)


def seed_command(store, records, directory):
    if store == "leveldb-c++":
        return [LEVELDB_BINARY, str(records), directory]
    return ["ruby", "-I", RUBY_LIB, SEED_SCRIPT, "seed", store, str(records), directory]


def measure():
    records = int(os.environ.get("BENCH_RUBY_RECORDS", "10000000"))
    zstd_records = int(os.environ.get("BENCH_RUBY_ZSTD_RECORDS", "1000000"))
    repeat = int(os.environ.get("BENCH_RUBY_REPEAT", "3"))
    parts = [p for p in os.environ.get("BENCH_RUBY_PARTS", ",".join(PARTS)).split(",") if p]
    previous = {}
    if set(parts) != set(PARTS) and os.path.exists(JSON_PATH):
        with open(JSON_PATH) as f:
            previous = json.load(f)
    value_sizes = [int(v) for v in os.environ.get("BENCH_RUBY_ZSTD_VALUE_BYTES", "1024,16384").split(",") if v]
    zstd = {} if "zstd" in parts else previous.get("zstd", {})
    for round_index in range(repeat if "zstd" in parts else 0):
        for engine in ZSTD_ENGINES:
            for value_bytes in value_sizes:
                # The same bytes in all: fewer records of larger values.
                count = max(10_000, zstd_records * 1024 // value_bytes)
                name = zstd_name(engine, value_bytes)
                directory = tempfile.mkdtemp(dir=WORK)
                try:
                    figures = run_json(["ruby", "-I", RUBY_LIB, SEED_SCRIPT, "zstd-threads", engine, str(count),
                                        directory, str(value_bytes)])
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
                log(f"round {round_index + 1}/{repeat} zstd {name} reads: 1 thread {figures['one_thread_s']:.3f} s, "
                    f"2 threads {figures['two_threads_s']:.3f} s, Ruby alone {figures['ruby_only_s']:.3f} s")
                kept = zstd.setdefault(name, {"engine": engine, "records": count, "value_bytes": value_bytes,
                                              "one_thread_s": float("inf"), "two_threads_s": float("inf"),
                                              "ruby_only_s": float("inf")})
                for field in ("one_thread_s", "two_threads_s", "ruby_only_s"):
                    kept[field] = min(kept[field], figures[field])
    best = {} if "seed" in parts else previous.get("seed", {})
    if "seed" in parts:
        build_leveldb_driver()
    for round_index in range(repeat if "seed" in parts else 0):
        shift = round_index % len(STORES)
        for store in STORES[shift:] + STORES[:shift]:
            if round_index > 0 and store in FIRST_ROUND_ONLY:
                continue
            directory = tempfile.mkdtemp(dir=WORK)
            try:
                figures = run_json(seed_command(store, records, directory))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            log(f"round {round_index + 1}/{repeat} {store}: write {figures['write_s']:.3f} s, "
                f"read {figures['read_s']:.3f} s")
            kept = best.setdefault(store, {"records": records, "write_s": float("inf"), "read_s": float("inf")})
            kept["write_s"] = min(kept["write_s"], figures["write_s"])
            kept["read_s"] = min(kept["read_s"], figures["read_s"])
    for figures in best.values():
        figures["total_s"] = figures["write_s"] + figures["read_s"]
    batched = measure_batched(repeat) if "batched" in parts else previous.get("batched", {})
    ruby_version = subprocess.run(["ruby", "-e", "print RUBY_VERSION"], capture_output=True, text=True).stdout
    this_run = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "ruby": ruby_version},
        "repeat": repeat,
    }
    # Each part keeps the run that measured it: this one, or the one the kept figures came from.
    runs = {part: this_run if part in parts else run_of(previous, part) for part in PARTS}
    document = {**this_run, "runs": runs, "seed": best, "zstd": zstd, "batched": batched}
    os.makedirs(RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    log(f"wrote {JSON_PATH}")


def run_of(document, part):
    """{when, machine, repeat} of the run that measured `part` of a ruby.json (files written
    before parts were measured separately have one run for all)."""
    return document.get("runs", {}).get(part) or {name: document.get(name) for name in ("when", "machine", "repeat")}


def measured_line(document, part):
    run = run_of(document, part)
    machine = run.get("machine") or {}
    return (f"Measured {run.get('when')} by `bench/ruby.py` ({machine.get('cpus')} CPUs, Ruby {machine.get('ruby')}, "
            f"best of {run.get('repeat')} rounds)")


def measure_batched(repeat):
    """{store: {records, batch, read_s, batched_s}}: each store in its own process, which
    alternates its two read loops `repeat` times and keeps the best of each."""
    records = int(os.environ.get("BENCH_RUBY_BATCH_RECORDS", "1000000"))
    batched = {}
    for store in BATCHED_STORES:
        directory = tempfile.mkdtemp(dir=WORK)
        try:
            figures = run_json(["ruby", "-I", RUBY_LIB, SEED_SCRIPT, "batched", store, str(records), directory,
                                str(BATCH_KEYS), str(repeat)])
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        log(f"batched {store}: db[k] {figures['read_s']:.3f} s, values_at {figures['batched_s']:.3f} s")
        batched[store] = {name: figures[name] for name in ("records", "batch", "read_s", "batched_s")}
    return batched


def batched_lines(document):
    """The batched part's table, or nothing when the JSON has none."""
    batched = document.get("batched") or {}
    if not batched:
        return []
    first = next(iter(batched.values()))
    rate = {store: row["records"] / row["batched_s"] for store, row in batched.items()}
    lines = [
        "",
        f"{measured_line(document, 'batched')}: {first['records']:,} keys `\"%016d\" % i` read back in one "
        f"process, every key through `db[k]` and through `db.values_at(*keys)` in batches of {first['batch']:,} "
        "keys, the two loops taking turns (key formatting included). Kura's `values_at` is one batched lookup "
        "with the GVL released (docs/get_many.md); Ruby's DBM loops over its keys.",
        "",
        "| store | db[k] reads/s | values_at reads/s | values_at / own db[k] | values_at / DBM's values_at |",
        "|---|---:|---:|---:|---:|",
    ]
    for store in BATCHED_STORES:
        row = batched.get(store)
        if row is None:
            continue
        versus_dbm = f"{rate[store] / rate['dbm']:.2f}x" if "dbm" in rate else "-"
        lines.append(f"| {STORE_TITLES[store]} | {row['records'] / row['read_s']:,.0f} | {rate[store]:,.0f} | "
                     f"{row['read_s'] / row['batched_s']:.2f}x | {versus_dbm} |")
    return lines


def lookup(document, path):
    section, name, field = path
    return document.get(section, {}).get(name, {}).get(field)


def report():
    with open(JSON_PATH) as f:
        document = json.load(f)
    seed = document["seed"]
    leveldb = seed.get("leveldb-c++")
    lines = [
        "# Ruby binding: the seed's LevelDB workload from Ruby",
        "",
        f"{measured_line(document, 'seed')}, stores taking turns. "
        "Keys `\"%016d\" % i` with equal values, written then read through `db[k] = v` / `db[k]`; "
        "each time covers open, loop (key formatting included) and close.",
        "",
        "| store | records | write s | read s | write+read s | writes/s | reads/s | LevelDB C++ time / this |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for store in STORES:
        if store not in seed:
            continue
        row = seed[store]
        ratio = f"{leveldb['total_s'] / row['total_s']:.2f}x" if leveldb else "-"
        lines.append(
            f"| {STORE_TITLES[store]} | {row['records']:,} | {row['write_s']:.2f} | {row['read_s']:.2f} | "
            f"{row['total_s']:.2f} | {row['records'] / row['write_s']:,.0f} | {row['records'] / row['read_s']:,.0f} | "
            f"{ratio} |")
    lines += [
        "",
        f"{measured_line(document, 'zstd')}: reads of a zstd-compressed database (English-like text values, "
        "every key once) from Ruby "
        "threads. *Ruby alone* is the same one-thread loop with the database call replaced by what "
        "Ruby itself spends per read with the GVL held (the key formatted, a new String of the "
        "value's size); the *bound* is what two threads could reach if nothing but that part "
        "were serialised (Amdahl).",
        "",
        "| engine | value bytes | records | 1 thread s | 2 threads s | 2 threads / 1 thread | Ruby alone s "
        "| GVL-held share | bound |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in document["zstd"].values():
        if "ruby_only_s" not in row:
            continue
        lines.append(f"| {row['engine']} | {row['value_bytes']:,} | {row['records']:,} | {row['one_thread_s']:.3f} | "
                     f"{row['two_threads_s']:.3f} | {row['one_thread_s'] / row['two_threads_s']:.2f}x | "
                     f"{row['ruby_only_s']:.3f} | {row['ruby_only_s'] / row['one_thread_s']:.0%} | "
                     f"{amdahl_bound(row):.2f}x |")
    lines += batched_lines(document)
    lines += [
        "",
        "## Targets",
        "",
        "| target | ratio | threshold | met |",
        "|---|---:|---:|---|",
    ]
    for label, numerator, denominator, threshold in TARGETS:
        top, bottom = lookup(document, numerator), lookup(document, denominator)
        if top is None or bottom is None:
            lines.append(f"| {label} | not measured | {threshold:.1f}x | - |")
            continue
        ratio = top / bottom
        lines.append(f"| {label} | {ratio:.2f}x | {threshold:.1f}x | {'yes' if ratio >= threshold else 'NO'} |")
    with open(MD_PATH, "w") as f:
        f.write("\n".join(lines) + "\n")
    log(f"wrote {MD_PATH}")
    plot(document)


def plot(document):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("bench/ruby.py: matplotlib is not importable (make venv); no PNG")
        return
    seed = document["seed"]
    stores = [store for store in STORES if store in seed]
    batched = document.get("batched") or {}
    batched_stores = [store for store in BATCHED_STORES if store in batched]
    panels = 3 if batched_stores else 2
    figure, axes = plt.subplots(1, panels, figsize=(12 + 4 * (panels - 2), 4.5),
                                gridspec_kw={"width_ratios": [3, 1, 1.5][:panels]})
    left, right = axes[0], axes[1]
    positions = range(len(stores))
    width = 0.38
    left.bar([p - width / 2 for p in positions], [seed[s]["write_s"] for s in stores], width, label="write")
    left.bar([p + width / 2 for p in positions], [seed[s]["read_s"] for s in stores], width, label="read")
    left.set_xticks(list(positions))
    left.set_xticklabels([STORE_TITLES[s] for s in stores], rotation=15)
    left.set_ylabel("seconds (lower is better)")
    records = seed[stores[0]]["records"] if stores else 0
    left.set_title(f'{records:,} keys "%016d", write then read')
    left.legend()
    engines = [name for name, row in document["zstd"].items() if "ruby_only_s" in row]
    for offset, (field, label, color) in enumerate([("one_thread_s", "1 thread", "tab:gray"),
                                                    ("two_threads_s", "2 threads", "tab:green")]):
        rows = [document["zstd"][engine] for engine in engines]
        right.bar([p + (offset - 0.5) * width for p in range(len(engines))],
                  [row["records"] / row[field] for row in rows], width, label=label, color=color)
    right.set_xticks(list(range(len(engines))))
    right.set_xticklabels(engines, rotation=15)
    right.set_ylabel("reads/s (higher is better)")
    right.set_title("zstd reads from Ruby threads")
    right.legend()
    if batched_stores:
        third = axes[2]
        for offset, (field, label, color) in enumerate([("read_s", "db[k]", "tab:gray"),
                                                        ("batched_s", "values_at", "tab:blue")]):
            third.bar([p + (offset - 0.5) * width for p in range(len(batched_stores))],
                      [batched[s]["records"] / batched[s][field] for s in batched_stores], width, label=label,
                      color=color)
        third.set_xticks(list(range(len(batched_stores))))
        third.set_xticklabels([STORE_TITLES[s].replace(" (Ruby)", "") for s in batched_stores], rotation=15)
        third.set_ylabel("reads/s (higher is better)")
        third.set_title(f"batched reads, {batched[batched_stores[0]]['batch']:,} keys a call")
        third.legend(loc="upper right", fontsize="small")
        third.set_ylim(top=max(batched[s]["records"] / batched[s][f] for s in batched_stores
                               for f in ("read_s", "batched_s")) * 1.3)
    figure.tight_layout()
    figure.savefig(PNG_PATH, dpi=100)
    log(f"wrote {PNG_PATH}")


def main(steps):
    if not steps or any(step not in ("measure", "report") for step in steps):
        sys.exit("usage: bench/ruby.py measure | report | measure report")
    for step in steps:
        measure() if step == "measure" else report()


if __name__ == "__main__":
    main(sys.argv[1:])
