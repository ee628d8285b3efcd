"""The Tkrzw side of each comparison: which Tkrzw DBM stands next to which Kura engine (by the
registry's engine name), its file extension, how `tkrzw_dbm_perf` and `tkrzw_dbm_util` are
told to run it, and the notes the report prints about the pairing. Kura's own engine facts
come from the registry (engines.py); an engine without a row here runs on Kura's side only."""

# Tkrzw 1.0.25's record compressors; Kura's other codecs run on Kura's side only.
CODECS = ("none", "zlib", "zstd", "lz4", "lzma")

PEERS = {
    "hash": {
        "dbm": "hash", "title": "Tkrzw HashDBM", "extension": "tkh",
        # The dictionary's hash file gets a million buckets, as a Tkrzw user would give it.
        "create_args": ["--buckets", "1000000"],
        "dictionary_build": "Build: `kura import` (default settings, worker threads = CPUs) "
                            "and `tkrzw_dbm_util create --dbm hash --buckets 1000000` + "
                            "`import --tsv` (one thread).",
    },
    "tree": {
        "dbm": "tree", "title": "Tkrzw TreeDBM", "extension": "tkt",
        # Both sides rebuild the imported tree: Tkrzw's import leaves half-full pages.
        "rebuild_after_import": True,
        "dictionary_build": "Build: `kura import X.kut` then `kura rebuild X.kut`, against "
                            "`tkrzw_dbm_util create --dbm tree --record_comp CODEC X.tkt`, "
                            "`import --tsv`, `rebuild`; build time includes both steps. Default "
                            "page sizes and caches on both sides (Tkrzw's tree caches 10,000 "
                            "pages; Kura's 256 MiB).",
    },
    "tiny": {"dbm": "tiny", "title": "Tkrzw TinyDBM", "extension": None},
    "baby": {"dbm": "baby", "title": "Tkrzw BabyDBM", "extension": None},
    "cache": {
        "dbm": "cache", "title": "Tkrzw CacheDBM", "extension": None,
        # Tkrzw's CacheDBM iterator costs O(records) per step (100,000 records took 55 s to
        # iterate here), so a full sequence would not finish: its set phase only is timed.
        "set_only": True,
        # Both caches get the same record cap, room for every key (cache_capacity).
        "cap_rec_num": True,
        "sequence_note": "Tkrzw is timed on **set only** (`--set_only`): its CacheDBM "
                         "iterator costs O(records) per step (iterating 100,000 records took "
                         "55 s here), so its full sequence would not finish; run on its own, "
                         "`--get_only` would read a new, empty in-memory database. Compare set "
                         "and RSS.",
    },
}


def peer(engine_name):
    """The Tkrzw row of a Kura engine, or None."""
    return PEERS.get(engine_name)


def cache_capacity(iterations, threads):
    """cap_rec_num for both caches: room for every key of the run with a margin, since the
    record cap is shared out among internal slots and a full slot evicts (the registry's
    benchmark default for CacheDbm is the same figure)."""
    return iterations * threads * 5 // 4 + 1024
