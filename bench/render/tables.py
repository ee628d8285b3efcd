"""The report's Markdown tables, each drawn from one part of bench.json: the sequence runs
of an engine, the dictionary rows of an engine, the tree's scans, the cache hit ratios, and
the single gets against the memory floor."""

from render.figures import mb, qps, ratio
from render.metrics import ns_per_get

PHASES = ["set", "get", "get_batch16", "get_batch64", "iterate", "remove"]
SCAN_PHASES = ["scan", "scan_back", "range"]
# The programs of a sequence run, in the order of `sequence_table`'s `row` arguments.
SIDES = ("tkrzw", "kura", "leveldb")


def sequence_table(results, in_memory, range_span):
    """Rows per workload and phase: QPS of both, ratio; the file size for file engines and the
    RSS after setting for in-memory ones; Kura's scan phases (QPS: records/s for full scans,
    scans/s for range scans) where it ran them. Runs that measured LevelDB too (the tree's)
    get its columns beside Tkrzw's."""
    with_leveldb = any("leveldb" in run for run in results)
    lines = ["| workload | phase | Tkrzw | Kura | Kura/Tkrzw |", "| --- | --- | ---: | ---: | ---: |"]
    if with_leveldb:
        lines = [lines[0] + " LevelDB | Kura/LevelDB |", lines[1] + " ---: | ---: |"]
    names = {"scan": "full scan, forward", "scan_back": "full scan, backward",
             "range": f"{range_span}-key range scans", "get_batch16": "get_many, batches of 16",
             "get_batch64": "get_many, batches of 64"}

    def row(label, name, theirs, ours, leveldb, show):
        line = f"| {label} | {name} | {show(theirs)} | {show(ours)} | {ratio(ours, theirs)} |"
        return line + (f" {show(leveldb)} | {ratio(ours, leveldb)} |" if with_leveldb else "")

    for run in results:
        for phase in PHASES + SCAN_PHASES:
            if phase not in run["kura"] and phase not in run["tkrzw"]:
                continue
            figures = [run.get(side, {}).get(phase, {}).get("qps", 0) for side in SIDES]
            lines.append(row(run["label"], names.get(phase, phase), *figures, qps))
        measure, name = ("rss_bytes", "RSS after set") if in_memory else ("file_size", "file size")
        sizes = [run.get(side, {}).get("set", {}).get(measure, 0) for side in SIDES]
        lines.append(row(run["label"], name, *sizes, mb))
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


def scan_table(results, range_span):
    """An ordered engine's scans on the dictionary: full scans in records/s, range scans in
    scans/s."""
    lines = ["| codec | Kura scan | Tkrzw scan | ratio | Kura scan back | Tkrzw scan back | "
             f"ratio | Kura {range_span}-key ranges 1T | Tkrzw 1T | ratio | Kura 2T | Tkrzw 2T | ratio |",
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


def nanoseconds(value):
    return f"{value:.0f} ns" if value else "-"


def loads(value):
    return f"{value:.2f}" if value else "-"


def floor_table(sequence, titles, load_ns_of):
    """Every single-get row of the sequence tables: the time one thread spends per get
    (threads / QPS) on each side, and that time in dependent loads of `load_ns_of(engine)`."""
    lines = ["| engine | workload | Tkrzw ns/get | Tkrzw loads | Kura ns/get | Kura loads |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for engine, runs in sequence.items():
        for run in runs:
            if "get" not in run["kura"] and "get" not in run["tkrzw"]:
                continue
            cells = [titles[engine], run["label"]]
            load_ns = load_ns_of(engine)
            for side in ("tkrzw", "kura"):
                per_get = ns_per_get(run, side)
                cells += [nanoseconds(per_get), loads(per_get and load_ns and per_get / load_ns)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(buffers, floor_mib):
    """memory_latency's figures per buffer size, the floor's buffer in bold."""
    lines = ["| buffer | ns per dependent load | huge pages advised |", "| ---: | ---: | ---: |"]
    for row in buffers:
        size = f"**{row['mib']} MiB**" if row["mib"] == floor_mib else f"{row['mib']} MiB"
        lines.append(f"| {size} | {row['small_pages_ns']:.0f} | {row['huge_pages_ns']:.0f} |")
    return "\n".join(lines)
