"""bench/results/bench.md as text: the header, the target tables, the sequence, floor,
dictionary and hit-ratio sections, each from bench.json and the peer notes of
tkrzw_peers.py."""

import targets
import tkrzw_peers
from render import metrics, tables, verdicts


def engine_facts(bench):
    """Registry entry per engine name, as the run recorded `kura engines --json`."""
    return {engine["name"]: engine for engine in bench.get("engines", [])}


def title(engine, facts):
    peer = tkrzw_peers.peer(engine)
    name = facts.get(engine, {}).get("class", engine)
    return f"{name} vs {peer['title']}" if peer else name


def sequence_section(engine, runs, bench, first_ordered):
    facts = engine_facts(bench)
    settings = bench["settings"]
    span, repeat = settings["range_span"], settings["sequence_repeat"]
    peer = tkrzw_peers.peer(engine)
    if peer:
        cap = (" --cap_rec_num N` (N = 1.25 x records + 1024, the same for "
               "`kura bench --params cap_rec_num=N`)" if peer.get("cap_rec_num") else "`")
        command = (f"`tkrzw_dbm_perf sequence --dbm {peer['dbm']} --iter {settings['iter']} "
                   f"--size 8{cap} against `kura bench --engine {engine}`, each run {repeat} "
                   "times taking turns; per phase, the best run of each side.")
    else:
        command = (f"`kura bench --engine {engine} --iter {settings['iter']} --size 8`, run "
                   f"{repeat} times; per phase, the best run (Tkrzw has no peer of it).")
    parts = [f"### {title(engine, facts)}", "", command]
    if facts.get(engine, {}).get("ordered"):
        if engine == first_ordered:
            parts.append(f"Kura also ran `--scan --range-scan {span}`: full scans through the "
                         "ordered cursor (QPS = records/s; Tkrzw's `iterate` row is its full "
                         f"forward scan) and {span}-key range scans from random keys (QPS = "
                         f"scans/s; iter/{span} scans per thread).")
        else:
            parts.append(f"Kura also ran `--scan --range-scan {span}` (see the {first_ordered} "
                         "section).")
    in_memory = facts.get(engine, {}).get("storage") == "memory"
    if in_memory:
        parts.append("In memory on both sides: no file, one database through all phases; the "
                     "last row is the process RSS after setting.")
    if peer and peer.get("sequence_note"):
        parts.append(peer["sequence_note"])
    if any("leveldb" in run for run in runs):
        parts.append("LevelDB ran the same keys, values and phases in the same turns "
                     "(`bench/leveldb_sequence.cc` against Debian's libleveldb: set, get, remove), "
                     "with TreeDbm's default memory (a 256 MiB block cache, a 64 MiB write buffer) "
                     "and its own other defaults (Snappy, no Bloom filter, no sync per write); its "
                     "file size is taken after the set phase, reopened and fully compacted "
                     "(untimed). LevelDB has no batched get, so Kura's get_many rows stand next to "
                     "its get row.")
    return parts + ["", tables.sequence_table(runs, in_memory, span), ""]


def floor_section(bench):
    latency = bench["memory_latency"]
    titles = {engine: title(engine, engine_facts(bench)) for engine in bench["sequence"]}
    return [
        "## Single gets and the memory floor",
        "",
        f"One dependent load (a pointer chase through random cache lines of "
        f"{latency['floor_buffer_mib']} MiB, `{latency['command']}`, in this run) took "
        f"**{latency['load_ns']:.0f} ns**. A get of a key among 1M records that the caches do "
        "not hold waits for at least one such load (docs/bench.md). Below, every get row of the "
        "sequence tables as the time one thread spends per get (threads / QPS) and that time "
        "in loads.",
        *earlier_floors(bench),
        "",
        tables.floor_table(bench["sequence"], titles, lambda engine: metrics.load_ns_of(bench, engine)),
        "",
        tables.latency_table(latency["buffers"], latency["floor_buffer_mib"]),
        "",
    ]


def earlier_floors(bench):
    """A note for the engines measured in another run than the floor shown: their rows use
    their run's floor."""
    kept = bench.get("floor_of_engine") or {}
    if not kept:
        return []
    by_floor = {}
    for engine, load_ns in kept.items():
        by_floor.setdefault(load_ns, []).append(engine)
    def floor(load_ns):
        return f"{load_ns:.0f} ns" if load_ns else "none measured"
    return ["", "The engines measured in another run than this floor (see the header) are "
            "compared with the load measured in their run: " + "; ".join(
                f"{', '.join(sorted(engines))}: {floor(load_ns)}"
                for load_ns, engines in by_floor.items()) + "."]


def dictionary_section(bench):
    settings, dictionary = bench["settings"], bench["dictionary"]
    facts = engine_facts(bench)
    span = settings["range_span"]
    parts = [
        "## Dictionary workload",
        "",
        f"`{settings['dictionary_path']}` from tools/make_dictionary.py "
        f"({settings['dict_records']} records, {settings['dict_bytes'] / 1e6:.1f} MB). "
        "Get: every key once in the same shuffled order, split among the threads "
        "(`kura bench --keys-from`, `bench/tkrzw_get.cc`), best of "
        f"{settings['repeat']} runs (one if a run takes over {settings['repeat_max_s']} s).",
        "",
    ]
    for engine, rows in dictionary.items():
        if not rows:
            continue
        peer = tkrzw_peers.peer(engine) or {}
        extension = facts.get(engine, {}).get("extension", "")
        build = peer.get("dictionary_build", f"Build: `kura import X.{extension}`.")
        with_tkrzw = any("tkrzw" in row for row in rows)
        parts += [f"### {engine.capitalize()} files", "", build, "",
                  tables.dictionary_table(rows, with_tkrzw), ""]
        if facts.get(engine, {}).get("ordered"):
            parts += [f"Scans of the same rebuilt trees: full scans with one iterator (records/s; "
                      f"Tkrzw's backward scan starts with `JumpLower` because its `Last()` lands "
                      f"in the first leaf in 1.0.25), and 10,000 {span}-key range scans "
                      "starting at shuffled keys (scans/s).", "",
                      tables.scan_table(rows, span), ""]
    return parts


def hit_ratio_section(hits):
    first = hits[0]
    return [
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
        tables.hit_ratio_table(hits),
        "",
    ]


def markdown(bench, chart_file=None):
    """The whole report; `chart_file` is the PNG beside it, None when none was drawn."""
    parts = [
        "# Kura vs Tkrzw",
        "",
        f"Measured {bench['date']} by `make bench` (bench/run.py) on: {bench['machine']}.",
        "All figures come from one run on a machine shared with other work; only ratios from "
        "the same run mean much, as absolute figures drift between runs. QPS counts all threads; "
        "iterations are per thread. `1T`/`2T`: 1 or 2 threads. The 2-thread get targets are "
        "measured on the same records as one thread (the sequence runs give each thread records "
        "of its own, so their 2-thread databases hold twice as many); the sequence ratio is shown "
        "beside them.",
        "",
    ]
    for merge in bench.get("merged_at", []):
        parts += [f"Re-measured {merge['date']} and merged in (BENCH_MERGE): "
                  f"{', '.join(merge['engines']) or 'the floor'}; every ratio still compares two "
                  "figures of the same run.", ""]
    figures = metrics.named_figures(bench)
    for group_title, table in verdicts.group_tables(targets.TARGETS, targets.GROUPS, figures):
        parts += [f"## {group_title}", "", table, ""]
    sequence = bench.get("sequence", {})
    if sequence:
        facts = engine_facts(bench)
        first_ordered = next((e for e in sequence if facts.get(e, {}).get("ordered")), None)
        parts += ["## Sequence workload", ""]
        for engine, runs in sequence.items():
            parts += sequence_section(engine, runs, bench, first_ordered)
        if bench.get("memory_latency"):
            parts += floor_section(bench)
    if bench.get("dictionary"):
        parts += dictionary_section(bench)
    if bench.get("hit_ratio"):
        parts += hit_ratio_section(bench["hit_ratio"])
    if chart_file:
        parts += [f"![charts]({chart_file})", ""]
    return "\n".join(parts)
