"""Cache hit ratios under Zipf keys: target/release/kura-cache-bench (crates/kura-bench)
runs CacheDbm, moka, quick_cache and plain LRU on the same trace and prints one JSON line
per (cache, Zipf exponent, threads)."""

import json
import os

import harness

ZIPF_EXPONENTS = (0.99, 1.2)
CAPACITY = 100_000
UNIVERSE = 1_000_000


def hit_ratio_workload():
    if not os.path.exists(harness.KURA_CACHE_BENCH):
        harness.log(f"bench: {harness.KURA_CACHE_BENCH} is missing (cargo build --release "
                    "builds it); no hit-ratio table")
        return []
    ops = harness.env_int("BENCH_HIT_OPS", 5_000_000)
    harness.log(f"cache hit ratio: Zipf {' and '.join(map(str, ZIPF_EXPONENTS))}, {ops} "
                f"requests, {CAPACITY} entries, {UNIVERSE} keys")
    output = harness.run([harness.KURA_CACHE_BENCH, "--capacity", str(CAPACITY),
                          "--universe", str(UNIVERSE), "--ops", str(ops),
                          "--zipf", ",".join(map(str, ZIPF_EXPONENTS)), "--threads", "1,2"])
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]
