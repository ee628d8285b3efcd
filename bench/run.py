#!/usr/bin/env python3
"""Kura against Tkrzw, side by side on this machine (`make bench`), and the demo table
(`make demo`, with --demo).

Workloads:
  1. sequence: `tkrzw_dbm_perf sequence --dbm ENGINE` against `kura bench --engine ENGINE`,
     the same keys and values, 1 and 2 threads, sequential and random keys; QPS of set, get,
     iterate, remove, the file size and the RSS. Engines: hash, tree (plus Kura's full scans
     and 100-key range scans, `--scan --range-scan 100`), and the in-memory tiny, baby and
     cache (no file on either side; Tkrzw's cache is measured on set only, see the report).
  2. dictionary: the TSV of tools/make_dictionary.py loaded with each codec by
     `kura import` and by `tkrzw_dbm_util import`; file size, build time, and the QPS of
     getting every key in a shuffled order with 1 and 2 threads (`kura bench --keys-from`
     and our bench/tkrzw_get.cc, which shuffle alike). Hash files, then tree files (imported,
     then rebuilt), the latter also with full scans and 100-key range scans.
  3. cache hit ratio: CacheDbm against moka and quick_cache under Zipf keys
     (target/release/kura-cache-bench, crates/kura-bench), beside plain LRU.

Writes bench/results/bench.md (tables with kura/tkrzw ratios), bench/results/bench.json
(every measurement) and bench/results/bench.png (if matplotlib is importable).

Environment variables shrink a run: BENCH_ITER (default 1000000 operations per thread),
BENCH_DICT_LIMIT (records of the dictionary, default all), BENCH_CODECS (comma list, hash and
tree), BENCH_TREE_CODECS (comma list for the tree only, default BENCH_CODECS),
BENCH_HIT_OPS (requests of the hit-ratio trace, default 5000000), BENCH_SEQUENCE_REPEAT (runs of
each sequence configuration per side, default 3); BENCH_SKIP_SEQUENCE=1,
BENCH_SKIP_DICTIONARY=1, BENCH_SKIP_TKRZW=1, BENCH_SKIP_HASH=1, BENCH_SKIP_TREE=1,
BENCH_SKIP_MEMORY=1 (tiny, baby, cache), BENCH_SKIP_HITRATIO=1 skip parts; BENCH_REPEAT
(default 3) sets how many times each dictionary get measurement runs, the best one counting
(a run longer than BENCH_REPEAT_MAX_S seconds, default 8, is not repeated).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "data")
WORK = os.path.join(DATA, "work")
RESULTS = os.path.join(ROOT, "bench", "results")
KURA = os.path.join(ROOT, "target", "release", "kura")
KURA_CACHE_BENCH = os.path.join(ROOT, "target", "release", "kura-cache-bench")
TKRZW_GET = os.path.join(WORK, "tkrzw_get")

KURA_CODECS = ["none", "zlib", "zstd", "lz4", "lzma", "snappy", "zstd-dict"]
TKRZW_CODECS = {"none", "zlib", "zstd", "lz4", "lzma"}
PHASES = ["set", "get", "iterate", "remove"]
SCAN_PHASES = ["scan", "scan_back", "range"]
TKRZW_PHASE = {"Setting": "set", "Getting": "get", "Iterating": "iterate", "Removing": "remove"}
# Engines of the sequence workload: Tkrzw's file extension (None: in memory, no file).
SEQUENCE_ENGINES = {"hash": "tkh", "tree": "tkt", "tiny": None, "baby": None, "cache": None}
ENGINE_TITLES = {"hash": "HashDbm vs Tkrzw HashDBM", "tree": "TreeDbm vs Tkrzw TreeDBM",
                 "tiny": "TinyDbm vs Tkrzw TinyDBM", "baby": "BabyDbm vs Tkrzw BabyDBM",
                 "cache": "CacheDbm vs Tkrzw CacheDBM"}
# The range-scan length of the ordered-engine phases.
RANGE_SPAN = 100
DONE_LINE = re.compile(r"^(Setting|Getting|Iterating|Removing) done: elapsed_time=([\d.]+) "
                       r"num_records=(\d+) qps=(\d+) mem=(\d+)")
FILE_SIZE_LINE = re.compile(r"^\s+file_size=(\d+)")


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, **kwargs):
    """Runs a command, failing loudly with its output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"bench: {' '.join(command)} failed ({result.returncode}):\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def remove_files(*paths):
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


# ---------------------------------------------------------------- sequence workload

def cache_capacity(iterations, threads):
    """cap_rec_num for both caches: room for every key of the run with a margin, since the
    record cap is shared out among internal slots and a full slot evicts."""
    return iterations * threads * 5 // 4 + 1024


def tkrzw_sequence(engine, iterations, threads, random_key, extra=()):
    extension = SEQUENCE_ENGINES[engine]
    path = os.path.join(WORK, f"perf.{extension}") if extension else None
    command = ["tkrzw_dbm_perf", "sequence", "--dbm", engine, "--iter", str(iterations),
               "--size", "8", "--threads", str(threads), *extra]
    if path:
        remove_files(path)
        command += ["--path", path]
    if engine == "cache":
        # Tkrzw's CacheDBM iterator costs O(records) per step (100,000 records took 55 s
        # to iterate here), so a full sequence would not finish: time the set phase only.
        command += ["--cap_rec_num", str(cache_capacity(iterations, threads)), "--set_only"]
    if random_key:
        command.append("--random_key")
    output = run(command)
    if path:
        remove_files(path)
    phases, current = {}, None
    for line in output.splitlines():
        done = DONE_LINE.match(line)
        if done:
            current = TKRZW_PHASE[done.group(1)]
            phases[current] = {"elapsed_s": float(done.group(2)), "records": int(done.group(3)),
                               "qps": float(done.group(4)), "rss_bytes": int(done.group(5))}
            continue
        size = FILE_SIZE_LINE.match(line)
        if size and current:
            phases[current]["file_size"] = int(size.group(1))
            current = None
    return phases


def kura_sequence_command(engine, iterations, threads, random_key, scans=True):
    """`kura bench` for a sequence run, and the file it writes (None in memory)."""
    command = [KURA, "bench", "--engine", engine, "--iter", str(iterations), "--size", "8",
               "--threads", str(threads), "--json"]
    path = None
    if engine in ("hash", "tree"):
        path = os.path.join(WORK, f"perf.{'kuh' if engine == 'hash' else 'kut'}")
        command += ["--path", path]
    if scans and engine in ("tree", "baby"):
        command += ["--scan", "--range-scan", str(RANGE_SPAN)]
    if engine == "cache":
        command += ["--params", f"cap_rec_num={cache_capacity(iterations, threads)}"]
    if random_key:
        command.append("--random-key")
    return command, path


def kura_sequence(engine, iterations, threads, random_key):
    command, path = kura_sequence_command(engine, iterations, threads, random_key)
    if path:
        remove_files(path)
    output = run(command)
    if path:
        remove_files(path)
    phases = {}
    for line in output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            phases[record["phase"]] = record
    return phases


def sequence_repeat():
    return max(1, env_int("BENCH_SEQUENCE_REPEAT", 3))


def sequence_workload(engine, iterations, with_tkrzw):
    """Each configuration runs `sequence_repeat()` times, Tkrzw and Kura taking turns, and each
    side keeps its best run per phase: on a shared machine the best run is the least
    disturbed, and taking turns exposes both to the same spells of outside load."""
    results = []
    for threads, random_key in [(1, False), (2, False), (1, True), (2, True)]:
        label = f"{threads} thread{'s' if threads > 1 else ''}, {'random' if random_key else 'sequential'} keys"
        log(f"sequence {engine}: {label}, {iterations} iterations per thread, "
            f"{sequence_repeat()} runs each")
        tkrzw_runs, kura_runs = [], []
        for _ in range(sequence_repeat()):
            if with_tkrzw:
                tkrzw_runs.append(tkrzw_sequence(engine, iterations, threads, random_key))
            kura_runs.append(kura_sequence(engine, iterations, threads, random_key))
        results.append({"engine": engine, "threads": threads, "random_key": random_key,
                        "label": label, "iterations": iterations,
                        "tkrzw": best_phases(tkrzw_runs), "kura": best_phases(kura_runs)})
    return results


SCALING_ENGINES = ("hash", "cache")


def thread_scaling(engine, records):
    """Get QPS of Kura alone with 1 and 2 threads over the same number of records (`records`,
    split among the threads), best of BENCH_REPEAT runs each. The sequence runs above give
    every thread `--iter` records of its own, as `tkrzw_dbm_perf` does, so their 2-thread
    database holds twice the records (and HashDbm's chains are twice as long in the same
    bucket count): that ratio mixes the data size into the thread scaling."""
    gets = {}
    for threads in (1, 2):
        command, path = kura_sequence_command(engine, records // threads, threads, False,
                                              scans=False)
        log(f"thread scaling {engine}: {threads} thread(s), {records} records in all")
        gets[threads] = best_of(command)["get"]
        if path:
            remove_files(path)
    return {"engine": engine, "records": records, "get1": gets[1], "get2": gets[2]}


def scaling_check(checks, name, scaling, sequence_runs):
    """The 2-thread target on equal data, with the per-thread-records ratio beside it."""
    if scaling:
        ours, base = scaling["get2"]["qps"], scaling["get1"]["qps"]
        checks.add(f"{name}: 2-thread get >= 1.8x 1-thread get, same {scaling['records']:,} records",
                   ours >= 1.8 * base, f"{qps(ours)} vs {qps(base)} ({ratio(ours, base)}, best of "
                   f"{max(1, env_int('BENCH_REPEAT', 3))} each)")
    one, two = find_run(sequence_runs, 1, False), find_run(sequence_runs, 2, False)
    if one and two:
        ours, base = two["kura"]["get"]["qps"], one["kura"]["get"]["qps"]
        records = two["kura"]["get"].get("records", 0)
        checks.info(f"{name}: 2-thread get vs 1-thread get, sequence runs ({records:,} vs "
                    f"{one['kura']['get'].get('records', 0):,} records)",
                    f"{qps(ours)} vs {qps(base)} ({ratio(ours, base)})")


# ---------------------------------------------------------------- dictionary workload

def dictionary_tsv(limit):
    os.makedirs(DATA, exist_ok=True)
    name = "dictionary.tsv" if limit <= 0 else f"dictionary-{limit}.tsv"
    path = os.path.join(DATA, name)
    if not os.path.exists(path):
        log(f"dictionary: generating {path}")
        command = [sys.executable, os.path.join(ROOT, "tools", "make_dictionary.py"), path]
        if limit > 0:
            command += ["--limit", str(limit)]
        subprocess.run(command, check=True)
    return path


def best_of(command):
    """Per phase, the run with the highest QPS among BENCH_REPEAT runs (default 3): on a
    shared machine, the best run is the one least disturbed by other work. Both programs get
    the same. A run longer than BENCH_REPEAT_MAX_S seconds (default 8) is not repeated, so
    that the slow codecs of the tree keep `make bench` within its time."""
    runs = []
    for _ in range(max(1, env_int("BENCH_REPEAT", 3))):
        started = time.monotonic()
        records = (json.loads(line) for line in run(command).splitlines() if line.startswith("{"))
        runs.append({record["phase"]: record for record in records})
        if time.monotonic() - started > env_int("BENCH_REPEAT_MAX_S", 8):
            break
    return best_phases(runs)


def best_phases(runs):
    """Per phase, the figures of the run with the highest QPS in it (`runs`: one dict of
    phase -> figures per run)."""
    best = {}
    for phases in runs:
        for phase, record in phases.items():
            if record["qps"] > best.get(phase, {}).get("qps", -1):
                best[phase] = record
    return best


def scan_flags(engine, threads, kura):
    """The extra phases of a dictionary get run on a tree: full scans with one thread, range
    scans with each thread count."""
    if engine != "tree":
        return []
    flags = (["--scan"] if threads == 1 else [])
    if kura:
        return flags + ["--range-scan", str(RANGE_SPAN), "--iter", "10000"]
    return flags + ["--range", str(RANGE_SPAN), "--count", "10000"]


def kura_get(db, tsv, threads, engine="hash"):
    return best_of([KURA, "bench", "--keys-from", tsv, "--path", db, "--threads", str(threads),
                    "--json", *scan_flags(engine, threads, True)])


def tkrzw_get(db, tsv, threads, engine="hash"):
    return best_of([TKRZW_GET, db, tsv, str(threads), *scan_flags(engine, threads, False)])


def build_tkrzw_get():
    source = os.path.join(ROOT, "bench", "tkrzw_get.cc")
    if (not os.path.exists(TKRZW_GET)
            or os.path.getmtime(TKRZW_GET) < os.path.getmtime(source)):
        cflags = subprocess.run(["pkg-config", "--cflags", "tkrzw"], capture_output=True,
                                text=True).stdout.split()
        run(["g++", "-O2", "-std=c++17", *cflags, source, "-o", TKRZW_GET, "-ltkrzw",
             "-lpthread"])


def store_gets(side, gets1, gets2):
    """get1/get2 as before (the get phase of 1 and 2 threads), plus the scan phases."""
    side["get1"], side["get2"] = gets1["get"], gets2["get"]
    for phase in ("scan", "scan_back"):
        if phase in gets1:
            side[phase] = gets1[phase]
    for threads, gets in ((1, gets1), (2, gets2)):
        if "range" in gets:
            side[f"range{threads}"] = gets["range"]


def dictionary_workload(tsv, codecs, with_tkrzw, engine="hash"):
    """Hash: `kura import` against `tkrzw_dbm_util create --buckets 1M` + `import`. Tree:
    import, then rebuild (both sides), timed together and apart."""
    kura_extension, tkrzw_extension = ("kuh", "tkh") if engine == "hash" else ("kut", "tkt")
    results = []
    for codec in codecs:
        row = {"codec": codec, "engine": engine}
        db = os.path.join(WORK, f"dict-{codec}.{kura_extension}")
        remove_files(db)
        log(f"dictionary {engine}: kura import, {codec}")
        started = time.monotonic()
        summary = run([KURA, "import", db, tsv, "--record-comp", codec])
        row["kura"] = {"import_s": time.monotonic() - started, "summary": summary.strip()}
        if engine == "tree":
            run([KURA, "rebuild", db])
        row["kura"]["build_s"] = time.monotonic() - started
        row["kura"]["file_size"] = os.path.getsize(db)
        store_gets(row["kura"], kura_get(db, tsv, 1, engine), kura_get(db, tsv, 2, engine))
        remove_files(db)
        if with_tkrzw and codec in TKRZW_CODECS:
            db = os.path.join(WORK, f"dict-{codec}.{tkrzw_extension}")
            remove_files(db)
            log(f"dictionary {engine}: tkrzw import, {codec}")
            started = time.monotonic()
            create = ["tkrzw_dbm_util", "create", "--dbm", engine, "--record_comp", codec]
            if engine == "hash":
                create += ["--buckets", "1000000"]
            run(create + [db])
            run(["tkrzw_dbm_util", "import", "--tsv", db, tsv])
            row["tkrzw"] = {"import_s": time.monotonic() - started}
            if engine == "tree":
                run(["tkrzw_dbm_util", "rebuild", db])
            row["tkrzw"]["build_s"] = time.monotonic() - started
            row["tkrzw"]["file_size"] = os.path.getsize(db)
            store_gets(row["tkrzw"], tkrzw_get(db, tsv, 1, engine), tkrzw_get(db, tsv, 2, engine))
            remove_files(db)
        results.append(row)
    return results


# ---------------------------------------------------------------- cache hit ratio

def hit_ratio_workload():
    """kura-cache-bench: one JSON line per (cache, Zipf exponent, threads)."""
    if not os.path.exists(KURA_CACHE_BENCH):
        log(f"bench: {KURA_CACHE_BENCH} is missing (cargo build --release builds it); "
            "no hit-ratio table")
        return []
    ops = env_int("BENCH_HIT_OPS", 5_000_000)
    log(f"cache hit ratio: Zipf 0.99 and 1.2, {ops} requests, 100000 entries, 1M keys")
    output = run([KURA_CACHE_BENCH, "--capacity", "100000", "--universe", "1000000",
                  "--ops", str(ops), "--zipf", "0.99,1.2", "--threads", "1,2"])
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


# ---------------------------------------------------------------- reporting

def ratio(ours, theirs):
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


def qps(value):
    if not value:
        return "-"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"


def mb(size):
    return f"{size / 1e6:.1f} MB" if size else "-"


def machine_info():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as info:
            kib = int(info.readline().split()[1])
            memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    tkrzw = subprocess.run(["tkrzw_build_util", "version"], capture_output=True, text=True)
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True)
    return (f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
            f"{tkrzw.stdout.strip() or 'Tkrzw not found'}; {rustc.stdout.strip()}")


def sequence_table(results):
    """Rows per workload and phase: QPS of both, ratio; the file size for file engines and the
    RSS after setting for in-memory ones; Kura's scan phases (QPS: records/s for full scans,
    scans/s for 100-key range scans) where it ran them."""
    lines = ["| workload | phase | Tkrzw | Kura | Kura/Tkrzw |",
             "| --- | --- | ---: | ---: | ---: |"]
    for run_ in results:
        in_memory = SEQUENCE_ENGINES[run_["engine"]] is None
        for phase in PHASES + SCAN_PHASES:
            if phase not in run_["kura"] and phase not in run_["tkrzw"]:
                continue
            theirs = run_["tkrzw"].get(phase, {}).get("qps", 0)
            ours = run_["kura"].get(phase, {}).get("qps", 0)
            name = {"scan": "full scan, forward", "scan_back": "full scan, backward",
                    "range": f"{RANGE_SPAN}-key range scans"}.get(phase, phase)
            lines.append(f"| {run_['label']} | {name} | {qps(theirs)} | {qps(ours)} | "
                         f"{ratio(ours, theirs)} |")
        measure, name = ("rss_bytes", "RSS after set") if in_memory else ("file_size", "file size")
        theirs = run_["tkrzw"].get("set", {}).get(measure, 0)
        ours = run_["kura"].get("set", {}).get(measure, 0)
        lines.append(f"| {run_['label']} | {name} | {mb(theirs)} | {mb(ours)} | "
                     f"{ratio(ours, theirs)} |")
    return "\n".join(lines)


def dictionary_table(results, with_tkrzw):
    if not with_tkrzw:
        lines = ["| codec | file size | build time | get QPS, 1 thread | get QPS, 2 threads |",
                 "| --- | ---: | ---: | ---: | ---: |"]
        for row in results:
            k = row["kura"]
            lines.append(f"| {row['codec']} | {mb(k['file_size'])} | {k['build_s']:.1f} s | "
                         f"{qps(k['get1']['qps'])} | {qps(k['get2']['qps'])} |")
        return "\n".join(lines)
    lines = ["| codec | Kura size | Tkrzw size | size ratio | Kura build | Tkrzw build | "
             "Kura get 1T | Tkrzw get 1T | get ratio 1T | Kura get 2T | Tkrzw get 2T | "
             "get ratio 2T |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in results:
        k, t = row["kura"], row.get("tkrzw", {})
        cells = [row["codec"], mb(k["file_size"]), mb(t.get("file_size")),
                 ratio(k["file_size"], t.get("file_size")), f"{k['build_s']:.1f} s",
                 f"{t['build_s']:.1f} s" if t else "-"]
        for threads in (1, 2):
            ours = k[f"get{threads}"]["qps"]
            theirs = t.get(f"get{threads}", {}).get("qps")
            cells += [qps(ours), qps(theirs), ratio(ours, theirs)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scan_table(results):
    """The tree's scans on the dictionary: full scans in records/s, range scans in scans/s."""
    lines = ["| codec | Kura scan | Tkrzw scan | ratio | Kura scan back | Tkrzw scan back | ratio | "
             f"Kura {RANGE_SPAN}-key ranges 1T | Tkrzw 1T | ratio | Kura 2T | Tkrzw 2T | ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for row in results:
        k, t = row["kura"], row.get("tkrzw", {})
        cells = [row["codec"]]
        for phase in ("scan", "scan_back", "range1", "range2"):
            ours = k.get(phase, {}).get("qps")
            theirs = t.get(phase, {}).get("qps")
            cells += [qps(ours), qps(theirs), ratio(ours, theirs)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def hit_ratio_table(hits):
    lines = ["| Zipf s | cache | hit ratio | vs plain LRU (Che) | QPS, 1 thread | QPS, 2 threads |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for s in sorted({h["zipf_s"] for h in hits}):
        rows = [h for h in hits if h["zipf_s"] == s]
        che = next((h["hit_ratio"] for h in rows if "Che" in h["cache"]), None)
        for name in dict.fromkeys(h["cache"] for h in rows):
            one = next((h for h in rows if h["cache"] == name and h["threads"] == 1), {})
            two = next((h for h in rows if h["cache"] == name and h["threads"] == 2), {})
            hit = one.get("hit_ratio", 0)
            versus = f"{hit - che:+.4f}" if che is not None and "Che" not in name else "-"
            lines.append(f"| {s} | {name} | {hit:.4f} | {versus} | {qps(one.get('qps'))} | "
                         f"{qps(two.get('qps'))} |")
    return "\n".join(lines)


class Checks:
    """Target rows: name, measured figures, verdict."""

    def __init__(self):
        self.rows = []

    def add(self, name, passed, detail):
        self.rows.append(f"| {name} | {detail} | {'yes' if passed else '**no**'} |")

    def info(self, name, detail):
        """A figure shown beside the targets that is not itself one."""
        self.rows.append(f"| {name} | {detail} | (not a target) |")

    def versus(self, name, ours, theirs, factor):
        if ours and theirs:
            self.add(name, ours >= factor * theirs,
                     f"{qps(ours)} vs {qps(theirs)} ({ratio(ours, theirs)})")

    def table(self):
        if not self.rows:
            return ""
        return "\n".join(["| target | measured | met |", "| --- | --- | --- |"] + self.rows)


def find_run(runs, threads, random_key):
    return next((r for r in runs if r["threads"] == threads and r["random_key"] == random_key), None)


def target_checks(sequence, dictionary, scaling):
    """The targets of issue #2 (HashDbm), each with the measured figures and a verdict."""
    checks = Checks()
    runs = sequence.get("hash", [])
    one = find_run(runs, 1, False)
    if one and one["tkrzw"]:
        for phase in ("set", "get", "remove"):
            checks.versus(f"1M records, 1 thread: {phase} >= 2x Tkrzw",
                          one["kura"][phase]["qps"], one["tkrzw"][phase]["qps"], 2)
        ours, theirs = one["kura"]["set"]["file_size"], one["tkrzw"]["set"]["file_size"]
        checks.add("file size <= Tkrzw's", ours <= theirs, f"{mb(ours)} vs {mb(theirs)}")
    scaling_check(checks, "hash", scaling.get("hash"), runs)
    by_codec = {row["codec"]: row for row in dictionary.get("hash", [])}
    zstd_dict, zstd = by_codec.get("zstd-dict"), by_codec.get("zstd", {})
    if zstd_dict:
        size = zstd_dict["kura"]["file_size"]
        checks.add("dictionary: zstd-dict file <= 40 MB", size <= 40e6, mb(size))
        theirs = zstd.get("tkrzw", {}).get("get1", {}).get("qps")
        checks.versus("dictionary: zstd-dict get >= 3x Tkrzw zstd",
                      zstd_dict["kura"]["get1"]["qps"], theirs, 3)
    lz4 = by_codec.get("lz4", {})
    if lz4.get("tkrzw"):
        ours, theirs = lz4["kura"]["file_size"], lz4["tkrzw"]["file_size"]
        checks.add("dictionary: lz4 file <= Tkrzw lz4", ours <= theirs, f"{mb(ours)} vs {mb(theirs)}")
        checks.versus("dictionary: lz4 get >= Tkrzw lz4", lz4["kura"]["get1"]["qps"],
                      lz4["tkrzw"]["get1"]["qps"], 1)
    none = by_codec.get("none", {})
    if none.get("tkrzw"):
        checks.versus("dictionary: none get >= Tkrzw none", none["kura"]["get1"]["qps"],
                      none["tkrzw"]["get1"]["qps"], 1)
    return checks.table()


def tree_checks(sequence, dictionary):
    """The targets of issue #3 (TreeDbm)."""
    checks = Checks()
    for random_key in (False, True):
        one = find_run(sequence.get("tree", []), 1, random_key)
        if not one or not one["tkrzw"]:
            continue
        keys = "random" if random_key else "sequential"
        for phase in ("set", "get", "remove"):
            checks.versus(f"tree, {keys} keys, 1 thread: {phase} >= 2x Tkrzw",
                          one["kura"][phase]["qps"], one["tkrzw"][phase]["qps"], 2)
        ours, theirs = one["kura"]["set"]["file_size"], one["tkrzw"]["set"]["file_size"]
        checks.add(f"tree, {keys} keys: file size <= Tkrzw's", ours <= theirs,
                   f"{mb(ours)} vs {mb(theirs)}")
    by_codec = {row["codec"]: row for row in dictionary.get("tree", [])}
    zstd = by_codec.get("zstd")
    if zstd:
        size = zstd["kura"]["file_size"]
        checks.add("tree dictionary: zstd file <= 40 MB", size <= 40e6, mb(size))
        checks.versus("tree dictionary: zstd get >= 3x Tkrzw zstd tree", zstd["kura"]["get1"]["qps"],
                      zstd.get("tkrzw", {}).get("get1", {}).get("qps"), 3)
    none = by_codec.get("none")
    if none:
        size = none["kura"]["file_size"]
        checks.add("tree dictionary: none file <= 120 MB", size <= 120e6, mb(size))
    lz4 = by_codec.get("lz4")
    if lz4:
        checks.versus("tree dictionary: lz4 get >= 3x Tkrzw lz4 tree", lz4["kura"]["get1"]["qps"],
                      lz4.get("tkrzw", {}).get("get1", {}).get("qps"), 3)
    return checks.table()


def memory_checks(sequence, hits, scaling):
    """The targets of issue #4 (TinyDbm, BabyDbm, CacheDbm)."""
    checks = Checks()
    for engine in ("tiny", "baby", "cache"):
        for random_key in (False, True):
            one = find_run(sequence.get(engine, []), 1, random_key)
            if not one or not one["tkrzw"]:
                continue
            keys = "random" if random_key else "sequential"
            for phase in ("set", "get", "remove"):
                checks.versus(f"{engine}, {keys} keys, 1 thread: {phase} >= 2x Tkrzw",
                              one["kura"].get(phase, {}).get("qps"),
                              one["tkrzw"].get(phase, {}).get("qps"), 2)
    one = find_run(sequence.get("cache", []), 1, False)
    if one and one["tkrzw"]:
        ours, theirs = one["kura"]["set"]["rss_bytes"], one["tkrzw"]["set"]["rss_bytes"]
        checks.add("cache: RSS after set <= 0.7x Tkrzw's", ours <= 0.7 * theirs,
                   f"{mb(ours)} vs {mb(theirs)} ({ratio(ours, theirs)})")
    scaling_check(checks, "cache", scaling.get("cache"), sequence.get("cache", []))
    for s in sorted({h["zipf_s"] for h in hits}):
        # The LRU target is the default policy's: the plain "kura CacheDbm" row.
        ours = next((h["hit_ratio"] for h in hits if h["zipf_s"] == s and h["threads"] == 1
                     and h["cache"] == "kura CacheDbm"), None)
        lru = next((h["hit_ratio"] for h in hits if h["zipf_s"] == s
                    and "simulated" in h["cache"]), None)
        che = next((h["hit_ratio"] for h in hits if h["zipf_s"] == s and "Che" in h["cache"]), None)
        if ours is not None and lru is not None:
            # Per-slot LRU lists differ from one global list by a hair either way: within
            # 0.001 of the global LRU on the same trace counts as meeting it.
            checks.add(f"cache hit ratio, Zipf {s}: >= plain LRU", ours >= lru - 0.001,
                       f"{ours:.4f} vs {lru:.4f} simulated, {che:.4f} by Che's approximation")
        # The admission option (policy=tinylfu) against the caches that admit selectively.
        admitting = next((h["hit_ratio"] for h in hits if h["zipf_s"] == s and h["threads"] == 1
                          and h["cache"] == "kura CacheDbm (tinylfu)"), None)
        others = {h["cache"].split(" ")[0]: h["hit_ratio"] for h in hits
                  if h["zipf_s"] == s and h["threads"] == 1
                  and h["cache"].split(" ")[0] in ("moka", "quick_cache")}
        if admitting is not None and others:
            checks.add(f"cache hit ratio, Zipf {s}: policy=tinylfu >= moka and quick_cache",
                       all(admitting >= theirs for theirs in others.values()),
                       f"{admitting:.4f} vs " + ", ".join(f"{name} {theirs:.4f}"
                                                          for name, theirs in others.items()))
    return checks.table()


def sequence_section(engine, runs, iterations):
    title = ENGINE_TITLES[engine]
    extra = {"cache": f" --cap_rec_num N` (N = 1.25 x records + 1024, the same for "
                      "`kura bench --params cap_rec_num=N`)",
             }.get(engine, "`")
    parts = [f"### {title}", "",
             f"`tkrzw_dbm_perf sequence --dbm {engine} --iter {iterations} --size 8{extra} against "
             f"`kura bench --engine {engine}`, each run {sequence_repeat()} times taking turns; "
             "per phase, the best run of each side."]
    if engine == "tree":
        parts.append(f"Kura also ran `--scan --range-scan {RANGE_SPAN}`: full scans through the "
                     "ordered cursor (QPS = records/s; Tkrzw's `iterate` row is its full forward "
                     f"scan) and {RANGE_SPAN}-key range scans from random keys (QPS = scans/s; "
                     "iter/100 scans per thread).")
    if engine == "baby":
        parts.append(f"Kura also ran `--scan --range-scan {RANGE_SPAN}` (see the tree section).")
    if SEQUENCE_ENGINES[engine] is None:
        parts.append("In memory on both sides: no file, one database through all phases; the "
                     "last row is the process RSS after setting.")
    if engine == "cache":
        parts.append("Tkrzw is timed on **set only** (`--set_only`): its CacheDBM iterator costs "
                     "O(records) per step (iterating 100,000 records took 55 s here), so its full "
                     "sequence would not finish; run on its own, `--get_only` would read a new, "
                     "empty in-memory database. Compare set and RSS.")
    return parts + ["", sequence_table(runs), ""]


def write_report(sequence, dictionary, hits, scaling, settings, tsv, plotted):
    os.makedirs(RESULTS, exist_ok=True)
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = [
        "# Kura vs Tkrzw",
        "",
        f"Measured {now} by `make bench` (bench/run.py) on: {machine_info()}.",
        "All figures come from one run on a machine shared with other work; only ratios from "
        "the same run mean much, as absolute figures drift between runs. QPS counts all threads; "
        "iterations are per thread. `1T`/`2T`: 1 or 2 threads. The 2-thread get targets are "
        "measured on the same records as one thread (the sequence runs give each thread records "
        "of its own, so their 2-thread databases hold twice as many); the sequence ratio is shown "
        "beside them.",
        "",
    ]
    for title, table in (("Targets: HashDbm (issue #2)", target_checks(sequence, dictionary, scaling)),
                         ("Targets: TreeDbm (issue #3)", tree_checks(sequence, dictionary)),
                         ("Targets: in-memory engines (issue #4)", memory_checks(sequence, hits, scaling))):
        if table:
            parts += [f"## {title}", "", table, ""]
    if sequence:
        parts += ["## Sequence workload", ""]
        for engine, runs in sequence.items():
            parts += sequence_section(engine, runs, settings["iter"])
    if dictionary:
        parts += [
            "## Dictionary workload",
            "",
            f"`{os.path.relpath(tsv, ROOT)}` from tools/make_dictionary.py "
            f"({settings['dict_records']} records, {settings['dict_bytes'] / 1e6:.1f} MB). "
            "Get: every key once in the same shuffled order, split among the threads "
            "(`kura bench --keys-from`, `bench/tkrzw_get.cc`), best of "
            f"{max(1, env_int('BENCH_REPEAT', 3))} runs (one if a run takes over "
            f"{env_int('BENCH_REPEAT_MAX_S', 8)} s).",
            "",
        ]
        if dictionary.get("hash"):
            with_tkrzw = any("tkrzw" in row for row in dictionary["hash"])
            parts += ["### Hash files", "",
                      "Build: `kura import` (default settings, worker threads = CPUs) and "
                      "`tkrzw_dbm_util create --dbm hash --buckets 1000000` + `import --tsv` "
                      "(one thread).", "",
                      dictionary_table(dictionary["hash"], with_tkrzw), ""]
        if dictionary.get("tree"):
            with_tkrzw = any("tkrzw" in row for row in dictionary["tree"])
            parts += ["### Tree files", "",
                      "Build: `kura import X.kut` then `kura rebuild X.kut`, against "
                      "`tkrzw_dbm_util create --dbm tree --record_comp CODEC X.tkt`, `import --tsv`, "
                      "`rebuild`; build time includes both steps. Default page sizes and caches "
                      "on both sides (Tkrzw's tree caches 10,000 pages; Kura's 256 MiB).", "",
                      dictionary_table(dictionary["tree"], with_tkrzw), "",
                      f"Scans of the same rebuilt trees: full scans with one iterator (records/s; "
                      f"Tkrzw's backward scan starts with `JumpLower` because its `Last()` lands "
                      f"in the first leaf in 1.0.25), and 10,000 {RANGE_SPAN}-key range scans "
                      "starting at shuffled keys (scans/s).", "",
                      scan_table(dictionary["tree"]), ""]
    if hits:
        first = hits[0]
        parts += [
            "## Cache hit ratio under Zipf keys",
            "",
            f"`target/release/kura-cache-bench` (crates/kura-bench): {first['capacity']} entries "
            f"in each cache, keys drawn from {first['universe']} by Zipf's law, "
            f"{first['warmup_ops']} requests to warm up then {first['ops']} measured, each a get "
            "then a set on a miss. Plain LRU: an exact simulation of one global LRU list on the "
            "same trace, and Che's approximation (the theoretical figure). moka and quick_cache "
            "admit new keys selectively (TinyLFU, S3-FIFO-like), so they may beat LRU; CacheDbm "
            "is plain LRU per slot by default, and `policy=tinylfu` (\"kura CacheDbm (tinylfu)\") "
            "adds TinyLFU admission over a segmented LRU (docs/memory.md).",
            "",
            hit_ratio_table(hits),
            "",
        ]
    if plotted:
        parts += ["![charts](bench.png)", ""]
    with open(os.path.join(RESULTS, "bench.md"), "w") as out:
        out.write("\n".join(parts))
    with open(os.path.join(RESULTS, "bench.json"), "w") as out:
        json.dump({"date": now, "settings": settings, "sequence": sequence,
                   "dictionary": dictionary, "hit_ratio": hits, "thread_scaling": scaling}, out,
                  indent=1)


def plot(sequence, dictionary, hits, file_name="bench.png"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("bench: matplotlib is not installed; no bench.png (make bench installs it in .venv)")
        return False
    panels = []  # (title, unit, labels, Kura values, Tkrzw values or None)
    for engine, runs in sequence.items():
        labels, ours, theirs = [], [], []
        for run_ in runs:
            for phase in ("set", "get", "remove"):
                labels.append(f"{run_['threads']}T{'r' if run_['random_key'] else 's'} {phase}")
                ours.append(run_["kura"].get(phase, {}).get("qps", 0) / 1e6)
                theirs.append(run_["tkrzw"].get(phase, {}).get("qps", 0) / 1e6)
        panels.append((f"{engine}: sequence (T = threads, s/r = seq/random keys)", "M QPS",
                       labels, ours, theirs))
    memory = [e for e in ("tiny", "baby", "cache") if e in sequence]
    if memory:
        labels, ours, theirs = [], [], []
        for engine in memory:
            for run_ in sequence[engine]:
                if run_["threads"] == 1:
                    labels.append(f"{engine} {'r' if run_['random_key'] else 's'}")
                    ours.append(run_["kura"].get("set", {}).get("rss_bytes", 0) / 1e6)
                    theirs.append(run_["tkrzw"].get("set", {}).get("rss_bytes", 0) / 1e6)
        panels.append(("in-memory engines: RSS after set, 1 thread", "MB", labels, ours, theirs))
    for engine, rows in dictionary.items():
        labels = [row["codec"] for row in rows]
        panels.append((f"dictionary {engine}: file size", "MB", labels,
                       [row["kura"]["file_size"] / 1e6 for row in rows],
                       [row.get("tkrzw", {}).get("file_size", 0) / 1e6 for row in rows]))
        panels.append((f"dictionary {engine}: random get, 1 thread", "k QPS", labels,
                       [row["kura"]["get1"]["qps"] / 1e3 for row in rows],
                       [row.get("tkrzw", {}).get("get1", {}).get("qps", 0) / 1e3 for row in rows]))
        if engine == "tree":
            panels.append((f"dictionary tree: {RANGE_SPAN}-key range scans, 1 thread",
                           "k scans/s", labels,
                           [row["kura"].get("range1", {}).get("qps", 0) / 1e3 for row in rows],
                           [row.get("tkrzw", {}).get("range1", {}).get("qps", 0) / 1e3
                            for row in rows]))
    if hits:
        one = [h for h in hits if h["threads"] == 1]
        panels.append(("cache hit ratio under Zipf (1 thread)", "hit ratio",
                       [f"s={h['zipf_s']} {h['cache'].split(' ')[0]}"
                        + (" (Che)" if "Che" in h["cache"] else
                           " (sim)" if "simulated" in h["cache"] else
                           " (tinylfu)" if "tinylfu" in h["cache"] else "") for h in one],
                       [h["hit_ratio"] for h in one], None))
    if not panels:
        return False
    columns = min(3, len(panels))
    rows_ = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows_, columns, figsize=(6.5 * columns, 4.8 * rows_),
                                squeeze=False)
    width = 0.38
    for axis, (title, unit, labels, ours, theirs) in zip(axes.flat, panels):
        positions = list(range(len(labels)))
        if theirs is None:
            axis.bar(positions, ours, 0.6, color="#2a7ab0")
            low = min(ours) if ours else 0
            axis.set_ylim(max(0.0, low - 0.1), 1.0)
        else:
            axis.bar([p - width / 2 for p in positions], theirs, width, label="Tkrzw",
                     color="#999999")
            axis.bar([p + width / 2 for p in positions], ours, width, label="Kura",
                     color="#2a7ab0")
            axis.legend(fontsize=8)
        axis.set_xticks(positions)
        axis.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        axis.set_title(title, fontsize=9)
        axis.set_ylabel(unit)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    figure.tight_layout()
    figure.savefig(os.path.join(RESULTS, file_name), dpi=100)
    return True


def count_records(tsv):
    records = size = 0
    with open(tsv, "rb") as lines:
        for line in lines:
            records += 1
            size += len(line)
    return records, size


def skipped(part):
    return bool(os.environ.get(f"BENCH_SKIP_{part}", "").strip())


def main():
    parser = argparse.ArgumentParser(description="Kura benchmarks against Tkrzw")
    parser.add_argument("--demo", action="store_true",
                        help="dictionary workload with Kura only; print the table")
    args = parser.parse_args()
    if not os.path.exists(KURA):
        sys.exit(f"bench: {KURA} is missing; run `cargo build --release` (make build)")
    os.makedirs(WORK, exist_ok=True)
    began = time.monotonic()

    with_tkrzw = not args.demo and not skipped("TKRZW")
    if with_tkrzw and not shutil.which("tkrzw_dbm_perf"):
        sys.exit("bench: tkrzw_dbm_perf not found; run `make deps`")
    codecs = [c for c in os.environ.get("BENCH_CODECS", ",".join(KURA_CODECS)).split(",") if c]
    tree_codecs = [c for c in os.environ.get("BENCH_TREE_CODECS", ",".join(codecs)).split(",")
                   if c]
    settings = {"iter": env_int("BENCH_ITER", 1_000_000),
                "dict_limit": env_int("BENCH_DICT_LIMIT", 0), "codecs": codecs,
                "tree_codecs": tree_codecs}

    engines = [e for e, part in (("hash", "HASH"), ("tree", "TREE"), ("tiny", "MEMORY"),
                                 ("baby", "MEMORY"), ("cache", "MEMORY")) if not skipped(part)]
    sequence = {}
    if not args.demo and not skipped("SEQUENCE"):
        for engine in engines:
            sequence[engine] = sequence_workload(engine, settings["iter"], with_tkrzw)
    scaling = {}
    if not args.demo and not skipped("SEQUENCE"):
        for engine in (e for e in engines if e in SCALING_ENGINES):
            scaling[engine] = thread_scaling(engine, settings["iter"])
    dictionary, tsv = {}, None
    dictionary_engines = ["hash"] if args.demo else [e for e in engines if e in ("hash", "tree")]
    if not skipped("DICTIONARY") and dictionary_engines:
        tsv = dictionary_tsv(settings["dict_limit"])
        settings["dict_records"], settings["dict_bytes"] = count_records(tsv)
        if with_tkrzw:
            build_tkrzw_get()
        for engine in dictionary_engines:
            dictionary[engine] = dictionary_workload(
                tsv, tree_codecs if engine == "tree" else codecs, with_tkrzw, engine)
    hits = []
    if not args.demo and not skipped("HITRATIO"):
        hits = hit_ratio_workload()
    remove_files(WORK)
    settings["elapsed_s"] = time.monotonic() - began
    log(f"bench: measured in {settings['elapsed_s'] / 60:.1f} min")

    if args.demo:
        print(f"\nDictionary data set: {os.path.relpath(tsv, ROOT)}, "
              f"{settings['dict_records']} records, {settings['dict_bytes'] / 1e6:.1f} MB\n")
        print(dictionary_table(dictionary.get("hash", []), False))
        return
    plotted = plot(sequence, dictionary, hits)
    write_report(sequence, dictionary, hits, scaling, settings, tsv, plotted)
    log(f"bench: wrote {os.path.relpath(os.path.join(RESULTS, 'bench.md'), ROOT)}"
        + (" and bench.png" if plotted else ""))
    with open(os.path.join(RESULTS, "bench.md")) as report:
        print(report.read())


if __name__ == "__main__":
    main()
