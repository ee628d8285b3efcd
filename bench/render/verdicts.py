"""Target rows (bench/targets.py) checked against the figures of one run: each row that has
all its figures becomes a line of a group's table, with the measured figures and whether the
target is met."""

from render.figures import Figure, ratio


def met(comparison, value, peers, threshold, tolerance):
    """Whether `value` meets the target against every peer figure (or the bare threshold)."""
    bounds = [threshold * peer for peer in peers] if peers else [threshold]
    if comparison == ">=":
        return all(value >= bound - tolerance for bound in bounds)
    if comparison == "<=":
        return all(value <= bound + tolerance for bound in bounds)
    raise ValueError(f"unknown comparison {comparison!r}")


def evaluate(target, figures):
    """(name, detail, verdict) of one target, or None when bench.json lacks a figure of it.
    The verdict is True/False, or None for a row that is not a target."""
    peer = target["peer"]
    peer_names = peer if isinstance(peer, list) else [peer] if peer else []
    value_names = target.get("values", {})
    names = [target["metric"], *peer_names, *value_names.values()]
    if any(figures.get(name) is None for name in names):
        return None
    value = figures[target["metric"]]
    peers = [figures[name] for name in peer_names]
    fields = {alias: Figure(figures[name]) for alias, name in value_names.items()}
    fields["metric"] = Figure(value)
    if peers:
        fields["peer"] = Figure(peers[0])
        fields["ratio"] = ratio(value, peers[0])
    verdict = None
    if target["comparison"]:
        verdict = met(target["comparison"], value, peers, target["threshold"],
                      target.get("tolerance", 0))
    return target["name"].format(**fields), target["detail"].format(**fields), verdict


def group_tables(targets, groups, figures):
    """(title, Markdown table) per group with at least one row, in the groups' order."""
    tables = []
    for group, title in groups:
        lines = []
        for target in (t for t in targets if t["group"] == group):
            checked = evaluate(target, figures)
            if checked:
                name, detail, verdict = checked
                mark = "(not a target)" if verdict is None else "yes" if verdict else "**no**"
                lines.append(f"| {name} | {detail} | {mark} |")
        if lines:
            tables.append((title, "\n".join(
                ["| target | measured | met |", "| --- | --- | --- |"] + lines)))
    return tables
