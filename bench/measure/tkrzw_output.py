"""Reading `tkrzw_dbm_perf sequence`'s text output: one "<Phase> done" line per phase with
its time, records, QPS and memory, followed by the file size."""

import re

PHASE_NAMES = {"Setting": "set", "Getting": "get", "Iterating": "iterate", "Removing": "remove"}
DONE_LINE = re.compile(r"^(Setting|Getting|Iterating|Removing) done: elapsed_time=([\d.]+) "
                       r"num_records=(\d+) qps=(\d+) mem=(\d+)")
FILE_SIZE_LINE = re.compile(r"^\s+file_size=(\d+)")


def perf_phases(output):
    """Phase name -> {elapsed_s, records, qps, rss_bytes[, file_size]}, in the field names of
    `kura bench --json` so that both sides are read alike."""
    phases, current = {}, None
    for line in output.splitlines():
        done = DONE_LINE.match(line)
        if done:
            current = PHASE_NAMES[done.group(1)]
            phases[current] = {"elapsed_s": float(done.group(2)), "records": int(done.group(3)),
                               "qps": float(done.group(4)), "rss_bytes": int(done.group(5))}
            continue
        size = FILE_SIZE_LINE.match(line)
        if size and current:
            phases[current]["file_size"] = int(size.group(1))
            current = None
    return phases
