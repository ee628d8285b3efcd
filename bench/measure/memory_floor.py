"""The memory floor under the 1M-record figures: the latency of one dependent load on this
machine, measured in the same run by `cargo run --release -p kura-bench --bin memory_latency`
(a pointer chase through random cache lines of buffers from 1 MiB to 256 MiB)."""

import re

import harness

COMMAND = ["cargo", "run", "--quiet", "--release", "-p", "kura-bench", "--bin", "memory_latency"]
# The buffer whose latency counts as "one load": the 1M-record tables of the sequence
# workload take tens of MB (27 MB for HashDbm's file, 40-70 MB of RSS in memory), beyond the
# L3's share of this shared machine, as 64 MiB is.
FLOOR_BUFFER_MIB = 64
# One row of memory_latency's Markdown table: "| 64 MiB | 171 | 168 |".
ROW = re.compile(r"^\|\s*(\d+) MiB\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")


def parse(output):
    """memory_latency's table as rows {mib, small_pages_ns, huge_pages_ns}."""
    return [{"mib": int(match.group(1)), "small_pages_ns": float(match.group(2)),
             "huge_pages_ns": float(match.group(3))}
            for match in map(ROW.match, output.splitlines()) if match]


def measure():
    """{command, buffers, floor_buffer_mib, load_ns}: load_ns is the small-page latency of
    the FLOOR_BUFFER_MIB buffer, the "one load" the report divides each get's time by. None
    (the report then has no floor) when memory_latency cannot run: the other workloads' figures,
    measured before it, are kept rather than lost to a missing cargo."""
    harness.log("memory floor: " + " ".join(COMMAND))
    output = harness.run_or_none(COMMAND, "no memory floor", cwd=harness.ROOT)
    if output is None:
        return None
    buffers = parse(output)
    floor = next((row for row in buffers if row["mib"] == FLOOR_BUFFER_MIB), None)
    if floor is None:
        harness.log(f"bench: memory_latency printed no {FLOOR_BUFFER_MIB} MiB row; no floor")
        return None
    return {"command": " ".join(c for c in COMMAND if c != "--quiet"), "buffers": buffers,
            "floor_buffer_mib": FLOOR_BUFFER_MIB, "load_ns": floor["small_pages_ns"]}
