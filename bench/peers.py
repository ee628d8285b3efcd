#!/usr/bin/env python3
"""Kura's TreeDbm and HashDbm against LMDB, RocksDB, fjall and redb (`make bench-peers`),
through the phases of redb's own `lmdb_benchmark`: bulk load, durable single and batch
writes, non-durable writes, len(), random point and range reads on 1, 2 and 4 threads, reads
after a reopen, removals, size before and after compaction (bench/peers/src/main.rs says what
each phase does and checks).

Builds bench/peers (its own cargo workspace, linking Debian's librocksdb) and runs the
`kura-peers` binary once per store per round, each store in a process of its own in a fresh
directory. Round 1 runs the stores in order, round 2 in reverse, and so on; the report keeps
the best (least) time of each phase per store. Before each round the `floors` binary
(bench/peers/src/bin/floors.rs) measures what the machine allows at best (an `fdatasync`,
a dependent load from memory, the disk's sequential and random reads), and the report sets
Kura's figures beside those floors. Writes bench/results/peers.json (every round's
lines too), peers.md (times per store and phase, and Kura's time over the best peer's) and
peers.png (if matplotlib is importable).

Environment: PEERS_RECORDS (default 1000000), PEERS_ROUNDS (default 2), PEERS_STORES (a
comma-separated subset, whose results go to peers-<stores>.* beside the full run's, e.g.
peers-kura-tree-fjall.md), PEERS_READS (bulk records each read phase reads; default all, 50,000
under --memory-limit, each phase its own), PEERS_REMOVALS (default half the records, 500,000
under --memory-limit), PEERS_CACHE_BYTES (default 4 GiB: RocksDB's block cache, fjall's and
redb's caches, TreeDbm's cache_bytes), PEERS_DIR (where the stores are written, default
bench/data/peers), PEERS_STORE_MINUTES (a store still running after this long is stopped and
reported with the phases it finished; default none, 20 under --memory-limit).

  python3 bench/peers.py                       the comparison
  python3 bench/peers.py --memory-limit 512M   each store in a cgroup v1 memory group of that
      limit (a group `kura-peers` under this process's own memory cgroup: on a machine where
      that is the root, /sys/fs/cgroup/memory/kura-peers), the page cache dropped before each
      store, the bulk load in commits of 100,000, caches a quarter of the limit unless
      PEERS_CACHE_BYTES says otherwise, MALLOC_ARENA_MAX=2 for every store (why: at
      MEMORY_MALLOC_ARENAS); results in peers-512M.{json,md,png}
  python3 bench/peers.py --render bench/results/peers-512M.json
      measures nothing: writes the report's .md and .png again from its JSON (after adding
      `notes`, paragraphs on how the run went, or `floors` measured apart from it)
"""

import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

STORES = ["kura-tree", "kura-hash", "lmdb", "rocksdb", "fjall", "redb"]
KURA = {"kura-tree": "TreeDbm", "kura-hash": "HashDbm"}
PEERS = ["lmdb", "rocksdb", "fjall", "redb"]
TITLES = {"kura-tree": "Kura TreeDbm", "kura-hash": "Kura HashDbm", "lmdb": "LMDB", "rocksdb": "RocksDB",
          "fjall": "fjall", "redb": "redb"}
# The phases in the order the binary runs them, and the rows of the report.
PHASES = ["bulk load", "individual writes", "batch writes", "nosync writes",
          "nosync writes, 1-op write_batch (overwrites)", "len()", "random reads", "random range reads",
          "random reads (2 threads)", "random reads (4 threads)", "close + reopen", "random reads after reopen",
          "removals", "uncompacted size", "compaction", "compacted size", "random reads after compaction"]
SIZE_PHASES = {"uncompacted size", "compacted size"}
# A phase only TreeDbm runs, set beside the peers' phase of the same kind in the ratio table.
RATIO_AGAINST = {"nosync writes, 1-op write_batch (overwrites)": "nosync writes"}
PEAK_RSS = "peak RSS"
PEERS_DIR = os.path.join(harness.ROOT, "bench", "peers")
MANIFEST = os.path.join(PEERS_DIR, "Cargo.toml")
DEFAULT_CACHE_BYTES = 4 << 30
MEMORY_BULK_BATCH = 100_000
# Bulk records each read phase reads under a memory limit, where a read waits for the disk
# (PEERS_READS overrides; 0 reads all).
MEMORY_READS = 50_000
# glibc malloc arenas for every store under a memory limit. By default glibc gives each thread
# that allocates an arena of its own, and memory freed into an arena stays there for that
# arena's next allocations: each read phase's new threads then grew TreeDbm's anonymous memory
# by about its cache (24 MiB cache, 1M records: 85 MB after the writes, 193 MB after the read
# phases; 86 MB throughout with one arena), which a cgroup counts like any other memory. The
# same setting for every store.
MEMORY_MALLOC_ARENAS = 2

# Records removed under a memory limit, where each removal of a B-tree or a hash file waits for
# the disk to read the record's page (PEERS_REMOVALS overrides; 0 removes half).
MEMORY_REMOVALS = 500_000
# Minutes a store may run under a memory limit before it is stopped (PEERS_STORE_MINUTES
# overrides; 0 means no limit): at 2M records under 128 MiB redb's compaction ran past 12
# minutes and was stopped by hand, which this does for every store alike and reports.
MEMORY_STORE_MINUTES = 20
# The LSMs' memtable (RocksDB write_buffer_size, fjall max_memtable_size) under a memory
# limit: an eighth of it. Their default, 64 MiB, is that eighth of the 512 MiB; at a
# quarter of the scale (2M records, 128 MiB) two default memtables (one filling, one flushing)
# took all of it and both were OOM-killed in their bulk load.
MEMORY_MEMTABLE_FRACTION = 8
CRATES = ["heed", "lmdb-master-sys", "rocksdb", "librocksdb-sys", "fjall", "lsm-tree", "redb"]
# The machine's floors (bench/peers/src/bin/floors.rs), measured before each round: what a
# durable commit, a lookup in memory and a read of the disk cost at least.
FLOOR_SYNC = "fdatasync of a 4 KiB write"
FLOOR_LOAD = "dependent memory load (256 MiB)"
FLOOR_SEQ_WRITE = "sequential write, 1 MiB at a time"
FLOOR_SEQ_READ = "sequential read, 1 MiB at a time"
FLOOR_READ_1 = "random 8 KiB reads, 1 in flight"
FLOOR_READ_32 = "random 8 KiB reads, 32 in flight"
FLOOR_PHASES = [FLOOR_SYNC, FLOOR_LOAD, FLOOR_SEQ_WRITE, FLOOR_SEQ_READ, FLOOR_READ_1, FLOOR_READ_32]
# Bytes of the file the floors read at random: about what TreeDbm's file holds a record in
# (8M records: 2.7 GB), between 256 MiB and 4 GiB. O_DIRECT reads see the device, so the
# size matters only for where on it they land.
FLOOR_BYTES_PER_RECORD = 340
# A record's bytes: a 24-byte key and a 150-byte value (bench/peers/src/records.rs).
RECORD_BYTES = 24 + 150


def parse_size(text):
    """`512M`, `2G`, `1048576`: bytes (binary multiples, as Kura's parameters)."""
    text = text.strip().upper()
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}.get(text[-1:], 0)
    return int(text[:-1] if shift else text) << shift


def binary_path():
    target = os.environ.get("CARGO_TARGET_DIR", "").strip()
    target = os.path.join(harness.ROOT, target) if target else os.path.join(PEERS_DIR, "target")
    return os.path.join(target, "release", "kura-peers")


def rocksdb_lib_dir():
    """Where Debian's librocksdb.so is (librocksdb-dev); ROCKSDB_LIB_DIR wins when set."""
    given = os.environ.get("ROCKSDB_LIB_DIR", "").strip()
    if given:
        return given
    found = sorted(glob.glob("/usr/lib/*/librocksdb.so")) + sorted(glob.glob("/usr/lib/librocksdb.so"))
    if not found:
        sys.exit("peers: librocksdb.so not found; install librocksdb-dev (make deps)")
    return os.path.dirname(found[0])


def build():
    """Builds kura-peers against the system librocksdb; returns the build's seconds."""
    env = dict(os.environ, ROCKSDB_LIB_DIR=rocksdb_lib_dir())
    harness.log("peers: cargo build --release --manifest-path bench/peers/Cargo.toml")
    began = time.monotonic()
    result = subprocess.run(["cargo", "build", "--release", "--manifest-path", MANIFEST], env=env)
    if result.returncode != 0:
        sys.exit("peers: building bench/peers failed")
    return time.monotonic() - began


def versions():
    """The peers' crate versions from bench/peers/Cargo.lock, and the system RocksDB's."""
    found = {}
    try:
        with open(os.path.join(PEERS_DIR, "Cargo.lock")) as lock:
            name = None
            for line in lock:
                if line.startswith("name = "):
                    name = line.split('"')[1]
                elif line.startswith("version = ") and name in CRATES:
                    found[name] = line.split('"')[1]
    except OSError:
        pass
    package = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "librocksdb-dev"],
                             capture_output=True, text=True)
    if package.returncode == 0 and package.stdout.strip():
        found["librocksdb-dev (linked)"] = package.stdout.strip()
    return found


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = ""
    try:
        with open("/proc/meminfo") as info:
            memory = f", {int(info.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; {rustc}"


class MemoryGroup:
    """A cgroup v1 memory group of `limit` bytes named kura-peers, under this process's own
    memory cgroup (so it is /sys/fs/cgroup/memory/kura-peers where that is the root)."""

    ROOT = "/sys/fs/cgroup/memory"

    def __init__(self, limit):
        own = "/"
        with open("/proc/self/cgroup") as groups:
            for line in groups:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(","):
                    own = path
        if not os.path.exists(os.path.join(self.ROOT, "memory.limit_in_bytes")):
            sys.exit(f"peers: --memory-limit needs the cgroup v1 memory controller at {self.ROOT}")
        self.path = os.path.join(self.ROOT, own.lstrip("/"), "kura-peers")
        os.makedirs(self.path, exist_ok=True)
        self.write("memory.limit_in_bytes", limit)
        self.limit = limit

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as control:
            control.write(str(value))

    def read(self, name):
        with open(os.path.join(self.path, name)) as control:
            return int(control.read().split()[0])

    def reset_peak(self):
        self.write("memory.max_usage_in_bytes", 0)

    def wrap(self, command):
        """`command` started inside the group: a shell joins it, then becomes the command."""
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"] + command

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def drop_page_cache():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as control:
            control.write("3")
    except OSError as error:
        harness.log(f"peers: cannot drop the page cache ({error}); the stores start with it warm")


def run_store(binary, store, settings, group):
    """One process of `store`; returns (lines by phase, peak RSS bytes, error or None)."""
    directory = os.path.join(settings["dir"], store)
    shutil.rmtree(directory, ignore_errors=True)
    command = [binary, "--store", store, "--records", str(settings["records"]), "--dir", directory,
               "--cache-bytes", str(settings["cache_bytes"])]
    if settings["bulk_batch"]:
        command += ["--bulk-batch", str(settings["bulk_batch"])]
    if settings["reads"]:
        command += ["--reads", str(settings["reads"])]
    if settings["removals"]:
        command += ["--removals", str(settings["removals"])]
    if settings["memtable_bytes"]:
        command += ["--memtable-bytes", str(settings["memtable_bytes"])]
    env = None
    if group:
        drop_page_cache()
        group.reset_peak()
        command = group.wrap(command)
        env = dict(os.environ, MALLOC_ARENA_MAX=str(MEMORY_MALLOC_ARENAS))
    lines, error = {}, None
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        stopped = threading.Event()

        def stop():
            stopped.set()
            process.kill()

        timer = threading.Timer(settings["store_minutes"] * 60, stop) if settings["store_minutes"] else None
        if timer:
            timer.start()
        for text in process.stdout:
            try:
                line = json.loads(text)
            except ValueError:
                harness.log(f"peers: {store}: not JSON: {text.rstrip()}")
                continue
            lines[line["phase"]] = line
            harness.log(f"peers: {store}: {line['phase']}: " + (
                f"{line['bytes'] / 1e6:.1f} MB" if line.get("bytes") is not None else
                f"{line['seconds']:.3f} s" if line.get("seconds") is not None else "n/a"))
        process.stdout.close()
        _, status, usage = os.wait4(process.pid, 0)
        if timer:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        peak = group.read("memory.max_usage_in_bytes") if group else usage.ru_maxrss * 1024
        if process.returncode != 0:
            stderr.seek(0)
            reason = "killed by signal %d" % -process.returncode if process.returncode < 0 else \
                f"exit status {process.returncode}"
            if stopped.is_set():
                reason = (f"stopped after {settings['store_minutes']} min (PEERS_STORE_MINUTES), "
                          f"after the phase {list(lines)[-1] if lines else 'none'}")
            elif group and process.returncode == -9:
                reason += " (the memory limit's OOM killer?)"
            error = f"{reason}: {stderr.read()[-1500:].strip()}"
            harness.log(f"peers: {store} failed, {error}")
    shutil.rmtree(directory, ignore_errors=True)
    return lines, peak, error


def run_floors(settings):
    """The machine's floors, outside any memory group (the disk is read with O_DIRECT, the
    memory chase needs 256 MiB); returns lines by phase, empty when the binary failed."""
    binary = os.path.join(os.path.dirname(binary_path()), "floors")
    directory = os.path.join(settings["dir"], "floors")
    file_bytes = min(4 << 30, max(256 << 20, settings["records"] * FLOOR_BYTES_PER_RECORD))
    harness.log(f"peers: the machine's floors ({file_bytes / 1e9:.1f} GB read at random)")
    result = subprocess.run([binary, "--dir", directory, "--file-bytes", str(file_bytes)],
                            capture_output=True, text=True)
    shutil.rmtree(directory, ignore_errors=True)
    if result.returncode != 0:
        harness.log(f"peers: floors failed: {result.stderr.strip()[-500:]}")
        return {}
    lines = {}
    for text in result.stdout.splitlines():
        line = json.loads(text)
        lines[line["phase"]] = line
        harness.log(f"peers: floor: {line['phase']}: {per_op(line) * 1e6:.2f} µs each")
    return lines


def per_op(line):
    """Seconds per operation of a floor line."""
    return line["seconds"] / max(1, line.get("ops") or 1)


def best_floors(rounds):
    """Per floor, the line with the least time per operation over the rounds."""
    best = {}
    for result in rounds:
        for phase, line in result.get("floor", {}).items():
            if phase not in best or per_op(line) < per_op(best[phase]):
                best[phase] = line
    return best


def floor_table(floors):
    """The floors as Markdown rows."""
    def rate(line):
        return f"{(line.get('ops') or 0) / line['seconds']:,.0f}/s"

    rows_out = []
    for phase in FLOOR_PHASES:
        line = floors.get(phase)
        if not line:
            continue
        if phase in (FLOOR_SEQ_WRITE, FLOOR_SEQ_READ):
            each = f"{line['bytes'] / line['seconds'] / 1e6:,.0f} MB/s"
        elif phase == FLOOR_LOAD:
            each = f"{per_op(line) * 1e9:.0f} ns each"
        else:
            each = f"{per_op(line) * 1e6:,.0f} µs each ({rate(line)})"
        rows_out.append(f"| {phase} | {each} |")
    return rows_out


def floor_notes(best, floors, settings):
    """Kura's and the best peer's figures beside the floor each cannot go below."""
    notes = []

    def per(store, phase, count):
        value = value_of(best, store, phase)
        return value / count if value else None

    def figures(phase, count, show):
        """Kura's stores' and the best peer's time per operation of `phase`, as `show` writes
        a time per operation: "Kura TreeDbm 154 µs, Kura HashDbm 130 µs, fjall 148 µs"."""
        stores = [k for k in KURA if per(k, phase, count)]
        peers = sorted((per(p, phase, count), p) for p in PEERS if per(p, phase, count))
        stores += [peers[0][1]] if peers else []
        return ", ".join(f"{TITLES[s]} {show(per(s, phase, count))}" for s in stores)

    kuras = [k for k in KURA if k in best]
    sync = floors.get(FLOOR_SYNC)
    if sync and kuras:
        commits = best[kuras[0]].get("individual writes", {}).get("ops") or 1000
        shown = figures("individual writes", commits, lambda seconds: f"{seconds * 1e6:.0f} µs")
        notes.append(f"A durable commit of one record: {shown}, against one `fdatasync` of a 4 KiB write alone, "
                     f"{per_op(sync) * 1e6:.0f} µs.")
    reads = settings.get("reads") or settings["records"]
    load, read_1, read_32 = floors.get(FLOOR_LOAD), floors.get(FLOOR_READ_1), floors.get(FLOOR_READ_32)
    if kuras and not settings.get("memory_limit") and load:
        shown = figures("random reads", reads, lambda seconds: f"{seconds * 1e9:.0f} ns")
        notes.append(f"A random read on one thread: {shown}; one dependent load from memory (a random "
                     f"address in 256 MiB, TLB miss included) takes {per_op(load) * 1e9:.0f} ns, so a lookup "
                     f"that must wait for a few of them in a row cannot take less than a few times that.")
    if kuras and settings.get("memory_limit") and read_1 and read_32:
        shown = figures("random reads", reads, lambda seconds: f"{1 / seconds:,.0f}/s")
        notes.append(f"Random reads on one thread, gets a second: {shown}; the disk reads "
                     f"{1 / per_op(read_1):,.0f} random 8 KiB pages a second one at a time, "
                     f"{1 / per_op(read_32):,.0f} with 32 in flight (the most several threads or read-ahead "
                     f"could get from it).")
        batch = best.get("kura-tree", {}).get("batch writes", {})
        if batch.get("ops"):
            floor_seconds = batch["ops"] * per_op(read_32)
            notes.append(f"Durable batches of random records into a B-tree larger than memory: each record "
                         f"modifies a leaf that must first be read, so {batch['ops']:,} records cost up to as "
                         f"many random page reads, {floor_seconds:.2f} s at the 32-in-flight rate; a "
                         f"log-structured store (RocksDB, fjall) appends instead and reads nothing. TreeDbm "
                         f"took {batch['seconds']:.2f} s.")
    seq_read, seq_write = floors.get(FLOOR_SEQ_READ), floors.get(FLOOR_SEQ_WRITE)
    if settings.get("memory_limit") and seq_read and seq_write:
        notes += bulk_load_floor_notes(best, settings, seq_read["bytes"] / seq_read["seconds"],
                                       seq_write["bytes"] / seq_write["seconds"])
    return notes


def bulk_load_floor_notes(best, settings, read_rate, write_rate):
    """Each Kura store's bulk load beside the time its disk bytes alone take at the disk's
    sequential rates, and the fastest peer's load: a store whose bytes alone take longer than
    the peer's whole load cannot catch it by moving them faster."""
    def moved(store):
        line = best.get(store, {}).get("bulk load", {})
        if line.get("seconds") is None or line.get("read_bytes") is None:
            return None
        return line["seconds"], line["read_bytes"], line["write_bytes"]

    peers = sorted((moved(p), p) for p in PEERS if moved(p))
    if not peers:
        return []
    (peer_seconds, peer_read, peer_written), peer = peers[0]
    record_bytes = settings["records"] * RECORD_BYTES
    notes = []
    for store in KURA:
        if not moved(store):
            continue
        seconds, read, written = moved(store)
        floor = read / read_rate + written / write_rate
        notes.append(f"Bulk load: {TITLES[store]} had the disk read {read / 1e9:.1f} GB and write "
                     f"{written / 1e9:.1f} GB ({written / record_bytes:.1f} times the records' bytes); at the "
                     f"disk's sequential rates above those bytes alone take {floor:.1f} s, "
                     f"{floor / peer_seconds:.2f}x {TITLES[peer]}'s whole load ({peer_seconds:.1f} s, "
                     f"{peer_read / 1e9:.1f} GB read, {peer_written / 1e9:.1f} GB written); {TITLES[store]} "
                     f"took {seconds:.1f} s.")
    return notes


def best_of(rounds):
    """Per store and phase, the least time (or size) over the rounds that measured it."""
    best = {}
    for store in STORES:
        phases = {}
        for result in rounds:
            for phase, line in result.get(store, {}).get("lines", {}).items():
                key = "bytes" if phase in SIZE_PHASES else "seconds"
                if line.get(key) is None:
                    phases.setdefault(phase, dict(line))
                    continue
                kept = phases.get(phase)
                if kept is None or kept.get(key) is None or line[key] < kept[key]:
                    phases[phase] = dict(line)
            peak = result.get(store, {}).get("peak_bytes")
            if peak:
                phases[PEAK_RSS] = {"bytes": min(peak, phases.get(PEAK_RSS, {}).get("bytes") or peak)}
        if phases:
            best[store] = phases
    return best


def checksum_mismatches(best):
    """Read phases where two stores returned different data (every store holds the same
    records, so every read phase's checksum must be the same)."""
    problems = []
    for phase in PHASES:
        sums = {store: best[store][phase]["checksum"] for store in best
                if "checksum" in best[store].get(phase, {})}
        if len(set(sums.values())) > 1:
            problems.append(f"{phase}: checksums differ: {sums}")
    return problems


def value_of(best, store, phase):
    line = best.get(store, {}).get(phase, {})
    return line.get("bytes") if phase in SIZE_PHASES or phase == PEAK_RSS else line.get("seconds")


def cell(best, store, phase):
    value = value_of(best, store, phase)
    if value is None:
        return "n/a" if phase in best.get(store, {}) else "-"
    if phase in SIZE_PHASES or phase == PEAK_RSS:
        return f"{value / 1e6:.1f} MB"
    ops = best[store][phase].get("ops") or 0
    rate = ops / value if ops > 1 and value > 0 else 0
    rate = f" ({rate / 1e6:.2f}M/s)" if rate >= 1e6 else f" ({rate / 1e3:.0f}k/s)" if rate >= 1e4 else \
        f" ({rate:.0f}/s)" if rate else ""
    return f"{value:.3f} s{rate}" if value >= 0.001 else f"{value * 1e6:.0f} µs"


def cpu_cell(best, store, phase):
    line = best.get(store, {}).get(phase, {})
    cpu, wall = line.get("cpu_seconds"), line.get("seconds")
    if cpu is None or not wall:
        return "-"
    return f"{cpu:.3f} s ({cpu / wall:.0%})"


def disk_cell(best, store, phase):
    line = best.get(store, {}).get(phase, {})
    read, written = line.get("read_bytes"), line.get("write_bytes")
    if read is None or written is None:
        return "-"
    return f"{read / 1e6:,.0f} / {written / 1e6:,.0f} MB"


def phase_table(title, intro, phases, stores, cell_of):
    """A section of the report: its `title`, the `intro` paragraph, and a table with a row per
    phase and a column per store, each cell `cell_of(store, phase)`."""
    lines = ["", f"## {title}", "", intro, "",
             "| phase | " + " | ".join(TITLES[s] for s in stores) + " |",
             "|---|" + "---:|" * len(stores)]
    return lines + [f"| {phase} | " + " | ".join(cell_of(s, phase) for s in stores) + " |" for phase in phases]


def rows(best):
    present = [p for p in PHASES if any(p in best.get(s, {}) for s in STORES)]
    return present + ([PEAK_RSS] if any(PEAK_RSS in best.get(s, {}) for s in STORES) else [])


def ratio_cell(best, kura, phase):
    ours = value_of(best, kura, phase)
    peers = [(value_of(best, peer, RATIO_AGAINST.get(phase, phase)), peer) for peer in PEERS]
    peers = [(value, peer) for value, peer in peers if value]
    if not ours or not peers:
        return "-"
    value, peer = min(peers)
    return f"{ours / value:.2f} ({TITLES[peer]})"


def markdown(report, chart):
    settings, best = report["settings"], report["best"]
    stores = [s for s in STORES if s in best]
    date = report["date"][:16].replace("T", " ") + " UTC"
    memory = settings.get("memory_limit")
    title = "Kura against LMDB, RocksDB, fjall and redb" + (
        f" under a {memory // 2**20} MiB memory limit" if memory else "")
    parts = [f"# {title}", "",
             f"Measured {date} by `make bench-peers` (bench/peers.py, bench/peers/) on: {report['machine']}.",
             "",
             f"{settings['records']:,} records of a 24-byte key and a 150-byte value (random bytes, fixed seed), "
             f"the phases of redb's `lmdb_benchmark`; each store in its own process, "
             f"{report.get('rounds_done', settings['rounds'])} round(s) in alternating store order"
             + (f" (of {settings['rounds']} planned; the run was stopped after these)"
                if report.get('rounds_done', settings['rounds']) < settings['rounds'] else "")
             + ", the best (least) time of each phase kept. "
             f"Caches: {settings['cache_bytes'] / 2**30:g} GiB (RocksDB block cache, fjall and redb caches, "
             f"TreeDbm `cache_bytes`; LMDB and HashDbm use the page cache); HashDbm `num_buckets` = 2 x records. "
             + (f"Each store in a cgroup v1 memory group of {memory // 2**20} MiB (page cache included), the page "
                f"cache dropped before it, the bulk load in commits of {settings['bulk_batch']:,}, glibc's malloc "
                f"held to {MEMORY_MALLOC_ARENAS} arenas in every store (`MALLOC_ARENA_MAX`)"
                + (f", RocksDB's and fjall's memtables {settings['memtable_bytes'] // 2**20} MiB (an eighth of "
                   f"the limit; their default, 64 MiB, is an eighth of 512 MiB)" if settings.get("memtable_bytes")
                   else "") + ". "
                if memory else "")
             + (f"Each read phase reads its own {settings['reads']:,} of the bulk records (random keys), not all. "
                if settings.get("reads") else "")
             + (f"The removals phase removes {settings['removals']:,} records, not half. "
                if settings.get("removals") else "")
             + "Versions: " + ", ".join(f"{name} {version}" for name, version in report["versions"].items()) + ".",
             ""]
    for note in report.get("notes", []):
        parts += [note, ""]
    if report["errors"]:
        parts += ["**Failures:**", ""] + [f"- {e}" for e in report["errors"]] + [""]
    parts += ["## Time per phase", "",
              "Seconds (and operations a second) of each phase; sizes are the bytes of every file in the store's "
              "directory after closing it.", "",
              "| phase | " + " | ".join(TITLES[s] for s in stores) + " |",
              "|---|" + "---:|" * len(stores)]
    for phase in rows(best):
        parts.append(f"| {phase} | " + " | ".join(cell(best, s, phase) for s in stores) + " |")
    kuras = [k for k in KURA if k in best]
    if kuras and any(p in best for p in PEERS):
        parts += ["", "## Kura ÷ best peer", "",
                  "Kura's time (or size) over the best of LMDB, RocksDB, fjall and redb in the same phase (named; "
                  "TreeDbm's one-record `write_batch` row against the peers' nosync writes); below 1 Kura is "
                  "ahead.", "",
                  "| phase | " + " | ".join(f"{TITLES[k]} ÷ best peer" for k in kuras) + " |",
                  "|---|" + "---:|" * len(kuras)]
        for phase in rows(best):
            parts.append(f"| {phase} | " + " | ".join(ratio_cell(best, k, phase) for k in kuras) + " |")
    cpu_rows = [phase for phase in rows(best) if phase not in SIZE_PHASES and phase != PEAK_RSS
                and any(best.get(s, {}).get(phase, {}).get("cpu_seconds") is not None for s in stores)]
    if cpu_rows:
        parts += phase_table(
            "CPU time per phase",
            "The process's CPU time (every thread, user and system) in the round whose phase is shown above, "
            "and its share of that phase's wall time: well under 100%, the store waited for the disk; over "
            "100%, more than one thread worked (the LSMs' flushes and compactions in the background "
            "included). CPU time is what a machine shared with other work inflates least.",
            cpu_rows, stores, lambda store, phase: cpu_cell(best, store, phase))
    disk_rows = [phase for phase in cpu_rows
                 if any(best.get(s, {}).get(phase, {}).get("read_bytes") is not None for s in stores)]
    if disk_rows:
        parts += phase_table(
            "Disk bytes per phase",
            "Read / written: what the kernel counted for the store's process against the disk "
            "(`/proc/self/io`) in the round whose phase is shown above: the reads it caused, its faults and "
            "read-ahead included, the page cache's hits not; the bytes it dirtied, whoever wrote them back "
            "(an LSM's flushes and compactions in its own threads included).",
            disk_rows, stores, lambda store, phase: disk_cell(best, store, phase))
    floors = report.get("floors") or {}
    if floors:
        parts += ["", "## The machine's floors, measured in the same run", "",
                  "Measured by bench/peers/src/bin/floors.rs before each round, outside any memory group, the best "
                  "of the rounds: the disk read and written with `O_DIRECT` (the device, not the page cache), "
                  "memory by a chase of dependent loads.", "",
                  "| measurement | each |", "|---|---:|"] + floor_table(floors)
        notes = floor_notes(best, floors, settings)
        if notes:
            parts += [""] + [f"- {note}" for note in notes]
    parts += ["", "## What each store does", "",
              "- Durable commits: Kura `write_batch_durable` (a single durable write is a one-record batch); LMDB "
              "default flags (sync at commit); RocksDB one `WriteBatch` with `set_sync(true)`; fjall one batch "
              "with `PersistMode::SyncData`; redb `Durability::Immediate`. The bulk load and the removals "
              "end, inside their phases, with TreeDbm's `checkpoint()`, which applies its write buffer "
              "(in a file larger than half the memory, commits wait there, journaled), so that their "
              "work is counted in them, not in the phases after them or the close; the LSMs flush and "
              "compact in threads of their own.",
              "- Non-durable single writes, each surviving a killed process: HashDbm `set`; TreeDbm `set` then "
              "`synchronize(false)` (a write to its journal); LMDB `NO_SYNC | NO_META_SYNC` switched "
              "on around each commit; RocksDB `set_sync(false)`; fjall `PersistMode::Buffer`; redb "
              "`Durability::None`. TreeDbm's other path, a one-record `write_batch`, is the row "
              "`nosync writes, 1-op write_batch (overwrites)`, rewriting the same 50,000 records.",
              "- Random reads: the bulk-loaded records in generation order, one read transaction per thread; "
              "each phase checks that every key was found with the value written. Range reads: 10 records "
              "from each of min(500,000, records) bulk keys; the count of records returned is checked; "
              "HashDbm has no order (n/a).",
              "- Close + reopen: RocksDB flushes its memtable and fjall rotates and flushes its memtable when "
              "closed, so that the reads after the reopen, and the sizes, are their tables'. Removals: half "
              "of all records, in durable commits of 100,000. Compaction: Kura `rebuild`, LMDB copy with "
              "`MDB_CP_COMPACT` and replace, RocksDB `compact_range`, fjall `major_compact`, redb `compact`. "
              "fjall's size includes its journal.",
              f"- {PEAK_RSS}: " + ("the memory group's peak usage (page cache included)." if memory else
                                   "the process's maximum resident set (mapped file pages it touched included)."),
              ""]
    if report["checksum_mismatches"]:
        parts += ["**Read checksums differ between stores:**", ""] + [
            f"- {p}" for p in report["checksum_mismatches"]] + [""]
    else:
        parts += ["Every read phase returned the same checksum from every store.", ""]
    if chart:
        parts += [f"![times per phase]({chart})", ""]
    return "\n".join(parts)


def draw(report, path):
    """One panel per phase, a bar per store; False (and no file) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        harness.log("peers: matplotlib is not installed; no chart (make venv installs it in .venv)")
        return False
    best = report["best"]
    stores = [s for s in STORES if s in best]
    panels = [p for p in rows(best) if sum(1 for s in stores if value_of(best, s, p)) > 1]
    if not panels:
        return False
    columns = 4
    lines = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.0 * lines), squeeze=False)
    for axis, phase in zip(axes.flat, panels):
        sized = phase in SIZE_PHASES or phase == PEAK_RSS
        values = [(value_of(best, s, phase) or 0) / (1e6 if sized else 1) for s in stores]
        colors = ["#2a7ab0" if s in KURA else "#999999" for s in stores]
        axis.barh(range(len(stores)), values, color=colors)
        axis.set_yticks(range(len(stores)))
        axis.set_yticklabels([TITLES[s] for s in stores], fontsize=7)
        axis.invert_yaxis()
        axis.set_title(phase, fontsize=9)
        axis.set_xlabel("MB" if sized else "seconds (less is better)", fontsize=7)
        axis.tick_params(axis="x", labelsize=7)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    memory = report["settings"].get("memory_limit")
    figure.suptitle(f"Kura vs LMDB, RocksDB, fjall, redb: {report['settings']['records']:,} records"
                    + (f", {memory // 2**20} MiB memory limit" if memory else ""), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory-limit", help="run each store in a cgroup v1 memory group of this size (512M)")
    parser.add_argument("--render", metavar="JSON",
                        help="measure nothing: write the .md and .png of a report written before (for a report "
                             "given `notes`, paragraphs on how its run went, or `floors` measured apart)")
    options = parser.parse_args()
    if options.render:
        render(options.render)
        return
    memory = parse_size(options.memory_limit) if options.memory_limit else None
    records = harness.env_int("PEERS_RECORDS", 1_000_000)
    rounds = max(1, harness.env_int("PEERS_ROUNDS", 2))
    stores = [s for s in os.environ.get("PEERS_STORES", ",".join(STORES)).split(",") if s]
    unknown = set(stores) - set(STORES)
    if unknown:
        sys.exit(f"peers: unknown stores {sorted(unknown)}; the stores are {STORES}")
    default_cache = memory // 4 if memory else DEFAULT_CACHE_BYTES
    settings = {"records": records, "rounds": rounds, "stores": stores,
                "cache_bytes": harness.env_int("PEERS_CACHE_BYTES", default_cache),
                "dir": os.environ.get("PEERS_DIR", "").strip() or os.path.join(harness.DATA, "peers"),
                "bulk_batch": MEMORY_BULK_BATCH if memory else 0, "memory_limit": memory,
                "reads": harness.env_int("PEERS_READS", MEMORY_READS if memory else 0),
                "removals": harness.env_int("PEERS_REMOVALS", MEMORY_REMOVALS if memory else 0),
                "memtable_bytes": memory // MEMORY_MEMTABLE_FRACTION if memory else 0,
                "store_minutes": harness.env_int("PEERS_STORE_MINUTES", MEMORY_STORE_MINUTES if memory else 0)}
    build_seconds = build()
    binary = binary_path()
    group = MemoryGroup(memory) if memory else None
    os.makedirs(settings["dir"], exist_ok=True)
    results, errors = [], []
    began = time.monotonic()
    stem = f"peers-{options.memory_limit}" if memory else "peers"
    if set(stores) != set(STORES):
        # A run of some stores (a quick look at one of them) must not replace the table of
        # every store, which the docs and the README quote.
        stem += "-" + "-".join(stores)
    try:
        for number in range(rounds):
            order = stores if number % 2 == 0 else list(reversed(stores))
            result = {"floor": run_floors(settings)}
            for store in order:
                harness.log(f"peers: round {number + 1}/{rounds}: {store}, {records} records")
                lines, peak, error = run_store(binary, store, settings, group)
                result[store] = {"lines": lines, "peak_bytes": peak}
                if error:
                    result[store]["error"] = error
                    errors.append(f"{store}, round {number + 1}: {error}")
            results.append(result)
            # Written after every round, so that a run stopped midway (a long one under a
            # memory limit) keeps the rounds it finished; the last round's report is the run's.
            report = write_report(stem, settings, results, errors, build_seconds)
    finally:
        if group:
            group.remove()
    harness.log(f"peers: measured in {(time.monotonic() - began) / 60:.1f} min")
    for problem in report["checksum_mismatches"]:
        harness.log(f"peers: {problem}")
    if errors or report["checksum_mismatches"]:
        sys.exit(1)


def render(path):
    """Writes the .md and .png beside the report `path` (a .json) from what it holds."""
    with open(path) as source:
        report = json.load(source)
    stem = os.path.splitext(path)[0]
    chart = os.path.basename(stem) + ".png" if draw(report, stem + ".png") else None
    with open(stem + ".md", "w") as out:
        out.write(markdown(report, chart))
    harness.log(f"peers: wrote {stem}.md" + (f", {chart}" if chart else ""))


def write_report(stem, settings, results, errors, build_seconds):
    """bench/results/STEM.{json,md,png} from the rounds measured so far; returns the report."""
    best = best_of(results)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "machine": machine(),
              "versions": versions(), "settings": {k: v for k, v in settings.items() if k != "dir"},
              "rounds_done": len(results), "build_seconds": round(build_seconds, 1), "best": best,
              "floors": best_floors(results),
              "rounds": results, "errors": errors, "checksum_mismatches": checksum_mismatches(best)}
    os.makedirs(harness.RESULTS, exist_ok=True)
    with open(os.path.join(harness.RESULTS, f"{stem}.json"), "w") as out:
        json.dump(report, out, indent=1)
    chart = f"{stem}.png" if draw(report, os.path.join(harness.RESULTS, f"{stem}.png")) else None
    with open(os.path.join(harness.RESULTS, f"{stem}.md"), "w") as out:
        out.write(markdown(report, chart))
    harness.log(f"peers: wrote bench/results/{stem}.json, {stem}.md" + (f", {chart}" if chart else "")
                + f" ({len(results)} of {settings['rounds']} rounds)")
    return report


if __name__ == "__main__":
    main()
