"""The report step of `make bench`: Markdown tables, target verdicts and charts drawn from
bench/results/bench.json alone (bench/report.py), without measuring anything."""
