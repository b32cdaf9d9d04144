"""The Ray cluster on the overview page: per node, its slots, how many take runs and are
busy, and why slots there are refused (validator.executor: ray only)."""

from __future__ import annotations

from prism_challenge.cluster.capacity import NodeUsage
from prism_challenge.dashboard.html import badge, esc, section, table


def cluster_html(nodes: list[NodeUsage]) -> str:
    rows = []
    for n in nodes:
        use = f"{n.busy}/{n.ready}" if n.ready else "—"
        refused = "; ".join(esc(r) for r in n.refused)
        rows.append([esc(n.name), str(n.slots), str(n.ready), use,
                     badge("refused", "warn") + " " + refused if n.refused else ""])
    total = sum(n.ready for n in nodes)
    busy = sum(n.busy for n in nodes)
    head = f"<p>{len(nodes)} nodes, {total} slots taking runs, {busy} busy.</p>"
    body = table(["node", "slots (resources)", "ready", "busy / ready", "refused"], rows,
                 numeric=(1, 2), empty="no live node in the cluster")
    return section("Cluster", head + body, anchor="cluster")
