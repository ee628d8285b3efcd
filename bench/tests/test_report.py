"""The report step alone: bench/report.py redraws bench.md from a committed bench.json (no
measuring, no `kura`, no network), every target row is a data row checked against the
figures, and the floor figures are the gets' times divided by the run's load latency."""

import functools
import json
import os
import random
import re

import harness
import report
import targets
from measure import memory_floor, tkrzw_output
from render import document, figures, metrics, verdicts

COMMITTED_JSON = os.path.join(harness.RESULTS, "bench.json")
COMMITTED_MD = os.path.join(harness.RESULTS, "bench.md")


@functools.lru_cache(maxsize=None)
def committed_text():
    with open(COMMITTED_JSON) as data:
        return data.read()


def committed():
    return json.loads(committed_text())


def target_rows(text):
    """{target name: (measured, verdict)} from the report's target tables."""
    rows = {}
    section = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line
        elif section and section.startswith("## Targets") and line.startswith("| ") \
                and not line.startswith("| target |") and not line.startswith("| ---"):
            name, measured, verdict = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[name] = (measured, verdict)
    return rows


def test_committed_json_redraws_the_committed_report(tmp_path):
    bench = committed()
    with open(COMMITTED_MD) as text:
        assert document.markdown(bench, report.CHART_FILE) == text.read()
    written = report.write_report(bench, str(tmp_path))
    assert (tmp_path / "bench.md").read_text() == written
    for heading in ["## Targets: HashDbm (issue #2)", "## Targets: TreeDbm (issue #3)",
                    "## Targets: in-memory engines (issue #4)", "## Sequence workload",
                    "### HashDbm vs Tkrzw HashDBM", "### CacheDbm vs Tkrzw CacheDBM",
                    "## Dictionary workload", "### Hash files", "### Tree files",
                    "## Cache hit ratio under Zipf keys"]:
        assert heading in written
    for codec in bench["settings"]["codecs"]:
        assert re.search(rf"^\| {re.escape(codec)} \| \d", written, re.MULTILINE)


def test_every_target_names_figures_that_a_full_run_has():
    """A typo in a target's figure names would silently drop its row: with a floor added to
    the committed run, only the rows of Tkrzw's set-only cache lack figures."""
    bench = committed()
    bench["memory_latency"] = {"load_ns": 150.0, "floor_buffer_mib": 64, "buffers": [],
                               "command": "memory_latency"}
    figures = metrics.named_figures(bench)
    missing = {t["name"] for t in targets.TARGETS if verdicts.evaluate(t, figures) is None}
    assert missing == {f"cache, {keys} keys, 1 thread: {phase} >= 2x Tkrzw"
                       for keys in ("sequential", "random") for phase in ("get", "remove")} | {
        f"cache, {threads}, {keys} keys: get >= 1.0x Tkrzw"
        for threads in ("1 thread", "2 threads") for keys in ("sequential", "random")}
    assert targets.scaling_engines() == ["cache", "hash"]


def test_target_verdicts_of_the_committed_run():
    """Each checked row shows the committed run's own figures, found in the JSON here
    independently of the target table, and the verdict their ratio earns."""
    bench = committed()
    rows = target_rows(document.markdown(bench))

    def sequence(engine, threads, random_key):
        return next(run for run in bench["sequence"][engine]
                    if run["threads"] == threads and run["random_key"] == random_key)

    def verdict(met):
        return "yes" if met else "**no**"

    hash_run = sequence("hash", 1, False)
    ours, theirs = hash_run["kura"]["get"]["qps"], hash_run["tkrzw"]["get"]["qps"]
    assert rows["1M records, 1 thread: get >= 2x Tkrzw"] == (
        f"{figures.qps(ours)} vs {figures.qps(theirs)} ({figures.ratio(ours, theirs)})", verdict(ours >= 2 * theirs))
    ours, theirs = hash_run["kura"]["set"]["file_size"], hash_run["tkrzw"]["set"]["file_size"]
    assert rows["file size <= Tkrzw's"] == (f"{figures.mb(ours)} vs {figures.mb(theirs)}", verdict(ours <= theirs))
    cache_run = sequence("cache", 1, False)
    ours, theirs = cache_run["kura"]["set"]["rss_bytes"], cache_run["tkrzw"]["set"]["rss_bytes"]
    assert rows["cache: RSS after set <= 0.7x Tkrzw's"] == (
        f"{figures.mb(ours)} vs {figures.mb(theirs)} ({figures.ratio(ours, theirs)})", verdict(ours <= 0.7 * theirs))
    assert rows["hash: 2-thread get vs 1-thread get, sequence runs (2,000,000 vs 1,000,000 "
                "records)"][1] == "(not a target)"
    ratios = {run["cache"]: run["hit_ratio"] for run in bench["hit_ratio"]
              if run["zipf_s"] == 1.2 and run["threads"] == 1}
    ours, moka, quick = ratios["kura CacheDbm (tinylfu)"], ratios["moka sync::Cache"], ratios["quick_cache sync::Cache"]
    assert rows["cache hit ratio, Zipf 1.2: policy=tinylfu >= moka and quick_cache"] == (
        f"{ours:.4f} vs moka {moka:.4f}, quick_cache {quick:.4f}", verdict(ours >= moka and ours >= quick))


def synthetic_run(generator):
    """A run of hash, tiny and cache sequence figures and a load latency, all random."""
    def side(with_get=True):
        phases = {"set": {"qps": generator.uniform(5e5, 8e6), "file_size": 2e7,
                          "rss_bytes": 4e7, "records": 10**6}}
        if with_get:
            phases["get"] = {"qps": generator.uniform(5e5, 8e6), "records": 10**6}
        return phases
    recorded = committed()
    bench = {key: recorded[key] for key in ("date", "machine", "engines", "settings")}
    bench["sequence"] = {
        engine: [{"engine": engine, "threads": threads, "random_key": random_key,
                  "label": f"{threads} thread{'s' if threads > 1 else ''}, "
                           f"{'random' if random_key else 'sequential'} keys",
                  "iterations": 10**6, "kura": side(), "tkrzw": side(engine != "cache")}
                 for threads, random_key in ((1, False), (2, False), (1, True), (2, True))]
        for engine in ("hash", "tiny", "cache")}
    bench["memory_latency"] = {"load_ns": generator.uniform(50, 400), "floor_buffer_mib": 64,
                               "command": "cargo run --release -p kura-bench --bin memory_latency",
                               "buffers": [{"mib": 64, "small_pages_ns": 1.0,
                                            "huge_pages_ns": 1.0}]}
    return bench


def test_floor_rows_and_verdicts_follow_the_figures():
    generator = random.Random(20)
    keys = {False: "sequential", True: "random"}
    for _ in range(50):
        bench = synthetic_run(generator)
        load = bench["memory_latency"]["load_ns"]
        text = document.markdown(bench)
        rows = target_rows(text)
        assert "## Single gets and the memory floor" in text
        for engine, runs in bench["sequence"].items():
            bound = 2.0 if engine == "hash" else 1.3
            for run in runs:
                ours = run["kura"]["get"]["qps"]
                per_get = run["threads"] * 1e9 / ours
                threads = f"{run['threads']} thread{'s' if run['threads'] > 1 else ''}"
                floor_row = (f"| {document.title(engine, document.engine_facts(bench))} | "
                             f"{run['label']} |")
                line = next(line for line in text.splitlines() if line.startswith(floor_row))
                assert line.endswith(f"| {per_get:.0f} ns | {per_get / load:.2f} |")
                if run["threads"] == 1:
                    name = (f"{engine}, {keys[run['random_key']]} keys, 1 thread: "
                            f"get <= {bound} loads")
                    assert rows[name][1] == ("yes" if per_get / load <= bound else "**no**")
                name = f"{engine}, {threads}, {keys[run['random_key']]} keys: get >= 1.0x Tkrzw"
                theirs = run["tkrzw"].get("get", {}).get("qps")
                if theirs is None:
                    assert name not in rows
                else:
                    assert rows[name][1] == ("yes" if ours >= theirs else "**no**")


def test_merges_keep_each_engines_floor():
    """Model-based: runs that each measure some engines, with or without the memory floor
    (BENCH_SKIP_FLOOR), merged one after another (BENCH_MERGE). Every engine stays compared
    with the floor of the run that last measured it (None: that run measured none), and its
    target rows show that floor."""
    import run
    generator = random.Random(21)
    engines = ("hash", "tiny", "cache")
    for _ in range(40):
        bench, model = None, {}
        for _ in range(generator.randint(1, 5)):
            later = synthetic_run(generator)
            measured = [e for e in engines if generator.random() < 0.5] or [generator.choice(engines)]
            later["sequence"] = {e: later["sequence"][e] for e in measured}
            if generator.random() < 0.3:
                later["memory_latency"] = None
            floor = (later["memory_latency"] or {}).get("load_ns")
            bench = later if bench is None else run.merged(json.loads(json.dumps(bench)), later)
            model.update({e: floor for e in measured})
            assert {e: metrics.load_ns_of(bench, e) for e in bench["sequence"]} == model
            rows = target_rows(document.markdown(bench))
            for engine, load in model.items():
                per_get = 1e9 / bench["sequence"][engine][0]["kura"]["get"]["qps"]
                bound = 2.0 if engine == "hash" else 1.3
                name = f"{engine}, sequential keys, 1 thread: get <= {bound} loads"
                if load:
                    assert rows[name][0] == (f"{per_get / load:.2f} loads ({per_get:.0f} ns per "
                                             f"get, one load {load:.0f} ns)")
                else:
                    assert not rows.get(name, ("",))[0].endswith("ns)")


def test_tkrzw_perf_output_is_read_per_phase():
    output = ("Setting done: elapsed_time=0.480844 num_records=1000000 qps=2079676 mem=28060000\n"
              "  file_size=28198400\n"
              "Getting done: elapsed_time=0.383157 num_records=1000000 qps=2609896 mem=28036000\n")
    phases = tkrzw_output.perf_phases(output)
    assert phases["set"] == {"elapsed_s": 0.480844, "records": 1000000, "qps": 2079676.0,
                             "rss_bytes": 28060000, "file_size": 28198400}
    assert phases["get"]["qps"] == 2609896.0 and "file_size" not in phases["get"]


def test_memory_latency_table_is_read():
    output = ("| buffer | ns per dependent load, small pages | huge pages advised |\n"
              "| ---: | ---: | ---: |\n| 1 MiB | 12 | 11 |\n| 64 MiB | 171 | 168 |\n")
    assert memory_floor.parse(output) == [
        {"mib": 1, "small_pages_ns": 12.0, "huge_pages_ns": 11.0},
        {"mib": 64, "small_pages_ns": 171.0, "huge_pages_ns": 168.0}]


def test_a_run_of_the_current_schema_redraws_every_section(tmp_path):
    """fixtures/tiny-run.json: `bench/run.py` at BENCH_ITER=2000 BENCH_DICT_LIMIT=2000
    BENCH_HIT_OPS=20000 BENCH_SEQUENCE_REPEAT=1 BENCH_REPEAT=1 (figures meaningless, every
    section present, the memory floor measured)."""
    with open(os.path.join(os.path.dirname(__file__), "fixtures", "tiny-run.json")) as data:
        bench = json.load(data)
    text = report.write_report(bench, str(tmp_path))
    for _, title in targets.GROUPS:
        assert f"## {title}" in text
    for engine in bench["engines"]:
        assert f"### {document.title(engine['name'], document.engine_facts(bench))}" in text
    floor = text.split("## Single gets and the memory floor")[1].split("## Dictionary")[0]
    get_rows = [run for runs in bench["sequence"].values() for run in runs if "get" in run["kura"]]
    assert len(get_rows) == 4 * len(bench["sequence"])
    assert sum(line.startswith("| ") and " keys | " in line
               for line in floor.splitlines()) == len(get_rows)
    assert f"**{bench['memory_latency']['load_ns']:.0f} ns**" in floor
    figures = metrics.named_figures(bench)
    shown = target_rows(text)
    expected = [verdicts.evaluate(t, figures) for t in targets.TARGETS]
    assert {checked[0] for checked in expected if checked} == set(shown)
    assert "### Tree files" in text and "## Cache hit ratio under Zipf keys" in text


def test_comparisons_include_their_bound_and_tolerance():
    assert verdicts.met(">=", 2.0, [1.0], 2, 0) and verdicts.met("<=", 2.0, [1.0], 2, 0)
    assert not verdicts.met(">=", 1.99, [1.0], 2, 0) and not verdicts.met("<=", 2.01, [1.0], 2, 0)
    assert verdicts.met(">=", 0.9991, [1.0], 1, 0.001)
    assert not verdicts.met(">=", 0.998, [1.0], 1, 0.001)
    assert verdicts.met("<=", 39e6, [], 40e6, 0) and not verdicts.met("<=", 41e6, [], 40e6, 0)
    assert not verdicts.met(">=", 0.81, [0.80, 0.82], 1, 0)


def test_sequence_tables_show_leveldb_beside_tkrzw_only_where_it_ran():
    """Random runs, with and without LevelDB's figures: its columns appear exactly when a run
    has them, and every LevelDB cell and Kura/LevelDB ratio is the run's own figure (a phase
    LevelDB has not, such as get_many, shows none)."""
    from render import tables
    rng = random.Random(20)
    labels = ["1 thread, sequential keys", "2 threads, random keys"]
    phases = {"set": "set", "get": "get", "get_batch64": "get_many, batches of 64", "remove": "remove"}
    for _ in range(50):
        with_leveldb = rng.random() < 0.5
        runs = []
        for label in labels:
            run = {"label": label, "tkrzw": {}, "kura": {}}
            for phase in phases:
                run["kura"][phase] = {"qps": rng.uniform(1e4, 1e7)}
                if phase != "get_batch64":
                    run["tkrzw"][phase] = {"qps": rng.uniform(1e4, 1e7)}
            for side in ("kura", "tkrzw"):
                run[side]["set"]["file_size"] = rng.randrange(1, 10**8)
            if with_leveldb:
                run["leveldb"] = {phase: {"qps": rng.uniform(1e4, 1e7)} for phase in ("set", "get", "remove")}
                run["leveldb"]["set"]["file_size"] = rng.randrange(1, 10**8)
            runs.append(run)
        lines = tables.sequence_table(runs, False, 100).splitlines()
        assert ("LevelDB" in lines[0]) == with_leveldb
        for run in runs:
            cells_of = {}
            for line in lines:
                cells = [cell.strip() for cell in line.strip("|").split("|")]
                if cells[0] == run["label"]:
                    cells_of[cells[1]] = cells
            for phase, name in list(phases.items()) + [("file size", "file size")]:
                cells = cells_of[name]
                assert len(cells) == (7 if with_leveldb else 5)
                measure, show = ("file_size", figures.mb) if phase == "file size" else ("qps", figures.qps)
                key = "set" if phase == "file size" else phase
                ours = run["kura"][key][measure]
                assert cells[3] == show(ours)
                if with_leveldb:
                    theirs = run["leveldb"].get(key, {}).get(measure, 0)
                    assert cells[5] == show(theirs)
                    assert cells[6] == figures.ratio(ours, theirs)
