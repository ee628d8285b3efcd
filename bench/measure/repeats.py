"""Running a measurement several times and keeping, per phase, the best run: on a shared
machine the best run is the one least disturbed by other work."""

import json
import time

import harness


def json_phases(output):
    """Phase -> figures from the JSON lines that `kura bench --json` and bench/tkrzw_get print."""
    records = (json.loads(line) for line in output.splitlines() if line.startswith("{"))
    # Batched gets (`kura bench --batch 16,64`) print one `get_batch` phase per batch size.
    return {record["phase"] + str(record.get("batch", "")): record for record in records}


def best_phases(runs):
    """Per phase, the figures of the run with the highest QPS in it (`runs`: one dict of
    phase -> figures per run)."""
    best = {}
    for phases in runs:
        for phase, record in phases.items():
            if record["qps"] > best.get(phase, {}).get("qps", -1):
                best[phase] = record
    return best


def best_of(command):
    """The best phases of `harness.repeat()` runs of a command printing JSON lines. A run
    longer than `harness.repeat_max_s()` seconds is not repeated, so that the slow codecs of
    the tree keep `make bench` within its time. Both programs get the same."""
    runs = []
    for _ in range(harness.repeat()):
        started = time.monotonic()
        runs.append(json_phases(harness.run(command)))
        if time.monotonic() - started > harness.repeat_max_s():
            break
    return best_phases(runs)
