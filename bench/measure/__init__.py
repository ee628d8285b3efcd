"""The measuring step of `make bench`: one module per workload, each returning plain data
that bench/run.py stores in bench/results/bench.json for bench/report.py to draw."""
