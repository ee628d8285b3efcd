"""bench/beyond_caches.py's report step alone: it redraws the committed table from the committed
JSON, and each verdict follows from the run's own figures (a ratio under its threshold never
prints as the threshold)."""

import copy
import json
import os

import beyond_caches


def committed():
    with open(beyond_caches.JSON_PATH) as f:
        return json.load(f)


def table_rows(text):
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| engine")]


def redraw(data, tmp_path):
    source, target = os.path.join(tmp_path, "run.json"), os.path.join(tmp_path, "run.md")
    with open(source, "w") as f:
        json.dump(data, f)
    beyond_caches.report(source, target)
    with open(target) as f:
        return f.read()


def test_the_committed_table_is_the_committed_json_redrawn(tmp_path):
    with open(beyond_caches.MD_PATH) as f:
        assert redraw(committed(), tmp_path) == f.read()


def test_each_verdict_follows_from_the_runs_figures(tmp_path):
    data = committed()
    rows = table_rows(redraw(data, tmp_path))
    assert len(rows) == len(data["rows"])
    for row, measured in zip(rows, data["rows"]):
        own = measured["kura_get_many"] / measured["kura_get"]
        assert row[7].endswith("yes") == (own >= beyond_caches.TARGET_OWN), row
        if measured["tkrzw_get"]:
            peer = measured["kura_get_many"] / measured["tkrzw_get"]
            assert row[8].endswith("yes") == (peer >= beyond_caches.TARGET_TKRZW), row


def test_a_ratio_just_under_its_threshold_prints_under_it(tmp_path):
    data = copy.deepcopy(committed())
    first = data["rows"][0]
    first["kura_get"] = 1_000_000.0
    first["kura_get_many"] = 1_999_999.0
    row = table_rows(redraw(data, tmp_path))[0]
    assert row[7] == "1.99x **no**"
