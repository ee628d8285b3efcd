"""Every benchmark script of `make bench` imports. The scripts run one after another at the
end of a long `make bench`, so a broken import shows only there, after the hour the run
before it took (bench/shard.py once still imported helpers that bench/run.py no longer
had). Each script is loaded as a module; none measures anything at import."""

import glob
import importlib
import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_benchmark_script_imports():
    scripts = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(BENCH, "*.py")))
    assert {"run", "shard", "compact", "server", "ruby"} <= set(scripts)
    for name in scripts:
        importlib.import_module(name)
