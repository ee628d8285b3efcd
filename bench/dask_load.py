"""kura.dask measured (issue 46, `make bench`): writes bench/results/dask.{json,md,png}.

(a) build: the same generated TSV file loaded as a 2-shard set by `kura import --shards 2
    --threads 2` and by kura.dask.to_kura on a LocalCluster of 2 worker processes (1 thread
    each) reading it with dask.dataframe.read_csv; the two take turns (DASK_REPEAT rounds),
    each build checked to hold every row. The
    file is read with pyarrow's CSV reader (dask[dataframe] installs pyarrow). The CPU
    seconds of each side are measured too (the importer's from the kernel's accounting of
    its process, the Dask workers' process time), and so is what Dask alone spends reading
    the file into dataframes (a pass that only counts their rows): the CPU any Dask build
    from that file pays before kura sees a row, which bounds to_kura's throughput on a
    machine's cores.
(b) serve: kura.dask.load_servers of generated rows into 3 `kura serve` and into 3
    memcached, from 1 and 2 worker processes, at 1, 16, 64 and 256 rows a set_many request
    (seed 001's table: where parallel loading starts to pay); memcached and kura take turns
    at each point, every server restarted empty, and each load checked by the servers'
    `curr_items` adding up to the rows sent (the keys are distinct).

Sizes: DASK_ROWS rows for (a) (default the issue's 10,000,000) and DASK_SERVER_ROWS for (b)
(default DASK_ROWS); DASK_REPEAT rounds of each (default 1). `python bench/dask_load.py report`
redraws the table and the PNG from the JSON.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import KURA, RESULTS, WORK, env_int, log, remove_files, run  # noqa: E402
from server import free_port, stats, wait_port  # noqa: E402

JSON_PATH = os.path.join(RESULTS, "dask.json")
ROWS = env_int("DASK_ROWS", 10_000_000)
SERVER_ROWS = env_int("DASK_SERVER_ROWS", ROWS)
REPEAT = env_int("DASK_REPEAT", 1)
BATCHES = (1, 16, 64, 256)
WORKERS = (1, 2)
SERVERS = 3
# Partitions of the generated rows in (b): the same for 1 and 2 workers.
SERVER_PARTITIONS = 8
TARGETS = {
    "to_kura_of_native": 0.8,
    "two_of_one_worker_batch_ge_64": 1.6,
    "kura_of_memcached_batch_ge_64": 1.0,
}


def row(i):
    return f"key{i:012d}", f"value {i} of the dask benchmark"


def write_input(path, rows):
    with open(path, "w") as out:
        for start in range(0, rows, 100_000):
            out.write("".join("%s\t%s\n" % row(i) for i in range(start, min(rows, start + 100_000))))


def set_count(base):
    import kura

    with kura.open(base, "r") as db:
        return len(db)


def cluster(workers):
    import distributed

    cluster = distributed.LocalCluster(
        n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None, silence_logs=40
    )
    return cluster, distributed.Client(cluster)


def read_frame(source):
    """The TSV file as a dask dataframe, read by pyarrow's CSV reader: pandas' own (engine="c")
    took 3.6x as long to read 1M rows into a 2-worker LocalCluster. Blocks of at most 16 MB,
    and at least 8 of them: 16 MB blocks of 1M rows (48 MB) made 3 partitions for 2 workers,
    the third read and split after the other two with one worker idle."""
    import dask.dataframe as dd

    blocksize = min(16 << 20, max(1 << 20, os.path.getsize(source) // 8))
    return dd.read_csv(source, sep="\t", header=None, names=["key", "value"], engine="pyarrow", blocksize=blocksize)


def measure_build(work):
    """(a): native import and to_kura on the same file, taking turns."""
    import kura.dask

    source = os.path.join(work, "rows.tsv")
    log(f"dask bench: writing {ROWS:,} rows")
    write_input(source, ROWS)
    native_base, dask_base = os.path.join(work, "native.kuh"), os.path.join(work, "dask.kuh")
    results = {"native": [], "to_kura": [], "read_only": []}
    local, client = cluster(2)
    try:
        # A first build of 1,000 rows: the workers import pyarrow and kura before the clock
        # runs (a cluster's start is not the load's throughput).
        warm = os.path.join(work, "warm")
        write_input(warm + ".tsv", 1000)
        kura.dask.to_kura(read_frame(warm + ".tsv"), warm + ".kuh", 2)
        remove_files(warm + ".kuh", warm + ".tsv")
        for round_ in range(REPEAT):
            sides = ("native", "to_kura", "read_only")
            for side in sides if round_ % 2 == 0 else reversed(sides):
                base = native_base if side == "native" else dask_base
                remove_files(base)
                # The importer's CPU is its process's; Dask's, its workers' and the driver's.
                def cpu_used():
                    return children_cpu() if side == "native" else workers_cpu(client) + time.process_time()

                cpu_before = cpu_used()
                started = time.perf_counter()
                if side == "native":
                    run([KURA, "import", base, source, "--shards", "2", "--threads", "2"])
                elif side == "to_kura":
                    kura.dask.to_kura(read_frame(source), base, 2)
                else:
                    count = int(read_frame(source).map_partitions(len).sum().compute())
                seconds = time.perf_counter() - started
                cpu = cpu_used() - cpu_before
                if side != "read_only":
                    count = set_count(base)
                if count != ROWS:
                    sys.exit(f"dask bench: {side} built or read {count:,} records of {ROWS:,}")
                results[side].append((ROWS / seconds, cpu))
                log(f"dask bench: build {side}: {ROWS / seconds:,.0f} rows/s ({seconds:.1f} s, {cpu:.1f} CPU s), {count:,} records")
                remove_files(base)
    finally:
        client.close()
        local.close()
        os.remove(source)
    # Each side's best round, and the CPU seconds that round took.
    best = {side: max(figures) for side, figures in results.items()}
    return {
        "native": best["native"][0],
        "to_kura": best["to_kura"][0],
        "read_only": best["read_only"][0],
        "cpu": {side: figures[1] for side, figures in best.items()},
    }


def children_cpu():
    """CPU seconds (user + system) of this process's waited-for children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def start_servers(side):
    ports = [free_port() for _ in range(SERVERS)]
    if side == "memcached":
        commands = [["memcached", "-l", "127.0.0.1", "-p", str(p), "-U", "0", "-m", "2048", "-t", "1", "-u", "root"] for p in ports]
    else:
        commands = [[KURA, "serve", "--port", str(p), "--threads", "1", "--memory-limit", "2G"] for p in ports]
    processes = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands]
    for port in ports:
        wait_port(port)
    return ports, processes


def process_cpu(pid):
    """CPU seconds (user + system) process `pid` has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as source:
        fields = source.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workers_cpu(client):
    """CPU seconds the cluster's worker processes have used so far."""
    return sum(client.run(time.process_time).values())


def generated(part):
    return [row(i) for i in range(part[0], part[1])]


def measure_servers():
    """(b): load_servers at each batch size from 1 and 2 workers, memcached and kura taking
    turns at each point."""
    import dask.bag
    import kura.dask

    step = -(-SERVER_ROWS // SERVER_PARTITIONS)
    ranges = [(start, min(SERVER_ROWS, start + step)) for start in range(0, SERVER_ROWS, step)]
    bag = dask.bag.from_sequence(ranges, npartitions=len(ranges)).map_partitions(
        lambda parts: [r for part in parts for r in generated(part)]
    )
    figures, sent, cpu = {}, {}, {}
    for workers in WORKERS:
        local, client = cluster(workers)
        try:
            for batch in BATCHES:
                best = {}
                for round_ in range(REPEAT):
                    order = ("memcached", "kura") if (round_ + batch) % 2 == 0 else ("kura", "memcached")
                    for side in order:
                        ports, processes = start_servers(side)
                        try:
                            workers_before = workers_cpu(client)
                            started = time.perf_counter()
                            loaded = sum(kura.dask.load_servers(bag, [("127.0.0.1", p) for p in ports], batch=batch))
                            seconds = time.perf_counter() - started
                            used = {
                                "servers": sum(process_cpu(p.pid) for p in processes),
                                "workers": workers_cpu(client) - workers_before,
                                "seconds": seconds,
                            }
                            # curr_items: every row present (the keys are distinct); cmd_set
                            # counts what was sent, resent requests included.
                            served = [stats(p) for p in ports]
                            items = sum(s["curr_items"] for s in served)
                            sent[f"{side}/{workers}/{batch}"] = sum(s["cmd_set"] for s in served)
                        finally:
                            for process in processes:
                                process.terminate()
                                process.wait(timeout=60)
                        if loaded != SERVER_ROWS or items != SERVER_ROWS:
                            sys.exit(f"dask bench: {side} loaded {loaded:,} rows, servers stored {items:,} of {SERVER_ROWS:,}")
                        if SERVER_ROWS / seconds > best.get(side, 0):
                            best[side] = SERVER_ROWS / seconds
                            cpu[f"{side}/{workers}/{batch}"] = used
                        log(f"dask bench: {side} {workers} worker(s) batch {batch}: {SERVER_ROWS / seconds:,.0f} rows/s")
                for side, value in best.items():
                    figures[f"{side}/{workers}/{batch}"] = value
        finally:
            client.close()
            local.close()
    return figures, sent, cpu


def measure():
    os.makedirs(WORK, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK) as work:
        build = measure_build(work)
    servers, sent, cpu = measure_servers()
    data = {
        "rows": ROWS, "server_rows": SERVER_ROWS, "repeat": REPEAT, "cores": os.cpu_count(),
        "build": build, "servers": servers, "sets_sent": sent, "cpu": cpu,
        "load_average": os.getloadavg(), "batches": list(BATCHES), "workers": list(WORKERS),
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(JSON_PATH, "w") as out:
        json.dump(data, out, indent=1)


def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    build = data["build"]
    left.bar(["kura import\n--shards 2 --threads 2", "to_kura\n2 Dask workers"], [build["native"] / 1e6, build["to_kura"] / 1e6])
    left.set_ylabel("M rows/s")
    left.set_title(f"building a 2-shard set, {data['rows']:,} rows")
    for side, style in (("kura", "-"), ("memcached", "--")):
        for workers in data["workers"]:
            right.plot(data["batches"], [data["servers"][f"{side}/{workers}/{b}"] / 1e3 for b in data["batches"]],
                       style, marker="o", label=f"{side}, {workers} worker(s)")
    right.set_xscale("log", base=2)
    right.set_xlabel("rows per set_many request")
    right.set_ylabel("k rows/s")
    right.set_title(f"load_servers into 3 servers, {data['server_rows']:,} rows")
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True


def report():
    with open(JSON_PATH) as source:
        data = json.load(source)
    build, servers = data["build"], data["servers"]
    ratio = build["to_kura"] / build["native"]
    lines = [
        "# kura.dask: building a shard set and loading servers from Dask",
        "",
        f"Measured {data['measured_at']} by `bench/dask_load.py` on {data['cores']} cores "
        f"(load average {' '.join(f'{x:.1f}' for x in data.get('load_average', []))} at the end) "
        f"(best of {data['repeat']} round(s), the sides taking turns). Build: {data['rows']:,} generated rows "
        "from one TSV file. Servers: each load into 3 fresh servers (1 thread each), checked by their "
        f"`curr_items`; {data['server_rows']:,} rows in {SERVER_PARTITIONS} partitions.",
        "",
        "| build | rows/s |",
        "|---|---|",
        f"| `kura import --shards 2 --threads 2` | {build['native']:,.0f} |",
        f"| `to_kura`, 2-worker LocalCluster | {build['to_kura']:,.0f} |",
        f"| to_kura / native | {ratio:.2f} (target {TARGETS['to_kura_of_native']}) |",
        "",
    ]
    if "cpu" in build:
        cpu, cores = build["cpu"], data["cores"]
        # What to_kura would reach with its CPU time spread over every core and no wait: the
        # most that removing every pause between its steps could give it.
        bound = data["rows"] / (cpu["to_kura"] / cores)
        lines += [
            "CPU seconds of each side's best round (the importer's process; the Dask workers' and the "
            "driver's process time) and what Dask alone spends reading the file into dataframes (a pass "
            "that counts their rows, nothing else):",
            "",
            "| side | rows/s | CPU s | CPU µs a row |",
            "|---|---|---|---|",
            f"| `kura import --shards 2 --threads 2` | {build['native']:,.0f} | {cpu['native']:.2f} | "
            f"{cpu['native'] / data['rows'] * 1e6:.2f} |",
            f"| `to_kura`, 2-worker LocalCluster | {build['to_kura']:,.0f} | {cpu['to_kura']:.2f} | "
            f"{cpu['to_kura'] / data['rows'] * 1e6:.2f} |",
            f"| Dask reading the file only (`read_csv(...).map_partitions(len)`) | {build['read_only']:,.0f} | "
            f"{cpu['read_only']:.2f} | {cpu['read_only'] / data['rows'] * 1e6:.2f} |",
            "",
            f"Dask's reading of the file alone takes {cpu['read_only'] / cpu['native']:.2f}x the importer's whole CPU "
            f"time, before kura sees a row; to_kura took {cpu['to_kura'] / cpu['native']:.2f}x. With that CPU time "
            f"spread over all {cores} cores and no wait between its steps, to_kura would reach {bound:,.0f} rows/s, "
            f"{bound / build['native']:.2f}x the importer.",
            "",
        ]
    lines += [
        "| batch | kura 1 worker | kura 2 workers | 2/1 | memcached 1 worker | memcached 2 workers | 2/1 | kura/memcached (2 workers) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    # The smallest batch from which on every batch measured loads 1.6x as fast from 2 workers.
    pays = None
    for batch in data["batches"]:
        k1, k2 = servers[f"kura/1/{batch}"], servers[f"kura/2/{batch}"]
        m1, m2 = servers[f"memcached/1/{batch}"], servers[f"memcached/2/{batch}"]
        if k2 / k1 < TARGETS["two_of_one_worker_batch_ge_64"]:
            pays = None
        elif pays is None:
            pays = batch
        lines.append(f"| {batch} | {k1:,.0f} | {k2:,.0f} | {k2 / k1:.2f} | {m1:,.0f} | {m2:,.0f} | {m2 / m1:.2f} | {k2 / m2:.2f} |")
    if "cpu" in data:
        lines += [
            "",
            "CPU seconds of the best load at each point (the 3 servers from /proc, the Dask workers' "
            "process time) and the cores they kept busy together ((servers + workers) / wall seconds; "
            f"the machine has {data['cores']}):",
            "",
            "| side | workers | batch | wall s | servers CPU s | workers CPU s | workers CPU µs a row | cores busy |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for side in ("kura", "memcached"):
            for workers in data["workers"]:
                for batch in data["batches"]:
                    used = data["cpu"][f"{side}/{workers}/{batch}"]
                    busy = (used["servers"] + used["workers"]) / used["seconds"]
                    lines.append(
                        f"| {side} | {workers} | {batch} | {used['seconds']:.2f} | {used['servers']:.2f} | "
                        f"{used['workers']:.2f} | {used['workers'] / data['server_rows'] * 1e6:.1f} | {busy:.2f} |"
                    )
    big = [b for b in data["batches"] if b >= 64]
    scaling = min(servers[f"kura/2/{b}"] / servers[f"kura/1/{b}"] for b in big)
    against = min(servers[f"kura/2/{b}"] / servers[f"memcached/2/{b}"] for b in big)
    lines += [
        "",
        f"Parallel loading into kura serve pays (2 workers ≥ {TARGETS['two_of_one_worker_batch_ge_64']}x one at this and every larger batch) from "
        f"{'batch ' + str(pays) if pays else 'no batch measured'}.",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| to_kura ≥ {TARGETS['to_kura_of_native']}x native import | {ratio:.2f} | {'yes' if ratio >= TARGETS['to_kura_of_native'] else 'no'} |",
        f"| batch ≥ 64: 2 workers ≥ {TARGETS['two_of_one_worker_batch_ge_64']}x 1 worker (kura) | {scaling:.2f} | "
        f"{'yes' if scaling >= TARGETS['two_of_one_worker_batch_ge_64'] else 'no'} |",
        f"| batch ≥ 64: kura ≥ {TARGETS['kura_of_memcached_batch_ge_64']}x memcached (2 workers) | {against:.2f} | "
        f"{'yes' if against >= TARGETS['kura_of_memcached_batch_ge_64'] else 'no'} |",
        "",
    ]
    if plot(data, os.path.join(RESULTS, "dask.png")):
        lines.append("![kura.dask](dask.png)")
    with open(os.path.join(RESULTS, "dask.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    steps = sys.argv[1:] or ["measure", "report"]
    if "measure" in steps:
        measure()
    if "report" in steps:
        report()


if __name__ == "__main__":
    main()
