"""Directives: program.md (immutable charter + one mutable block) and its JSON twin.

Both are pure functions of the state: numbers are printed at fixed precision, lists are
sorted by id, and no clock is read, so the same ledger always yields the same bytes and
the same sha256 digest (served as `X-Prism-Program-Digest`).
"""

from __future__ import annotations

import hashlib
from collections import Counter

from prism_challenge.registry.allocation import Allocation, allocate
from prism_challenge.registry.credit import design_of
from prism_challenge.registry.evidence import parse_stratum
from prism_challenge.registry.hypotheses import (
    Interaction,
    SingleFactor,
    Threshold,
    axes_of,
    cell_assignment,
    cells_of,
)
from prism_challenge.registry.populations import DIRECTIVES, Assignment, focus
from prism_challenge.registry.state import HypState, RegistryState, terms_of

START = "<!-- BAD_PI_MUTABLE_START -->"
END = "<!-- BAD_PI_MUTABLE_END -->"

CHARTER = """# PRISM research program

PRISM scores how well a model *learns from scratch*: the validator re-runs your
`training.py` on a locked token stream and charges every token at the loss your model had
before it trained on it (prequential bits per byte). Lower is better.

Every scored submission is also an experiment. The registry below keeps falsifiable claims
about design axes and judges each claim only by *matched contrasts*: your run against a
waiting run of another miner that differs from yours in the claim's axis and agrees with it
on every other axis (each run is used once per claim). Declare the axes you chose in
`prism.toml` under `[axes]`; the harness measures parameter count, layers, optimiser,
learning rate, batch size, precision and compile itself, and a declaration that
contradicts a measurement is flagged.

This charter does not change. Only the block between the markers below is rewritten, from
evidence, after every scored submission.
"""


def recipe_of(h: HypState, lean: bool | None = None) -> dict[str, str]:
    """What a claim tells a miner to set: the better side (empty for interactions).
    `lean` overrides the status for an undecided claim (True = the treatment side)."""
    if isinstance(h.spec, SingleFactor | Threshold):
        better = h.status == "supported" if lean is None else lean
        return cell_assignment(h.spec, "T" if better else "C")
    return {}


def program_json(state: RegistryState, cfg, alloc: Allocation | None = None,
                 who: Assignment | None = None) -> dict:
    """The brief as data; with `who`, the brief of that hotkey's population (the same
    global content plus a `population` section first)."""
    alloc = alloc or allocate(state, cfg)
    explore, settled, near, open_cells, recipe, leaning = [], [], [], [], {}, {}
    for h in sorted(state.hypotheses.values(), key=lambda x: x.id):
        t = terms_of(h, cfg)
        row = {
            "id": h.id,
            "kind": h.spec.kind,
            "statement": h.statement,
            "status": h.status,
            "n": t.n,
            "mean": round(t.mean, 4),
            "ci90": [round(t.ci90[0], 4), round(t.ci90[1], 4)],
            "p_support": round(t.p_support, 4),
            "p_refute": round(t.p_refute, 4),
        }
        if h.status != "active":
            row["recipe"] = recipe_of(h)
            settled.append(row)
            for axis, arm in row["recipe"].items():
                recipe.setdefault(axis, arm)
            continue
        if h.archived:
            continue
        row["share"] = round(alloc.shares.get(h.id, 0.0), 4)
        row["sprint"] = alloc.sprint == h.id
        row["canary"] = h.canary_axis is not None
        row["cells"] = {c: cell_assignment(h.spec, c) for c in cells_of(h.spec)}
        row["open"] = [
            {"stratum": parse_stratum(c["stratum"]), "cell": c["cell"],
             "set": cell_assignment(h.spec, c["cell"])}
            for c in alloc.cells.get(h.id, [])
        ]
        explore.append(row)
        open_cells += [{"hypothesis": h.id, **c} for c in row["open"]]
        if t.p_claim >= cfg.lean_prob or t.p_claim <= 1 - cfg.lean_prob:
            for axis, arm in recipe_of(h, lean=t.p_claim >= 0.5).items():
                leaning.setdefault(axis, arm)
        if t.n >= 1 and max(t.p_support, t.p_refute) >= cfg.near_miss:
            near.append({"id": h.id, "statement": h.statement, "n": t.n,
                         "p_support": row["p_support"], "p_refute": row["p_refute"]})
    explore.sort(key=lambda r: (-r["share"], r["id"]))
    doc = {
        "version": 1,
        "observations": state.n_obs,
        "eligible": state.n_eligible,
        "best_bpb": None if state.best_bpb is None else round(state.best_bpb, 6),
        "stall_cycle": state.stall_cycle,
        "recipe": dict(sorted(recipe.items())),
        "leaning": {k: v for k, v in sorted(leaning.items()) if k not in recipe},
        "explore": explore,
        "settled": settled,
        "open_cells": open_cells,
        "near_misses": near,
        "axes": [{"name": a.name, "kind": a.kind, "arms": a.arms,
                  "status": state.axis_status[a.name]} for a in state.axes],
    }
    if who is not None:
        doc["population"] = population_section(state, cfg, alloc, who, doc)
    return doc


def best_guess(state: RegistryState, cfg) -> dict[str, str]:
    """The side every undecided pair claim with any evidence points to (the strongest claim
    wins an axis): the greedy design the exploit population starts from. Unlike "leaning"
    it needs no threshold: exploiting means acting on the current best estimate."""
    ranked = []
    for h in state.live():
        if h.status == "active" and h.n > 0 and not isinstance(h.spec, Interaction):
            p = terms_of(h, cfg).p_claim
            if p != 0.5:
                ranked.append((-abs(p - 0.5), h.id, recipe_of(h, lean=p > 0.5)))
    guess: dict[str, str] = {}
    for _, _, arms in sorted(ranked):
        for axis, arm in arms.items():
            guess.setdefault(axis, arm)
    return guess


def fitted_guess(state: RegistryState, sweeps: int = 8) -> dict[str, str]:
    """Per claimed axis, the arm an additive model of the recent eligible runs finds best
    (bpb = sum of one effect per arm of every axis, fitted by backfitting). Matched
    contrasts are few early on (a run serves one pair claim, and most runs find no partner),
    while every run carries a little information on every axis: the fit points somewhere
    long before the claims do. It only steers the exploit population's starting design and
    is never evidence; matched evidence (best guess, leaning, recipe) overrides it. Each
    (hotkey, design) counts once, at its mean bpb, so copies weigh nothing extra; an axis
    needs two arms seen in at least two such groups. Pure arithmetic in a fixed order: the
    same ledger gives the same guess on any machine."""
    claimed = {a for h in state.live() if not isinstance(h.spec, Interaction)
               for a in axes_of(h.spec)}
    groups: dict[tuple[str, str], list] = {}
    for r in state.recent:
        g = groups.setdefault((r["hotkey"], design_of(r["arms"])), [r["arms"], 0.0, 0])
        g[1] += r["bpb"]
        g[2] += 1
    if len(groups) < 4:
        return {}
    bpb = [total / n for _, total, n in groups.values()]
    axes = sorted({a for arms, _, _ in groups.values() for a in arms})
    column = {a: [(i, arms[a]) for i, (arms, _, _) in enumerate(groups.values()) if a in arms]
              for a in axes}
    counts = {a: Counter(arm for _, arm in column[a]) for a in axes}
    effect: dict[str, dict[str, float]] = {a: dict.fromkeys(counts[a], 0.0) for a in axes}
    fit = [0.0] * len(bpb)  # the model's current prediction for each group
    for _ in range(sweeps):  # Gauss-Seidel over the axes: each arm's mean residual
        for a in axes:
            old, sums = effect[a], dict.fromkeys(effect[a], 0.0)
            for i, arm in column[a]:
                sums[arm] += bpb[i] - fit[i] + old[arm]
            new = effect[a] = {arm: sums[arm] / counts[a][arm] for arm in sums}
            for i, arm in column[a]:
                fit[i] += new[arm] - old[arm]
    out = {}
    for a in sorted(claimed & set(axes)):
        seen = {arm: v for arm, v in effect[a].items() if counts[a][arm] >= 2}
        if len(seen) >= 2:
            out[a] = min(sorted(seen), key=seen.__getitem__)
    return out


def exploit_design(state: RegistryState, cfg, doc: dict) -> dict[str, str]:
    """The design the exploit population starts from: the leader's arms, then the fitted
    guess, the best guess from matched evidence, leaning and settled recipes (`doc`, the
    global brief of the same state), each overriding the one before."""
    return dict(sorted({**state.best_arms, **fitted_guess(state), **best_guess(state, cfg),
                        **doc["leaning"], **doc["recipe"]}.items()))


def population_section(state, cfg, alloc: Allocation, who: Assignment, doc: dict,
                       start: dict[str, str] | None = None) -> dict:
    """The `population` part of a hotkey's brief, over the global `doc` of the same state.
    `start`: `exploit_design` of the same state, when the caller has it (one per state, not
    one per population)."""
    start = exploit_design(state, cfg, doc) if start is None else start
    ids, fallback = focus(state, who, alloc.scores, cfg, start)
    rows = {r["id"]: r for r in doc["explore"]}
    total = sum(alloc.shares.get(k, 0.0) for k in ids)
    chosen = [{"id": k, "statement": rows[k]["statement"],
               "share": round(alloc.shares.get(k, 0.0) / total, 4) if total else 0.0,
               "open": rows[k]["open"][:5]} for k in ids if k in rows]
    return {
        "hotkey": who.hotkey, "index": who.index, "count": who.count, "kind": who.kind,
        "epoch": who.epoch, "salt": who.salt, "why": who.why,
        "directive": DIRECTIVES[who.kind], "fallback": fallback,
        "focus": chosen, "start_from": start,
    }


def _population_block(pop: dict) -> list[str]:
    out = [f"## Your population: {pop['index']} of {pop['count']} ({pop['kind']})", "",
           f"Hotkey {pop['hotkey']}. Why: {pop['why']}.", "", pop["directive"]]
    if pop["fallback"]:
        out += ["", f"({pop['fallback']}.)"]
    if pop["start_from"]:
        out += ["", "Start from: " + ", ".join(f"{k}={v}" for k, v in pop["start_from"].items())]
    out += ["", "### Your focus (share of your next submissions)", ""]
    for r in pop["focus"]:
        out.append(f"- {r['share'] * 100:.1f}% {r['id']}: {r['statement']}")
        for c in r["open"]:
            sets = ", ".join(f"{k}={v}" for k, v in c["set"].items())
            like = ", ".join(f"{k}={v}" for k, v in c["stratum"].items()) or "any configuration"
            out.append(f"  - open cell: {sets}, with {like}")
    if not pop["focus"]:
        out.append("- nothing open: follow the global brief below")
    return out + ["", "The global brief every population shares follows.", ""]


def _mutable_block(doc: dict) -> str:
    out = _population_block(doc["population"]) if "population" in doc else []
    out += [f"## State after {doc['observations']} scored submissions "
            f"({doc['eligible']} eligible)", ""]
    if doc["best_bpb"] is not None:
        out += [f"Best bpb so far: {doc['best_bpb']:.4f}.", ""]
    out += ["### Explore (share of your next submissions)", ""]
    for r in doc["explore"] or []:
        tag = " **[decision sprint]**" if r["sprint"] else (" [canary]" if r["canary"] else "")
        out.append(f"- {r['share'] * 100:.1f}% {r['id']}: {r['statement']}{tag} "
                   f"(n={r['n']}, P(theta>0.6)={r['p_support']:.2f}, "
                   f"P(theta<0.4)={r['p_refute']:.2f})")
    if not doc["explore"]:
        out.append("- nothing active")
    out += ["", "### Settled", ""]
    for r in doc["settled"]:
        rec = ", ".join(f"{k}={v}" for k, v in r["recipe"].items()) or "see statement"
        out.append(f"- {r['id']} {r['status']}: {r['statement']} -> use {rec} (n={r['n']})")
    if not doc["settled"]:
        out.append("- nothing yet")
    out += ["", "### Leaning (undecided, current best guess)", ""]
    out.append(", ".join(f"{k}={v}" for k, v in doc["leaning"].items()) or "- none")
    out += ["", "### Open test cells (a run here unlocks evidence)", ""]
    for c in doc["open_cells"][:20]:
        sets = ", ".join(f"{k}={v}" for k, v in c["set"].items())
        like = ", ".join(f"{k}={v}" for k, v in c["stratum"].items()) or "any configuration"
        out.append(f"- {c['hypothesis']}: {sets}, with {like}")
    if not doc["open_cells"]:
        out.append("- none")
    out += ["", "### Near misses (close to a decision)", ""]
    for r in doc["near_misses"]:
        out.append(f"- {r['id']}: {r['statement']} (n={r['n']}, support {r['p_support']:.2f}, "
                   f"refute {r['p_refute']:.2f})")
    if not doc["near_misses"]:
        out.append("- none")
    return "\n".join(out)


def render_program(state: RegistryState, cfg, who: Assignment | None = None
                   ) -> tuple[str, str, dict]:
    """(program.md text, its sha256 hex digest, the JSON document carrying the digest);
    with `who`, the brief of that hotkey's population."""
    doc = program_json(state, cfg, who=who)
    text = f"{CHARTER}\n{START}\n{_mutable_block(doc)}\n{END}\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text, digest, {**doc, "digest": digest}


def mutable_block(text: str) -> str:
    """The rewritten part of a program.md (ValueError when the markers are missing)."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError("program.md must hold exactly one mutable block")
    return text[text.index(START) + len(START): text.index(END)]
