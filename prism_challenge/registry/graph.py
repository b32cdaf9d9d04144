"""The theory graph: hypotheses and axes as nodes; parent/child and shared-axis links.

Parents come from proposals that refine a claim, and every interaction is a child of the
single-factor claims over its axes. Two claims sharing an axis are `linked`, so a reader sees
which beliefs a decision about one axis can move. Operator annotations
(`prism registry note`) ride on their hypothesis node.
"""

from __future__ import annotations

from prism_challenge.registry.hypotheses import Interaction, axes_of
from prism_challenge.registry.state import RegistryState, terms_of


def theory_graph(state: RegistryState, cfg) -> dict:
    nodes, edges = [], []
    for a in state.axes:
        nodes.append({"id": f"axis:{a.name}", "type": "axis", "status": state.axis_status[a.name]})
    hyps = list(state.hypotheses.values())
    for h in hyps:
        t = terms_of(h, cfg)
        nodes.append({"id": h.id, "type": "hypothesis", "statement": h.statement,
                      "status": h.status, "archived": h.archived, "origin": h.origin,
                      "mean": round(t.mean, 4), "n": t.n,
                      "notes": list(state.notes.get(h.id, []))})
        for axis in axes_of(h.spec):
            edges.append({"from": h.id, "to": f"axis:{axis}", "type": "about"})
        if h.parent:
            edges.append({"from": h.parent, "to": h.id, "type": "parent"})
        if isinstance(h.spec, Interaction):
            for p in hyps:
                if not isinstance(p.spec, Interaction) and p.id != h.parent and set(
                    axes_of(p.spec)
                ) & set(axes_of(h.spec)):
                    edges.append({"from": p.id, "to": h.id, "type": "parent"})
    for i, a in enumerate(hyps):
        for b in hyps[i + 1:]:
            if set(axes_of(a.spec)) & set(axes_of(b.spec)):
                edges.append({"from": a.id, "to": b.id, "type": "linked"})
    return {"nodes": nodes, "edges": edges}
