"""bench.json as a flat map of named figures, the names the targets (bench/targets.py) refer
to. A name is a path of fields joined by `/`, the runs of a list named by what tells them
apart:

  sequence/ENGINE/CONFIG/SIDE/PHASE/FIELD    CONFIG: 1s, 2s, 1r, 2r (threads; sequential or
                                             random keys), SIDE: kura or tkrzw
  floor/ENGINE/load_ns                       one dependent load of the engine's run (memory_latency)
  floor/ENGINE/CONFIG/SIDE/ns_per_get        a get's time as one thread sees it
  floor/ENGINE/CONFIG/SIDE/loads             that time in loads
  dictionary/ENGINE/CODEC/SIDE/FIELD[/FIELD] e.g. dictionary/hash/lz4/kura/get1/qps
  scaling/ENGINE/FIELD[/FIELD]               e.g. scaling/hash/get2/qps
  hit_ratio/ZIPF/CACHE/THREADST/FIELD        e.g. hit_ratio/0.99/kura CacheDbm/1T/hit_ratio
  settings/FIELD
"""


def config(run):
    """1s, 2s, 1r, 2r: threads, then sequential or random keys."""
    return f"{run['threads']}{'r' if run['random_key'] else 's'}"


def flatten(prefix, value, into):
    """Every number or string under `value`, named prefix/field/..."""
    if isinstance(value, dict):
        for key, inner in value.items():
            flatten(f"{prefix}/{key}", inner, into)
    elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
        into[prefix] = value
    return into


def ns_per_get(run, side):
    """Nanoseconds per get as each thread sees it: QPS counts all threads."""
    qps = run[side].get("get", {}).get("qps")
    return run["threads"] * 1e9 / qps if qps else None


def load_ns_of(bench, engine):
    """The dependent load an engine's single gets are compared with: the floor measured in the
    run that measured the engine (`floor_of_engine` keeps it where a BENCH_MERGE left the
    file another run's floor; None when that run measured none), else the file's floor."""
    kept = bench.get("floor_of_engine") or {}
    if engine in kept:
        return kept[engine]
    return (bench.get("memory_latency") or {}).get("load_ns")


def named_figures(bench):
    figures = {}
    flatten("settings", bench.get("settings", {}), figures)
    for engine, runs in bench.get("sequence", {}).items():
        load_ns = load_ns_of(bench, engine)
        if load_ns:
            figures[f"floor/{engine}/load_ns"] = load_ns
        for run in runs:
            for side in ("kura", "tkrzw"):
                flatten(f"sequence/{engine}/{config(run)}/{side}", run[side], figures)
                nanoseconds = ns_per_get(run, side)
                if nanoseconds and load_ns:
                    name = f"floor/{engine}/{config(run)}/{side}"
                    figures[f"{name}/ns_per_get"] = nanoseconds
                    figures[f"{name}/loads"] = nanoseconds / load_ns
    for engine, rows in bench.get("dictionary", {}).items():
        for row in rows:
            for side in ("kura", "tkrzw"):
                flatten(f"dictionary/{engine}/{row['codec']}/{side}", row.get(side, {}), figures)
    for engine, scaling in bench.get("thread_scaling", {}).items():
        flatten(f"scaling/{engine}", scaling, figures)
    for hit in bench.get("hit_ratio", []):
        flatten(f"hit_ratio/{hit['zipf_s']}/{hit['cache']}/{hit['threads']}T", hit, figures)
    return figures
