"""bench/cache_engines.py's report step alone: it redraws the committed table from the committed
JSON, and each verdict follows from the run's own figures (a ratio under its threshold never
prints as the threshold, a get over its loads never prints as under them)."""

import copy
import json
import os

import cache_engines


def committed():
    with open(cache_engines.JSON_PATH) as f:
        return json.load(f)


def verdict_rows(text):
    """The rows of the targets table: engine, figure, measured, target, met."""
    rows = text.split("## Issue 42's engine-level targets", 1)[1]
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in rows.splitlines() if line.startswith("| ") and not line.startswith("| engine")]


def redraw(data, tmp_path):
    source, target = os.path.join(tmp_path, "run.json"), os.path.join(tmp_path, "run.md")
    with open(source, "w") as f:
        json.dump(data, f)
    cache_engines.report(source, target, None)
    with open(target) as f:
        return f.read()


def test_the_committed_table_is_the_committed_json_redrawn(tmp_path):
    with open(cache_engines.MD_PATH) as f:
        assert redraw(committed(), tmp_path) == f.read()


def test_each_verdict_follows_from_the_runs_figures(tmp_path):
    data = committed()
    tkrzw = data["sides"][cache_engines.TKRZW]["best"]
    floor = data["memory_floor"]["load_ns"]
    for engine, figure, _, _, met in verdict_rows(redraw(data, tmp_path)):
        ours = data["sides"][engine]["best"]
        if figure.startswith("memory"):
            expected = ours["rss_growth"] / tkrzw["rss_growth"] <= cache_engines.MEMORY_AT_MOST
        elif figure.startswith("single get"):
            field = "get_qps" if "same order" in figure else "get_random_qps"
            expected = 1e9 / ours[field] / floor <= cache_engines.CACHE_LOADS_AT_MOST
        else:
            field = {"set": "set_qps", "get, same order": "get_qps", "get, shuffled": "get_random_qps"}[
                figure.removesuffix(" QPS vs Tkrzw")]
            expected = ours[field] / tkrzw[field] >= cache_engines.QPS_AT_LEAST
        assert (met == "yes") == expected, (engine, figure, met)


def test_a_ratio_just_under_its_threshold_prints_under_it(tmp_path):
    data = copy.deepcopy(committed())
    data["sides"][cache_engines.TKRZW]["best"]["set_qps"] = 1_000_000.0
    data["sides"]["segcache"]["best"]["set_qps"] = 1_199_999.0
    rows = verdict_rows(redraw(data, tmp_path))
    assert ["segcache", "set QPS vs Tkrzw", "1.19x", ">= 1.2x", "**no**"] in rows


def test_a_get_just_over_its_loads_prints_over_them(tmp_path):
    data = copy.deepcopy(committed())
    data["memory_floor"]["load_ns"] = 100.0
    data["sides"]["cache"]["best"]["get_qps"] = 1e9 / 130.1
    rows = verdict_rows(redraw(data, tmp_path))
    assert ["cache", "single get, same order, in loads", "1.31", "<= 1.3", "**no**"] in rows
