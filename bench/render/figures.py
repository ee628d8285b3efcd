"""How the report writes a figure: QPS as 3.70M or 791k, sizes in MB, ratios as 1.78x, and
a Figure wrapper so that target templates can say `{metric:qps}` or `{metric:mb}`."""


def ratio(ours, theirs):
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


def qps(value):
    if not value:
        return "-"
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"


def mb(size):
    return f"{size / 1e6:.1f} MB" if size else "-"


class Figure:
    """A measured number that formats as `qps` or `mb` as well as with any float or int
    format specification."""

    UNITS = {"qps": qps, "mb": mb}

    def __init__(self, value):
        self.value = value

    def __format__(self, spec):
        unit = Figure.UNITS.get(spec)
        return unit(self.value) if unit else format(self.value, spec)
