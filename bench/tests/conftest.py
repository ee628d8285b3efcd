"""Makes the benchmark's modules (bench/*.py, bench/measure, bench/render) importable the way
bench/run.py and bench/report.py import them."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
