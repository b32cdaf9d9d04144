"""Does the registry learn the truth, and do its directives help? A synthetic swarm.

Miners submit configurations on a response surface with known effects plus Gaussian noise;
the registry (the real fold, axis reader, directives, populations, proposal gates and
research credit: `ledger.apply`, `read_axes`, `program_json`, `population_section`,
`plan_cycle`) observes every score. Every `registry.cycle_scored` submissions a research
cycle runs with a scripted proposer standing in for the LLM: each claim it proposes is, with
probability `--true-rate`, one with a true benefit on the surface, else noise (no effect, or
the wrong direction); the real gates refuse duplicates. Directed miners read their
population's brief (refreshed every `--refresh` submissions): explore and canary populations
pick a claim by share and complete its oldest open test cell (else start a contrast on the
settled and leaning recipe); the exploit population sends its brief's design to start from
(the leader's, with the best guess on every claimed axis), half the time as it is and half
the time with one claimed axis changed. Random miners ignore the brief. One more hotkey
farms: it sends copies of its first design (same arms, fresh noise) for the whole run.
Printed:

- per seed hypothesis, how often it reached the right status within N submissions;
- false support: claims without a true benefit (seed and proposed) that were ever
  supported;
- submissions until the first one lands in the best region, with directives vs without;
- the research credit paid to the farmer's copies (beyond its first run), as a share of all
  credit paid.

    .venv/bin/python benchmarks/registry_sim.py            # default: 40 seeds x 600
    .venv/bin/python benchmarks/registry_sim.py --seeds 10 --populations 1 --true-rate 0

In a git worktree that borrows another checkout's virtual environment, prefix
`PYTHONPATH=.`: otherwise the script imports that checkout's `prism_challenge`.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry.allocation import allocate
from prism_challenge.registry.axes import read_axes
from prism_challenge.registry.cycle import Answers, due, plan_cycle
from prism_challenge.registry.directives import (
    exploit_design,
    population_section,
    program_json,
)
from prism_challenge.registry.hypotheses import Interaction, cell_of, cells_of
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.populations import assign
from prism_challenge.registry.seeds import SEED_HYPOTHESES
from prism_challenge.registry.state import RegistryState

CHOICES = {
    "params": [2e6, 2e7, 2e8],
    "optimizer": ["adamw", "muon", "sgd", "lion"],
    "lr": [3e-4, 3e-3],
    "norm": ["layernorm", "rmsnorm"],
    "position": ["learned", "rope", "alibi"],
    "precision": ["fp32", "bf16"],
    "compile": ["false", "true"],
    "batch_size": [16, 64],
}
# bpb effects (lower is better). norm and compile have none; bf16 hurts; muon x high lr synergy.
EFFECTS = {
    "params": {2e6: 0.0, 2e7: -0.15, 2e8: -0.3},
    "optimizer": {"adamw": 0.0, "muon": -0.04, "sgd": 0.06, "lion": -0.01},
    "lr": {3e-4: 0.0, 3e-3: -0.02},
    "position": {"learned": 0.0, "rope": -0.03, "alibi": -0.01},
    "precision": {"fp32": 0.0, "bf16": 0.02},
    "batch_size": {16: -0.025, 64: 0.0},
}
SYNERGY = -0.03  # extra for muon with lr 3e-3
BEST = {"optimizer": "muon", "lr": 3e-3, "position": "rope", "precision": "fp32",
        "batch_size": 16}
# What each seed claim's right status is on this surface (seeds.py order).
TRUTH = ["supported", "active", "supported", "refuted", "active", "supported", "supported",
         "supported"]
ARM_VALUE = {
    "params": {"1e+06-1e+07": 2e6, "1e+07-1e+08": 2e7, ">=1e+08": 2e8},
    "lr": {"0.0001-0.001": 3e-4, "0.001-0.01": 3e-3, ">=0.001": 3e-3, "<0.001": 3e-4},
    "batch_size": {"8-32": 16, "32-128": 64},
}


def _single(axis, t, c):
    return {"spec": {"kind": "single", "axis": axis, "treatment": t, "control": c},
            "importance": 0.6}


def _grid(a, a1, a0, b, b1, b0):
    return {"spec": {"kind": "interaction", "axis_a": a, "a1": a1, "a0": a0, "axis_b": b,
                     "b1": b1, "b0": b0}, "importance": 0.4}


# What the scripted proposer says. True: a real benefit on the surface. Noise: no effect,
# or the wrong direction (the gates refuse the duplicates of seed claims among them).
TRUE_POOL = [
    _single("optimizer", "lion", "adamw"), _single("optimizer", "muon", "lion"),
    _single("optimizer", "adamw", "sgd"), _single("position", "alibi", "learned"),
    _single("position", "rope", "alibi"),
    {"spec": {"kind": "threshold", "axis": "params", "threshold": 1e7}, "importance": 0.5},
]
NOISE_POOL = [
    _single("optimizer", "sgd", "adamw"), _single("position", "learned", "rope"),
    _single("norm", "layernorm", "rmsnorm"), _single("compile", "false", "true"),
    {"spec": {"kind": "threshold", "axis": "batch_size", "threshold": 32}, "importance": 0.5},
    _grid("norm", "rmsnorm", "layernorm", "compile", "true", "false"),
    _grid("optimizer", "muon", "adamw", "batch_size", "8-32", "32-128"),
    _grid("precision", "bf16", "fp32", "norm", "rmsnorm", "layernorm"),
]


def true_bpb(c: dict) -> float:
    bpb = 2.0 + sum(EFFECTS[a][c[a]] for a in EFFECTS)
    return bpb + (SYNERGY if c["optimizer"] == "muon" and c["lr"] == 3e-3 else 0.0)


def value_of(axis: str, arm: str):
    if axis in ARM_VALUE:
        return ARM_VALUE[axis].get(arm)
    return arm if arm in CHOICES.get(axis, []) else None


def _same(axis: str, arm: str, want: str) -> bool:
    """A bucket and a bound ("0.001-0.01", ">=0.001") that set the same value agree."""
    return arm == want or value_of(axis, arm) is not None and (
        value_of(axis, arm) == value_of(axis, want))


def overlay(config: dict, arms: dict) -> None:
    for axis, arm in arms.items():
        v = value_of(axis, arm)
        if v is not None:
            config[axis] = v


def random_config(rng: random.Random) -> dict:
    return {a: rng.choice(v) for a, v in CHOICES.items()}


def submission(config: dict) -> tuple[dict, dict]:
    norm = "RMSNorm" if config["norm"] == "rmsnorm" else "LayerNorm"
    measured = {
        "param_count": int(config["params"]), "layer_count": 4, "module_census": {norm: 4},
        "optimizers": [{"cls": config["optimizer"], "hparams": {"lr": config["lr"]}}],
        "batch_size": config["batch_size"], "precision": config["precision"],
        "compile": config["compile"] == "true",
    }
    return measured, {"norm": config["norm"], "position": config["position"]}


def _readings(schema) -> list[tuple]:
    """Every configuration of the surface: (reading, expected bpb)."""
    out = []
    for values in itertools.product(*CHOICES.values()):
        config = dict(zip(CHOICES, values, strict=True))
        out.append((read_axes(schema, *submission(config)), true_bpb(config)))
    return out


def true_gain(spec, readings) -> float:
    """The claim's expected matched bpb gain on the surface (> 0: a real benefit)."""
    cells: dict[str, list[float]] = {c: [] for c in cells_of(spec)}
    for reading, bpb in readings:
        cell = cell_of(spec, reading)
        if cell is not None:
            cells[cell].append(bpb)
    if any(not v for v in cells.values()):
        return 0.0  # the surface never fills a cell: no evidence can exist either way
    m = {c: statistics.fmean(v) for c, v in cells.items()}
    if isinstance(spec, Interaction):
        return -(m["11"] - m["10"] - m["01"] + m["00"])
    return m["C"] - m["T"]


def _pick(rows: list[dict], rng: random.Random) -> dict | None:
    return rng.choices(rows, weights=[max(r["share"], 1e-9) for r in rows])[0] if rows else None


def directed_config(doc: dict, rng: random.Random) -> dict:
    """Follow one brief: the population's focus (and, for exploit, its design to start from);
    complete an open cell that agrees with the starting point on the other axes, else set
    one cell of the chosen claim on the starting point."""
    config = random_config(rng)
    pop = doc.get("population")
    exploit = pop is not None and pop["kind"] == "exploit"
    start = pop["start_from"] if exploit else {**doc["leaning"], **doc["recipe"]}
    overlay(config, start)
    if exploit and rng.random() < 0.5:
        return config  # the best guess itself: the partner of the one-axis changes
    rows = {r["id"]: r for r in doc["explore"]}
    focus = [r for r in (pop["focus"] if pop is not None else doc["explore"]) if r["id"] in rows]
    row = _pick(focus, rng)
    if row is None:
        return config
    for cell in rows[row["id"]]["open"]:
        if all(_same(a, cell["stratum"].get(a, arm), arm) for a, arm in start.items()
               if a not in cell["set"]):
            overlay(config, cell["stratum"])
            overlay(config, cell["set"])
            return config
    cells = rows[row["id"]]["cells"]
    if exploit:  # change the claimed axis: a cell the starting design is not in
        cells = {c: arms for c, arms in cells.items()
                 if any(start.get(a) != arm for a, arm in arms.items())} or cells
    overlay(config, cells[rng.choice(sorted(cells))])
    return config


def briefs(state: RegistryState, cfg, miners: list[str], populations: int) -> dict[str, dict]:
    """Each directed miner's brief: the global document plus its population's section."""
    alloc = allocate(state, cfg)
    doc = program_json(state, cfg, alloc)
    epoch = state.n_obs // cfg.cycle_scored if cfg.cycle_scored else 0
    start = exploit_design(state, cfg, doc)
    out, by_index = {}, {}
    for hk in miners:
        who = assign(hk, netuid=0, epoch=epoch, count=populations)
        if who.index not in by_index:
            by_index[who.index] = {**doc, "population": population_section(
                state, cfg, alloc, who, doc, start)}
        out[hk] = by_index[who.index]
    return out


def proposer(state: RegistryState, cfg, rng: random.Random, true_rate: float) -> Answers:
    wanted = cfg.max_proposals - sum(1 for h in state.live()
                                     if h.origin == "llm" and h.status == "active")
    pool = [rng.choice(TRUE_POOL if rng.random() < true_rate else NOISE_POOL)
            for _ in range(max(wanted, 0))]
    return Answers(hypotheses=pool)


def run(seed: int, n: int, directed_fraction: float, noise: float, refresh: int, cfg, *,
        populations: int = 3, true_rate: float = 0.5, readings=None) -> dict:
    rng = random.Random(seed)
    llm = random.Random(seed + 7_777)
    state = RegistryState()
    for s in SEED_HYPOTHESES:
        apply(state, "hypothesis", {"origin": "seed", **s}, cfg)
    miners = [f"hk{i}" for i in range(12)]
    directed = miners[: round(directed_fraction * len(miners))]
    docs = briefs(state, cfg, directed, populations) if directed else {}
    ever_supported: set[str] = set()
    ever_refuted: set[str] = set()
    first_best = None
    farm_design, copies, paid, paid_copies, copies_used = None, set(), 0.0, 0.0, 0
    for i in range(n):
        hotkey = rng.choice([*miners, "farmer"])
        if hotkey == "farmer":
            if farm_design is None:
                farm_design = random_config(rng)
            else:
                copies.add(i)
            config = dict(farm_design)
        elif hotkey in docs:
            config = directed_config(docs[hotkey], rng)
        else:
            config = random_config(rng)
        if first_best is None and all(config[a] == v for a, v in BEST.items()):
            first_best = i + 1
        measured, declared = submission(config)
        reading = read_axes(state.schema(), measured, declared)
        bpb = true_bpb(config) + rng.gauss(0.0, noise)
        apply(state, "observation", {"hotkey": hotkey, "bpb": bpb, "eligible": True,
                                     "submission_id": i, "reading": reading.model_dump()}, cfg)
        for c in state.credits:
            if c[0] == state.n_obs:  # granted by this observation
                paid += c[2]
                paid_copies += c[2] if c[4] - 1 in copies else 0.0
        copies_used += sum(1 for at, _, _, sids in state.contrasts
                           if at == state.n_obs for s in sids if s in copies)
        if due(state, cfg):
            for _, kind, payload in plan_cycle(state, proposer(state, cfg, llm, true_rate),
                                               cfg, trigger="scored", now=0.0):
                apply(state, kind, payload, cfg)
        ever_supported |= {h.id for h in state.hypotheses.values() if h.status == "supported"}
        ever_refuted |= {h.id for h in state.hypotheses.values() if h.status == "refuted"}
        if directed and (i + 1) % refresh == 0:
            docs = briefs(state, cfg, directed, populations)
    readings = readings or _readings(state.schema())
    ids = sorted(state.hypotheses)
    gains = {h: true_gain(state.hypotheses[h].spec, readings) for h in ids}
    return {
        "status": [state.hypotheses[h].status for h in ids],
        "n": [state.hypotheses[h].n for h in ids],
        "ever_supported": [h in ever_supported for h in ids],
        "ever_refuted": [h in ever_refuted for h in ids],
        "benefit": [gains[h] > cfg.tie_bpb for h in ids],
        "origin": [state.hypotheses[h].origin for h in ids],
        "first_best": first_best if first_best is not None else n + 1,
        "cycles": state.cycles,
        "credit": (paid, paid_copies, copies_used, len(copies)),
    }


def _print_world(world: str, runs: list[dict], n: int) -> None:
    print(f"\n[{world} world] right status within {n} submissions:")
    for k, truth in enumerate(TRUTH):
        right = sum(r["status"][k] == truth for r in runs) / len(runs)
        n_mean = statistics.mean(r["n"][k] for r in runs)
        claim = SEED_HYPOTHESES[k]["spec"]
        print(f"  H{k + 1:03d} {claim['kind']:<11} {claim.get('axis', claim.get('axis_a')):<10}"
              f" truth={truth:<9} right={right:5.0%}  mean contrasts={n_mean:6.1f}")
    nulls = [(r, k) for r in runs for k, b in enumerate(r["benefit"]) if not b]
    proposed = [(r, k) for r, k in nulls if r["origin"][k] == "llm"]
    false = sum(r["ever_supported"][k] for r, k in nulls)
    print(f"  false support: {false}/{len(nulls)} = {false / len(nulls):.1%} (claims without a "
          f"true benefit, seed and proposed, ever supported; proposed alone: "
          f"{sum(r['ever_supported'][k] for r, k in proposed)}/{len(proposed)})")
    final = sum(r["status"][k] == "supported" for r, k in nulls)
    print(f"  ... supported at the end of the run: {final}/{len(nulls)} = "
          f"{final / len(nulls):.1%}")
    goods = [(r, k) for r in runs for k, b in enumerate(r["benefit"]) if b]
    wrong = sum(r["ever_refuted"][k] for r, k in goods)
    found = [(r, k) for r, k in goods if r["origin"][k] == "llm"]
    print(f"  false refutation: {wrong}/{len(goods)} = {wrong / len(goods):.1%} (claims with a "
          f"true benefit ever refuted)")
    print(f"  proposals: {statistics.mean(r['cycles'] for r in runs):.1f} cycles per run; "
          f"{len(found) / len(runs):.1f} true and {len(proposed) / len(runs):.1f} noise claims "
          f"accepted per run; true proposed claims supported: "
          f"{sum(r['status'][k] == 'supported' for r, k in found)}/{len(found)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--n", type=int, default=600, help="submissions per simulated run")
    ap.add_argument("--directed-fraction", type=float, default=0.75)
    ap.add_argument("--noise", type=float, default=0.02, help="bpb noise (std) per run")
    ap.add_argument("--refresh", type=int, default=5, help="submissions between brief reads")
    ap.add_argument("--populations", type=int, default=RegistrySettings().populations)
    ap.add_argument("--true-rate", type=float, default=0.5,
                    help="chance that a proposed claim has a true benefit")
    ap.add_argument("--smoke", action="store_true", help="1 seed x 40 submissions (the suite)")
    args = ap.parse_args()
    if args.smoke:
        args.seeds, args.n = 1, 40
    cfg = RegistrySettings(populations=args.populations)
    readings = _readings(RegistryState().schema())
    t0 = time.perf_counter()
    common = {"populations": args.populations, "true_rate": args.true_rate,
              "readings": readings}
    worlds = {
        "directed": [run(s, args.n, args.directed_fraction, args.noise, args.refresh, cfg,
                         **common) for s in range(args.seeds)],
        "random": [run(10_000 + s, args.n, 0.0, args.noise, args.refresh, cfg, **common)
                   for s in range(args.seeds)],
    }
    print(f"registry_sim: {args.seeds} seeds x {args.n} submissions, noise sd {args.noise}, "
          f"{args.directed_fraction:.0%} of 12 miners directed over {args.populations} "
          f"population(s), 1 farmer, a research cycle every {cfg.cycle_scored} "
          f"(true-effect proposals {args.true_rate:.0%}) ({time.perf_counter() - t0:.1f}s)")
    for world, runs in worlds.items():
        _print_world(world, runs, args.n)
    d = [r["first_best"] for r in worlds["directed"]]
    rnd = [r["first_best"] for r in worlds["random"]]
    ratio = statistics.median(d) / statistics.median(rnd)
    region = "/".join(f"{k}={v}" for k, v in BEST.items())
    print(f"\nsubmissions to first reach the best region ({region}):")
    for name, xs in (("with directives", d), ("random", rnd)):
        print(f"  {name:<16} median {statistics.median(xs):.0f}, mean {statistics.mean(xs):.1f}")
    print(f"  ratio directed/random (medians): {ratio:.2f}  (target <= 0.40)")
    credit = [r["credit"] for world in worlds.values() for r in world]
    paid, farmed = sum(c[0] for c in credit), sum(c[1] for c in credit)
    print(f"\nresearch credit: {paid:.0f} points paid; the farmer sent {sum(c[3] for c in credit)} "
          f"copies of its first design, matched as evidence {sum(c[2] for c in credit)} times")
    print(f"  near-duplicate credit: {farmed / paid if paid else 0.0:.2f}  (share of all credit "
          f"paid to copies beyond the first; target 0)")
    print(f"total {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
