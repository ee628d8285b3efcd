#!/usr/bin/env python3
"""The report step of `make bench`: redraws bench/results/bench.md (Markdown tables with
Kura/Tkrzw ratios and the targets of the issues) and bench/results/bench.png (charts, if
matplotlib is importable) from bench/results/bench.json alone, without measuring and without
a built `kura`.

  python3 bench/report.py                       the committed results, in place
  python3 bench/report.py RUN.json --out DIR    another run's JSON, report written into DIR
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from render import charts, document  # noqa: E402

CHART_FILE = "bench.png"


def write_report(bench, out_dir):
    """Writes bench.md (and bench.png) into `out_dir`; returns the Markdown."""
    os.makedirs(out_dir, exist_ok=True)
    plotted = charts.draw(bench, os.path.join(out_dir, CHART_FILE))
    text = document.markdown(bench, CHART_FILE if plotted else None)
    path = os.path.join(out_dir, "bench.md")
    with open(path, "w") as out:
        out.write(text)
    harness.log(f"bench: wrote {path}" + (f" and {CHART_FILE}" if plotted else ""))
    return text


def main():
    parser = argparse.ArgumentParser(description="Redraw the benchmark report from its JSON")
    parser.add_argument("json", nargs="?", default=os.path.join(harness.RESULTS, "bench.json"))
    parser.add_argument("--out", help="directory of bench.md and bench.png (default: the "
                                      "JSON's directory)")
    args = parser.parse_args()
    with open(args.json) as data:
        bench = json.load(data)
    out_dir = args.out or os.path.dirname(os.path.abspath(args.json))
    write_report(bench, out_dir)


if __name__ == "__main__":
    main()
