#!/usr/bin/env python3
"""CompactDbm's density benchmark (issue 16): bytes per record against get and set QPS.

Steps:
  measure  runs every map on every data set, one process per map so that nothing else moves
           its resident set, and writes bench/results/compact.json;
  item6    issue 42 item 6 only: CompactDbm's default and TinyDbm from Python (PYTHON_DEFAULT
           below), merged into that JSON under "item6", then the report;
  report   reads ONLY that JSON and writes bench/results/compact.md (tables, ratios against the
           HashMap and TinyDbm measured in the same run, the targets) and compact.png (bytes
           per record against get QPS: the curve bucket size moves CompactDbm along).

Maps: CompactDbm with each codec and a few bucket sizes, TinyDbm and HashMap<Vec<u8>,Vec<u8>>
(crates/kura-bench/src/compact/, `kura-compact-bench run`), Tkrzw's TinyDBM
(bench/tkrzw_tiny.cc) and a Python dict of bytes (below). Data sets: the dictionary TSV
(`make dictionary`), 10M short records (12-byte keys, 20-60 byte values), and the 1M `%08d`
sequence. Bytes per record = resident-set growth over the load / records, each resident set
taken after glibc's malloc_trim (memory the load freed again is not the map's).

Environment: BENCH_COMPACT_RECORDS caps the records of every data set (the small-size switch,
e.g. 100000); BENCH_COMPACT_DATASETS picks data sets (comma-separated names of DATASETS, default
all); BENCH_ITER sets gets per thread per phase (default 1000000; sets are a fifth).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

import harness

ROOT, DATA, WORK, RESULTS = harness.ROOT, harness.DATA, harness.WORK, harness.RESULTS
DRIVER = os.path.join(harness.release_dir(), "kura-compact-bench")
TKRZW_TINY = os.path.join(WORK, "tkrzw_tiny")

# CompactDbm settings measured: (codec, records per bucket[, more parameters]). The default is
# zstd-dict, 4, with a 1 MiB dictionary (zstd, 16 until 2026-11-29; ITEM6 below); zstd-dict with 1 (long records, with a 1 MiB dictionary) to 3 (short ones) records
# a bucket is the dense-and-fast read setting (docs/compact.md).
# One record a bucket (zstd, zstd-dict) is the fast end of each curve: the fastest sets and
# gets a codec gives, at the density the per-bucket costs leave (docs/compact.md).
COMPACT_SETTINGS = [("none", 4), ("none", 16), ("lz4", 2), ("lz4", 4), ("lz4", 16), ("zstd", 1), ("zstd", 4),
                    ("zstd", 16), ("zstd", 64), ("zstd-dict", 1), ("zstd-dict", 1, "dict_size=1048576"),
                    ("zstd-dict", 2), ("zstd-dict", 3), ("zstd-dict", 4), ("zstd-dict", 6), ("zstd-dict", 8),
                    ("zstd-dict", 16)]
PEERS = ["hashmap", "tiny", "tkrzw-tiny", "python-dict"]
# Data sets: name -> (title, how it is made, full record count).
DATASETS = {
    "dictionary": ("dictionary (WordNet + EDICT JSON)", None, None),
    "short": ("short records (12-byte keys, 20-60 byte values)", "short", 10_000_000),
    "seq": ("`%08d` sequence", "seq", 1_000_000),
}

# Targets of issue 16, as data. metric: `raw_fraction` (memory / raw bytes), `bytes_vs` (the
# peer's bytes per record / the subject's), a QPS field, or `scaling` (get_qps_2 / get_qps_1).
# The dictionary data set's subject: one record a bucket, and a 1 MiB dictionary (denser than
# the default 256 KiB at the same get speed, docs/compact.md).
DICTIONARY_SUBJECT = "compact:zstd-dict:1:dict_size=1048576"
TARGETS = [
    {"data": "dictionary", "subject": DICTIONARY_SUBJECT, "metric": "raw_fraction", "at_most": 0.30},
    {"data": "dictionary", "subject": DICTIONARY_SUBJECT, "metric": "get_qps_1", "at_least": 300_000},
    {"data": "dictionary", "subject": DICTIONARY_SUBJECT, "metric": "scaling", "at_least": 1.8},
    {"data": "short", "subject": "compact:zstd-dict:3", "metric": "bytes_vs", "peer": "hashmap", "at_least": 5.0},
    {"data": "short", "subject": "compact:zstd-dict:3", "metric": "bytes_vs", "peer": "tiny", "at_least": 3.0},
    {"data": "short", "subject": "compact:zstd-dict:3", "metric": "get_qps_1", "at_least": 500_000},
    # The fastest setting, on the two data sets of small records.
    {"data": "short", "subject": "compact:none:4", "metric": "bytes_vs", "peer": "tiny", "at_least": 2.0},
    {"data": "short", "subject": "compact:none:4", "metric": "get_qps_1", "at_least": 1_000_000},
    {"data": "seq", "subject": "compact:lz4:2", "metric": "bytes_vs", "peer": "tiny", "at_least": 2.0},
    {"data": "seq", "subject": "compact:lz4:2", "metric": "get_qps_1", "at_least": 1_000_000},
    # "Keep buckets small enough": the fastest plain-zstd setting, one record a bucket.
    {"data": "dictionary", "subject": "compact:zstd:1", "metric": "set_qps_1", "at_least": 100_000},
]

# The Python dict contender, run as its own process on the same TSV.
# What the contender processes below share: the resident set after malloc_trim, and the
# (key, value) pairs of the TSV file.
RSS_OF_PROCESS = r"""
import ctypes
libc = ctypes.CDLL("libc.so.6")
def rss():
    libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
def tsv_pairs(path):
    with open(path, "rb") as f:
        for line in f:
            key, sep, value = line.rstrip(b"\n").partition(b"\t")
            if sep:
                yield key, value
"""

PYTHON_DICT = RSS_OF_PROCESS + r"""
import itertools, json, random, sys, time
path, limit, gets, sets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
records = list(itertools.islice(tsv_pairs(path), limit))
keys = [k for k, _ in records]
order = list(range(len(records)))
random.Random(0x6b757261).shuffle(order)
before = rss()
started = time.perf_counter()
table = {}
for key, value in records:
    table[bytes(bytearray(key))] = bytes(bytearray(value))
load = len(records) / (time.perf_counter() - started)
grown = rss() - before
gets = max(1, min(gets, 2 * len(records)))
started = time.perf_counter()
n = len(order)
for i in range(gets):
    table[keys[order[i % n]]]
get_qps = gets / (time.perf_counter() - started)
sets = max(1, min(sets, n))
started = time.perf_counter()
for i in range(sets):
    index = order[i % n]
    table[keys[index]] = records[(index + 1) % n][1]
set_qps = sets / (time.perf_counter() - started)
print(json.dumps({"contender": "python-dict", "records": n, "rss_growth": grown,
                  "bytes_per_record": grown / n, "load_qps": load, "get_qps_1": get_qps,
                  "set_qps_1": set_qps, "raw_bytes": sum(len(k) + len(v) for k, v in records)}))
"""


# Issue 42, item 6: CompactDbm's default from Python. `kura.open(path, "c", engine=...)` with
# no other parameter, the records set one by one (`db[k] = v`, as a Python program fills a
# dict), against TinyDbm opened the same way. Memory: the process's resident-set growth over
# the load after malloc_trim, as for every map above (the engine's own `memory_bytes` is
# reported beside it). Gets: one thread, random keys, every value compared with the one
# written; before them every record is read back once and checked.
ITEM6_RECORDS = 200_000
ITEM6_TARGET = {"memory_vs_tiny_at_most": 0.35, "get_qps_at_least": 200_000}
PYTHON_DEFAULT = RSS_OF_PROCESS + r"""
import json, os, random, sys, tempfile, time
import kura
path, engine, limit, gets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
params = dict(p.split("=", 1) for p in sys.argv[5].split(",") if p) if len(sys.argv) > 5 else {}
table = {}
for key, value in tsv_pairs(path):
    if len(table) >= limit:
        break
    table[key] = value
keys = list(table)
values = [table[k] for k in keys]
del table
order = list(range(len(keys)))
random.Random(0x6b757261).shuffle(order)
work = tempfile.mkdtemp()
extension = {"compact": ".kumz", "tiny": ".kumt"}[engine]
before = rss()
started = time.perf_counter()
db = kura.open(os.path.join(work, "item6" + extension), "c", engine=engine, **params)
clock = time.perf_counter
slowest = 0.0
for key, value in zip(keys, values):
    before_set = clock()
    db[key] = value
    slowest = max(slowest, clock() - before_set)
load = len(keys) / (time.perf_counter() - started)
grown = rss() - before
for key, value in zip(keys, values):
    if db[key] != value:
        sys.exit(f"item6: {engine}: a value read back differs from the one written")
n = len(order)
gets = max(1, gets)
load_average = os.getloadavg()[0]
wrong = 0
started = time.perf_counter()
for i in range(gets):
    j = order[i % n]
    if db[keys[j]] != values[j]:
        wrong += 1
get_qps = gets / (time.perf_counter() - started)
if wrong:
    sys.exit(f"item6: {engine}: {wrong} gets returned a value never written for their key")
stats = db.inspect()
db.close()
for name in os.listdir(work):
    os.remove(os.path.join(work, name))
os.rmdir(work)
print(json.dumps({"engine": engine, "params": ",".join(f"{k}={v}" for k, v in params.items()), "records": n,
                  "rss_growth": grown, "bytes_per_record": grown / n, "load_qps": load, "get_qps_1": get_qps,
                  "gets": gets, "load_average": load_average, "slowest_set_s": slowest,
                  "raw_bytes": sum(len(k) + len(v) for k, v in zip(keys, values)),
                  "stats": {k: v for k, v in stats.items() if isinstance(v, (int, str, bool))}}))
"""


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"compact: {' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def build():
    subprocess.run(["cargo", "build", "--release", "-p", "kura-bench", "--bin", "kura-compact-bench"],
                   check=True, cwd=ROOT)
    os.makedirs(WORK, exist_ok=True)
    source = os.path.join(ROOT, "bench", "tkrzw_tiny.cc")
    if not harness.driver_is_current(TKRZW_TINY, source):
        cflags = subprocess.run(["pkg-config", "--cflags", "tkrzw"], capture_output=True,
                                text=True).stdout.split()
        subprocess.run(["g++", "-O2", "-std=c++17", *cflags, source, "-o", TKRZW_TINY, "-ltkrzw",
                        "-lpthread"], check=True)


def dataset_path(name, cap):
    """The TSV of a data set, generated if needed; None when it cannot be had."""
    title, kind, full = DATASETS[name]
    if kind is None:
        path = os.path.join(DATA, "dictionary.tsv")
        return path if os.path.exists(path) else None
    records = min(full, cap)
    path = os.path.join(WORK, f"compact-{kind}-{records}.tsv")
    if not os.path.exists(path):
        subprocess.run([DRIVER, "generate", "--kind", kind, "--records", str(records), "--out", path],
                       check=True)
    return path


def contender_id(row):
    if row["contender"] == "compact":
        more = f":{row['params']}" if row.get("params") else ""
        return f"compact:{row['codec']}:{row['bucket_records']}{more}"
    return row["contender"]


def measure(out):
    cap = env_int("BENCH_COMPACT_RECORDS", 10**12)
    gets = env_int("BENCH_ITER", 1_000_000)
    sets = max(1, gets // 5)
    build()
    rows = []
    wanted = [name for name in os.environ.get("BENCH_COMPACT_DATASETS", ",".join(DATASETS)).split(",") if name]
    for name in wanted:
        if name not in DATASETS:
            sys.exit(f"compact: unknown data set {name!r} (known: {', '.join(DATASETS)})")
        path = dataset_path(name, cap)
        if path is None:
            print(f"compact: no {name} data set (make dictionary), skipped", file=sys.stderr)
            continue
        limit = str(min(cap, 2**63 - 1))
        commands = [[DRIVER, "run", "--data", path, "--contender", "compact", "--codec", codec,
                     "--bucket-records", str(size), "--limit", limit, "--gets", str(gets),
                     "--sets", str(sets), "--params", ",".join(more)] for codec, size, *more in COMPACT_SETTINGS]
        commands += [[DRIVER, "run", "--data", path, "--contender", peer, "--limit", limit,
                      "--gets", str(gets), "--sets", str(sets)] for peer in ("hashmap", "tiny")]
        if cap >= 10**12:
            commands.append([TKRZW_TINY, path, str(gets), str(sets)])
        else:
            # tkrzw_tiny reads the whole file: give it a capped copy.
            capped = os.path.join(WORK, f"compact-{name}-cap{cap}.tsv")
            with open(path, "rb") as source, open(capped, "wb") as target:
                for i, line in enumerate(source):
                    if i >= cap:
                        break
                    target.write(line)
            commands.append([TKRZW_TINY, capped, str(gets), str(sets)])
        commands.append([sys.executable, "-c", PYTHON_DICT, path, limit, str(gets), str(sets)])
        for command in commands:
            row = run(command)
            row["dataset"] = name
            row["id"] = contender_id(row)
            print(f"compact: {name} {row['id']}: {row['bytes_per_record']:.1f} B/record, "
                  f"get {row['get_qps_1']:.0f} QPS", file=sys.stderr)
            rows.append(row)
    document = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": platform.platform(), "cpus": os.cpu_count(),
                "records_cap": cap, "gets_per_thread": gets, "sets_per_thread": sets, "rows": rows}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(document, f, indent=1)


def measure_item6(out):
    """Issue 42 item 6 (see ITEM6_RECORDS): CompactDbm's default and TinyDbm from Python, taking
    turns, BENCH_COMPACT_ITEM6_ROUNDS rounds (default 3); BENCH_COMPACT_ITEM6_CURVE adds
    CompactDbm settings (`;`-separated parameter lists, e.g. `bucket_records=2;bucket_records=8`),
    the trade-off curve around the default. Merged into the JSON `out` under "item6"."""
    path = dataset_path("dictionary", 10**12)
    if path is None:
        print("compact: no dictionary data set (make dictionary), item 6 skipped", file=sys.stderr)
        return
    records = min(ITEM6_RECORDS, env_int("BENCH_COMPACT_RECORDS", ITEM6_RECORDS))
    gets = env_int("BENCH_ITER", 1_000_000)
    rounds = env_int("BENCH_COMPACT_ITEM6_ROUNDS", 3)
    curve = [c for c in os.environ.get("BENCH_COMPACT_ITEM6_CURVE", "").split(";") if c]
    runs = []
    for turn in range(rounds):
        for engine, params in [("compact", ""), ("tiny", ""), *(("compact", c) for c in curve)]:
            row = run([sys.executable, "-c", PYTHON_DEFAULT, path, engine, str(records), str(gets), params])
            row["round"] = turn
            print(f"compact: item 6 round {turn} {engine} {params}: {row['bytes_per_record']:.1f} B/record, "
                  f"get {row['get_qps_1']:.0f} QPS (load average {row['load_average']:.2f})", file=sys.stderr)
            runs.append(row)
    document = {}
    if os.path.exists(out):
        with open(out) as f:
            document = json.load(f)
    document["item6"] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                         "records": records, "gets": gets, "rounds": rounds, "niceness": os.nice(0), "runs": runs}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(document, f, indent=1)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def item6_lines(item6):
    """The report's section on issue 42 item 6: every run, then the medians against the target."""
    runs = item6["runs"]
    lines = ["## Issue 42, item 6: CompactDbm's default from Python", "",
             f"{item6['date']}: {item6['records']:,} dictionary records set one by one from Python into "
             "`kura.open(path, \"c\", engine=...)` with no other parameter, then every value read back, "
             f"then {item6['gets']:,} random gets on one thread, each value compared with the one written. "
             f"{item6['rounds']} rounds, the maps taking turns, one process each, at niceness "
             f"{item6.get('niceness', 0)}. Memory is the resident-set "
             "growth over the load (after malloc_trim); `memory_bytes` is CompactDbm's own account. The load "
             "average is the machine's (2 shared cores) when the gets began.", "",
             "| round | map | params | bytes/record | memory_bytes/record | get 1T | load avg | dictionary | "
             "bucket_records | slowest set |",
             "|---:|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in runs:
        stats = r.get("stats", {})
        own = stats.get("memory_bytes")
        own_per = "-" if own is None else f"{own / r['records']:.1f}"
        slowest = "-" if "slowest_set_s" not in r else f"{r['slowest_set_s'] * 1000:.1f} ms"
        dictionary = (f"{stats.get('dict_size', 0):,} B, {stats.get('dict_trigger', '-')} at "
                      f"{stats.get('dict_trained_records', 0):,}") if stats.get("dict_trained") else "-"
        lines.append(f"| {r['round']} | {r['engine']} | {r['params'] or 'default'} | {r['bytes_per_record']:.1f} | "
                     f"{own_per} | {fmt_qps(r['get_qps_1'])} | "
                     f"{r['load_average']:.2f} | {dictionary} | {stats.get('bucket_records', '-')} | "
                     f"{slowest} |")
    lines.append("")
    by = lambda engine, params: [r for r in runs if r["engine"] == engine and r["params"] == params]
    tiny = by("tiny", "")
    if tiny:
        tiny_bytes = median([r["bytes_per_record"] for r in tiny])
        lines += ["| map | params | median bytes/record | of TinyDbm | median get 1T | met (<= "
                  f"{ITEM6_TARGET['memory_vs_tiny_at_most']}x, >= {ITEM6_TARGET['get_qps_at_least'] // 1000}k) |",
                  "|---|---|---:|---:|---:|---|"]
        settings = sorted({(r["engine"], r["params"]) for r in runs}, key=lambda s: (s[0] != "compact", s[1] != "", s))
        for engine, params in settings:
            rows = by(engine, params)
            per = median([r["bytes_per_record"] for r in rows])
            qps = median([r["get_qps_1"] for r in rows])
            ratio = per / max(tiny_bytes, 1e-9)
            met = "-" if engine != "compact" else ("yes" if ratio <= ITEM6_TARGET["memory_vs_tiny_at_most"]
                                                    and qps >= ITEM6_TARGET["get_qps_at_least"] else "NO")
            lines.append(f"| {engine} | {params or 'default'} | {per:.1f} | {ratio:.3f}x | {fmt_qps(qps)} | {met} |")
        lines.append("")
    return lines


def find(rows, data, ident):
    return next((r for r in rows if r["dataset"] == data and r["id"] == ident), None)


def metric_value(rows, target):
    row = find(rows, target["data"], target["subject"])
    if row is None:
        return None
    metric = target["metric"]
    if metric == "raw_fraction":
        return row["rss_growth"] / max(1, row["raw_bytes"])
    if metric == "scaling":
        return row["get_qps_2"] / max(1e-9, row["get_qps_1"])
    if metric == "bytes_vs":
        peer = find(rows, target["data"], target["peer"])
        return None if peer is None else peer["bytes_per_record"] / max(1e-9, row["bytes_per_record"])
    return row.get(metric)


def fmt_qps(value):
    return "-" if value is None else f"{value / 1000:,.0f}k"


def report(source, md, png):
    with open(source) as f:
        document = json.load(f)
    rows = document["rows"]
    lines = [f"# CompactDbm density ({document['date']})", "",
             f"Machine: {document['machine']}, {document['cpus']} CPUs. Records per data set capped at "
             f"{document['records_cap']:,}; {document['gets_per_thread']:,} gets and "
             f"{document['sets_per_thread']:,} sets per thread per phase. Bytes per record is the "
             "process's resident-set growth over the load divided by the records (one process "
             "per map); ratios are against the HashMap and TinyDbm of the same run. Each map "
             "ran once, one after the other.", ""]
    for name, (title, _, _) in DATASETS.items():
        data_rows = [r for r in rows if r["dataset"] == name]
        if not data_rows:
            continue
        hashmap, tiny = find(rows, name, "hashmap"), find(rows, name, "tiny")
        first = data_rows[0]
        lines += [f"## {title}", "",
                  f"{first['records']:,} records, {first['raw_bytes'] / first['records']:.1f} raw bytes "
                  "a record.", "",
                  "| map | bytes/record | x raw | HashMap / it | TinyDbm / it | get 1T | get 2T | "
                  "set 1T | set 2T |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in data_rows:
            per = r["bytes_per_record"]
            vs = lambda peer: "-" if peer is None else f"{peer['bytes_per_record'] / max(per, 1e-9):.2f}x"
            lines.append(f"| {r['id']} | {per:.1f} | {r['rss_growth'] / max(1, r['raw_bytes']):.2f} | "
                         f"{vs(hashmap)} | {vs(tiny)} | {fmt_qps(r.get('get_qps_1'))} | "
                         f"{fmt_qps(r.get('get_qps_2'))} | {fmt_qps(r.get('set_qps_1'))} | "
                         f"{fmt_qps(r.get('set_qps_2'))} |")
        lines.append("")
    lines += ["## Targets (issue 16)", "", "| data | map | metric | target | measured | met |",
              "|---|---|---|---:|---:|---|"]
    for target in TARGETS:
        value = metric_value(rows, target)
        bound = target.get("at_least", target.get("at_most"))
        sign = ">=" if "at_least" in target else "<="
        met = "-" if value is None else ("yes" if (value >= bound if sign == ">=" else value <= bound) else "NO")
        metric = target["metric"] + (f" ({target['peer']})" if "peer" in target else "")
        shown = "-" if value is None else (f"{value:,.0f}" if value > 1000 else f"{value:.2f}")
        lines.append(f"| {target['data']} | {target['subject']} | {metric} | {sign} {bound:,} | {shown} | {met} |")
    lines.append("")
    if "item6" in document:
        lines += item6_lines(document["item6"])
    with open(md, "w") as f:
        f.write("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compact: matplotlib missing, no plot", file=sys.stderr)
        return
    names = [n for n in DATASETS if any(r["dataset"] == n for r in rows)]
    item6 = document.get("item6")
    panels = len(names) + (1 if item6 else 0)
    figure, axes = plt.subplots(1, max(1, panels), figsize=(6 * max(1, panels), 5), squeeze=False)
    if item6:
        axis = axes[0][-1]
        settings = sorted({(r["engine"], r["params"]) for r in item6["runs"]})
        for engine, params in settings:
            runs = [r for r in item6["runs"] if r["engine"] == engine and r["params"] == params]
            axis.plot([r["bytes_per_record"] for r in runs], [r["get_qps_1"] for r in runs], "o" if engine == "compact"
                      else "s", label=f"{'CompactDbm' if engine == 'compact' else 'TinyDbm'} {params or 'default'}")
        tiny = [r["bytes_per_record"] for r in item6["runs"] if r["engine"] == "tiny"]
        if tiny:
            axis.axvline(median(tiny) * ITEM6_TARGET["memory_vs_tiny_at_most"], color="grey", linestyle=":",
                         label=f"{ITEM6_TARGET['memory_vs_tiny_at_most']}x TinyDbm")
        axis.axhline(ITEM6_TARGET["get_qps_at_least"], color="grey", linestyle="--", label="200k gets/s")
        axis.set_title(f"issue 42 item 6: from Python, {item6['records']:,} dictionary records, each run", fontsize=9)
        axis.set_xlabel("bytes per record (RSS growth / records)")
        axis.set_ylabel("gets per second, 1 thread")
        axis.set_xscale("log")
        axis.legend(fontsize=7)
    for axis, name in zip(axes[0], names):
        data_rows = [r for r in rows if r["dataset"] == name]
        curves = sorted({(r["codec"], r.get("params") or "") for r in data_rows if r["contender"] == "compact"})
        for codec, params in curves:
            curve = sorted((r for r in data_rows if r.get("codec") == codec and (r.get("params") or "") == params),
                           key=lambda r: r["bucket_records"])
            axis.plot([r["bytes_per_record"] for r in curve], [r["get_qps_1"] for r in curve], "o-",
                      label=f"CompactDbm {codec} {params}".rstrip())
            for r in curve:
                axis.annotate(str(r["bucket_records"]), (r["bytes_per_record"], r["get_qps_1"]), fontsize=7)
        for r in data_rows:
            if r["contender"] != "compact":
                axis.plot([r["bytes_per_record"]], [r["get_qps_1"]], "s", label=r["id"])
        axis.set_title(DATASETS[name][0], fontsize=9)
        axis.set_xlabel("bytes per record (RSS growth / records)")
        axis.set_ylabel("gets per second, 1 thread")
        axis.set_xscale("log")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(png, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["measure", "item6", "report", "all"])
    parser.add_argument("--json", default=os.path.join(RESULTS, "compact.json"))
    parser.add_argument("--md", default=os.path.join(RESULTS, "compact.md"))
    parser.add_argument("--png", default=os.path.join(RESULTS, "compact.png"))
    args = parser.parse_args()
    if args.step in ("measure", "all"):
        measure(args.json)
    if args.step in ("item6", "all"):
        measure_item6(args.json)
    if args.step in ("item6", "report", "all"):
        report(args.json, args.md, args.png)


if __name__ == "__main__":
    main()
