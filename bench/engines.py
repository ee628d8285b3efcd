"""The engines and codecs as the library's registries describe them, read from `kura engines
--json` and `kura codecs --json`: name, class, extension, file or memory, ordered; the codec
names. The benchmark keeps no list of its own; the Tkrzw side of each comparison is in
tkrzw_peers.py."""

import json

import harness


def registry(kura=harness.KURA):
    """Every engine, in the registry's order, as a dict of the fields the benchmark uses."""
    fields = ("name", "class", "extension", "storage", "ordered")
    output = harness.run([kura, "engines", "--json"])
    return [{field: entry[field] for field in fields}
            for entry in map(json.loads, filter(None, output.splitlines()))]


def codecs(kura=harness.KURA):
    """Every codec name, in the registry's (file header id) order."""
    output = harness.run([kura, "codecs", "--json"])
    return [json.loads(line)["name"] for line in output.splitlines() if line]


def in_memory(engine):
    return engine["storage"] == "memory"


def wanted(engine):
    """Whether a run includes the engine: BENCH_SKIP_<NAME> leaves one out, BENCH_SKIP_MEMORY
    every in-memory engine."""
    return not harness.skipped(engine["name"]) and not (
        in_memory(engine) and harness.skipped("MEMORY"))
