"""A posteriors table as an HTML fragment the dashboard can embed (escaped, no scripts)."""

from __future__ import annotations

from html import escape


def posteriors_panel(hypotheses: list[dict]) -> str:
    rows = []
    for h in hypotheses:
        p, e = h["posterior"], h["effect"]
        effect = "" if e["mean_gain_bpb"] is None else f"{e['mean_gain_bpb']:+.4f}"
        if e["se"] is not None:
            effect += f" ± {e['se']:.4f}"
        status = h["status"] + (" (archived)" if h["archived"] else "")
        rows.append(
            "<tr>"
            f"<td>{escape(h['id'])}</td><td>{escape(h['statement'])}</td>"
            f"<td>{escape(status)}</td><td>{h['n']}</td><td>{p['mean']:.3f}</td>"
            f"<td>[{p['ci90'][0]:.3f}, {p['ci90'][1]:.3f}]</td>"
            f"<td>{p['p_support']:.3f}</td><td>{p['p_refute']:.3f}</td><td>{p['rope']:.3f}</td>"
            f"<td>{escape(effect)}</td></tr>"
        )
    head = ("<tr><th>id</th><th>claim</th><th>status</th><th>n</th><th>mean θ</th>"
            "<th>90% CI</th><th>P(θ>0.6)</th><th>P(θ<0.4)</th><th>ROPE</th>"
            "<th>bpb gain ± se</th></tr>")
    return (f'<table class="prism-posteriors"><thead>{head}</thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")
