#!/usr/bin/env python3
"""ShardDbm and the parallel importer (issue 15): `kura import` time for shards x threads x
batch size, codecs with 1 and 2 threads, and ShardDbm set/get next to Tkrzw's ShardDBM.

Two steps:
  bench/shard.py measure   runs everything, writes bench/results/shard.json
  bench/shard.py report    reads ONLY that JSON, writes bench/results/shard.md and shard.png

Sizes (environment): SHARD_LINES lines of the generated TSV (default 10,000,000),
SHARD_DICT_LIMIT records of the dictionary data set (default 0: all of `make dictionary`),
SHARD_ITER set/get iterations per thread (default 1,000,000), SHARD_REPEAT runs per
configuration, best kept (default 3; SHARD_REPEAT_MAX_S: runs longer than this many seconds,
default 8, are not repeated). KURA_BIN overrides the kura binary (default
target/release/kura). A small run: SHARD_LINES=200000 SHARD_DICT_LIMIT=50000 SHARD_ITER=100000.
"""

import datetime
import glob
import json
import operator
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as bench  # noqa: E402  (paths, run, log, env_int, remove_files)
from measure import dictionary, machine, tkrzw_output  # noqa: E402
from render.figures import qps, ratio  # noqa: E402

# The targets, as data: a metric computed from the JSON (see `metrics`), a
# comparison and a threshold.
TARGETS = [
    {"metric": "dict_zstd_2t_speedup", "compare": ">=", "threshold": 1.8,
     "what": "dictionary import, zstd, 2 shards: 1-thread time / 2-thread time"},
    {"metric": "dict_zstd-dict_2t_speedup", "compare": ">=", "threshold": 1.8,
     "what": "dictionary import, zstd-dict, 2 shards: 1-thread time / 2-thread time"},
    {"metric": "dict_none_2t_speedup", "compare": ">=", "threshold": 1.3,
     "what": "dictionary import, no compression, 2 shards: 1-thread time / 2-thread time"},
    {"metric": "one_shard_vs_plain", "compare": ">=", "threshold": 0.95,
     "what": "generated TSV: plain `kura import` time / `--shards 1 --threads 1` time"},
    {"metric": "batch1_shards_vs_one_shard", "compare": ">=", "threshold": 1.0,
     "what": "generated TSV, batch 1, 2 threads: 1-shard time / best multi-shard time"},
    {"metric": "set_2t_speedup", "compare": ">=", "threshold": 1.8,
     "what": "ShardDbm random set: 2-thread QPS / 1-thread QPS"},
    {"metric": "set_2t_vs_tkrzw", "compare": ">=", "threshold": 1.3,
     "what": "ShardDbm random set, 2 threads: Kura QPS / Tkrzw ShardDBM QPS"},
]
# What the machine allows (see `ceiling_runs`): the same work done by two independent
# processes at once, with nothing shared but the machine, taking turns with the 2-thread run
# of that work. The 2-thread run is held to a share of the two processes' speed, which does
# not depend on how fast two cores are here, where the fixed thresholds above may ask more
# than two such processes get.
CEILING_TARGETS = [
    {"metric": f"dict_{codec}_2t_of_ceiling", "compare": ">=", "threshold": 0.9,
     "what": f"dictionary import, {codec}, 2 shards: 2-thread speed / two processes' speed"}
    for codec in ("zstd", "none")
] + [
    {"metric": "set_2t_of_ceiling", "compare": ">=", "threshold": 0.9,
     "what": "ShardDbm random set: 2-thread QPS / two processes' QPS"},
]
CEILING_CODECS = ["none", "zstd"]
COMPARE = {">=": operator.ge, "<=": operator.le}

SHARDS = [1, 2, 4]
THREADS = [1, 2]
BATCHES = [1, 8, 64, 1024]
CODECS = ["none", "zstd", "zstd-dict"]
NUM_SHARDS_SEQUENCE = 4
KURA = os.environ.get("KURA_BIN") or bench.KURA
JSON_PATH = os.path.join(bench.RESULTS, "shard.json")
SECONDS = re.compile(r"seconds=([\d.]+)")


def repeat():
    return max(1, bench.env_int("SHARD_REPEAT", 3))


def generated_tsv(lines):
    """`lines` records with keys in a scrambled order and values of 10 to 73 bytes."""
    path = os.path.join(bench.DATA, f"shard-generated-{lines}.tsv")
    if not os.path.exists(path):
        bench.log(f"shard: generating {path}")
        os.makedirs(bench.DATA, exist_ok=True)
        with open(path + ".tmp", "w") as out:
            for i in range(lines):
                key = (i * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
                out.write(f"{key:016x}\tvalue-{i:09d}-{'x' * (i % 64)}\n")
        os.replace(path + ".tmp", path)
    return path


def clean(base):
    bench.remove_files(base, *glob.glob(base + "-*-of-*"))


def import_command(base, tsv, codec, threads=1):
    return [KURA, "import", base, tsv, "--threads", str(threads), "--record-comp", codec]


def seconds_of(output):
    """The `seconds=` of a `kura import` summary line."""
    return float(SECONDS.search(output).group(1))


def import_seconds(tsv, shards=None, threads=1, batch=None, codec="none"):
    """The `seconds=` of one `kura import` into a new hash database (or set)."""
    base = os.path.join(bench.WORK, "import.kuh")
    clean(base)
    command = import_command(base, tsv, codec, threads)
    if shards:
        command += ["--shards", str(shards)]
    if batch:
        command += ["--batch", str(batch)]
    output = bench.run(command)
    clean(base)
    return seconds_of(output)


def best_times(configs, tsv):
    """Best (least) seconds per configuration; configurations take turns within each round so
    that a spell of outside load touches all of them alike. A configuration whose run took
    more than SHARD_REPEAT_MAX_S seconds (default 8) is not repeated, which keeps the 10M-line
    grid and the slow codecs within `make bench`'s time."""
    best = {}
    longest = bench.env_int("SHARD_REPEAT_MAX_S", 8)
    for round_number in range(repeat()):
        for name, kwargs in configs:
            if round_number > 0 and best[name] > longest:
                continue
            seconds = import_seconds(tsv, **kwargs)
            best[name] = min(best.get(name, seconds), seconds)
    return best


def import_grid(tsv):
    configs = [("plain", {})]
    configs += [(f"{s}/{t}/{b}", {"shards": s, "threads": t, "batch": b})
                for s in SHARDS for t in THREADS for b in BATCHES]
    configs += [(f"{s}/{t}/default", {"shards": s, "threads": t}) for s in SHARDS for t in THREADS]
    return best_times(configs, tsv)


def codec_runs(tsv):
    configs = [(f"{codec}/{shards or 0}/{threads}", {"codec": codec, "shards": shards, "threads": threads})
               for codec in CODECS for shards in (None, 2) for threads in THREADS]
    return best_times(configs, tsv)


def shard_params(iterations, threads):
    """The same set parameters for both sides: one bucket per record in each shard (as
    `kura import` sizes a new set). The engines' default of 1M buckets per shard would give
    4 shards 4M buckets for 1M records, and Kura a 4x larger bucket cache."""
    buckets = max(1024, iterations * threads // NUM_SHARDS_SEQUENCE)
    return f"num_shards={NUM_SHARDS_SEQUENCE},num_buckets={buckets}"


def tkrzw_shard(iterations, threads):
    path = os.path.join(bench.WORK, "perf.tkh")
    clean(path)
    output = bench.run(["tkrzw_dbm_perf", "sequence", "--dbm", "shard", "--path", path,
                        "--params", shard_params(iterations, threads), "--iter", str(iterations),
                        "--size", "8", "--threads", str(threads), "--random_key"])
    clean(path)
    return {phase: figures["qps"] for phase, figures in tkrzw_output.perf_phases(output).items()}


def kura_shard(iterations, threads):
    path = os.path.join(bench.WORK, "perf.kus")
    clean(path)
    output = bench.run([KURA, "bench", "--engine", "shard", "--path", path, "--params",
                        shard_params(iterations, threads), "--iter", str(iterations), "--size", "8",
                        "--threads", str(threads), "--random-key", "--json"])
    clean(path)
    records = (json.loads(line) for line in output.splitlines() if line.startswith("{"))
    return {record["phase"]: record["qps"] for record in records}


def split_in_halves(tsv):
    """The two halves of `tsv` (by lines), as files in the work directory."""
    with open(tsv, "rb") as source:
        lines = source.readlines()
    middle = len(lines) // 2
    halves = []
    for number, part in enumerate((lines[:middle], lines[middle:])):
        path = os.path.join(bench.WORK, f"half-{number}.tsv")
        with open(path, "wb") as out:
            out.writelines(part)
        halves.append(path)
    return halves


def concurrently(commands):
    """Starts every command at once and returns their outputs."""
    processes = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for c in commands]
    outputs = [p.communicate()[0] for p in processes]
    for command, process in zip(commands, processes):
        if process.returncode != 0:
            sys.exit(f"shard: {' '.join(command)} failed")
    return outputs


def ceiling_runs(tsv, iterations):
    """What two cores give two independent processes, the bound of any 2-thread speedup here,
    next to the 2-thread run of the same work, all three taking turns in each round (the
    machine's speed drifts by tens of percent over minutes, so only a same-round comparison
    holds).

    Import: the whole file by one 1-thread process; its two halves at once by two such
    processes into two files (the slower one's time); the whole file with `--shards 2
    --threads 2`. Set: one `kura bench` process of 1 thread; two at once, each on its own set
    (QPS summed); one process of 2 threads doing the same work. Best of max(SHARD_REPEAT, 3)
    rounds each."""
    halves = split_in_halves(tsv)
    bases = [os.path.join(bench.WORK, f"ceiling-{n}.kuh") for n in range(2)]
    rounds = max(repeat(), 3)
    imports = {codec: {} for codec in CEILING_CODECS}

    def keep_least(figures, name, seconds):
        figures[name] = min(figures.get(name, seconds), seconds)

    for _ in range(rounds):
        for codec in CEILING_CODECS:
            for base in bases:
                clean(base)
            output = bench.run(import_command(bases[0], tsv, codec))
            keep_least(imports[codec], "whole", seconds_of(output))
            clean(bases[0])
            outputs = concurrently([import_command(b, h, codec) for b, h in zip(bases, halves)])
            keep_least(imports[codec], "paired", max(seconds_of(o) for o in outputs))
            for base in bases:
                clean(base)
            keep_least(imports[codec], "two_threads", import_seconds(tsv, shards=2, threads=2, codec=codec))
    sets = {"alone": 0.0, "paired": 0.0, "two_threads": 0.0}
    paths = [os.path.join(bench.WORK, f"ceiling-{n}.kus") for n in range(2)]
    for _ in range(rounds):
        for path in paths:
            clean(path)
        sets["alone"] = max(sets["alone"], set_qps(bench.run(kura_set_command(paths[0], iterations))))
        clean(paths[0])
        outputs = concurrently([kura_set_command(p, iterations) for p in paths])
        sets["paired"] = max(sets["paired"], sum(set_qps(o) for o in outputs))
        for path in paths:
            clean(path)
        sets["two_threads"] = max(sets["two_threads"], set_qps(bench.run(kura_set_command(paths[0], iterations, 2))))
        clean(paths[0])
    for path in halves:
        bench.remove_files(path)
    return {"rounds": rounds, "import_s": imports, "set_qps": sets}


def kura_set_command(path, iterations, threads=1):
    return [KURA, "bench", "--engine", "shard", "--path", path, "--params", shard_params(iterations, threads),
            "--iter", str(iterations), "--size", "8", "--threads", str(threads), "--random-key", "--json"]


def set_qps(output):
    records = (json.loads(line) for line in output.splitlines() if line.startswith("{"))
    return next((r["qps"] for r in records if r["phase"] == "set"), 0.0)


def sequence_runs(iterations):
    """Best QPS per phase, Tkrzw and Kura taking turns."""
    results = {}
    for threads in THREADS:
        best = {"tkrzw": {}, "kura": {}}
        for _ in range(repeat()):
            for side, measure in (("tkrzw", tkrzw_shard), ("kura", kura_shard)):
                for phase, value in measure(iterations, threads).items():
                    best[side][phase] = max(best[side].get(phase, 0), value)
        results[str(threads)] = best
    return results


def measure():
    if not os.path.exists(KURA):
        sys.exit(f"shard: {KURA} is missing; run `make build` (or set KURA_BIN)")
    os.makedirs(bench.WORK, exist_ok=True)
    began = time.monotonic()
    lines = bench.env_int("SHARD_LINES", 10_000_000)
    dict_limit = bench.env_int("SHARD_DICT_LIMIT", 0)
    iterations = bench.env_int("SHARD_ITER", 1_000_000)
    dictionary_path = dictionary.dictionary_tsv(dict_limit)
    generated = generated_tsv(lines)
    data = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "machine": machine.machine_info(), "repeat": repeat(), "iterations": iterations,
            "num_shards_sequence": NUM_SHARDS_SEQUENCE,
            "datasets": {"dictionary": {"path": os.path.relpath(dictionary_path, bench.ROOT),
                                        "lines": dictionary.count_records(dictionary_path)[0]},
                         "generated": {"path": os.path.relpath(generated, bench.ROOT), "lines": lines}}}
    bench.log("shard: import grid, dictionary")
    data["grid_dictionary"] = import_grid(dictionary_path)
    bench.log("shard: import grid, generated")
    data["grid_generated"] = import_grid(generated)
    bench.log("shard: codecs, dictionary")
    data["codecs"] = codec_runs(dictionary_path)
    bench.log("shard: ShardDbm set/get vs Tkrzw ShardDBM")
    data["sequence"] = sequence_runs(iterations)
    bench.log("shard: two-process ceilings")
    data["ceiling"] = ceiling_runs(dictionary_path, iterations)
    data["elapsed_s"] = time.monotonic() - began
    os.makedirs(bench.RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as out:
        json.dump(data, out, indent=1)
    bench.log(f"shard: measured in {data['elapsed_s'] / 60:.1f} min -> {JSON_PATH}")


# ---------------------------------------------------------------- report (reads the JSON only)

def metrics(data):
    codecs, grid, seq = data["codecs"], data["grid_generated"], data["sequence"]
    values = {}
    for codec in CODECS:
        values[f"dict_{codec}_2t_speedup"] = codecs[f"{codec}/2/1"] / codecs[f"{codec}/2/2"]
    values["one_shard_vs_plain"] = grid["plain"] / grid["1/1/default"]
    values["batch1_shards_vs_one_shard"] = grid["1/2/1"] / min(grid[f"{s}/2/1"] for s in SHARDS if s > 1)
    set1, set2 = seq["1"]["kura"].get("set", 0), seq["2"]["kura"].get("set", 0)
    values["set_2t_speedup"] = set2 / set1 if set1 else 0.0
    tkrzw2 = seq["2"]["tkrzw"].get("set", 0)
    values["set_2t_vs_tkrzw"] = set2 / tkrzw2 if tkrzw2 else 0.0
    ceiling = data.get("ceiling")
    if ceiling and "import_s" in ceiling:
        for codec in CEILING_CODECS:
            runs = ceiling["import_s"][codec]
            values[f"dict_{codec}_ceiling"] = runs["whole"] / runs["paired"]
            values[f"dict_{codec}_same_round_speedup"] = runs["whole"] / runs["two_threads"]
            values[f"dict_{codec}_2t_of_ceiling"] = runs["paired"] / runs["two_threads"]
        sets = ceiling["set_qps"]
        if sets["alone"] and sets["paired"]:
            values["set_ceiling"] = sets["paired"] / sets["alone"]
            values["set_same_round_speedup"] = sets["two_threads"] / sets["alone"]
            values["set_2t_of_ceiling"] = sets["two_threads"] / sets["paired"]
    return values


def grid_table(grid):
    rows = ["| shards | threads | " + " | ".join(f"batch {b}" for b in BATCHES) + " | default batch |",
            "|---:|---:|" + "---:|" * (len(BATCHES) + 1)]
    for s in SHARDS:
        for t in THREADS:
            cells = []
            for b in [*BATCHES, "default"]:
                seconds, base = grid[f"{s}/{t}/{b}"], grid[f"1/1/{b}"]
                cells.append(f"{seconds:.2f} s ({base / seconds:.2f}x)")
            rows.append(f"| {s} | {t} | " + " | ".join(cells) + " |")
    rows.append(f"\nPlain `kura import` (no `--shards`, 1 thread, default batch): {grid['plain']:.2f} s.")
    return "\n".join(rows)


def codec_table(codecs):
    rows = ["| codec | shards | 1 thread | 2 threads | speedup |", "|---|---:|---:|---:|---:|"]
    for codec in CODECS:
        for shards in (0, 2):
            one, two = codecs[f"{codec}/{shards}/1"], codecs[f"{codec}/{shards}/2"]
            rows.append(f"| {codec} | {shards or 'plain'} | {one:.2f} s | {two:.2f} s | {one / two:.2f}x |")
    return "\n".join(rows)


def sequence_table(seq):
    rows = ["| threads | phase | Tkrzw ShardDBM | Kura ShardDbm | Kura / Tkrzw |", "|---:|---|---:|---:|---:|"]
    for threads, sides in seq.items():
        for phase in ("set", "get"):
            tk, ku = sides["tkrzw"].get(phase, 0), sides["kura"].get(phase, 0)
            rows.append(f"| {threads} | {phase} | {qps(tk)} | {qps(ku)} | {ratio(ku, tk)} |")
    return "\n".join(rows)


def target_table(values, targets):
    rows = ["| target | value | wanted | met |", "|---|---:|---:|---|"]
    for target in targets:
        value = values.get(target["metric"])
        if value is None:
            continue
        met = COMPARE[target["compare"]](value, target["threshold"])
        rows.append(f"| {target['what']} | {value:.2f} | {target['compare']} {target['threshold']} | "
                    f"{'yes' if met else '**no**'} |")
    return "\n".join(rows)


def ceiling_table(values):
    if "set_ceiling" not in values:
        return "(not measured in this run)"
    rows = ["| work | two-process ceiling | 2-thread speedup, same rounds | 2 threads against two processes |",
            "|---|---:|---:|---:|"]
    for label, prefix in (("dictionary import, zstd, 2 shards", "dict_zstd"),
                          ("dictionary import, none, 2 shards", "dict_none"), ("ShardDbm random set", "set")):
        rows.append(f"| {label} | {values[prefix + '_ceiling']:.2f}x | {values[prefix + '_same_round_speedup']:.2f}x | "
                    f"{values[prefix + '_2t_of_ceiling']:.2f} |")
    return "\n".join(rows)


def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for axis, name in zip(axes[:2], ("grid_dictionary", "grid_generated")):
        grid = data[name]
        for s in SHARDS:
            for t in THREADS:
                axis.plot(BATCHES, [grid[f"{s}/{t}/{b}"] for b in BATCHES], marker="o", label=f"{s} shards, {t} thr")
        axis.set_xscale("log")
        axis.set_xlabel("batch size (records)")
        axis.set_ylabel("import seconds")
        axis.set_title(f"import, {name.split('_')[1]} ({data['datasets'][name.split('_')[1]]['lines']:,} lines)")
        axis.legend(fontsize=7)
    seq = data["sequence"]
    labels = [f"{t} thr {p}" for t in seq for p in ("set", "get")]
    xs = range(len(labels))
    tk = [seq[t]["tkrzw"].get(p, 0) / 1e6 for t in seq for p in ("set", "get")]
    ku = [seq[t]["kura"].get(p, 0) / 1e6 for t in seq for p in ("set", "get")]
    axes[2].bar([x - 0.2 for x in xs], tk, width=0.4, label="Tkrzw ShardDBM")
    axes[2].bar([x + 0.2 for x in xs], ku, width=0.4, label="Kura ShardDbm")
    axes[2].set_xticks(list(xs), labels)
    axes[2].set_ylabel("M QPS (random keys)")
    axes[2].set_title(f"{data['num_shards_sequence']} shards, {data['iterations']:,} ops/thread")
    axes[2].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True


def report():
    with open(JSON_PATH) as source:
        data = json.load(source)
    values = metrics(data)
    plotted = plot(data, os.path.join(bench.RESULTS, "shard.png"))
    sets = data["datasets"]
    parts = [
        "# ShardDbm and the parallel importer", "",
        f"Measured {data['date'][:16]} UTC by `bench/shard.py` on: {data['machine']}.",
        f"Best of {data['repeat']} runs per configuration, configurations taking turns; only "
        "same-run ratios mean much on a shared machine.", "",
        "## Targets", "", target_table(values, TARGETS), "",
        "## Against what the machine allows", "",
        "Two independent processes, started together, each doing half of the work (an import of "
        "each half of the dictionary into its own file, 1 thread) or a 1-thread set run of its own: "
        "nothing shared but the machine. Their speedup over one process is the most any 2-thread "
        f"run can reach here. One process, the two processes and the 2-thread run take turns in each "
        f"of {data.get('ceiling', {}).get('rounds', '?')} rounds, best of each; the last column is the "
        "2-thread run's speed over the two processes' (1.0: threads in one process lose nothing to "
        "separate processes).", "",
        ceiling_table(values), "",
        target_table(values, CEILING_TARGETS), "",
        f"## Import time: dictionary ({sets['dictionary']['lines']:,} lines, `{sets['dictionary']['path']}`)", "",
        "HashDbm shards, no compression; in brackets the speedup over 1 shard / 1 thread at the same batch size.", "",
        grid_table(data["grid_dictionary"]), "",
        f"## Import time: generated TSV ({sets['generated']['lines']:,} lines)", "",
        grid_table(data["grid_generated"]), "",
        "## Codecs: dictionary import with 1 and 2 threads", "",
        "`plain` is one database (2 threads = 2 writers sharing it); `2` is `--shards 2`.", "",
        codec_table(data["codecs"]), "",
        f"## ShardDbm vs Tkrzw ShardDBM ({data['num_shards_sequence']} HashDbm/HashDBM shards, random keys)", "",
        "`kura bench --engine shard` against `tkrzw_dbm_perf sequence --dbm shard`, 8-byte values, "
        f"{data['iterations']:,} operations per thread, both sides with `--params "
        f"num_shards={data['num_shards_sequence']},num_buckets=` one bucket per record per shard.", "",
        sequence_table(data["sequence"]), "",
    ]
    if plotted:
        parts += ["![shard](shard.png)", ""]
    with open(os.path.join(bench.RESULTS, "shard.md"), "w") as out:
        out.write("\n".join(parts))
    print("\n".join(parts))


if __name__ == "__main__":
    step = sys.argv[1] if len(sys.argv) > 1 else ""
    if step == "measure":
        measure()
    elif step == "report":
        report()
    else:
        sys.exit("usage: bench/shard.py measure|report")
