"""Thread scaling on equal data: Kura's get QPS with 1 and 2 threads over the same number of
records, split among the threads. The sequence runs give every thread `--iter` records of its
own, as `tkrzw_dbm_perf` does, so their 2-thread database holds twice the records (and
HashDbm's chains are twice as long in the same bucket count): that ratio mixes the data size
into the thread scaling."""

import harness
from measure import repeats, sequence


def thread_scaling(engine, records):
    """Best get of `harness.repeat()` runs with 1 and with 2 threads, `records` in all."""
    gets = {}
    for threads in (1, 2):
        command, path = sequence.kura_sequence_command(engine, records // threads, threads,
                                                       False, scans=False)
        harness.log(f"thread scaling {engine['name']}: {threads} thread(s), {records} records "
                    "in all")
        gets[threads] = repeats.best_of(command)["get"]
        if path:
            harness.remove_files(path)
    return {"engine": engine["name"], "records": records, "get1": gets[1], "get2": gets[2]}
