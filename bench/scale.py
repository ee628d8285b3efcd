#!/usr/bin/env python3
"""The scale run (`make scale`, not part of `make bench` or CI): TinyDbm and CacheDbm with
100 million records of 8-byte keys and values, next to Tkrzw's TinyDBM and CacheDBM in the
same run, one engine at a time so that each has the machine's memory to itself.

Both sides run the sequence workload of `make bench` (bench/measure/sequence.py:
`tkrzw_dbm_perf sequence` against `kura bench`, sequential keys `%08d`, 1 thread): set,
get, iterate and remove QPS, and the process RSS after setting. Tkrzw's TinyDBM gets
`--buckets N` (one bucket per record, as Kura's table grows to); its default 1M buckets would
make 100-record chains and measure nothing but that. Tkrzw's CacheDBM is timed on set only,
as in `make bench` (its iterator costs O(records) per step).

Writes bench/results/scale.md, scale.json and scale.png (if matplotlib is importable).
SCALE_RECORDS (default 100000000) and SCALE_ENGINES (default tiny,cache) change the run.
"""

import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402
import harness  # noqa: E402
from measure import machine, sequence as workload  # noqa: E402
from render import charts, document, tables  # noqa: E402


def main():
    records = harness.env_int("SCALE_RECORDS", 100_000_000)
    names = [e for e in os.environ.get("SCALE_ENGINES", "tiny,cache").split(",") if e]
    if not os.path.exists(harness.KURA):
        sys.exit(f"scale: {harness.KURA} is missing; run `make build`")
    os.makedirs(harness.WORK, exist_ok=True)
    began = time.monotonic()
    registry = engines.registry()
    facts = {engine["name"]: engine for engine in registry}
    sequence = {}
    for engine in names:
        label = "1 thread, sequential keys"
        extra = ["--buckets", str(records)] if engine == "tiny" else []
        harness.log(f"scale {engine}: tkrzw, {records} records")
        tkrzw = workload.tkrzw_sequence(facts[engine], records, 1, False, extra)
        harness.log(f"scale {engine}: kura, {records} records")
        kura = workload.kura_sequence(facts[engine], records, 1, False)
        sequence[engine] = [{"engine": engine, "threads": 1, "random_key": False, "label": label,
                             "iterations": records, "tkrzw": tkrzw, "kura": kura}]
    elapsed = time.monotonic() - began
    harness.log(f"scale: measured in {elapsed / 60:.1f} min")

    os.makedirs(harness.RESULTS, exist_ok=True)
    with open(os.path.join(harness.RESULTS, "scale.json"), "w") as out:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "records": records, "sequence": sequence}, out, indent=1)
    plotted = charts.draw({"engines": registry, "sequence": sequence},
                          os.path.join(harness.RESULTS, "scale.png"))
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = ["# Kura vs Tkrzw at scale: 100M records in memory", "",
             f"Measured {date} by `make scale` (bench/scale.py) on: {machine.machine_info()}.",
             f"{records:,} records of 8-byte keys (`%08d`) and 8-byte values, one thread, one "
             "engine at a time; each side in its own process. Only same-run ratios mean much "
             f"on this shared machine. Took {elapsed / 60:.1f} min.", ""]
    notes = {"tiny": f"Tkrzw ran with `--buckets {records}`.",
             "cache": "Tkrzw is timed on set only (its CacheDBM iterator costs O(records) per "
                      "step); compare set and RSS. Both caches get `cap_rec_num` = 1.25 x "
                      "records + 1024, so nothing is evicted."}
    for engine, runs in sequence.items():
        in_memory = engines.in_memory(facts[engine])
        parts += [f"## {document.title(engine, facts)}", "", notes.get(engine, ""), "",
                  tables.sequence_table(runs, in_memory, workload.RANGE_SPAN), ""]
    if plotted:
        parts += ["![scale](scale.png)", ""]
    with open(os.path.join(harness.RESULTS, "scale.md"), "w") as out:
        out.write("\n".join(parts))
    harness.remove_files(harness.WORK)
    with open(os.path.join(harness.RESULTS, "scale.md")) as report:
        print(report.read())


if __name__ == "__main__":
    main()
