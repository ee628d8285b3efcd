"""bench/results/bench.png: bar charts of Kura beside Tkrzw drawn from bench.json (sequence
QPS per engine, RSS of the in-memory engines, dictionary file sizes, gets and range scans,
cache hit ratios), with matplotlib when it is importable."""

import harness


def panels(bench):
    """(title, unit, labels, Kura values, Tkrzw values or None, other peers) per chart; other
    peers: [(name, values)], LevelDB's beside the tree's sequence."""
    facts = {engine["name"]: engine for engine in bench.get("engines", [])}
    sequence, dictionary = bench.get("sequence", {}), bench.get("dictionary", {})
    hits = bench.get("hit_ratio", [])
    span = bench.get("settings", {}).get("range_span", 100)
    result = []
    for engine, runs in sequence.items():
        labels, ours, theirs, leveldb = [], [], [], []
        for run in runs:
            for phase in ("set", "get", "remove"):
                labels.append(f"{run['threads']}T{'r' if run['random_key'] else 's'} {phase}")
                ours.append(run["kura"].get(phase, {}).get("qps", 0) / 1e6)
                theirs.append(run["tkrzw"].get(phase, {}).get("qps", 0) / 1e6)
                leveldb.append(run.get("leveldb", {}).get(phase, {}).get("qps", 0) / 1e6)
        others = [("LevelDB", leveldb)] if any("leveldb" in run for run in runs) else []
        result.append((f"{engine}: sequence (T = threads, s/r = seq/random keys)", "M QPS",
                       labels, ours, theirs, others))
    memory = [e for e in sequence if facts.get(e, {}).get("storage") == "memory"]
    if memory:
        labels, ours, theirs = [], [], []
        for engine in memory:
            for run in sequence[engine]:
                if run["threads"] == 1:
                    labels.append(f"{engine} {'r' if run['random_key'] else 's'}")
                    ours.append(run["kura"].get("set", {}).get("rss_bytes", 0) / 1e6)
                    theirs.append(run["tkrzw"].get("set", {}).get("rss_bytes", 0) / 1e6)
        result.append(("in-memory engines: RSS after set, 1 thread", "MB", labels, ours, theirs, []))
    for engine, rows in dictionary.items():
        labels = [row["codec"] for row in rows]
        result.append((f"dictionary {engine}: file size", "MB", labels,
                       [row["kura"]["file_size"] / 1e6 for row in rows],
                       [row.get("tkrzw", {}).get("file_size", 0) / 1e6 for row in rows], []))
        result.append((f"dictionary {engine}: random get, 1 thread", "k QPS", labels,
                       [row["kura"]["get1"]["qps"] / 1e3 for row in rows],
                       [row.get("tkrzw", {}).get("get1", {}).get("qps", 0) / 1e3 for row in rows], []))
        if facts.get(engine, {}).get("ordered"):
            result.append((f"dictionary {engine}: {span}-key range scans, 1 thread",
                           "k scans/s", labels,
                           [row["kura"].get("range1", {}).get("qps", 0) / 1e3 for row in rows],
                           [row.get("tkrzw", {}).get("range1", {}).get("qps", 0) / 1e3
                            for row in rows], []))
    if hits:
        one = [h for h in hits if h["threads"] == 1]
        result.append(("cache hit ratio under Zipf (1 thread)", "hit ratio",
                       [f"s={h['zipf_s']} {h['cache'].split(' ')[0]}"
                        + (" (Che)" if "Che" in h["cache"] else
                           " (sim)" if "simulated" in h["cache"] else
                           " (tinylfu)" if "tinylfu" in h["cache"] else "") for h in one],
                       [h["hit_ratio"] for h in one], None, []))
    return result


def draw(bench, path):
    """Writes the charts to `path`; False (and no file) without matplotlib or figures."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        harness.log("bench: matplotlib is not installed; no chart (make venv installs it in .venv)")
        return False
    charts = panels(bench)
    if not charts:
        return False
    columns = min(3, len(charts))
    rows = (len(charts) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 4.8 * rows), squeeze=False)
    for axis, (title, unit, labels, ours, theirs, others) in zip(axes.flat, charts):
        positions = list(range(len(labels)))
        if theirs is None:
            axis.bar(positions, ours, 0.6, color="#2a7ab0")
            low = min(ours) if ours else 0
            axis.set_ylim(max(0.0, low - 0.1), 1.0)
        else:
            # Tkrzw, the other peers, then Kura, side by side within 0.76 of each label.
            series = [("Tkrzw", theirs, "#999999")] + [(name, values, "#d9a441") for name, values in others]
            series.append(("Kura", ours, "#2a7ab0"))
            width = 0.76 / len(series)
            for index, (name, values, color) in enumerate(series):
                offset = (index - (len(series) - 1) / 2) * width
                axis.bar([p + offset for p in positions], values, width, label=name, color=color)
            axis.legend(fontsize=8)
        axis.set_xticks(positions)
        axis.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        axis.set_title(title, fontsize=9)
        axis.set_ylabel(unit)
    for axis in list(axes.flat)[len(charts):]:
        axis.set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
