"""The targets of the issues as data: each row names a measured figure (`metric`, a name from
render/metrics.py), what it is compared with (`peer`: one figure, a list of figures that must
all be met, or None for a fixed threshold), the `comparison` (">=", "<=", or None for a figure
shown beside the targets that is not one), the `threshold` (a factor of the peer, or the
bound itself), an optional absolute `tolerance`, and how the report words the row: `name` and
`detail` are format strings over the figures (`{metric}`, `{peer}`, `{ratio}` and the
`values` named in the row), with the units of render/figures.py (`{metric:qps}`,
`{peer:mb}`). A row whose figures are not all in bench.json is left out of the report.
Rows are listed in the order the report shows them, under their group's title."""

GROUPS = [
    ("hash", "Targets: HashDbm (issue #2)"),
    ("tree", "Targets: TreeDbm (issue #3)"),
    ("memory", "Targets: in-memory engines (issue #4)"),
    ("floor", "Targets: single gets against the memory floor (issue #20)"),
    ("batch", "Targets: batched gets, get_many in batches of 64 (issue #20)"),
]

VERSUS = "{metric:qps} vs {peer:qps} ({ratio})"
SIZES = "{metric:mb} vs {peer:mb}"
KEYS = {"s": "sequential", "r": "random"}


def row(group, name, metric, peer, comparison, threshold, detail, **extra):
    return {"group": group, "name": name, "metric": metric, "peer": peer,
            "comparison": comparison, "threshold": threshold, "detail": detail, **extra}


def versus_tkrzw(group, name, engine, config, phase, factor):
    """Kura's QPS of a sequence phase against Tkrzw's in the same configuration."""
    return row(group, name, f"sequence/{engine}/{config}/kura/{phase}/qps",
               f"sequence/{engine}/{config}/tkrzw/{phase}/qps", ">=", factor, VERSUS)


def dictionary_get(group, name, engine, codec, peer_codec, factor):
    """Kura's 1-thread dictionary get with `codec` against Tkrzw's with `peer_codec`."""
    return row(group, name, f"dictionary/{engine}/{codec}/kura/get1/qps",
               f"dictionary/{engine}/{peer_codec}/tkrzw/get1/qps", ">=", factor, VERSUS)


def file_at_most(group, name, engine, codec, megabytes):
    return row(group, name, f"dictionary/{engine}/{codec}/kura/file_size", None, "<=",
               megabytes * 1e6, "{metric:mb}")


def thread_scaling(group, engine):
    """The 2-thread target on equal records, and the sequence runs' ratio beside it (their
    2-thread database holds twice the records)."""
    return [
        row(group, f"{engine}: 2-thread get >= 1.8x 1-thread get, same {{records:,}} records",
            f"scaling/{engine}/get2/qps", f"scaling/{engine}/get1/qps", ">=", 1.8,
            "{metric:qps} vs {peer:qps} ({ratio}, best of {repeat} each)",
            values={"records": f"scaling/{engine}/records", "repeat": "settings/repeat"}),
        row(group, f"{engine}: 2-thread get vs 1-thread get, sequence runs ({{two:,}} vs "
                   "{one:,} records)",
            f"sequence/{engine}/2s/kura/get/qps", f"sequence/{engine}/1s/kura/get/qps", None, 1,
            VERSUS, values={"two": f"sequence/{engine}/2s/kura/get/records",
                            "one": f"sequence/{engine}/1s/kura/get/records"}),
    ]


def hit_ratio(zipf):
    figure = f"hit_ratio/{zipf}/{{}}/1T/hit_ratio"
    return [
        # Per-slot LRU lists differ from one global list by a hair either way: within 0.001
        # of the global LRU on the same trace counts as meeting it.
        row("memory", f"cache hit ratio, Zipf {zipf}: >= plain LRU",
            figure.format("kura CacheDbm"), figure.format("plain LRU (simulated)"), ">=", 1,
            "{metric:.4f} vs {peer:.4f} simulated, {che:.4f} by Che's approximation",
            tolerance=0.001, values={"che": figure.format("plain LRU (Che approximation)")}),
        # The admission option (policy=tinylfu) against the caches that admit selectively.
        row("memory", f"cache hit ratio, Zipf {zipf}: policy=tinylfu >= moka and quick_cache",
            figure.format("kura CacheDbm (tinylfu)"),
            [figure.format("moka sync::Cache"), figure.format("quick_cache sync::Cache")], ">=",
            1, "{metric:.4f} vs moka {moka:.4f}, quick_cache {quick_cache:.4f}",
            values={"moka": figure.format("moka sync::Cache"),
                    "quick_cache": figure.format("quick_cache sync::Cache")}),
    ]


def floor(engine, loads):
    """A single get of 1M records costs at most `loads` dependent loads of the same run, and
    stays ahead of Tkrzw's in every configuration of the sequence table."""
    rows = [row("floor", f"{engine}, {KEYS[keys]} keys, 1 thread: get <= {loads} loads",
                f"floor/{engine}/1{keys}/kura/loads", None, "<=", loads,
                "{metric:.2f} loads ({ns:.0f} ns per get, one load {load:.0f} ns)",
                values={"ns": f"floor/{engine}/1{keys}/kura/ns_per_get",
                        "load": f"floor/{engine}/load_ns"})
            for keys in "sr"]
    return rows + [versus_tkrzw("floor", f"{engine}, {threads} thread{'s' * (threads > 1)}, "
                                         f"{KEYS[keys]} keys: get >= 1.0x Tkrzw",
                                engine, f"{threads}{keys}", "get", 1.0)
                   for keys in "sr" for threads in (1, 2)]


def batched(engine, keys_list, with_tkrzw):
    """`get_many` in batches of 64 against the engine's own single get (>= 2x) and, where
    Tkrzw times gets on its peer, Tkrzw's single get (>= 3x), one thread."""
    rows = []
    for keys in keys_list:
        config = f"1{keys}"
        metric = f"sequence/{engine}/{config}/kura/get_batch64/qps"
        rows.append(row("batch", f"{engine}, {KEYS[keys]} keys: get_many(64) >= 2x own get",
                        metric, f"sequence/{engine}/{config}/kura/get/qps", ">=", 2, VERSUS))
        if with_tkrzw:
            rows.append(row("batch", f"{engine}, {KEYS[keys]} keys: get_many(64) >= 3x Tkrzw get",
                            metric, f"sequence/{engine}/{config}/tkrzw/get/qps", ">=", 3,
                            VERSUS))
    return rows


TARGETS = [
    # Issue #2: HashDbm.
    *(versus_tkrzw("hash", f"1M records, 1 thread: {phase} >= 2x Tkrzw", "hash", "1s", phase, 2)
      for phase in ("set", "get", "remove")),
    row("hash", "file size <= Tkrzw's", "sequence/hash/1s/kura/set/file_size",
        "sequence/hash/1s/tkrzw/set/file_size", "<=", 1, SIZES),
    *thread_scaling("hash", "hash"),
    file_at_most("hash", "dictionary: zstd-dict file <= 40 MB", "hash", "zstd-dict", 40),
    dictionary_get("hash", "dictionary: zstd-dict get >= 3x Tkrzw zstd", "hash", "zstd-dict",
                   "zstd", 3),
    row("hash", "dictionary: lz4 file <= Tkrzw lz4", "dictionary/hash/lz4/kura/file_size",
        "dictionary/hash/lz4/tkrzw/file_size", "<=", 1, SIZES),
    dictionary_get("hash", "dictionary: lz4 get >= Tkrzw lz4", "hash", "lz4", "lz4", 1),
    dictionary_get("hash", "dictionary: none get >= Tkrzw none", "hash", "none", "none", 1),
    # Issue #3: TreeDbm.
    *(entry for keys in "sr" for entry in [
        *(versus_tkrzw("tree", f"tree, {KEYS[keys]} keys, 1 thread: {phase} >= 2x Tkrzw",
                       "tree", f"1{keys}", phase, 2) for phase in ("set", "get", "remove")),
        row("tree", f"tree, {KEYS[keys]} keys: file size <= Tkrzw's",
            f"sequence/tree/1{keys}/kura/set/file_size",
            f"sequence/tree/1{keys}/tkrzw/set/file_size", "<=", 1, SIZES)]),
    file_at_most("tree", "tree dictionary: zstd file <= 40 MB", "tree", "zstd", 40),
    dictionary_get("tree", "tree dictionary: zstd get >= 3x Tkrzw zstd tree", "tree", "zstd",
                   "zstd", 3),
    file_at_most("tree", "tree dictionary: none file <= 120 MB", "tree", "none", 120),
    dictionary_get("tree", "tree dictionary: lz4 get >= 3x Tkrzw lz4 tree", "tree", "lz4", "lz4",
                   3),
    # Issue #4: TinyDbm, BabyDbm, CacheDbm (Tkrzw's CacheDBM is timed on set only, so its get
    # and remove rows have no peer figure and are left out).
    *(versus_tkrzw("memory", f"{engine}, {KEYS[keys]} keys, 1 thread: {phase} >= 2x Tkrzw",
                   engine, f"1{keys}", phase, 2)
      for engine in ("tiny", "baby", "cache") for keys in "sr"
      for phase in ("set", "get", "remove")),
    row("memory", "cache: RSS after set <= 0.7x Tkrzw's", "sequence/cache/1s/kura/set/rss_bytes",
        "sequence/cache/1s/tkrzw/set/rss_bytes", "<=", 0.7, SIZES + " ({ratio})"),
    *thread_scaling("memory", "cache"),
    *(entry for zipf in (0.99, 1.2) for entry in hit_ratio(zipf)),
    # Issue #20: single gets against one dependent load of the same run (memory_latency).
    *floor("hash", 2.0),
    *floor("tiny", 1.3),
    *floor("cache", 1.3),
    # Issue #20: batched gets (Tkrzw's CacheDBM is timed on set only: no peer row for cache).
    *batched("hash", "sr", True),
    *batched("tiny", "sr", True),
    *batched("cache", "sr", False),
    *batched("tree", "r", False),
]


def scaling_engines():
    """The engines whose thread scaling a target reads: bench/run.py measures those."""
    return sorted({target["metric"].split("/")[1] for target in TARGETS
                   if target["metric"].startswith("scaling/")})
